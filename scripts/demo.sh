#!/usr/bin/env bash
# The demo: build, compile the bundled Java program (demo/java), profile it for ~5 s at 10,000
# samples per second per thread, and leave demo.html (flame graph) and demo.pb.gz (pprof) in the
# current directory; then print the 10 hottest methods and the decoding summary.
#
# Usage: scripts/demo.sh [SECONDS]
# Env: STACKFRAG_BUILD_DIR (default build/), STACKFRAG_SKIP_BUILD=1 (use that build as it is), JAVA_HOME
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${STACKFRAG_BUILD_DIR:-$ROOT/build}"
SECONDS_TO_RUN="${1:-5}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
JAVAC="${JAVA_HOME:+$JAVA_HOME/bin/}javac"
if [ -z "${JAVA_HOME:-}" ] && [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]; then
  JAVA=/usr/lib/jvm/java-17-openjdk-amd64/bin/java
  JAVAC=/usr/lib/jvm/java-17-openjdk-amd64/bin/javac
fi
STACKFRAG="$BUILD/bin/stackfrag"

[ "${STACKFRAG_SKIP_BUILD:-0}" = 1 ] || STACKFRAG_BUILD_DIR="$BUILD" "$ROOT/scripts/build.sh"
rm -rf "$BUILD/demo-classes"
"$JAVAC" -d "$BUILD/demo-classes" "$ROOT"/demo/java/demo/*.java
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

# The agent writes the profiles itself when it has live decoding (file=); older builds only record,
# and the profiles are then made from the recording, which gives the same trees.
live=0
if "$STACKFRAG" run -f "$SCRATCH/probe.json" -- "$JAVA" -version >/dev/null 2>&1 && [ -s "$SCRATCH/probe.json" ]; then
  live=1
fi

echo "== profiling demo.Demo for ${SECONDS_TO_RUN} s at 10 kHz per thread (interval=100us)"
if [ "$live" = 1 ]; then
  # One live profile as lossless CCT json; the html and pprof files are views of it.
  "$STACKFRAG" run -i 100us -f "$SCRATCH/demo.json" --title "stackfrag demo" -- \
    "$JAVA" -cp "$BUILD/demo-classes" demo.Demo "$SECONDS_TO_RUN" 2>&1 | tee "$SCRATCH/run.log"
  "$STACKFRAG" report "$SCRATCH/demo.json" -o demo.html --title "stackfrag demo"
  "$STACKFRAG" report "$SCRATCH/demo.json" -o demo.pb.gz
  profile="$SCRATCH/demo.json"
else
  echo "(this agent has no live profile output (file=); recording and decoding afterwards)"
  "$STACKFRAG" run -i 100us --record "$SCRATCH/demo.sfr" -- \
    "$JAVA" -cp "$BUILD/demo-classes" demo.Demo "$SECONDS_TO_RUN"
  "$STACKFRAG" report "$SCRATCH/demo.sfr" -o "$SCRATCH/demo.json"
  "$STACKFRAG" report "$SCRATCH/demo.json" -o demo.html --title "stackfrag demo"
  "$STACKFRAG" report "$SCRATCH/demo.json" -o demo.pb.gz
  profile="$SCRATCH/demo.json"
fi

echo
echo "== top 10 methods by self samples (where the CPU time went)"
"$STACKFRAG" query "$profile" --json --top 1000000 | python3 -c '
import json, sys
rows = json.load(sys.stdin)["methods"]
whole = sum(r["self"] for r in rows) or 1
print("%8s %7s %8s  method" % ("self", "", "total"))
for r in sorted(rows, key=lambda r: -r["self"])[:10]:
    print("%8d %6.2f%% %8d  %s" % (r["self"], 100.0 * r["self"] / whole, r["total"], r["name"]))
'
echo
echo "== top 10 methods by total samples (anywhere on the stack)"
"$STACKFRAG" query "$profile" --top 10 | tail -n +2
echo
echo "== summary"
if [ "$live" = 1 ]; then
  # The agent's closing summary: samples taken, decoded/incomplete/failed, failures by reason.
  sed -n '/stop summary/,/top methods/p' "$SCRATCH/run.log" | grep -v 'top methods' || true
else
  "$STACKFRAG" replay "$SCRATCH/demo.sfr" | head -8
fi
echo
echo "wrote $(pwd)/demo.html (open in a browser) and $(pwd)/demo.pb.gz (go tool pprof -http=: demo.pb.gz)"
