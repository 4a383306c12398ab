#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ and runs
# them (ctest -L unit). The decoder runs inside the JVM on hostile input, so its tests must pass
# here too: any read outside a stack fragment or any UB aborts the run.
# Usage: scripts/sanitize.sh [ctest args...]   e.g. scripts/sanitize.sh -R decoder
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${STACKFRAG_ASAN_BUILD_DIR:-$ROOT/build-asan}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTACKFRAG_SANITIZE=address,undefined >/dev/null
# Only the test executables: the agent (loaded into a JVM) cannot run under ASan without preloading.
targets=$(cmake --build "$BUILD" --target help | sed -n 's/^\.\.\. \(test_[A-Za-z0-9_]*\).*/\1/p')
cmake --build "$BUILD" -j"$(nproc)" --target $targets
cd "$BUILD"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest -L unit --output-on-failure "$@"
