#!/usr/bin/env bash
# Two server frameworks no shared workload has (tests/integration/servers: an embedded Tomcat and a
# Netty service) under wrk load, with no profiler, stackfrag and, when ASYNC_PROFILER names its
# library, async-profiler (event=cpu) at the same intervals. Configurations alternate run by run
# within each round. Per run, after WARMUP seconds of the same load (the JIT's first compilations): the
# requests served in SECS seconds and the JVM's CPU time (user + sys) during them (wrk runs on the
# same CPUs), so the cost is CPU per request, as a ratio to the same round's no-profiler run; the share of the process's CPU that stackfrag's own threads used (as
# the agent measured it); and each profiler's coverage: its samples times the interval against the
# JVM's CPU time (stackfrag's own figure from its stop summary, async-profiler's from its output).
# Prints a Markdown table (median, min–max over the rounds).
#
# Usage: bench/servers.sh [-r ROUNDS] [-s SECS] [-u WARMUP] [-w "tomcat netty"] [-c "sf10ms sf1ms ap10ms ap1ms"]
# Env: ASYNC_PROFILER (path of libasyncProfiler.so, built from its sources: not part of this project),
#      STACKFRAG_AGENT (default build/lib/libstackfrag.so), JAVA_HOME (default JDK 17),
#      SERVERS_LOGS (a directory that keeps every run's stderr).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENT="${STACKFRAG_AGENT:-$ROOT/build/lib/libstackfrag.so}"
ASYNC_PROFILER="${ASYNC_PROFILER:-}"
export JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}"
DRIVER="$ROOT/tests/integration/servers/run-server.sh"
ROUNDS=5
SECS=10
WARMUP=8
SERVERS="tomcat netty"
CHOSEN=""
while getopts "r:s:u:w:c:" opt; do
  case "$opt" in
    r) ROUNDS="$OPTARG" ;;
    s) SECS="$OPTARG" ;;
    u) WARMUP="$OPTARG" ;;
    w) SERVERS="$OPTARG" ;;
    c) CHOSEN="$OPTARG" ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
  esac
done
BENCH=servers
# shellcheck source=common/checks.sh
. "$ROOT/bench/common/checks.sh"
# shellcheck source=common/stats.sh
. "$ROOT/bench/common/stats.sh"
need_count -r "$ROUNDS" rounds
need_count -s "$SECS" seconds
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "$BENCH: -u wants whole seconds of warm-up, got '$WARMUP'" >&2; exit 2; }
need_java >/dev/null
need_agent "$AGENT"
need_async_profiler_if_given "$ASYNC_PROFILER"
for s in $SERVERS; do
  [[ " tomcat netty " == *" $s "* ]] || { echo "$BENCH: unknown server '$s' (tomcat, netty)" >&2; exit 2; }
done
SCRATCH="$(mktemp -d /dev/shm/sf-servers.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT

ALL=(
  "sf10ms|stackfrag 100/s|-agentpath:$AGENT=loglevel=info,interval=10ms,file=OUT.html"
  "sf1ms|stackfrag 1k/s|-agentpath:$AGENT=loglevel=info,interval=1ms,file=OUT.html"
  "ap10ms|async-profiler 10 ms|-agentpath:$ASYNC_PROFILER=start,event=cpu,interval=10ms,file=OUT.collapsed"
  "ap1ms|async-profiler 1 ms|-agentpath:$ASYNC_PROFILER=start,event=cpu,interval=1ms,file=OUT.collapsed"
)
CONFIGS=("none|no profiler|")
add_chosen_configs ALL

declare -A CPU_PER_REQ AGENT_PCT COVERAGE RPS
for round in $(seq "$ROUNDS"); do
  for server in $SERVERS; do
    for entry in "${CONFIGS[@]}"; do
      IFS='|' read -r key _ opts <<<"$entry"
      out="$SCRATCH/$server-$key-$round"
      work="$SCRATCH/work-$server"
      opts="${opts//OUT/$out}"
      JAVA_OPTS="$opts" SECS="$SECS" WARMUP="$WARMUP" "$DRIVER" "$server" "$work" > "$out.stdout" 2> "$out.err" ||
        { echo "$BENCH: $server with $key failed (round $round):" >&2; tail -20 "$out.err" >&2; exit 1; }
      [ -z "${SERVERS_LOGS:-}" ] || { mkdir -p "$SERVERS_LOGS"; cp "$out.err" "$SERVERS_LOGS/$server-$key-$round.err"; }
      read -r requests cpu_ms whole_ms < <(sed -n 's/^run-server: \([0-9]*\) requests, JVM CPU \([0-9]*\) ms (whole run \([0-9]*\) ms)$/\1 \2 \3/p' "$out.err")
      [ -n "${requests:-}" ] && [ "$requests" -gt 0 ] || { echo "$BENCH: $server with $key served no request" >&2; exit 1; }
      CPU_PER_REQ[$server,$key]+="$(awk -v c="$cpu_ms" -v r="$requests" 'BEGIN { printf "%.1f", c * 1000 / r }') "
      RPS[$server,$key]+="$(awk -v r="$requests" -v s="$SECS" 'BEGIN { printf "%.0f", r / s }') "
      case "$key" in
        sf*)
          AGENT_PCT[$server,$key]+="$(sed -n 's/.*agent threads CPU: .* = \([0-9.]*\)% of.*/\1/p' "$out.err" | tail -1) "
          COVERAGE[$server,$key]+="$(sed -n 's/.*coverage \([0-9.]*\)% of the process.*/\1/p' "$out.err" | tail -1) " ;;
        ap*)
          interval_ms="${key#ap}"; interval_ms="${interval_ms%ms}"
          samples="$(awk '{ s += $NF } END { print s + 0 }' "$out.collapsed" 2>/dev/null || echo 0)"
          COVERAGE[$server,$key]+="$(awk -v n="$samples" -v i="$interval_ms" -v c="$whole_ms" 'BEGIN { printf "%.1f", 100 * n * i / c }') " ;;
      esac
      rm -f "$out.html" "$out.collapsed"
    done
  done
done

cell() { [ -n "${1// /}" ] || { echo "—"; return; }; spread "$1" "$2" ""; }   # cell LIST FORMAT
echo "| server | configuration | requests/s | CPU µs per request | ratio to no profiler | stackfrag's own threads % | coverage % |"
echo "|---|---|---:|---:|---:|---:|---:|"
for server in $SERVERS; do
  for entry in "${CONFIGS[@]}"; do
    IFS='|' read -r key label _ <<<"$entry"
    ratio="—"
    [ "$key" = none ] || ratio="$(cell "$(ratios "${CPU_PER_REQ[$server,$key]}" "${CPU_PER_REQ[$server,none]}")" "%.3f")×"
    echo "| $server | $label | $(median "${RPS[$server,$key]}") | $(cell "${CPU_PER_REQ[$server,$key]}" "%.0f") | $ratio | $(cell "${AGENT_PCT[$server,$key]:-}" "%.2f") | $(cell "${COVERAGE[$server,$key]:-}" "%.1f") |"
  done
done
echo
echo "JDK: $JAVA_HOME; $ROUNDS rounds, each configuration once per round in turn: ${WARMUP} s of warm-up, then ${SECS} s measured, under wrk (2 threads, 48 connections, on the same 2 CPUs); medians (min–max). Coverage: the profiler's samples times its interval against the JVM's CPU time of the whole run."
