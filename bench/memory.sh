#!/usr/bin/env bash
# What profiling costs a Java service in memory: the JVM's resident memory, sampled every second,
# with stackfrag (live profile, no recording) and, when ASYNC_PROFILER names its library, with
# async-profiler (event=cpu) at the same interval, against a run with no profiler. The heap is
# touched at the start (-XX:+AlwaysPreTouch, and the workload's -Xms = -Xmx) so that what moves is
# native memory. Per configuration: anonymous memory once warm (after the first quarter of the
# run), at its peak and at the end, each against the no-profiler run of the same round, the growth
# over the second half of the run (what a long run would keep adding), and the file-backed memory
# (mapped libraries and debug symbols) at the end; below the table, stackfrag's ring memory and its
# threads' share of the process's CPU time over the run. Rounds alternate the configurations.
#
# Usage: bench/memory.sh [-i ITER] [-r ROUNDS] [-t INTERVAL] [-w WORKLOAD]
#   -i ITER      workload iterations per run (default 40: about a minute of httpserver)
#   -r ROUNDS    rounds, each running every configuration once (default 1)
#   -t INTERVAL  sampling interval of both profilers (default 1ms)
#   -w WORKLOAD  a shared workload (default httpserver)
# Env: ASYNC_PROFILER (path of libasyncProfiler.so: adds its runs; build it yourself, it is not part
#      of this project), STACKFRAG_AGENT (default build/lib/libstackfrag.so), STACKFRAG_SHARED_DIR,
#      JAVA_HOME.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENT="${STACKFRAG_AGENT:-$ROOT/build/lib/libstackfrag.so}"
ASYNC_PROFILER="${ASYNC_PROFILER:-}"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}"
ITER=40 ROUNDS=1 INTERVAL=1ms WORKLOAD=httpserver
while getopts "i:r:t:w:" opt; do
  case "$opt" in
    i) ITER="$OPTARG" ;;
    r) ROUNDS="$OPTARG" ;;
    t) INTERVAL="$OPTARG" ;;
    w) WORKLOAD="$OPTARG" ;;
    *) sed -n '2,19p' "$0" >&2; exit 2 ;;
  esac
done
BENCH=memory
# shellcheck source=common/checks.sh
. "$ROOT/bench/common/checks.sh"
need_count -i "$ITER" iterations
need_count -r "$ROUNDS" rounds
JAVA="$(need_java)"
need_agent "$AGENT"
need_async_profiler_if_given "$ASYNC_PROFILER"
RUN="$SHARED/bench/workloads/$WORKLOAD/run.sh"
[ -x "$RUN" ] || { echo "memory: no workload $WORKLOAD at $RUN" >&2; exit 2; }
SCRATCH="$(mktemp -d /dev/shm/sf-memory.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT

CONFIGS=("none|no profiler|"
         "sf|stackfrag $INTERVAL|-agentpath:$AGENT=interval=$INTERVAL,loglevel=info,file=$SCRATCH/sf.html")
[ -n "$ASYNC_PROFILER" ] &&
  CONFIGS+=("ap|async-profiler $INTERVAL|-agentpath:$ASYNC_PROFILER=start,event=cpu,interval=$INTERVAL,file=$SCRATCH/ap.collapsed")

# Prints "warm_mib peak_mib end_mib growth_mib_per_min file_mib samples" of one run's memory file.
summarize() {
  awk '{ t[NR] = $1; a[NR] = $2; f[NR] = $3 }
       END {
         if (NR < 4) { print "- - - - - " NR; exit }
         q = int(NR / 4) + 1; h = int(NR / 2) + 1
         peak = 0; for (i = q; i <= NR; i++) if (a[i] > peak) peak = a[i]
         dt = t[NR] - t[h]; growth = dt > 0 ? (a[NR] - a[h]) / 1024 / dt * 60 : 0
         printf "%.1f %.1f %.1f %.2f %.1f %d\n", a[q] / 1024, peak / 1024, a[NR] / 1024, growth, f[NR] / 1024, NR
       }' "$1"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $WORKLOAD, ITER=$ITER, $ROUNDS round(s), $("$JAVA" -version 2>&1 | head -1)"
echo
echo "| round | profiler | seconds | anon MiB warm | peak | end | against no profiler (warm / peak / end) | growth MiB/min, second half | file-backed MiB |"
echo "|---:|---|---:|---:|---:|---:|---|---:|---:|"
for r in $(seq "$ROUNDS"); do
  base=""
  for entry in "${CONFIGS[@]}"; do
    IFS='|' read -r key label opts <<<"$entry"
    mem="$SCRATCH/$key.$r.mem"
    : >"$mem"
    if ! env ITER="$ITER" JAVA_OPTS="-XX:+AlwaysPreTouch $opts" JAVA="$ROOT/bench/common/java-cpu.sh" \
        SF_REAL_JAVA="$JAVA" SF_JVM_MEMORY="$mem" "$RUN" >"$SCRATCH/out" 2>"$SCRATCH/err"; then
      echo "memory: $WORKLOAD failed with '$opts':" >&2
      tail -20 "$SCRATCH/err" >&2
      exit 1
    fi
    need_no_agent_error "$SCRATCH/err" "on $WORKLOAD with '$opts'"
    read -r warm peak end growth file samples <<<"$(summarize "$mem")"
    [ "$warm" != "-" ] || { echo "memory: only $samples memory samples of $WORKLOAD (too short a run?)" >&2; exit 1; }
    if [ -z "$base" ]; then
      base="$warm $peak $end"
      against="-"
    else
      read -r bw bp be <<<"$base"
      against="$(awk -v w="$warm" -v p="$peak" -v e="$end" -v bw="$bw" -v bp="$bp" -v be="$be" \
                   'BEGIN { printf "%+.1f / %+.1f / %+.1f", w - bw, p - bp, e - be }')"
    fi
    echo "| $r | $label | $samples | $warm | $peak | $end | $against | $growth | $file |"
    # The agent's own account of what it pinned for the kernel's rings, and of its threads' CPU
    # time: over a run this long, what the once-per-run work (the JIT's announcements) weighs.
    if [ "$key" = sf ]; then
      { sed -n 's/^ *ring memory (pinned by the kernel): /stackfrag rings: /p' "$SCRATCH/err"
        sed -n 's/.*\(agent threads CPU: .*\)/stackfrag \1/p' "$SCRATCH/err" | head -1; } >"$SCRATCH/agent.$r"
    fi
  done
done
echo
for r in $(seq "$ROUNDS"); do [ -s "$SCRATCH/agent.$r" ] && sed "s/^/round $r: /" "$SCRATCH/agent.$r"; done
true
