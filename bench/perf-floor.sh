#!/usr/bin/env bash
# What the kernel's sampling alone costs a JVM, with no agent in it: the workload runs under
# `perf record -e task-clock` at the interval (perf's reader is another process, outside the JVM's
# CPU time), once with the ip alone and once with a copy of the user stack per sample, as stackfrag
# asks for, in alternating rounds with a run without sampling. The floor under any perf-based
# profiler's overhead on this machine: a profiler that decodes the stack pays at least the second
# column, async-profiler's event=cpu at least the first (plus its signal and AsyncGetCallTrace).
#
# Usage: bench/perf-floor.sh [-i ITER] [-r ROUNDS] [-w "WORKLOADS"] [-t INTERVAL_US] [-s STACK_BYTES]
#   -i ITER     workload iterations per run (default 3)
#   -r ROUNDS   rounds, each running the three configurations once (default 3)
#   -w LIST     workloads (default: xalan)
#   -t US       sampling interval in µs (default 100: 10 kHz)
#   -s BYTES    user stack copied per sample in the third configuration (default 16384)
# Env: STACKFRAG_SHARED_DIR, JAVA_HOME. Needs perf (linux-perf) and kernel.perf_event_paranoid
# low enough to sample one's own processes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}"
WORKLOADS_DIR="$SHARED/bench/workloads"
ITER=3
ROUNDS=3
WORKLOADS="xalan"
INTERVAL_US=100
STACK=16384
while getopts "i:r:w:t:s:" opt; do
  case "$opt" in
    i) ITER="$OPTARG" ;;
    r) ROUNDS="$OPTARG" ;;
    w) WORKLOADS="$OPTARG" ;;
    t) INTERVAL_US="$OPTARG" ;;
    s) STACK="$OPTARG" ;;
    *) sed -n '2,17p' "$0" >&2; exit 2 ;;
  esac
done
BENCH=perf-floor
# shellcheck source=common/checks.sh
. "$ROOT/bench/common/checks.sh"
# shellcheck source=common/stats.sh
. "$ROOT/bench/common/stats.sh"
need_count -r "$ROUNDS" rounds
need_count -i "$ITER" iterations
need_count -t "$INTERVAL_US" "interval µs"
need_count -s "$STACK" "stack bytes"
JAVA="$(need_java)"
command -v perf >/dev/null || { echo "$BENCH: perf is missing (apt-get install linux-perf)" >&2; exit 2; }
SCRATCH="$(mktemp -d /dev/shm/sf-perf-floor.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT
JAVA_CPU="$ROOT/bench/common/java-cpu.sh"
PERIOD_NS=$((INTERVAL_US * 1000))

# One run: prints the JVM's CPU seconds (user + sys); `$@` is the command the workload runs under.
jvm_cpu() {
  rm -f "$SCRATCH/times"
  if ! "$@" env ITER="$ITER" JAVA="$JAVA_CPU" SF_REAL_JAVA="$JAVA" SF_JVM_TIMES="$SCRATCH/times" \
      "$WORKLOADS_DIR/$workload/run.sh" >"$SCRATCH/out" 2>"$SCRATCH/err"; then
    echo "$BENCH: $workload failed under: $*" >&2
    tail -5 "$SCRATCH/err" >&2
    exit 1
  fi
  awk '{ printf "%.3f\n", $1 + $2 }' "$SCRATCH/times"
  rm -f "$SCRATCH/perf.data"
}

echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC with \`bench/perf-floor.sh -i $ITER -r $ROUNDS -w \"$WORKLOADS\" -t $INTERVAL_US -s $STACK\`: $(nproc) CPUs, kernel $(uname -r), $("$JAVA" -version 2>&1 | head -1)."
echo
echo "| workload | no sampling: JVM CPU s | perf task-clock every $INTERVAL_US µs, ip only | the same with $STACK bytes of user stack a sample |"
echo "|---|---:|---:|---:|"
for workload in $WORKLOADS; do
  [ -x "$WORKLOADS_DIR/$workload/run.sh" ] || { echo "$BENCH: no workload $workload in $WORKLOADS_DIR" >&2; exit 2; }
  none="" ip="" stack=""
  for round in $(seq "$ROUNDS"); do
    n=$(jvm_cpu)
    i=$(jvm_cpu perf record -q -e task-clock -c "$PERIOD_NS" -o "$SCRATCH/perf.data" --)
    s=$(jvm_cpu perf record -q -e task-clock -c "$PERIOD_NS" --call-graph "dwarf,$STACK" -o "$SCRATCH/perf.data" --)
    echo "$BENCH: $workload round $round/$ROUNDS: JVM CPU $n s without sampling, $i s ip only, $s s with the stack" >&2
    none="${none:+$none }$n" ip="${ip:+$ip }$i" stack="${stack:+$stack }$s"
  done
  echo "| $workload | $(median "$none") | $(spread "$(ratios "$ip" "$none")" "%.2f" "×") | $(spread "$(ratios "$stack" "$none")" "%.2f" "×") |"
done
echo
echo "Each cell: the JVM's CPU time (user + sys, not the workload's other processes) as a ratio to the run without sampling of the same round, median (min–max). perf's own work (reading the rings, writing its file to tmpfs) runs in perf's process, outside these times; its memory traffic is not."
