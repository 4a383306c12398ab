#!/usr/bin/env bash
# Stands in for `java` in a workload's run.sh (which starts the JVM as $JAVA) so that a bench
# measures the JVM's own CPU time, not the workload's other processes (httpserver's wrk and curl, a
# javac). Runs $SF_REAL_JAVA with the arguments, passes SIGTERM/SIGINT on, and when SF_JVM_TIMES is
# set writes the JVM's "user_s sys_s" there. When SF_JVM_MEMORY is set, appends the JVM's resident
# memory there every second: "seconds_since_start anon_kib file_kib" (RssAnon, RssFile); its
# sampling runs as a child whose CPU time `times` would add to SF_JVM_TIMES, so set one of the two.
set -u
"$SF_REAL_JAVA" "$@" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null' TERM INT
if [ -n "${SF_JVM_MEMORY:-}" ]; then
  (
    start=$SECONDS
    while [ -r "/proc/$pid/status" ]; do
      awk -v t=$((SECONDS - start)) '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 }
           END { if (a != "") printf "%d %d %d\n", t, a, f }' "/proc/$pid/status" >>"$SF_JVM_MEMORY" 2>/dev/null
      sleep 1
    done
  ) &
  sampler=$!
fi
while true; do
  rc=0; wait $pid || rc=$?
  [ $rc -gt 128 ] && kill -0 $pid 2>/dev/null && continue
  break
done
[ -n "${sampler:-}" ] && { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; }
if [ -n "${SF_JVM_TIMES:-}" ]; then
  # `times`: this shell's own line, then its children's "XmY.YYYs XmY.YYYs" (user, sys).
  times >"$SF_JVM_TIMES.raw"
  awk 'function secs(t,   m) { m = t; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", t); sub(/s$/, "", t); return m * 60 + t }
       NR == 2 { printf "%.3f %.3f\n", secs($1), secs($2) }' "$SF_JVM_TIMES.raw" >"$SF_JVM_TIMES"
  rm -f "$SF_JVM_TIMES.raw"
fi
exit $rc
