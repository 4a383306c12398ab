#!/usr/bin/env bash
# What profiling costs a Java application: the JVM's CPU time (user + sys) and the workload's wall
# time with stackfrag writing a live profile at 100 / 1,000 / 10,000 samples per second per thread,
# with JFR's execution sampler at 100 / 1,000 per second and, when ASYNC_PROFILER names its library,
# with async-profiler (event=cpu) at the same intervals as stackfrag, against runs with no profiler.
# Configurations alternate run by run within each round, so drift in machine load hits all of them
# alike; each ratio is taken within a round (a configuration's run against the same round's
# no-profiler run) and the table shows the median ratio with its min–max over the rounds, and the
# share of the process's CPU that stackfrag's own threads used (exact: the agent measures it); with
# async-profiler, a second table gives stackfrag's added CPU as a share of async-profiler's. The
# table goes into the section "Overhead (bench/overhead.sh)" of docs/benchmarks.md.
#
# Usage: bench/overhead.sh [-i ITER] [-r ROUNDS] [-w "WORKLOADS"] [-c "CONFIGS"] [-e EXT] [-n]
#   -i ITER     workload iterations per run (default 3; the workloads' own defaults are 12-20)
#   -r ROUNDS   rounds, each running every configuration once (default 7)
#   -w LIST     workloads (default: xalan lucene h2 jython groundtruth httpserver, those installed)
#   -c LIST     configurations besides "none" (default: all that can run), from
#               sf10ms sf1ms sf100us jfr10ms jfr1ms ap10ms ap1ms ap100us, and for a side-by-side
#               of the sampling modes sfthread10ms sfthread1ms sfthread100us sfcpu10ms sfcpu1ms
#               sfcpu100us (stackfrag with mode=thread / mode=cpu; not in the default set), and with
#               STACKFRAG_AGENT_B set, sfb10ms sfb1ms sfb100us (that second agent build, default
#               options: two builds compared in the same alternating runs; not in the default set)
#   -e EXT      profile format stackfrag writes at exit: html, pb.gz, collapsed, json (default html)
#   -n          print the table only; leave docs/benchmarks.md alone
# Env: ASYNC_PROFILER (path of libasyncProfiler.so: adds the ap* configurations; build it yourself,
#      it is not part of this project), STACKFRAG_AGENT (default build/lib/libstackfrag.so),
#      STACKFRAG_AGENT_B (another build of the agent, e.g. an older commit's, for an A/B),
#      STACKFRAG_SHARED_DIR, JAVA_HOME, OVERHEAD_LOGS (a directory that keeps every run's stderr).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENT="${STACKFRAG_AGENT:-$ROOT/build/lib/libstackfrag.so}"
ASYNC_PROFILER="${ASYNC_PROFILER:-}"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}"
WORKLOADS_DIR="$SHARED/bench/workloads"
JFC_DIR="$ROOT/bench/overhead"
ITER=3
ROUNDS=7
WORKLOADS="xalan lucene h2 jython groundtruth httpserver"
CHOSEN=""
EXT=html
WRITE_DOC=1
while getopts "i:r:w:c:e:n" opt; do
  case "$opt" in
    i) ITER="$OPTARG" ;;
    r) ROUNDS="$OPTARG" ;;
    w) WORKLOADS="$OPTARG" ;;
    c) CHOSEN="$OPTARG" ;;
    e) EXT="$OPTARG" ;;
    n) WRITE_DOC=0 ;;
    *) sed -n '2,22p' "$0" >&2; exit 2 ;;
  esac
done
BENCH=overhead
# shellcheck source=common/checks.sh
. "$ROOT/bench/common/checks.sh"
# shellcheck source=common/stats.sh
. "$ROOT/bench/common/stats.sh"
need_count -r "$ROUNDS" rounds
need_count -i "$ITER" iterations
JAVA="$(need_java)"
need_agent "$AGENT"
AGENT_B="${STACKFRAG_AGENT_B:-}"
if [ -n "$AGENT_B" ] && [ ! -f "$AGENT_B" ]; then
  echo "overhead: no agent at $AGENT_B (STACKFRAG_AGENT_B names the second build to compare)" >&2; exit 2
fi
[ -z "$AGENT_B" ] || need_agent "$AGENT_B"
need_async_profiler_if_given "$ASYNC_PROFILER"
[ -x /usr/bin/time ] || { echo "overhead: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
SCRATCH="$(mktemp -d /dev/shm/sf-overhead.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT

# The JVM's own CPU time, without the workload's other processes (bench/common/java-cpu.sh).
JAVA_CPU="$ROOT/bench/common/java-cpu.sh"

# Whether this agent decodes live (file=). Without it, stackfrag runs sample and build the events
# but write nothing, which the table then says: that is the capture cost without decoding.
if "$JAVA" "-agentpath:$AGENT=file=$SCRATCH/probe.json" -version >/dev/null 2>&1 && [ -s "$SCRATCH/probe.json" ]; then
  SF_OUT="file=OUTFILE"
  SF_NOTE="stackfrag decodes live and writes a .$EXT profile to tmpfs (/dev/shm) at exit (\`file=\`, no \`record=\`)"
else
  SF_OUT=""
  SF_NOTE="**this agent build has no live profile (\`file=\`)**: stackfrag samples and builds the event stream but neither decodes nor stores it, so these columns miss the decoding cost"
fi
SF="-agentpath:$AGENT=loglevel=info${SF_OUT:+,$SF_OUT}"
AP="-agentpath:$ASYNC_PROFILER=start,event=cpu,file=OUTAP"
JFR="-XX:StartFlightRecording=filename=OUTJFR,settings=$JFC_DIR"

# key | column title | JAVA_OPTS ("" = no profiler); OUTFILE / OUTJFR / OUTAP become fresh files per run
ALL_CONFIGS=(
  "sf10ms|stackfrag 100/s|$SF,interval=10ms"
  "sf1ms|stackfrag 1k/s|$SF,interval=1ms"
  "sf100us|stackfrag 10k/s|$SF,interval=100us"
  "jfr10ms|JFR 10 ms|$JFR/execution-sample-10ms.jfc"
  "jfr1ms|JFR 1 ms|$JFR/execution-sample-1ms.jfc"
  "ap10ms|async-profiler 10 ms|$AP,interval=10ms"
  "ap1ms|async-profiler 1 ms|$AP,interval=1ms"
  "ap100us|async-profiler 100 µs|$AP,interval=100us"
)
# The sampling modes side by side (issue 15's question of the default mode): only when -c names them.
MODE_CONFIGS=(
  "sfthread10ms|stackfrag mode=thread 100/s|$SF,interval=10ms,mode=thread"
  "sfthread1ms|stackfrag mode=thread 1k/s|$SF,interval=1ms,mode=thread"
  "sfthread100us|stackfrag mode=thread 10k/s|$SF,interval=100us,mode=thread"
  "sfcpu10ms|stackfrag mode=cpu 100/s|$SF,interval=10ms,mode=cpu"
  "sfcpu1ms|stackfrag mode=cpu 1k/s|$SF,interval=1ms,mode=cpu"
  "sfcpu100us|stackfrag mode=cpu 10k/s|$SF,interval=100us,mode=cpu"
)
[ -n "$CHOSEN" ] && ALL_CONFIGS+=("${MODE_CONFIGS[@]}")
# A second build of the agent in the same rounds (is a change a regression, or was it the host?).
if [ -n "$AGENT_B" ] && [ -n "$CHOSEN" ]; then
  SF_B="-agentpath:$AGENT_B=loglevel=info${SF_OUT:+,$SF_OUT}"
  ALL_CONFIGS+=(
    "sfb10ms|stackfrag B 100/s|$SF_B,interval=10ms"
    "sfb1ms|stackfrag B 1k/s|$SF_B,interval=1ms"
    "sfb100us|stackfrag B 10k/s|$SF_B,interval=100us"
  )
fi
if [ -z "$AGENT_B" ] && [[ " $CHOSEN " == *" sfb"* ]]; then
  echo "overhead: the sfb* configurations need STACKFRAG_AGENT_B=/path/libstackfrag.so (a second build)" >&2; exit 2
fi
CONFIGS=("none|no profiler|")
add_chosen_configs ALL_CONFIGS
[ "${#CONFIGS[@]}" -gt 1 ] || { echo "overhead: no configuration to compare with no profiler" >&2; exit 2; }

# Prints "jvm_cpu_seconds wall_seconds agent_percent" of one run, or ends the script with the
# run's stderr. agent_percent is "-" for runs without stackfrag.
run_once() {
  local workload="$1" opts="$2" tag="$3"
  local out="$SCRATCH/$tag.$EXT"
  opts="${opts//OUTFILE/$out}"
  opts="${opts//OUTJFR/$SCRATCH/$tag.jfr}"
  opts="${opts//OUTAP/$SCRATCH/$tag.collapsed}"
  rm -f "$SCRATCH/times"
  if ! /usr/bin/time -f "%e" -o "$SCRATCH/time" env ITER="$ITER" JAVA_OPTS="$opts" JAVA="$JAVA_CPU" \
      SF_REAL_JAVA="$JAVA" SF_JVM_TIMES="$SCRATCH/times" "$WORKLOADS_DIR/$workload/run.sh" >"$SCRATCH/out" 2>"$SCRATCH/err"; then
    echo "overhead: $workload failed with '$opts':" >&2
    tail -20 "$SCRATCH/err" >&2
    exit 1
  fi
  need_no_agent_error "$SCRATCH/err" "on $workload with '$opts'"
  if [ -n "$SF_OUT" ] && { [[ "$opts" == *"$AGENT="*file=* ]] || { [ -n "$AGENT_B" ] && [[ "$opts" == *"$AGENT_B="*file=* ]]; }; } && [ ! -s "$out" ]; then
    echo "overhead: no profile written to $out on $workload" >&2
    exit 1
  fi
  if [ -n "$ASYNC_PROFILER" ] && [[ "$opts" == *"$ASYNC_PROFILER"* ]] && [ ! -s "$SCRATCH/$tag.collapsed" ]; then
    echo "overhead: async-profiler wrote no profile on $workload" >&2
    exit 1
  fi
  [ -s "$SCRATCH/times" ] || { echo "overhead: no JVM CPU time from $workload (does its run.sh start \$JAVA?)" >&2; exit 1; }
  rm -f "$SCRATCH/$tag".*
  # OVERHEAD_LOGS=DIR keeps each run's stderr (the agent's stop summary: coverage, drops) there.
  if [ -n "${OVERHEAD_LOGS:-}" ]; then mkdir -p "$OVERHEAD_LOGS" && cp "$SCRATCH/err" "$OVERHEAD_LOGS/$tag.$(date +%s%N).err"; fi
  # The agent's own threads, as it measured them ("agent threads CPU: ... = 0.61% of ...").
  local agent_pct
  agent_pct="$(sed -n 's/.*agent threads CPU: .* = \([0-9.]*\)% of.*/\1/p' "$SCRATCH/err" | tail -1)"
  # The same until the last sample: without the stop's one-time work (the last drain, the file).
  local sampling_pct
  sampling_pct="$(sed -n 's/.*agent threads CPU while sampling: .* = \([0-9.]*\)% of.*/\1/p' "$SCRATCH/err" | tail -1)"
  # The agent's code on the JVM's own threads (JVMTI callbacks: class preparation, compiled code).
  local callbacks_pct
  callbacks_pct="$(sed -n "s/.*agent code on the JVM's threads CPU: .* = \([0-9.]*\)% of.*/\1/p" "$SCRATCH/err" | tail -1)"
  awk -v a="${agent_pct:--}" -v s="${sampling_pct:--}" -v cb="${callbacks_pct:--}" -v wall="$(cat "$SCRATCH/time")" '{ printf "%.3f %.3f %s %s %s\n", $1 + $2, wall, a, s, cb }' "$SCRATCH/times"
}

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
declare -A cpu wall agent sampling callbacks
for w in "${selected[@]}"; do
  for ((round = 1; round <= ROUNDS; round++)); do
    for i in "${!CONFIGS[@]}"; do
      IFS='|' read -r key name opts <<<"${CONFIGS[$i]}"
      read -r c t a sp cb < <(run_once "$w" "$opts" "$w-$key-$round")
      cpu["$w|$i"]+="$c "
      wall["$w|$i"]+="$t "
      [ "$a" != - ] && agent["$w|$i"]+="$a "
      [ "$sp" != - ] && sampling["$w|$i"]+="$sp "
      [ "$cb" != - ] && callbacks["$w|$i"]+="$cb "
      echo "overhead: $w round $round/$ROUNDS $name: JVM CPU $c s, wall $t s$([ "$a" = - ] || echo ", agent $a%")$([ "$sp" = - ] || echo " ($sp% while sampling)")$([ "$cb" = - ] || echo ", callbacks $cb%")" >&2
    done
  done
done
uptime_after="$(uptime | sed 's/.*load average: //')"

# The index in CONFIGS of the configuration keyed exactly $1, or nothing.
config_index() {
  local i key _rest
  for i in "${!CONFIGS[@]}"; do
    IFS='|' read -r key _rest <<<"${CONFIGS[$i]}"
    if [ "$key" = "$1" ]; then echo "$i"; fi
  done
  return 0
}
# Whether a configuration whose key starts with $1 is in the table.
has_config() { printf '%s\n' "${CONFIGS[@]}" | grep -q "^$1"; }
cpu_model="$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
java_version="$("$JAVA" -version 2>&1 | head -1)"
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/overhead.sh -i $ITER -r $ROUNDS -w \"${selected[*]}\"${CHOSEN:+ -c \"$CHOSEN\"}\`: $(nproc) CPUs ($cpu_model), kernel $(uname -r), $java_version. Load average (1/5/15 min) $uptime_before before, $uptime_after after."
  echo
  echo "Each cell: the JVM's CPU time (user + sys; not the workload's load generator) as a ratio to the no-profiler run of the same round, median over $ROUNDS rounds with min–max, then the median wall-time ratio; every round runs each configuration once, in turn, ITER=$ITER, the workloads' default threads. stackfrag: default options (mode=auto: one inheriting perf event and ring per CPU at 1 ms and slower, one per thread below 1 ms; stack=auto); $SF_NOTE.$(has_config jfr && echo " JFR: only \`jdk.ExecutionSample\` at the period (bench/overhead/*.jfc), recording to tmpfs; JFR samples at most a few running threads per period, stackfrag every thread that ran for an interval, so at equal periods stackfrag takes more samples on busy multi-threaded workloads.")$(has_config ap && echo " async-profiler: \`event=cpu\` at the interval, collapsed output to tmpfs (\`$(basename "$ASYNC_PROFILER")\` built from its sources).") \"agent\": the share of the process's CPU time that stackfrag's own threads (reader, decoder, code poll) used, median (min–max), as the agent measured it — exact, unlike the ratios, which carry the workloads' run-to-run spread; the kernel's work in the sampled threads is not in it (bench_sample_cost). \"while sampling\": the same share up to the last sample (median), without the stop's one-time work (the last drain and decode, names, writing the file), which weighs on runs this short and vanishes on long ones. \"callbacks\": the share the agent's code took on the JVM's own threads (JVMTI callbacks: class preparation, compiled-code loads; median, as the agent measured it), also inside the ratios and not in \"agent\".$([[ " ${selected[*]} " == *" groundtruth "* ]] && echo " groundtruth runs for a fixed time: its wall time cannot grow, only its CPU time.")"
  echo
  header="| workload | no profiler: JVM CPU s (wall s) |"
  rule="|---|---:|"
  for i in "${!CONFIGS[@]}"; do
    [ "$i" -eq 0 ] && continue
    IFS='|' read -r key name opts <<<"${CONFIGS[$i]}"
    header+=" $name |"
    rule+="---:|"
  done
  echo "$header"
  echo "$rule"
  for w in "${selected[@]}"; do
    row="| $w | $(printf '%.2f (%.2f)' "$(median "${cpu["$w|0"]}")" "$(median "${wall["$w|0"]}")") |"
    for i in "${!CONFIGS[@]}"; do
      [ "$i" -eq 0 ] && continue
      cell="$(spread "$(ratios "${cpu["$w|$i"]}" "${cpu["$w|0"]}")" "%.3f" "×") / $(printf '%.3f' "$(median "$(ratios "${wall["$w|$i"]}" "${wall["$w|0"]}")")")×"
      [ -n "${agent["$w|$i"]:-}" ] && cell+="; agent $(spread "${agent["$w|$i"]}" "%.2f" "%%")"
      [ -n "${sampling["$w|$i"]:-}" ] && cell+=", while sampling $(median "${sampling["$w|$i"]}")%"
      [ -n "${callbacks["$w|$i"]:-}" ] && cell+="; callbacks $(median "${callbacks["$w|$i"]}")%"
      row+=" $cell |"
    done
    echo "$row"
  done
  # Issue 15's comparison, spelled out: what stackfrag adds as a share of what async-profiler adds
  # at the same interval, from the two median ratios. Where async-profiler adds under 2 % (10 ms)
  # the quotient is noise over noise, so it is not printed.
  share_cols=()
  for pair in "sf10ms ap10ms 10 ms" "sf1ms ap1ms 1 ms" "sf100us ap100us 100 µs" \
              "sfb10ms ap10ms 10 ms (B)" "sfb1ms ap1ms 1 ms (B)" "sfb100us ap100us 100 µs (B)"; do
    read -r sf_key ap_key label <<<"$pair"
    sf_i="$(config_index "$sf_key")"
    ap_i="$(config_index "$ap_key")"
    if [ -n "$sf_i" ] && [ -n "$ap_i" ]; then share_cols+=("$sf_i $ap_i $label"); fi
  done
  if [ "${#share_cols[@]}" -gt 0 ]; then
    echo
    echo "stackfrag's added CPU as a share of async-profiler's at the same interval: (stackfrag's median ratio − 1) ÷ (async-profiler's − 1), from the table above; \"–\" where async-profiler added under 2 %."
    echo
    header="| workload |"
    rule="|---|"
    for col in "${share_cols[@]}"; do
      read -r _ _ label <<<"$col"
      header+=" $label |"
      rule+="---:|"
    done
    echo "$header"
    echo "$rule"
    for w in "${selected[@]}"; do
      row="| $w |"
      for col in "${share_cols[@]}"; do
        read -r sf_i ap_i _ <<<"$col"
        sf_ratio="$(median "$(ratios "${cpu["$w|$sf_i"]}" "${cpu["$w|0"]}")")"
        ap_ratio="$(median "$(ratios "${cpu["$w|$ap_i"]}" "${cpu["$w|0"]}")")"
        row+=" $(awk -v s="$sf_ratio" -v a="$ap_ratio" 'BEGIN { if (a - 1 < 0.02) print "–"; else printf "%.2f", (s - 1) / (a - 1) }') |"
      done
      echo "$row"
    done
  fi
} >"$SCRATCH/table.md"

cat "$SCRATCH/table.md"
if [ "$WRITE_DOC" = 1 ]; then
  python3 "$ROOT/bench/capture-jvm/update_section.py" "$ROOT/docs/benchmarks.md" \
    "Overhead (bench/overhead.sh)" "$SCRATCH/table.md"
  echo "overhead: updated docs/benchmarks.md" >&2
fi
