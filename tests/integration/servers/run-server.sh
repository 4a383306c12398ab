#!/usr/bin/env bash
# Starts one of the servers here (tomcat, netty) on JAVA_HOME's JVM with JAVA_OPTS, waits until it
# answers, loads it with wrk for SECS seconds, stops it with SIGTERM (the agent writes its profile
# at the JVM's exit) and exits with the JVM's status (143 after SIGTERM counts as 0).
# Usage: JAVA_HOME=... [JAVA_OPTS=...] [SECS=6] run-server.sh tomcat|netty WORKDIR
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
PORT=$((20000 + RANDOM % 20000))
# shellcheck disable=SC2086
"$JAVA_HOME/bin/java" ${JAVA_OPTS:-} -cp "$CP:$WORK/classes" "$MAIN" "$PORT" "$WORK/base" &
JVM=$!
for _ in $(seq 600); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT$URL_PATH" && break
  kill -0 "$JVM" 2>/dev/null || { wait "$JVM" || exit $?; exit 1; }
  sleep 0.1
done
wrk -t2 -c48 -d"${SECS}s" -s "$WORK/load.lua" "http://127.0.0.1:$PORT/" > "$WORK/wrk.out"
grep -E "Requests/sec|requests in" "$WORK/wrk.out" >&2 || true
kill -TERM "$JVM"
status=0; wait "$JVM" || status=$?
[ "$status" = 143 ] && status=0
exit "$status"
