#!/usr/bin/env bash
# A mostly idle service (bench/quiet/QuietService.java: 8 threads waking every 100 ms for a few
# tens of µs of work, 10 s): what the agent's own threads cost there, per agent build, in alternating
# rounds -- the reader's CPU time and cycles (and how many came later, after quiet cycles), the
# agent's threads' CPU time and share, the samples, the process's CPU time (all from the agent's log).
# Usage: bench/quiet-service.sh [-r ROUNDS] [-i INTERVAL] [-j JAVA_HOME] [AGENT.so ...]
#   (default: 3 rounds, 1ms, build/lib/libstackfrag.so)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS=3 INTERVAL=1ms JDK="${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}"
while getopts "r:i:j:" opt; do
  case "$opt" in
    r) ROUNDS="$OPTARG" ;;
    i) INTERVAL="$OPTARG" ;;
    j) JDK="$OPTARG" ;;
    *) sed -n '2,7p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
AGENTS=("$@")
[ ${#AGENTS[@]} -gt 0 ] || AGENTS=("$ROOT/build/lib/libstackfrag.so")
for a in "${AGENTS[@]}"; do [ -r "$a" ] || { echo "no agent at $a" >&2; exit 2; }; done
WORK="$(mktemp -d /tmp/sf-quiet.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
"$JDK/bin/javac" -d "$WORK" "$ROOT/bench/quiet/QuietService.java"

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds, interval=$INTERVAL, $("$JDK/bin/java" -version 2>&1 | head -1)"
echo "| round | agent | reader ms | cycles (later) | agent's threads ms | of the process | samples | process CPU ms |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$ROUNDS"); do
  for a in "${AGENTS[@]}"; do
    log="$WORK/run.log"
    "$JDK/bin/java" "-agentpath:$a=interval=$INTERVAL,file=$WORK/p.html" -cp "$WORK" QuietService 10000 > "$log" 2>&1
    python3 - "$log" "$r" "$a" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def grab(pattern, default="-"):
    m = re.search(pattern, text)
    return m.group(1) if m else default
agent = grab(r"agent threads CPU: ([0-9.]+) ms")
reader = grab(r"agent threads CPU: [0-9.]+ ms \(reader ([0-9.]+)")
share = grab(r"agent threads CPU: [0-9.]+ ms \(.*?\) = ([0-9.]+%)")
process = grab(r"agent threads CPU: .*? of the process's ([0-9]+) ms")
cycles = grab(r"(\d+) cycles every")
later = grab(r"(\d+) later, after quiet cycles", "0")
samples = grab(r"summary: (\d+) samples")
print(f"| {sys.argv[2]} | {sys.argv[3]} | {reader} | {cycles} ({later}) | {agent} | {share} | {samples} | {process} |")
PY
  done
done
