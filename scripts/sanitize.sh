#!/usr/bin/env bash
# Builds and runs the tests under sanitizers, each in its own build directory:
#   address  AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/): the unit tests, then every
#            integration test with the sanitized agent inside real JVMs (libasan preloaded into
#            every java they start). The decoder runs inside the JVM on hostile input, so any read
#            outside a stack fragment or any UB aborts that JVM with exit code 99.
#   thread   ThreadSanitizer (build-tsan/): the unit tests, which run the agent's threaded parts on
#            their own (reader thread, event queue with several producers, live decoder thread
#            with dumps from other threads, oracle signal handler), then every integration test
#            with the TSan-built agent inside real JVMs (libtsan preloaded into java), except those
#            that start java from a workload's shell script (shells crash with libtsan preloaded).
#   all      both (the default).
# Usage: scripts/sanitize.sh [address|thread|all] [ctest args...]   e.g. scripts/sanitize.sh thread -R agent
# Environment: STACKFRAG_ASAN_BUILD_DIR, STACKFRAG_TSAN_BUILD_DIR (build directories),
#              JOBS (parallel build jobs, default 2: the machine is shared), SANITIZE_JVM=0 (unit
#              tests only), SANITIZE_FILTER (Catch test spec for the integration part, default all).
#
# The JVM under ASan: HotSpot needs its own SIGSEGV handling (implicit null checks, stack banging)
# and leaks by design at exit: handle_segv=0, allow_user_segv_handler=1, detect_leaks=0 for java
# (the unit tests run LeakSanitizer).
# The JVM under TSan: HotSpot is not instrumented, so TSan sees only what its calls into libc do
# (malloc, memset, pthread_*), not the lock-free handoffs around them, and reports those as races
# (a Metaspace mutex published without a lock; memory the JDK's libraries wrote, freed and HotSpot
# reused). Interceptor calls from the JDK's own libraries are therefore ignored (`called_from_lib`,
# generated below for every library of the JDKs the tests use); our code stays fully instrumented,
# so a race between the agent's callbacks (on JVM threads) and its own threads is still reported.
# TSan also defers an asynchronous signal that arrives in uninstrumented (JIT) code to the next libc
# call it intercepts and then runs the handler with the arrival's context, so under TSan the
# validate oracle (SIGPROF handler: registers, stack copy, AsyncGetCallTrace) does not describe one
# moment; tests that compare with it check that agreement only in the other builds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE=all
case "${1:-}" in
    address|thread|all) MODE="$1"; shift ;;
esac
JOBS="${JOBS:-2}"

# configure + build DIR SANITIZERS TARGETS...
build() {
    local dir="$1" sanitizers="$2"
    shift 2
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTACKFRAG_SANITIZE="$sanitizers" >/dev/null
    nice -n 5 cmake --build "$dir" -j"$JOBS" --target "$@"
}

test_targets() {
    cmake --build "$1" --target help | sed -n 's/^\.\.\. \(test_[A-Za-z0-9_]*\).*/\1/p' | grep -v '^test_integration$'
}

run_address() {
    local dir="${STACKFRAG_ASAN_BUILD_DIR:-$ROOT/build-asan}"
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTACKFRAG_SANITIZE=address,undefined >/dev/null
    build "$dir" address,undefined $(test_targets "$dir")
    echo "== ASan+UBSan: unit tests ($dir)"
    (cd "$dir" && ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}" \
        UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
        ctest -L unit --output-on-failure "$@")
    [ "${SANITIZE_JVM:-1}" = 0 ] && return
    echo "== ASan+UBSan: the agent in JVMs ($dir)"
    build "$dir" address,undefined stackfrag_agent stackfrag_cli test_integration
    local libasan
    libasan="$(${CXX:-c++} -print-file-name=libasan.so)"
    # The test binary is sanitized itself (same runtime); every java it starts inherits the preload
    # and these options. A report anywhere ends that JVM with exit code 99, which the test sees.
    (cd "$dir" && LD_PRELOAD="$libasan" \
        ASAN_OPTIONS="handle_segv=0:allow_user_segv_handler=1:detect_leaks=0:exitcode=99:halt_on_error=1" \
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=99" \
        ./bin/test_integration ${SANITIZE_FILTER:+"$SANITIZE_FILTER"})
}

# The JDK libraries whose calls into libc TSan is to ignore (see the header), then our own entries.
jvm_tsan_suppressions() {
    local jdk lib
    for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
        [ -d "$jdk/lib" ] || continue
        for lib in "$jdk"/lib/server/libjvm.so "$jdk"/lib/*.so; do
            [ -e "$lib" ] && echo "called_from_lib:/$(basename "$lib")"
        done
    done | sort -u
    cat "$ROOT/scripts/tsan.supp"
}

run_thread() {
    local dir="${STACKFRAG_TSAN_BUILD_DIR:-$ROOT/build-tsan}"
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTACKFRAG_SANITIZE=thread >/dev/null
    build "$dir" thread $(test_targets "$dir")
    echo "== TSan: unit tests ($dir)"
    (cd "$dir" && TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/scripts/tsan.supp}" \
        ctest -L unit --output-on-failure "$@")
    [ "${SANITIZE_JVM:-1}" = 0 ] && return
    echo "== TSan: the agent in JVMs ($dir)"
    build "$dir" thread stackfrag_agent stackfrag_cli test_integration
    jvm_tsan_suppressions > "$dir/tsan-jvm.supp"
    local libtsan
    libtsan="$(${CXX:-c++} -print-file-name=libtsan.so)"
    # libtsan is preloaded into java only (tests/integration/agent_process.hpp): shells crash with
    # it preloaded, which also leaves out the tests that start java from a workload's run.sh (the
    # shared workloads run under ASan above).
    (cd "$dir" && STACKFRAG_TEST_JAVA_PRELOAD="$libtsan" \
        TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$dir/tsan-jvm.supp" \
        ./bin/test_integration "${SANITIZE_FILTER:-~\"agent on*\" ~\"breadcrumbs: a shared*\" ~\"without permission to open perf events*\"}")
}

case "$MODE" in
    address) run_address "$@" ;;
    thread) run_thread "$@" ;;
    all) run_address "$@"; run_thread "$@" ;;
esac
