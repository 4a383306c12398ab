#!/usr/bin/env bash
# Deep stacks: incomplete traces on the deep shared workloads with a fixed 16 KB fragment (without
# and with stitching) and with stack=auto (the default, with a live profile), at each interval, on
# JDK 17 and 25. Each run records with the AsyncGetCallTrace oracle on (validate) so that stitched
# traces can be checked against ASGCT; figures are over the profile's samples. Prints a Markdown
# table (docs/benchmarks.md, "Deep stacks").
# Usage: bench/deep-stacks.sh [-i ITER] [-t "1ms 100us"] [-w "jython xalan"]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${SHARED:-$ROOT/../shared/bench/workloads}"
[ -d "$SHARED" ] || SHARED=/work/shared/bench/workloads
BUILD="${STACKFRAG_BUILD_DIR:-$ROOT/build}"
ITER=2 INTERVALS="1ms 100us" WORKLOADS="jython xalan"
while [ $# -gt 0 ]; do
  case "$1" in
    -i) ITER="$2"; shift 2 ;;
    -t) INTERVALS="$2"; shift 2 ;;
    -w) WORKLOADS="$2"; shift 2 ;;
    *) echo "usage: $0 [-i ITER] [-t \"1ms 100us\"] [-w \"jython xalan\"]" >&2; exit 2 ;;
  esac
done
JDKS=(/usr/lib/jvm/java-17-openjdk-amd64)
[ -d /usr/lib/jvm/temurin-25-jdk-amd64 ] && JDKS+=(/usr/lib/jvm/temurin-25-jdk-amd64)
WORK="$(mktemp -d /dev/shm/sf-deep.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

run() {   # run NAME JDK WORKLOAD AGENT_OPTIONS
  local name="$1" jdk="$2" w="$3" opts="$4"
  JAVA_HOME="$jdk" ITER="$ITER" THREADS=2 \
    JAVA_OPTS="-agentpath:$BUILD/lib/libstackfrag.so=$opts,record=$WORK/$name.sfr,log=$WORK/$name.log" \
    "$SHARED/$w/run.sh" > "$WORK/$name.out" 2>&1
}

echo "| JDK | workload | interval | incomplete %: 16 KB | 16 KB + stitching | stack=auto + stitching | stitched % (auto) | stitched ASGCT pairs agreeing | mean fragment (auto) | est. extra kernel µs/sample | decode ns median / p99 (16 KB, auto) | fragments grew / shrank |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for jdk in "${JDKS[@]}"; do
  major="$("$jdk/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/.*java.specification.version = //p')"
  for w in $WORKLOADS; do
    for t in $INTERVALS; do
      base="$w-$major-$t"
      echo "== JDK $major $w $t (ITER=$ITER)" >&2
      if ! run "$base-fixed" "$jdk" "$w" "interval=$t,stack=16384,validate" ||
         ! run "$base-auto" "$jdk" "$w" "interval=$t,validate,file=$WORK/$base-auto.collapsed"; then
        echo "| $major | $w | $t | run failed | | | | | | | | |"
        continue
      fi
      "$BUILD/bin/stackfrag" replay --json --no-stitch "$WORK/$base-fixed.sfr" > "$WORK/$base-fixed-plain.json"
      "$BUILD/bin/stackfrag" replay --json "$WORK/$base-fixed.sfr" > "$WORK/$base-fixed-stitch.json"
      "$BUILD/bin/stackfrag" replay --json "$WORK/$base-auto.sfr" > "$WORK/$base-auto.json"
      changes="$(sed -n 's/.*stack=auto: fragments grew \([0-9]*\) times, shrank \([0-9]*\) times.*/\1 \/ \2/p' "$WORK/$base-auto.log" | tail -1)"
      python3 - "$WORK/$base-fixed-plain.json" "$WORK/$base-fixed-stitch.json" "$WORK/$base-auto.json" \
          "$major" "$w" "$t" "${changes:-?}" <<'PY'
import json, sys
plain, stitch, auto = (json.load(open(p)) for p in sys.argv[1:4])
major, w, t, changes = sys.argv[4:8]
pct = lambda r, k: 100.0 * r["profile"][k] / max(1, r["profile"]["samples"])
mean = auto["profile"]["fragment_bytes_mean"]
# bench_sample_cost (docs/benchmarks.md): 8.55 us per sample at 16 KB, 10.95 us at 64 KB; linear between.
extra = max(0.0, (mean - 16384) / (65528 - 16384) * (10.95 - 8.55))
pairs, agree = auto["oracle_stitched_pairs"], auto["oracle_stitched_agree"]
print(f"| {major} | {w} | {t} | {pct(plain, 'incomplete'):.2f} | {pct(stitch, 'incomplete'):.2f} | "
      f"{pct(auto, 'incomplete'):.2f} | {pct(auto, 'stitched'):.2f} | {agree} / {pairs} | {mean:.0f} | {extra:.2f} | "
      f"{plain['decode_ns_median']} / {plain['decode_ns_p99']}, {auto['decode_ns_median']} / {auto['decode_ns_p99']} | {changes} |")
PY
    done
  done
done
echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC'), ITER=$ITER, load average $(cut -d' ' -f1 /proc/loadavg) at the end." >&2
