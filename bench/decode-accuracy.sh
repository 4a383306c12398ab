#!/usr/bin/env bash
# Decoder accuracy on the shared workloads: records each one with the agent at a given rate with the
# AsyncGetCallTrace oracle on (validate), replays the recording, and prints decoded %, incomplete %,
# failures, agreement with AsyncGetCallTrace and decode time as a Markdown table; the table replaces
# the "Decoder accuracy" section of docs/benchmarks.md.
# Usage: bench/decode-accuracy.sh [-i ITER] [-t INTERVAL] [-w "xalan lucene ..."] [-j "JVM flags"] [-o OPTS] [-J JDK] [-k DIR] [--no-doc]
# -k DIR keeps each recording and its replay --json in DIR (for --show-disagreements afterwards).
# -j adds JVM flags to every run (another GC or JIT tier: -XX:+UseZGC, -XX:TieredStopAtLevel=1, ...);
#    the table is then printed only, and docs/benchmarks.md left alone.
# -o OPTS adds agent options (e.g. -o mode=cpu; the validate oracle decodes its own SIGPROF copies in
#    every mode, so its columns do not depend on the mode, the profile's decoded / incomplete / failed do).
# -J JDK measures that JDK only (a JAVA_HOME) instead of JDK 17 and 25.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}/bench/workloads"
BUILD="${STACKFRAG_BUILD_DIR:-$ROOT/build}"
ITER=2 INTERVAL=100us WORKLOADS="xalan lucene h2 jython groundtruth httpserver" DOC=1 KEEP= JVM_FLAGS= EXTRA= ONLY_JDK=
while [ $# -gt 0 ]; do
  case "$1" in
    -i) ITER="$2"; shift 2 ;;
    -t) INTERVAL="$2"; shift 2 ;;
    -w) WORKLOADS="$2"; shift 2 ;;
    -k) KEEP="$2"; shift 2 ;;
    -j) JVM_FLAGS="$2"; DOC=0; shift 2 ;;
    -o) EXTRA=",$2"; shift 2 ;;
    -J) ONLY_JDK="$2"; shift 2 ;;
    --no-doc) DOC=0; shift ;;
    *) echo "usage: $0 [-i ITER] [-t INTERVAL] [-w \"workloads\"] [-j \"JVM flags\"] [-o OPTS] [-J JDK] [-k DIR] [--no-doc]" >&2; exit 2 ;;
  esac
done
[ -x "$BUILD/bin/stackfrag" ] || "$ROOT/scripts/build.sh"
JDKS=(/usr/lib/jvm/java-17-openjdk-amd64)
[ -d /usr/lib/jvm/temurin-25-jdk-amd64 ] && JDKS+=(/usr/lib/jvm/temurin-25-jdk-amd64)
[ -n "$ONLY_JDK" ] && JDKS=("$ONLY_JDK")
WORK="$(mktemp -d /dev/shm/sf-accuracy.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

table="$WORK/table.md"
{
  echo "| JDK | workload | samples | decoded % | incomplete %: all (profile / validator) | failed (top reasons) | ASGCT pairs (both ok) | identical % | identical except top bci % | ASGCT stale / missed entry callee / stopped early / scope after an exception pc / scope after a leaf call / scope after a call a stub resolved / carrier only / older anchor / failed where we decoded | decode ns median / p99 |"
  echo "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"
} > "$table"
for jdk in "${JDKS[@]}"; do
  major="$("$jdk/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/.*java.specification.version = //p')"
  for w in $WORKLOADS; do
    rec="$WORK/$w-$major.sfr"
    echo "== JDK $major $w (ITER=$ITER, interval=$INTERVAL)" >&2
    if ! JAVA_HOME="$jdk" ITER="$ITER" THREADS=2 GT_SLICE_MS=500 REQUESTS=2000 \
        JAVA_OPTS="${JVM_FLAGS:+$JVM_FLAGS }-agentpath:$BUILD/lib/libstackfrag.so=interval=$INTERVAL,validate,record=$rec$EXTRA" \
        "$SHARED/$w/run.sh" > "$WORK/$w-$major.out" 2>&1; then
      echo "| $major | $w | run failed (see below) | | | | | | | | |" >> "$table"
      tail -5 "$WORK/$w-$major.out" >&2
      continue
    fi
    "$BUILD/bin/stackfrag" replay --json "$rec" > "$WORK/$w-$major.json"
    if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && cp "$rec" "$WORK/$w-$major.json" "$KEEP/"; fi
    python3 - "$WORK/$w-$major.json" "$major" "$w" >> "$table" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
failed = sorted(r.get("failed", {}).items(), key=lambda kv: -kv[1])[:3]
failed_text = ", ".join(f"{k} {v}" for k, v in failed) or "none"
both = r.get("oracle_both_ok", 0)
pct = lambda n: f"{100.0 * n / both:.1f}" if both else "–"
prof = r.get("profile", {})
ps, pi = prof.get("samples", 0), prof.get("incomplete", 0)
os_, oi = r["samples"] - ps, r["incomplete"] - pi
share = lambda n, d: f"{100.0 * n / d:.2f}" if d else "–"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['samples']} | {r['decoded_pct']:.2f} | {r['incomplete_pct']:.2f} ({share(pi, ps)} / {share(oi, os_)}) | "
      f"{failed_text} | {r.get('oracle_pairs', 0)} ({both}) | {pct(r.get('oracle_identical', 0))} | "
      f"{pct(r.get('oracle_identical_except_top_bci', 0))} | {r.get('oracle_stale', 0)} / {r.get('oracle_entry_codelet', 0)} / {r.get('oracle_stopped_early', 0)} / {r.get('oracle_exception_scope', 0)} / {r.get('oracle_leaf_call_scope', 0)} / {r.get('oracle_stub_call_scope', 0)} / {r.get('oracle_carrier_only', 0)} / {r.get('oracle_older_anchor', 0)} / {r.get('oracle_failed_we_decoded', 0)} | "
      f"{r['decode_ns_median']} / {r['decode_ns_p99']} |")
PY
  done
done
[ -z "$JVM_FLAGS" ] || echo "JVM flags: $JVM_FLAGS"
cat "$table"
if [ "$DOC" = 1 ]; then
  body="$WORK/body.md"
  {
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/decode-accuracy.sh -i $ITER -t $INTERVAL${EXTRA:+ -o ${EXTRA#,}}${ONLY_JDK:+ -J $ONLY_JDK}\`."
    echo
    echo "Machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), kernel $(uname -r), load average $(cut -d' ' -f1 /proc/loadavg) at the end."
    echo
    cat "$table"
    echo
    echo "*samples* counts perf samples and oracle samples (each oracle sample is decoded too). *incomplete*: of all"
    echo "samples, then of the profile's and of the validator's own: the validator's SIGPROF copy follows the"
    echo "fragment size stack=auto gives the thread's perf samples (docs/decoding.md §2.7). *identical* compares"
    echo "the Java frames (method and bci, top to bottom) with AsyncGetCallTrace's answer for the same snapshot;"
    echo "*except top bci* ignores the bci of an interpreted top frame, which the decoder takes from the live"
    echo "bytecode pointer (R13) while AsyncGetCallTrace reads the frame's bcp slot, which lags until the next"
    echo "call (docs/decoding.md). *ASGCT stale*: pairs where the decoder's walk went through a frame whose code had"
    echo "moved rsp, where ASGCT read a stale return slot; *missed entry callee*: the decoder's top frame is a callee"
    echo "caught in its interpreter method-entry codelet and ASGCT named its caller (docs/decoding.md §2.2); *stopped"
    echo "early*: ASGCT's frames are the decoder's top ones and its walk ended at a VM runtime stub or a deoptimized"
    echo "caller, where HotSpot's safe_for_sender stops it (docs/decoding.md §4; none of these three kinds is in *both"
    echo "ok*); *failed where we decoded*: ASGCT failed,"
    echo "the decoder did not. Decode times include cold caches and the loaded machine's noise."
  } > "$body"
  python3 "$ROOT/bench/capture-jvm/update_section.py" "$ROOT/docs/benchmarks.md" "Decoder accuracy (bench/decode-accuracy.sh)" "$body"
fi
