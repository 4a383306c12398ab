#!/usr/bin/env bash
# Decoding on programs no test and no shared workload has (bench/probes/*.java: deoptimizing class
# hierarchies, method handles, regexes, crypto and sort intrinsics, a StackOverflowError thrown over
# and over, virtual threads, service-like code with a recursion of random depth; and, where
# Debian's rhino and scala packages are installed, JavaScript on Rhino compiled and interpreted and
# the Scala compiler at work), each recorded
# with validate and replayed; prints a Markdown table of decoded %, failures by reason and
# agreement with AsyncGetCallTrace (docs/benchmarks.md, "Failed walks", forty-second session).
# Usage: bench/probes.sh [-s SECONDS] [-t INTERVAL] [-j "JVM flags"] [-p "Unseen Unseen2 SOE VT Javac Vec Natives Mixed Rhino RhinoInterp Scalac"] [-k DIR] [-a] [-J JDK]
#   -k DIR: keep the recordings (PROGRAM-JDK.sfr) there, to read the failures with `stackfrag replay`
#   -J JDK: that JDK only (a JAVA_HOME: another update of a release, say), instead of JDK 17 and 25
#   -a: run each program beside a Java agent that retransforms ~300 loaded classes once a second,
#       three times, as APM tools do (bench/probes/agent/Retransformer.java)
#   STACKFRAG_AGENT=/path/libstackfrag.so: record with that agent (a copy: a rebuilt agent is another
#   module to the replay, whose frames it no longer unwinds)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${STACKFRAG_BUILD_DIR:-$ROOT/build}"
SECONDS_TO_RUN=8 INTERVAL=100us JVM_FLAGS= PROGRAMS="Unseen Unseen2 SOE VT Javac Vec Natives Mixed Rhino RhinoInterp Scalac" KEEP= RETRANSFORM= ONLY_JDK=
while [ $# -gt 0 ]; do
  case "$1" in
    -s) SECONDS_TO_RUN="$2"; shift 2 ;;
    -t) INTERVAL="$2"; shift 2 ;;
    -j) JVM_FLAGS="$2"; shift 2 ;;
    -p) PROGRAMS="$2"; shift 2 ;;
    -k) KEEP="$2"; shift 2 ;;
    -a) RETRANSFORM=1; shift ;;
    -J) ONLY_JDK="$2"; shift 2 ;;
    *) echo "usage: $0 [-s SECONDS] [-t INTERVAL] [-j \"JVM flags\"] [-p \"Unseen Unseen2 SOE VT Javac Vec Natives Mixed Rhino RhinoInterp Scalac\"] [-k DIR] [-a] [-J JDK]" >&2; exit 2 ;;
  esac
done
[ -x "$BUILD/bin/stackfrag" ] || "$ROOT/scripts/build.sh"
AGENT="${STACKFRAG_AGENT:-$BUILD/lib/libstackfrag.so}"
JDKS=(/usr/lib/jvm/java-17-openjdk-amd64)
[ -d /usr/lib/jvm/temurin-25-jdk-amd64 ] && JDKS+=(/usr/lib/jvm/temurin-25-jdk-amd64)
[ -n "$ONLY_JDK" ] && JDKS=("$ONLY_JDK")
RHINO=/usr/share/java/rhino.jar
SCALA_JARS=/usr/share/java/scala-compiler.jar:/usr/share/java/scala-library.jar:/usr/share/java/scala-reflect.jar
WORK="$(mktemp -d /dev/shm/sf-probes.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
[ -z "$KEEP" ] || mkdir -p "$KEEP"

echo "| JDK | program | samples | decoded % | failed (reasons) | incomplete | identical to ASGCT apart from the top bci |"
echo "|---|---|---:|---:|---|---:|---:|"
for jdk in "${JDKS[@]}"; do
  major="$("$jdk/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/.*java.specification.version = //p')"
  mkdir -p "$WORK/classes-$major"
  for p in $PROGRAMS; do
    # VT needs virtual threads (JDK 21+); the others compile for 17. Vec needs the incubating
    # Vector API's module, at compile and at run time.
    if [ "$p" = VT ] && [ "$major" -lt 21 ]; then continue; fi
    modules=
    [ "$p" = Vec ] && modules="--add-modules jdk.incubator.vector"
    # The program's class path and main class with its arguments; Rhino and Scalac run code of
    # Debian's packages (not installed by scripts/setup.sh: skipped without them).
    main=(-cp "$WORK/classes-$major" "$p" "$SECONDS_TO_RUN")
    case "$p" in
      Rhino|RhinoInterp)
        if [ ! -r "$RHINO" ]; then echo "| $major | $p | skipped: no $RHINO (apt-get install rhino) | | | | |"; continue; fi
        opt=9
        [ "$p" = RhinoInterp ] && opt=-1
        main=(-cp "$RHINO" org.mozilla.javascript.tools.shell.Main -opt "$opt" "$ROOT/bench/probes/Rhino.js" "$SECONDS_TO_RUN") ;;
      Scalac)
        if [ ! -r "${SCALA_JARS%%:*}" ]; then echo "| $major | $p | skipped: no ${SCALA_JARS%%:*} (apt-get install scala) | | | | |"; continue; fi
        "$jdk/bin/javac" -cp "$SCALA_JARS" -d "$WORK/classes-$major" "$ROOT/bench/probes/Scalac.java" || exit 1
        [ -f "$WORK/Gen.scala" ] || python3 "$ROOT/bench/probes/gen_scala.py" "$WORK/Gen.scala"
        mkdir -p "$WORK/scala-out-$major"
        main=(-cp "$WORK/classes-$major:$SCALA_JARS" Scalac "$SECONDS_TO_RUN" "$WORK/scala-out-$major" "$WORK/Gen.scala") ;;
      *)
        # shellcheck disable=SC2086
        "$jdk/bin/javac" $modules -d "$WORK/classes-$major" "$ROOT/bench/probes/$p.java" 2>"$WORK/$p-$major.javac" ||
          { cat "$WORK/$p-$major.javac" >&2; exit 1; } ;;
    esac
    rec="$WORK/$p-$major.sfr"
    agent_jar=
    if [ -n "$RETRANSFORM" ]; then
      jar="$WORK/retransformer-$major.jar"
      if [ ! -f "$jar" ]; then
        mkdir -p "$WORK/agent-$major"
        "$jdk/bin/javac" -d "$WORK/agent-$major" "$ROOT/bench/probes/agent/Retransformer.java"
        printf 'Premain-Class: Retransformer\nCan-Retransform-Classes: true\n' > "$WORK/agent-$major.mf"
        "$jdk/bin/jar" --create --file "$jar" --manifest "$WORK/agent-$major.mf" -C "$WORK/agent-$major" .
      fi
      agent_jar="-javaagent:$jar=$p"
    fi
    # shellcheck disable=SC2086
    if ! "$jdk/bin/java" $JVM_FLAGS $modules $agent_jar -agentpath:"$AGENT=interval=$INTERVAL,validate,record=$rec" \
        "${main[@]}" > "$WORK/$p-$major.out" 2>&1; then
      echo "| $major | $p | run failed: $(tail -1 "$WORK/$p-$major.out") | | | | |"
      continue
    fi
    "$BUILD/bin/stackfrag" replay --json "$rec" > "$WORK/$p-$major.json"
    [ -z "$KEEP" ] || cp "$rec" "$KEEP/"
    python3 - "$WORK/$p-$major.json" "$major" "$p" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
failed = sorted(r.get("failed", {}).items(), key=lambda kv: -kv[1])
both = r.get("oracle_both_ok", 0)
agree = 100.0 * r.get("oracle_identical_except_top_bci", 0) / both if both else 0.0
print("| %s | %s | %d | %.2f | %d (%s) | %d | %.2f %% of %d |" % (
    sys.argv[2], sys.argv[3], r["samples"], r["decoded_pct"], sum(n for _, n in failed),
    ", ".join("%s %d" % kv for kv in failed), r.get("incomplete", 0), agree, both))
PY
  done
done
