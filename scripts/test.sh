#!/usr/bin/env bash
# Builds everything and runs every test (unit and integration) through CTest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh"
cd "${STACKFRAG_BUILD_DIR:-$ROOT/build}"
ctest --output-on-failure "$@"
