#!/usr/bin/env bash
# What profiling costs a Java application: process CPU time (user + sys) and wall time of the
# shared workloads with stackfrag writing a live profile at 100 / 1,000 / 10,000 samples per second
# per thread, and with JFR's execution sampler at 100 / 1,000 per second, against runs with no
# profiler. Configurations alternate run by run, so drift in machine load hits all of them alike;
# the table shows medians and their ratios to the no-profiler median, and goes into the section
# "Overhead (bench/overhead.sh)" of docs/benchmarks.md.
#
# Usage: bench/overhead.sh [-i ITER] [-r RUNS] [-w "xalan lucene h2 jython groundtruth"] [-e EXT] [-n]
#   -i ITER   workload iterations per run (default 3; the workloads' own defaults are 12-20)
#   -r RUNS   runs per configuration (default 5)
#   -w LIST   workloads (default: all five that are installed)
#   -e EXT    profile format stackfrag writes at exit: html, pb.gz, collapsed, json (default html)
#   -n        print the table only; leave docs/benchmarks.md alone
# Env: STACKFRAG_AGENT (default build/lib/libstackfrag.so), STACKFRAG_SHARED_DIR, JAVA_HOME.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENT="${STACKFRAG_AGENT:-$ROOT/build/lib/libstackfrag.so}"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}"
WORKLOADS_DIR="$SHARED/bench/workloads"
JFC_DIR="$ROOT/bench/overhead"
ITER=3
RUNS=5
WORKLOADS="xalan lucene h2 jython groundtruth"
EXT=html
WRITE_DOC=1
while getopts "i:r:w:e:n" opt; do
  case "$opt" in
    i) ITER="$OPTARG" ;;
    r) RUNS="$OPTARG" ;;
    w) WORKLOADS="$OPTARG" ;;
    e) EXT="$OPTARG" ;;
    n) WRITE_DOC=0 ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
  esac
done
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
[ -r "$AGENT" ] || { echo "overhead: no agent at $AGENT (scripts/build.sh, or set STACKFRAG_AGENT)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "overhead: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
SCRATCH="$(mktemp -d /dev/shm/sf-overhead.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT

# Whether this agent decodes live (file=). Without it, stackfrag runs sample and build the events
# but write nothing, which the table then says: that is the capture cost without decoding.
if "$JAVA" "-agentpath:$AGENT=file=$SCRATCH/probe.json" -version >/dev/null 2>&1 && [ -s "$SCRATCH/probe.json" ]; then
  SF_OUT="file=OUTFILE"
  SF_NOTE="stackfrag decodes live and writes a .$EXT profile to tmpfs (/dev/shm) at exit (\`file=\`, no \`record=\`)"
else
  SF_OUT=""
  SF_NOTE="**this agent build has no live profile (\`file=\`)**: stackfrag samples and builds the event stream but neither decodes nor stores it, so these columns miss the decoding cost"
fi

# name | JAVA_OPTS ("" = no profiler); OUTFILE / OUTJFR become fresh files per run
CONFIGS=(
  "none|"
  "stackfrag 100/s|-agentpath:$AGENT=interval=10ms,loglevel=info${SF_OUT:+,$SF_OUT}"
  "stackfrag 1k/s|-agentpath:$AGENT=interval=1ms,loglevel=info${SF_OUT:+,$SF_OUT}"
  "stackfrag 10k/s|-agentpath:$AGENT=interval=100us,loglevel=info${SF_OUT:+,$SF_OUT}"
  "JFR 10 ms|-XX:StartFlightRecording=filename=OUTJFR,settings=$JFC_DIR/execution-sample-10ms.jfc"
  "JFR 1 ms|-XX:StartFlightRecording=filename=OUTJFR,settings=$JFC_DIR/execution-sample-1ms.jfc"
)

# Prints "cpu_seconds wall_seconds" of one run, or ends the script with the run's stderr.
run_once() {
  local workload="$1" opts="$2" tag="$3"
  local out="$SCRATCH/$tag.$EXT"
  opts="${opts//OUTFILE/$out}"
  opts="${opts//OUTJFR/$SCRATCH/$tag.jfr}"
  if ! /usr/bin/time -f "%U %S %e" -o "$SCRATCH/time" env ITER="$ITER" JAVA_OPTS="$opts" \
      "$WORKLOADS_DIR/$workload/run.sh" >"$SCRATCH/out" 2>"$SCRATCH/err"; then
    echo "overhead: $workload failed with '$opts':" >&2
    tail -20 "$SCRATCH/err" >&2
    exit 1
  fi
  if grep -q '\[stackfrag\] error' "$SCRATCH/err"; then
    echo "overhead: the agent reported an error on $workload with '$opts':" >&2
    grep '\[stackfrag\]' "$SCRATCH/err" >&2
    exit 1
  fi
  if [ -n "$SF_OUT" ] && [[ "$opts" == *file=* ]] && [ ! -s "$out" ]; then
    echo "overhead: no profile written to $out on $workload" >&2
    exit 1
  fi
  rm -f "$SCRATCH/$tag".*
  # The agent's own threads, as it measured them ("agent threads CPU: ... = 0.61% of ..."); "-" for
  # runs without stackfrag.
  local agent_pct
  agent_pct="$(sed -n 's/.*agent threads CPU: .* = \([0-9.]*\)% of.*/\1/p' "$SCRATCH/err" | tail -1)"
  awk -v a="${agent_pct:--}" '{ printf "%.3f %.3f %s\n", $1 + $2, $3, a }' "$SCRATCH/time"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

selected=()
for w in $WORKLOADS; do
  # A first run compiles the driver, so no javac time is measured.
  if [ -x "$WORKLOADS_DIR/$w/run.sh" ] && ITER=1 "$WORKLOADS_DIR/$w/run.sh" >/dev/null 2>"$SCRATCH/warm.err"; then
    selected+=("$w")
  else
    echo "overhead: skipping $w (not runnable: $(tail -1 "$SCRATCH/warm.err" 2>/dev/null))" >&2
  fi
done
[ "${#selected[@]}" -gt 0 ] || { echo "overhead: no workload to run" >&2; exit 2; }

uptime_before="$(uptime | sed 's/.*load average: //')"
declare -A cpu wall agent
for w in "${selected[@]}"; do
  for ((run = 1; run <= RUNS; run++)); do
    for i in "${!CONFIGS[@]}"; do
      IFS='|' read -r name opts <<<"${CONFIGS[$i]}"
      read -r c t a < <(run_once "$w" "$opts" "$w-$i-$run")
      cpu["$w|$i"]+="$c "
      wall["$w|$i"]+="$t "
      [ "$a" != - ] && agent["$w|$i"]+="$a "
      echo "overhead: $w run $run/$RUNS $name: cpu $c s, wall $t s" >&2
    done
  done
done
uptime_after="$(uptime | sed 's/.*load average: //')"

med() { tr ' ' '\n' <<<"$1" | grep . | median; }
cpu_model="$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
java_version="$("$JAVA" -version 2>&1 | head -1)"
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/overhead.sh -i $ITER -r $RUNS -w \"${selected[*]}\"\`: $(nproc) CPUs ($cpu_model), kernel $(uname -r), $java_version. Load average (1/5/15 min) $uptime_before before, $uptime_after after."
  echo
  echo "Each cell: median process CPU time (user + sys) and median wall time as ratios to the no-profiler medians (CPU× / wall×); $RUNS alternating runs per configuration, ITER=$ITER, the workloads' default threads. stackfrag: default options (16 KB fragments, one perf event per thread); $SF_NOTE. JFR: only \`jdk.ExecutionSample\` at the period (bench/overhead/*.jfc), recording to tmpfs; JFR samples at most a few running threads per period, stackfrag every thread that ran for an interval, so at equal periods stackfrag takes more samples on busy multi-threaded workloads. \"agent\": the median share of the process's CPU time that stackfrag's own threads (reader, decoder, code poll) used, as the agent measured it — exact, unlike the ratios, which carry the workloads' run-to-run spread; the kernel's work in the sampled threads is not in it (bench_sample_cost). groundtruth runs for a fixed time: its wall time cannot grow, only its CPU time."
  echo
  header="| workload | no profiler: CPU s (wall s) |"
  rule="|---|---:|"
  for i in "${!CONFIGS[@]}"; do
    [ "$i" -eq 0 ] && continue
    header+=" ${CONFIGS[$i]%%|*} |"
    rule+="---:|"
  done
  echo "$header"
  echo "$rule"
  for w in "${selected[@]}"; do
    base="$(med "${cpu["$w|0"]}")"
    base_wall="$(med "${wall["$w|0"]}")"
    row="| $w | $(printf '%.2f (%.2f)' "$base" "$base_wall") |"
    for i in "${!CONFIGS[@]}"; do
      [ "$i" -eq 0 ] && continue
      c="$(med "${cpu["$w|$i"]}")"
      t="$(med "${wall["$w|$i"]}")"
      a="$( [ -n "${agent["$w|$i"]:-}" ] && med "${agent["$w|$i"]}" || true)"
      row+=" $(awk -v c="$c" -v b="$base" -v t="$t" -v bw="$base_wall" -v a="$a" 'BEGIN { printf "%.3f× / %.3f×", c / b, t / bw; if (a != "") printf " (agent %.2f%%)", a }') |"
    done
    echo "$row"
  done
} >"$SCRATCH/table.md"

cat "$SCRATCH/table.md"
if [ "$WRITE_DOC" = 1 ]; then
  python3 "$ROOT/bench/capture-jvm/update_section.py" "$ROOT/docs/benchmarks.md" \
    "Overhead (bench/overhead.sh)" "$SCRATCH/table.md"
  echo "overhead: updated docs/benchmarks.md" >&2
fi
