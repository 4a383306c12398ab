#!/usr/bin/env bash
# What being profiled costs the JVM's own threads, feature by feature: each run measures the JVM
# process's CPU time and context switches (perf stat's software counters over every thread of the
# JVM, the workload's load generator left out), subtracts the CPU time of stackfrag's own threads
# (the agent's exact "agent threads CPU" line) and shows what the agent's callbacks took on the
# JVM's threads (its exact "agent code on the JVM's threads" line). Configurations switch the
# agent's features off one at a time with sampling effectively off (interval=1000s: every
# per-thread perf event open, no sample taken), and sample at 100/s and 1,000/s, beside no profiler
# and, when ASYNC_PROFILER names its library, async-profiler. Configurations alternate within each
# round; the table shows medians over the rounds with the min–max of each ratio to the same
# round's no-profiler run. (perf stat also asks for instructions:u/k; a VM without a PMU, like
# this project's, answers "not supported", and the table leaves them out.)
#
# Usage: bench/jvm-side-cost.sh [-i ITER] [-r ROUNDS] [-w "WORKLOADS"] [-c "CONFIGS"]
#   -i ITER     workload iterations per run (default 3)
#   -r ROUNDS   rounds, each running every configuration once (default 5)
#   -w LIST     workloads (default: xalan httpserver)
#   -c LIST     configurations besides "none" (default: all), from the keys in CONFIG_LIST below
# Env: ASYNC_PROFILER (libasyncProfiler.so: adds ap10ms and ap1ms), STACKFRAG_AGENT (default
#      build/lib/libstackfrag.so), STACKFRAG_SHARED_DIR, JAVA_HOME, JVM_SIDE_LOGS (a directory that
#      keeps every run's stderr and perf stat output).
# The counters are perf's own per-thread counting events on every JVM thread: they are the same
# in every configuration, including "none".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENT="${STACKFRAG_AGENT:-$ROOT/build/lib/libstackfrag.so}"
ASYNC_PROFILER="${ASYNC_PROFILER:-}"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}"
WORKLOADS_DIR="$SHARED/bench/workloads"
ITER=3
ROUNDS=5
WORKLOADS="xalan httpserver"
CHOSEN=""
while getopts "i:r:w:c:" opt; do
  case "$opt" in
    i) ITER="$OPTARG" ;;
    r) ROUNDS="$OPTARG" ;;
    w) WORKLOADS="$OPTARG" ;;
    c) CHOSEN="$OPTARG" ;;
    *) sed -n '2,21p' "$0" >&2; exit 2 ;;
  esac
done
BENCH=jvm-side-cost
# shellcheck source=common/checks.sh
. "$ROOT/bench/common/checks.sh"
need_count -r "$ROUNDS" rounds
need_count -i "$ITER" iterations
JAVA="$(need_java)"
need_agent "$AGENT"
need_async_profiler_if_given "$ASYNC_PROFILER"
command -v perf >/dev/null || { echo "jvm-side-cost: perf is missing (linux-perf)" >&2; exit 2; }
SCRATCH="$(mktemp -d /dev/shm/sf-jvmside.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT

# Stands in for `java` in the workload's run.sh: perf stat over the JVM alone.
cat >"$SCRATCH/java" <<EOF
#!/usr/bin/env bash
exec perf stat -x, -o "$SCRATCH/stat" -e task-clock,instructions:u,instructions:k,context-switches -- "$JAVA" "\$@"
EOF
chmod +x "$SCRATCH/java"

SF="-agentpath:$AGENT=loglevel=info,file=OUTFILE"
IDLE="$SF,interval=1000s"
AP="-agentpath:$ASYNC_PROFILER=start,event=cpu,file=OUTAP,collapsed"
# key | title | JAVA_OPTS; OUTFILE / OUTAP become fresh files per run
CONFIG_LIST=(
  "idle|stackfrag, no samples (interval=1000s)|$IDLE"
  "idle-nobc|  the same, breadcrumbs=off|$IDLE,breadcrumbs=off"
  "idle-java|  the same, threads=java|$IDLE,threads=java"
  "idle-jvmti|  the same, mode=jvmti (no perf event)|$IDLE,mode=jvmti"
  "sf10ms|stackfrag 100/s|$SF,interval=10ms"
  "sf10ms-nobc|  the same, breadcrumbs=off|$SF,interval=10ms,breadcrumbs=off"
  "sf1ms|stackfrag 1k/s|$SF,interval=1ms"
  "ap10ms|async-profiler 10 ms|$AP,interval=10ms"
  "ap1ms|async-profiler 1 ms|$AP,interval=1ms"
)
CONFIGS=("none|no profiler|")
add_chosen_configs CONFIG_LIST

# Prints "task_ms instr_u instr_k switches agent_ms callback_ms" of one run.
run_once() {
  local workload="$1" opts="$2" tag="$3"
  opts="${opts//OUTFILE/$SCRATCH/$tag.html}"
  opts="${opts//OUTAP/$SCRATCH/$tag.collapsed}"
  rm -f "$SCRATCH/stat"
  if ! env ITER="$ITER" JAVA_OPTS="$opts" JAVA="$SCRATCH/java" "$WORKLOADS_DIR/$workload/run.sh" \
      >"$SCRATCH/out" 2>"$SCRATCH/err"; then
    echo "jvm-side-cost: $workload failed with '$opts':" >&2
    tail -20 "$SCRATCH/err" >&2
    exit 1
  fi
  need_no_agent_error "$SCRATCH/err" "on $workload with '$opts'"
  [ -s "$SCRATCH/stat" ] || { echo "jvm-side-cost: no perf stat output from $workload" >&2; exit 1; }
  if [ -n "${JVM_SIDE_LOGS:-}" ]; then
    mkdir -p "$JVM_SIDE_LOGS"
    local stamp; stamp="$(date +%s%N)"
    cp "$SCRATCH/err" "$JVM_SIDE_LOGS/$tag.$stamp.err"
    cp "$SCRATCH/stat" "$JVM_SIDE_LOGS/$tag.$stamp.stat"
  fi
  rm -f "$SCRATCH/$tag".*
  local agent_ms
  local agent_ms callback_ms
  agent_ms="$(sed -n 's/.*agent threads CPU: \([0-9.]*\) ms.*/\1/p' "$SCRATCH/err" | tail -1)"
  callback_ms="$(sed -n "s/.*agent code on the JVM's threads CPU: \([0-9.]*\) ms.*/\1/p" "$SCRATCH/err" | tail -1)"
  awk -F, -v a="${agent_ms:-0}" -v cb="${callback_ms:-0}" '
    $3 == "task-clock" { t = $1 }
    $3 ~ /^instructions:u/ { u = $1 ~ /^[0-9]+$/ ? $1 : "NA" }   # "<not supported>" without a PMU
    $3 ~ /^instructions:k/ { k = $1 ~ /^[0-9]+$/ ? $1 : "NA" }
    $3 == "context-switches" { c = $1 }
    END { printf "%.1f %s %s %s %s %s\n", t, u, k, c, a, cb }' "$SCRATCH/stat"
}

for w in $WORKLOADS; do
  [ -x "$WORKLOADS_DIR/$w/run.sh" ] || { echo "jvm-side-cost: no workload $w" >&2; exit 2; }
  ITER=1 "$WORKLOADS_DIR/$w/run.sh" >/dev/null 2>&1 || true   # compiles the driver
done

echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC: bench/jvm-side-cost.sh -i $ITER -r $ROUNDS -w \"$WORKLOADS\"; load average $(cut -d' ' -f1-3 /proc/loadavg) before"
for w in $WORKLOADS; do
  : >"$SCRATCH/$w.results"
  for ((round = 1; round <= ROUNDS; round++)); do
    for entry in "${CONFIGS[@]}"; do
      key="${entry%%|*}"; rest="${entry#*|}"; opts="${rest#*|}"
      line="$(run_once "$w" "$opts" "$w-$key-$round")"
      echo "$w $round $key $line" >>"$SCRATCH/$w.results"
      echo "  $w round $round $key: $line" >&2
    done
  done
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after"
echo
echo "| workload | configuration | JVM CPU s (ratio, min–max) | context switches | stackfrag's threads ms | stackfrag's code on the JVM's threads ms | JVM CPU without stackfrag's threads (ratio, min–max) |"
echo "|---|---|---:|---:|---:|---:|---:|"
for w in $WORKLOADS; do
  for entry in "${CONFIGS[@]}"; do
    key="${entry%%|*}"; rest="${entry#*|}"; title="${rest%%|*}"
    awk -v w="$w" -v key="$key" -v title="$title" '
      function median(a, n,   i, j, t) {
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
      }
      function cell(arr, ratio, n,   lo, hi, i, m) {
        lo = 1e99; hi = -1e99
        for (i = 1; i <= n; i++) { if (ratio[i] < lo) lo = ratio[i]; if (ratio[i] > hi) hi = ratio[i] }
        m = median(arr, n) / 1000
        if (key == "none") return sprintf("%.2f", m)
        return sprintf("%.2f (%.3f×, %.3f–%.3f)", m, median(ratio, n), lo, hi)
      }
      $3 == "none" { base[$2] = $0 }
      $3 == key { n++; round[n] = $2; t[n] = $4; c[n] = $7; a[n] = $8; cb[n] = $9; j[n] = $4 - $8 }
      END {
        for (i = 1; i <= n; i++) {
          split(base[round[i]], b, " ")
          rt[i] = t[i] / b[4]; rj[i] = j[i] / (b[4] - b[8])
        }
        printf "| %s | %s | %s | %d | %.0f | %.0f | %s |\n", w, title, cell(t, rt, n), median(c, n), median(a, n),
          median(cb, n), cell(j, rj, n)
      }' "$SCRATCH/$w.results"
  done
done
