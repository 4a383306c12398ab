#!/usr/bin/env bash
# Profile accuracy against a ground truth and against the safepoint-biased baseline (mode=jvmti):
#  1. groundtruth workload: total-variation distance between the kernel methods' shares in a profile
#     and the CPU-time shares the program measured itself, for stackfrag at 1 kHz and 10 kHz and for
#     mode=jvmti at 1 kHz (bench/accuracy/accuracy.py says how the shares are computed);
#  2. every shared workload: `stackfrag diff` of stackfrag (perf, interval=1ms) against mode=jvmti
#     (interval=1ms) — degree of overlap, hot-context coverage both ways, method correlation — and,
#     for scale, of two stackfrag runs against each other (run-to-run noise);
#  3. with ASYNC_PROFILER=/path/libasyncProfiler.so (built from its sources; never committed): its
#     ground-truth distance at 1 kHz beside stackfrag's, and `stackfrag diff` of stackfrag against it
#     on every workload, with two of its runs against each other for scale.
# The tables replace the "Accuracy (bench/accuracy.sh)" section of docs/benchmarks.md (-n: only print).
# Usage: [ASYNC_PROFILER=…] bench/accuracy.sh [-i ITER] [-g SLICES] [-w "xalan lucene ..."] [-n]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}/bench/workloads"
BUILD="${STACKFRAG_BUILD_DIR:-$ROOT/build}"
ITER=2 SLICES=6 WORKLOADS="xalan lucene h2 jython groundtruth" DOC=1
while [ $# -gt 0 ]; do
  case "$1" in
    -i) ITER="$2"; shift 2 ;;
    -g) SLICES="$2"; shift 2 ;;
    -w) WORKLOADS="$2"; shift 2 ;;
    -n) DOC=0; shift ;;
    *) echo "usage: $0 [-i ITER] [-g GROUNDTRUTH_SLICES] [-w \"workloads\"] [-n]" >&2; exit 2 ;;
  esac
done
[ -x "$BUILD/bin/stackfrag" ] || "$ROOT/scripts/build.sh"
CLI="$BUILD/bin/stackfrag"
HELPER="$ROOT/bench/accuracy/accuracy.py"
JDK=/usr/lib/jvm/java-17-openjdk-amd64
WORK="$(mktemp -d /dev/shm/sf-accuracy.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
started=$(date +%s)

# run_with NAME WORKLOAD AGENT PROFILE LABEL: the workload with -agentpath:AGENT writing the profile
# PROFILE (in $WORK), then its query json NAME.query.json; 1 when it failed.
run_with() {
  local name="$1" workload="$2" agent="$3" profile="$WORK/$4" iter="$ITER"
  [ "$workload" = groundtruth ] && iter="$SLICES"
  echo "== $name: $workload ITER=$iter, $5" >&2
  if ! JAVA_HOME="$JDK" ITER="$iter" THREADS=2 GT_SLICE_MS=1000 JAVA_OPTS="-agentpath:$agent" \
      "$SHARED/$workload/run.sh" > "$WORK/$name.out" 2> "$WORK/$name.err"; then
    tail -5 "$WORK/$name.err" >&2
    return 1
  fi
  "$CLI" query "$profile" --json --top 1000000 > "$WORK/$name.query.json"
}
# run NAME WORKLOAD AGENT_OPTIONS: stackfrag writing NAME.json.
run() { run_with "$1" "$2" "$BUILD/lib/libstackfrag.so=$3,file=$WORK/$1.json" "$1.json" "$3"; }
# run_ap NAME WORKLOAD: async-profiler (event=cpu, 1 ms) writing NAME.collapsed.
AP="${ASYNC_PROFILER:-}"
[ -z "$AP" ] || [ -r "$AP" ] || { echo "ASYNC_PROFILER=$AP: no such file" >&2; exit 2; }
run_ap() { run_with "$1" "$2" "$AP=start,event=cpu,interval=1ms,file=$WORK/$1.collapsed,collapsed" "$1.collapsed" async-profiler; }

# 1. Ground truth.
truth_table="$WORK/truth.md"
{
  echo "| profiler | interval | samples | in kernels | TVD (total shares) pp | TVD (self shares) pp | largest error |"
  echo "|---|---|---:|---:|---:|---:|---|"
} > "$truth_table"
rows=("stackfrag:interval=1ms:1 ms" "stackfrag:interval=100us:100 µs" "jvmti:mode=jvmti,interval=1ms:1 ms")
[ -z "$AP" ] || rows+=("async-profiler:event=cpu:1 ms")
for row in "${rows[@]}"; do
  IFS=: read -r profiler options interval <<< "$row"
  name="gt-$profiler-${options//[^a-z0-9]/}"
  if [ "$profiler" = async-profiler ]; then
    ran() { run_ap "$name" groundtruth; }
  else
    ran() { run "$name" groundtruth "$options"; }
  fi
  if ! ran; then
    echo "| $profiler | $interval | run failed | | | | |" >> "$truth_table"
    continue
  fi
  python3 "$HELPER" tvd "$WORK/$name.query.json" "$WORK/$name.out" > "$WORK/$name.tvd.json"
  python3 - "$WORK/$name.tvd.json" "$profiler" "$interval" >> "$truth_table" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
method, error = r["largest_error"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['samples']:.0f} | {100.0 * r['kernel_samples'] / max(r['samples'], 1):.1f}% | "
      f"{r['tvd_total_pp']:.2f} | {r['tvd_self_pp']:.2f} | {method.split('/')[-1]} {error:+.2f} pp |")
PY
done
# The truth of the first run, for the record (each run measures its own; they differ by a little).
truth_shares="$(python3 - "$WORK"/gt-stackfrag-interval1ms.out <<'PY'
import re, sys
print(", ".join(f"{m.group(1).split('.', 1)[1]} {m.group(2)}%" for m in
                 (re.match(r"^truth: (\S+) ([0-9.]+)%", l) for l in open(sys.argv[1])) if m))
PY
)" || truth_shares="(no truth: the run failed)"

# diff_row DIFF_JSON WORKLOAD [AGAIN_JSON]: a table row of `stackfrag diff --json`'s figures, with the
# overlap of the run-to-run comparison AGAIN_JSON last ("run failed" without one).
diff_row() {
  python3 - "$1" "$2" "${3:-}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = lambda v: "–" if v is None else f"{v:.3f}"
again = f(json.load(open(sys.argv[3]))["overlap"]) if sys.argv[3] else "run failed"
print(f"| {sys.argv[2]} | {d['samples_a']} / {d['samples_b']} | {f(d['overlap'])} | {f(d['hot_coverage_a_in_b'])} | "
      f"{f(d['hot_coverage_b_in_a'])} | {f(d['method_correlation'])} | {again} |")
PY
}

# 2. stackfrag against mode=jvmti, and against itself.
diff_table="$WORK/diff.md"
{
  echo "| workload | samples stackfrag / jvmti | overlap | hot coverage stackfrag in jvmti | hot coverage jvmti in stackfrag | method correlation | overlap of two stackfrag runs |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
} > "$diff_table"
for w in $WORKLOADS; do
  a="$w-stackfrag" b="$w-jvmti" c="$w-stackfrag-again"
  if [ "$w" = groundtruth ] && [ -f "$WORK/gt-stackfrag-interval1ms.json" ] && [ -f "$WORK/gt-jvmti-modejvmtiinterval1ms.json" ]; then
    cp "$WORK/gt-stackfrag-interval1ms.json" "$WORK/$a.json"
    cp "$WORK/gt-jvmti-modejvmtiinterval1ms.json" "$WORK/$b.json"
  elif ! run "$a" "$w" interval=1ms || ! run "$b" "$w" mode=jvmti,interval=1ms; then
    echo "| $w | run failed | | | | | |" >> "$diff_table"
    continue
  fi
  "$CLI" diff "$WORK/$a.json" "$WORK/$b.json" --json > "$WORK/$w.diff.json"
  again=""
  if run "$c" "$w" interval=1ms; then
    "$CLI" diff "$WORK/$a.json" "$WORK/$c.json" --json > "$WORK/$w.again.json"
    again="$WORK/$w.again.json"
  fi
  diff_row "$WORK/$w.diff.json" "$w" "$again" >> "$diff_table"
done

# 3. stackfrag against async-profiler, and async-profiler against itself.
ap_table="$WORK/ap.md"
if [ -n "$AP" ]; then
  {
    echo "| workload | samples stackfrag / async-profiler | overlap | hot coverage stackfrag in async-profiler | hot coverage async-profiler in stackfrag | method correlation | overlap of two async-profiler runs |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
  } > "$ap_table"
  for w in $WORKLOADS; do
    a="$w-stackfrag" b="$w-ap" c="$w-ap-again"
    [ "$w" = groundtruth ] && [ -f "$WORK/gt-stackfrag-interval1ms.json" ] && cp "$WORK/gt-stackfrag-interval1ms.json" "$WORK/$a.json"
    if [ ! -f "$WORK/$a.json" ] || ! run_ap "$b" "$w"; then
      echo "| $w | run failed | | | | | |" >> "$ap_table"
      continue
    fi
    "$CLI" diff "$WORK/$a.json" "$WORK/$b.collapsed" --json > "$WORK/$w.ap.json"
    again=""
    if run_ap "$c" "$w"; then
      "$CLI" diff "$WORK/$b.collapsed" "$WORK/$c.collapsed" --json > "$WORK/$w.ap-again.json"
      again="$WORK/$w.ap-again.json"
    fi
    diff_row "$WORK/$w.ap.json" "$w" "$again" >> "$ap_table"
  done
fi
minutes=$(( ($(date +%s) - started + 59) / 60 ))

body="$WORK/body.md"
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/accuracy.sh -i $ITER -g $SLICES\` (JDK 17, THREADS=2, $minutes min)."
  echo
  echo "Machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), kernel $(uname -r), load average $(cut -d' ' -f1 /proc/loadavg) at the end."
  echo
  echo "**Against the ground truth** (groundtruth workload, $SLICES slices of 1 s, 2 worker threads). The"
  echo "program times every call of its five kernel methods with its threads' CPU clocks; TVD is the"
  echo "total-variation distance ½·Σ|profile share − true share| over the five, in percentage points"
  echo "(target for stackfrag: ≤ 2). *total shares*: samples with the kernel anywhere on the stack, as the"
  echo "truth is inclusive; *self shares*: samples ending in the kernel. *in kernels*: samples with one of"
  echo "the five on the stack. True shares of the first run: $truth_shares."
  echo
  cat "$truth_table"
  echo
  echo "**stackfrag against mode=jvmti** (both at interval=1ms, separate runs; ITER=$ITER, groundtruth"
  echo "$SLICES slices): \`stackfrag diff --json\` with its defaults (frame kinds merged, threads ignored,"
  echo "hot = ≥ 0.1 × the hottest context; docs/analyses.md). Perf profiles also hold native and stub frames,"
  echo "which GetAllStackTraces never reports, and JVMTI's stacks end at safepoint polls, not where the"
  echo "time went; both lower the overlap. The last column compares two stackfrag runs of the same"
  echo "workload: the overlap that run-to-run variation alone leaves."
  echo
  cat "$diff_table"
  if [ -n "$AP" ]; then
    echo
    echo "**stackfrag against async-profiler** (\`event=cpu,interval=1ms\`, built from its sources; separate"
    echo "runs): the same \`stackfrag diff\`. Its normalisation makes the two profilers' names comparable"
    echo "(C++ parameter lists, the JVM threads' kind roots, kernel frames as one \`[kernel]\`). stackfrag's"
    echo "own threads are in its profile (their top frames), async-profiler's are not. The last column"
    echo "compares two async-profiler runs: what run-to-run variation leaves."
    echo
    cat "$ap_table"
  fi
} > "$body"
cat "$body"
if [ "$DOC" = 1 ]; then
  python3 "$ROOT/bench/capture-jvm/update_section.py" "$ROOT/docs/benchmarks.md" "Accuracy (bench/accuracy.sh)" "$body"
fi
