#!/usr/bin/env bash
# Many threads, mostly waking from short sleeps, deep stacks (tests/integration/java/ManyThreads.java:
# a pool running chains of lambdas into string, regex, stream and reflection work; a fixed amount of
# work, so CPU time compares): what a profiler costs and explains there. Per configuration, median
# over the rounds (each round runs every configuration once, in turn): the JVM's CPU time (user +
# sys) against the no-profiler run of the same round, the agent's own threads' share (its log),
# the peak ring memory the kernel pinned, coverage (samples x interval / process CPU time), and
# incomplete and failed samples. async-profiler (event=cpu) when ASYNC_PROFILER is given.
#
# With -p idle, the program is tests/integration/java/IdlePool.java instead: THREADS threads parked
# on a latch (waking once a second) beside 2 busy ones doing ROUNDS_OF_TASKS x 1000 rounds of string
# work (docs/benchmarks.md, "Many parked threads, lazy rings").
#
# Usage: bench/many-threads.sh [-p pool|idle] [-t THREADS] [-k ROUNDS_OF_TASKS] [-r ROUNDS] [-i "1ms 100us"] [-j JAVA_HOME]
# Env: STACKFRAG_AGENT (default build/lib/libstackfrag.so), ASYNC_PROFILER.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENT="${STACKFRAG_AGENT:-$ROOT/build/lib/libstackfrag.so}"
AP="${ASYNC_PROFILER:-}"
THREADS=200
TASK_ROUNDS=300
ROUNDS=3
INTERVALS="1ms"
JDK="${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}"
PROGRAM=pool
while getopts "p:t:k:r:i:j:" opt; do
  case "$opt" in
    p) PROGRAM="$OPTARG" ;;
    t) THREADS="$OPTARG" ;;
    k) TASK_ROUNDS="$OPTARG" ;;
    r) ROUNDS="$OPTARG" ;;
    i) INTERVALS="$OPTARG" ;;
    j) JDK="$OPTARG" ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
  esac
done
BENCH=many-threads
# shellcheck source=common/checks.sh
. "$ROOT/bench/common/checks.sh"
need_count -t "$THREADS" threads
need_count -k "$TASK_ROUNDS" "rounds of tasks"
need_count -r "$ROUNDS" rounds
need_agent "$AGENT"
need_async_profiler_if_given "$AP"
SCRATCH="$(mktemp -d /dev/shm/sf-many-threads.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT
case "$PROGRAM" in
  pool) MAIN=ManyThreads; ARGS=("$THREADS" "$TASK_ROUNDS") ;;
  idle) MAIN=IdlePool; ARGS=("$THREADS" 2 "$((TASK_ROUNDS * 1000))") ;;
  *) echo "many-threads: -p takes pool or idle, not '$PROGRAM'" >&2; exit 2 ;;
esac
"$JDK/bin/javac" -d "$SCRATCH" "$ROOT/tests/integration/java/$MAIN.java"

configs="none"
for i in $INTERVALS; do
  configs="$configs sf-thread-$i sf-cpu-$i"
  [ -n "$AP" ] && configs="$configs ap-$i"
done

options_of() {   # config -> the JVM option, empty for none
  case "$1" in
    none) echo "" ;;
    sf-thread-*) echo "-agentpath:$AGENT=interval=${1#sf-thread-},file=$SCRATCH/p.collapsed,log=$SCRATCH/log" ;;
    sf-cpu-*) echo "-agentpath:$AGENT=interval=${1#sf-cpu-},mode=cpu,file=$SCRATCH/p.collapsed,log=$SCRATCH/log" ;;
    ap-*) echo "-agentpath:$AP=start,event=cpu,interval=${1#ap-},file=$SCRATCH/ap.collapsed,collapsed" ;;
  esac
}

echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC: $MAIN, $THREADS threads, $TASK_ROUNDS rounds of tasks, $ROUNDS rounds, $("$JDK/bin/java" -version 2>&1 | head -1); load average $(cut -d' ' -f1-3 /proc/loadavg) before"
for round in $(seq "$ROUNDS"); do
  for c in $configs; do
    rm -f "$SCRATCH/log" "$SCRATCH/times"
    opt="$(options_of "$c")"
    # shellcheck disable=SC2086
    /usr/bin/time -f "%U %S" -o "$SCRATCH/times" "$JDK/bin/java" $opt -cp "$SCRATCH" "$MAIN" "${ARGS[@]}" >/dev/null 2>"$SCRATCH/err" \
      || { echo "many-threads: $c failed:" >&2; tail -5 "$SCRATCH/err" >&2; exit 1; }
    cpu="$(awk '{print $1 + $2}' "$SCRATCH/times")"
    agent="-"; memory="-"; coverage="-"; incomplete="-"; failed="-"
    if [ -s "$SCRATCH/log" ]; then
      agent="$(sed -n 's/.*agent threads CPU: .* = \([0-9.]*\)% of.*/\1/p' "$SCRATCH/log" | tail -1)"
      memory="$(sed -n 's/.*ring memory (pinned by the kernel): peak \([0-9.]*\) MB.*/\1/p' "$SCRATCH/log" | tail -1)"
      coverage="$(sed -n 's/.*  coverage \([0-9.]*\)% of the process.*/\1/p' "$SCRATCH/log" | tail -1)"
      incomplete="$(sed -n 's/.*stop summary: .* incomplete \([0-9.]*\)% .*/\1/p' "$SCRATCH/log" | tail -1)"
      failed="$(sed -n 's/.*stop summary: .* failed \([0-9.]*\)% .*/\1/p' "$SCRATCH/log" | tail -1)"
    elif [ "${c%%-*}" = ap ] && [ -s "$SCRATCH/ap.collapsed" ]; then
      interval="${c#ap-}"
      ns=$(case "$interval" in *us) echo $(( ${interval%us} * 1000 )) ;; *ms) echo $(( ${interval%ms} * 1000000 )) ;; esac)
      coverage="$(awk -v ns="$ns" -v cpu="$cpu" '{n += $NF} END {printf "%.1f", 100 * n * ns / 1e9 / cpu}' "$SCRATCH/ap.collapsed")"
    fi
    echo "$round $c $cpu ${agent:--} ${memory:--} ${coverage:--} ${incomplete:--} ${failed:--}" >>"$SCRATCH/results"
    rm -f "$SCRATCH/ap.collapsed"
  done
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after"

median() { sort -n | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo
echo "| configuration | JVM CPU s | vs no profiler | agent threads | ring memory peak MB | coverage | incomplete | failed |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for c in $configs; do
  cpu="$(awk -v c="$c" '$2 == c {print $3}' "$SCRATCH/results" | median)"
  ratio="$(awk -v c="$c" '$2 == c {cpu[$1] = $3} $2 == "none" {base[$1] = $3} END {for (r in cpu) if (base[r] > 0) print cpu[r] / base[r]}' "$SCRATCH/results" | median)"
  col() { awk -v c="$c" -v k="$1" '$2 == c && $k != "-" {print $k}' "$SCRATCH/results" | median; }
  pct() { [ "$1" = - ] && echo - || echo "$1 %"; }
  printf "| %s | %.2f | %s | %s | %s | %s | %s | %s |\n" "$c" "$cpu" "$( [ "$c" = none ] && echo 1 || printf '%.3f×' "$ratio")" \
    "$(pct "$(col 4)")" "$(col 5)" "$(pct "$(col 6)")" "$(pct "$(col 7)")" "$(pct "$(col 8)")"
done
