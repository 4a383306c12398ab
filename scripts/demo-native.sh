#!/usr/bin/env bash
# The native demo: build, then sample the bundled native busy program for 2 s with per-thread perf
# events, record the samples, and print what was captured. (scripts/demo.sh profiles the Java demo.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${STACKFRAG_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh"

RECORDING="$(mktemp -d)/busy.sfr"
"$BUILD/bin/stackfrag" capture --interval 1ms --duration 2s -o "$RECORDING" -- "$BUILD/bin/stackfrag-busy"
echo
echo "recording: $RECORDING"
