#!/usr/bin/env bash
# Starts one of the servers here (tomcat, netty) on JAVA_HOME's JVM with JAVA_OPTS, waits until it
# answers, loads it with wrk (48 connections) for WARMUP seconds and then for SECS seconds, says on
# stderr how many requests the second load got and the JVM's CPU time during it, stops the JVM with
# SIGTERM (the agent writes its profile at the JVM's exit) and exits with the JVM's status (143
# after SIGTERM counts as 0).
# Usage: JAVA_HOME=... [JAVA_OPTS=...] [WARMUP=0] [SECS=6] run-server.sh tomcat|netty WORKDIR
set -euo pipefail
set -f   # JAVA_OPTS is word-split below, unglobbed
SERVER="$1"; WORK="$2"; SECS="${SECS:-6}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "$SERVER" in
  tomcat) MAIN=TomcatServe; JARS="tomcat10-embed-core tomcat10-embed-el jakarta-annotation-api"
          URL_PATH="/api/orders"; LUA_PATH='"/api/orders?user=u" .. (n % 1013) .. "&region=eu&n=" .. n' ;;
  netty)  MAIN=NettyServe; JARS="netty-buffer netty-codec netty-codec-http netty-common netty-handler netty-resolver netty-transport guava"
          URL_PATH="/x"; LUA_PATH='"/x?id=item-" .. (n % 997) .. "&q=" .. n' ;;
  *) echo "run-server.sh: unknown server '$SERVER' (tomcat or netty)" >&2; exit 2 ;;
esac
CP=""
for j in $JARS; do
  [ -r "/usr/share/java/$j.jar" ] || { echo "run-server.sh: missing /usr/share/java/$j.jar (scripts/setup.sh installs it)" >&2; exit 2; }
  CP="${CP:+$CP:}/usr/share/java/$j.jar"
done
command -v wrk >/dev/null || { echo "run-server.sh: wrk is missing (the shared workloads' install.sh installs it)" >&2; exit 2; }
mkdir -p "$WORK/classes"
"$JAVA_HOME/bin/javac" -nowarn -cp "$CP" -d "$WORK/classes" "$HERE/$MAIN.java" 2>"$WORK/javac.err" ||
  { cat "$WORK/javac.err" >&2; exit 2; }
cat > "$WORK/load.lua" <<LUA
n = 0
request = function()
  n = n + 1
  return wrk.format("GET", $LUA_PATH, {["Accept-Encoding"] = "gzip"})
end
LUA
# Port 0: the server says which port the kernel gave it ("listening PORT" on its stdout).
# shellcheck disable=SC2086
"$JAVA_HOME/bin/java" ${JAVA_OPTS:-} -cp "$CP:$WORK/classes" "$MAIN" 0 "$WORK/base" > "$WORK/server.out" &
JVM=$!
PORT=""
for _ in $(seq 600); do
  PORT="$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$WORK/server.out")"
  [ -n "$PORT" ] && curl -s -o /dev/null "http://127.0.0.1:$PORT$URL_PATH" && break
  kill -0 "$JVM" 2>/dev/null || { wait "$JVM" || exit $?; echo "run-server.sh: $MAIN exited before it served" >&2; exit 1; }
  sleep 0.1
done
[ -n "$PORT" ] || { kill -KILL "$JVM"; echo "run-server.sh: $MAIN did not listen within 60 s" >&2; exit 1; }
jvm_cpu_ms() {   # user + sys of the JVM so far (fields 14 and 15 of its stat)
  local stat
  read -r -a stat < <(sed 's/^.*) //' "/proc/$JVM/stat")
  echo $(( (stat[11] + stat[12]) * 1000 / $(getconf CLK_TCK) ))
}
load() { wrk -t2 -c48 -d"$1s" -s "$WORK/load.lua" "http://127.0.0.1:$PORT/"; }
[ "${WARMUP:-0}" = 0 ] || load "$WARMUP" > "$WORK/warmup.out"
before="$(jvm_cpu_ms)"
load "$SECS" > "$WORK/wrk.out"
# For bench/servers.sh: the requests of the measured load and the JVM's CPU time during it, without
# the warm-up's JIT compilation and the stop's work (a profiler writing its output).
requests="$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$WORK/wrk.out")"
after="$(jvm_cpu_ms)"
echo "run-server: $requests requests, JVM CPU $((after - before)) ms (whole run $after ms)" >&2
kill -TERM "$JVM"
status=0; wait "$JVM" || status=$?
[ "$status" = 143 ] && status=0
exit "$status"
