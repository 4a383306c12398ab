#!/usr/bin/env bash
# Installs exactly the Debian 12 packages stackfrag needs to build, test and demo.
# Idempotent and non-interactive: runs apt-get (with one `apt-get update`) only when something is missing.
set -euo pipefail

PKGS=(
  g++ cmake make pkg-config       # toolchain
  openjdk-17-jdk-headless         # jvmti.h, and the JVM the integration tests and demo run
  catch2                          # unit and integration tests
  libunwind-dev                   # native frames: unwinding over a stack snapshot
  libboost-dev                    # Boost.Lockfree queues between agent threads
  libcli11-dev                    # command line of the stackfrag tool
  libfmt-dev                      # formatting in tools and reports
  nlohmann-json3-dev              # --json outputs and the CCT json format
  libzstd-dev                     # recording chunk compression
  zlib1g-dev                      # crc32 of recording chunks; gzip of pprof output
  libprotozero-dev                # pprof protobuf encoding
  libzydis-dev                    # x86 instruction decoding for prologue/stub analysis
  libcurl4-openssl-dev            # push=: HTTP(S) POSTs of each period's profile to a profiling server (agent only)
  golang-go                       # `go tool pprof`, which the profile tests use to read our .pb.gz output
  chromium                        # headless check of the html flame graph (ctest -L browser)
  jruby groovy clojure            # JVM languages whose code no shared workload has (agent_jvm_languages_test.cpp)
  libtomcat10-embed-java libjakarta-annotation-api-java libnetty-java libguava-java   # server frameworks (agent_servers_test.cpp)
  libc6-dbg                       # names of glibc's static functions (msort_with_tmp under qsort) in profiles; agent_foreign_test.cpp
  clang libclang-rt-14-dev        # libFuzzer (clang's -fsanitize=fuzzer runtime) for scripts/fuzz.sh; the gcc build does not use them
)
PKGS+=("${STACKFRAG_EXTRA_PKGS[@]:-}")

missing=()
for p in "${PKGS[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The shared workloads (Xalan, Lucene, H2, Jython packages) used by integration tests and benches.
SHARED="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared"
if [ -x "$SHARED/bench/workloads/install.sh" ]; then
  "$SHARED/bench/workloads/install.sh" >/dev/null
fi
