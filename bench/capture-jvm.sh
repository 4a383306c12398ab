#!/usr/bin/env bash
# CPU cost of the stackfrag agent on the shared JVM workloads: the JVM process's CPU time
# (user + sys) with the agent sampling 100 / 1,000 / 10,000 times per second per thread, once
# recording to a file on tmpfs and once discarding the events (record=/dev/null, which also keeps the live decoder off), against runs without
# the agent. Configurations alternate run by run (so drift in machine load hits all alike); the
# table shows median CPU ratios to the no-agent median, and is appended to docs/benchmarks.md.
#
# Usage: bench/capture-jvm.sh [-i ITER] [-r RUNS] [-w "xalan lucene h2 jython"] [-n]
#   -i ITER       workload iterations per run (default 2)
#   -r RUNS       runs per configuration (default 3, at least 3 for a median)
#   -w LIST       workloads (default: xalan lucene h2 jython, those installed). groundtruth runs
#                 for a fixed time, so its CPU time does not grow with overhead: not a default.
#   -n            print the table only; do not touch docs/benchmarks.md
# Env: STACKFRAG_AGENT (default build/lib/libstackfrag.so), STACKFRAG_SHARED_DIR, JAVA_HOME.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENT="${STACKFRAG_AGENT:-$ROOT/build/lib/libstackfrag.so}"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}"
WORKLOADS_DIR="$SHARED/bench/workloads"
ITER=2
RUNS=3
WORKLOADS="xalan lucene h2 jython"
WRITE_DOC=1
while getopts "i:r:w:n" opt; do
  case "$opt" in
    i) ITER="$OPTARG" ;;
    r) RUNS="$OPTARG" ;;
    w) WORKLOADS="$OPTARG" ;;
    n) WRITE_DOC=0 ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
  esac
done
[ -r "$AGENT" ] || { echo "capture-jvm: no agent at $AGENT (build it, or set STACKFRAG_AGENT)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "capture-jvm: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
SCRATCH="$(mktemp -d /dev/shm/sf-capture-jvm.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT

# name | agent options ("" = no agent); REC is replaced by a fresh file per run
CONFIGS=(
  "none|"
  "100/s discard|interval=10ms,record=/dev/null,loglevel=warn"
  "100/s record|interval=10ms,record=REC,loglevel=warn"
  "1k/s discard|interval=1ms,record=/dev/null,loglevel=warn"
  "1k/s record|interval=1ms,record=REC,loglevel=warn"
  "10k/s discard|interval=100us,record=/dev/null,loglevel=warn"
  "10k/s record|interval=100us,record=REC,loglevel=warn"
)

# Prints "cpu_seconds wall_seconds" of one run, or fails the script with the run's stderr.
run_once() {
  local workload="$1" options="$2" tag="$3"
  local opts="" rec="$SCRATCH/$tag.sfr"
  if [ -n "$options" ]; then opts="-agentpath:$AGENT=${options//REC/$rec}"; fi
  rm -f "$rec"
  if ! /usr/bin/time -f "%U %S %e" -o "$SCRATCH/time" env ITER="$ITER" JAVA_OPTS="$opts" \
      "$WORKLOADS_DIR/$workload/run.sh" >"$SCRATCH/out" 2>"$SCRATCH/err"; then
    echo "capture-jvm: $workload failed with '$options':" >&2
    tail -20 "$SCRATCH/err" >&2
    exit 1
  fi
  if grep -q '\[stackfrag\] error' "$SCRATCH/err"; then
    echo "capture-jvm: the agent reported an error on $workload with '$options':" >&2
    grep '\[stackfrag\]' "$SCRATCH/err" >&2
    exit 1
  fi
  rm -f "$rec"
  awk '{ printf "%.3f %.3f\n", $1 + $2, $3 }' "$SCRATCH/time"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

selected=()
for w in $WORKLOADS; do
  if [ -x "$WORKLOADS_DIR/$w/run.sh" ] && ITER=1 "$WORKLOADS_DIR/$w/run.sh" >/dev/null 2>"$SCRATCH/warm.err"; then
    selected+=("$w")   # also compiles the driver, so no javac run is measured
  else
    echo "capture-jvm: skipping $w (not runnable: $(tail -1 "$SCRATCH/warm.err"))" >&2
  fi
done
[ "${#selected[@]}" -gt 0 ] || { echo "capture-jvm: no workload to run" >&2; exit 2; }

load_before="$(cut -d' ' -f1 /proc/loadavg)"
declare -A cpu wall
for w in "${selected[@]}"; do
  for ((run = 1; run <= RUNS; run++)); do
    for i in "${!CONFIGS[@]}"; do
      IFS='|' read -r name options <<<"${CONFIGS[$i]}"
      read -r c t < <(run_once "$w" "$options" "$w-$i-$run")
      cpu["$w|$i"]+="$c "
      wall["$w|$i"]+="$t "
      echo "capture-jvm: $w run $run $name: cpu $c s, wall $t s" >&2
    done
  done
done
load_after="$(cut -d' ' -f1 /proc/loadavg)"

cpu_model="$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
java_version="$("${JAVA_HOME:+$JAVA_HOME/bin/}java" -version 2>&1 | head -1)"
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/capture-jvm.sh -i $ITER -r $RUNS\`: $(nproc) CPUs ($cpu_model), kernel $(uname -r), $java_version; load average $load_before before, $load_after after."
  echo
  if awk -v a="$load_after" -v b="$load_before" -v n="$(nproc)" 'BEGIN { exit !(a > n || b > n) }'; then
    echo "The machine was shared with other work (load average above its CPU count), so the runs competed for CPUs: differences of 10-20% between neighbouring cells are noise; compare the trend with the rate."
    echo
  fi
  echo "JVM process CPU time (user + sys) with the agent, as a ratio to the median without it; medians of $RUNS alternating runs, ITER=$ITER, THREADS = #CPUs, default agent options otherwise (16 KB fragments, mode=thread). *discard*: events are built and counted but not stored (\`record=/dev/null\`, no live decoding); *record*: written to a recording on tmpfs (/dev/shm)."
  echo
  header="| workload | no agent: CPU s (wall s) |"
  rule="|---|---:|"
  for i in "${!CONFIGS[@]}"; do
    [ "$i" -eq 0 ] && continue
    header+=" ${CONFIGS[$i]%%|*} |"
    rule+="---:|"
  done
  echo "$header"
  echo "$rule"
  for w in "${selected[@]}"; do
    base="$(tr ' ' '\n' <<<"${cpu["$w|0"]}" | grep . | median)"
    base_wall="$(tr ' ' '\n' <<<"${wall["$w|0"]}" | grep . | median)"
    row="| $w | $(printf '%.2f (%.2f)' "$base" "$base_wall") |"
    for i in "${!CONFIGS[@]}"; do
      [ "$i" -eq 0 ] && continue
      m="$(tr ' ' '\n' <<<"${cpu["$w|$i"]}" | grep . | median)"
      row+=" $(awk -v m="$m" -v b="$base" 'BEGIN { printf "%.2f×", m / b }') |"
    done
    echo "$row"
  done
} >"$SCRATCH/table.md"

cat "$SCRATCH/table.md"
if [ "$WRITE_DOC" = 1 ]; then
  python3 "$ROOT/bench/capture-jvm/update_section.py" "$ROOT/docs/benchmarks.md" \
    "JVM capture (bench/capture-jvm.sh)" "$SCRATCH/table.md"
  echo "capture-jvm: updated docs/benchmarks.md" >&2
fi
