#!/usr/bin/env bash
# How much of the process's CPU time a profile explains: for each shared workload at 1 ms and 100 us,
# coverage = samples taken x interval / process CPU time (the JVM's user + sys, bench/common/java-cpu.sh), and the shares of
# the samples by thread kind (Java, GC, compiler, VM, other) and in the kernel ([kernel] leaves); the
# same for async-profiler (event=cpu) when ASYNC_PROFILER=/path/libasyncProfiler.so is given. Goes into
# the section "Coverage (bench/coverage.sh)" of docs/benchmarks.md.
#
# Usage: bench/coverage.sh [-i ITER] [-w "xalan lucene h2 jython httpserver groundtruth"] [-t "1ms 100us"] [-m "thread cpu"] [-n]
#   -i ITER   workload iterations per run (default 2)
#   -w LIST   workloads (default: all six that are installed)
#   -t LIST   sampling intervals (default "1ms 100us")
#   -m LIST   stackfrag modes (default "thread cpu")
#   -n        print the table only; leave docs/benchmarks.md alone
# Env: STACKFRAG_AGENT (default build/lib/libstackfrag.so), STACKFRAG_SHARED_DIR, JAVA_HOME, ASYNC_PROFILER.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENT="${STACKFRAG_AGENT:-$ROOT/build/lib/libstackfrag.so}"
SHARED="${STACKFRAG_SHARED_DIR:-$ROOT/../shared}"
WORKLOADS_DIR="$SHARED/bench/workloads"
ITER=2
WORKLOADS="xalan lucene h2 jython httpserver groundtruth"
INTERVALS="1ms 100us"
MODES="thread cpu"
WRITE_DOC=1
while getopts "i:w:t:m:n" opt; do
  case "$opt" in
    i) ITER="$OPTARG" ;;
    w) WORKLOADS="$OPTARG" ;;
    t) INTERVALS="$OPTARG" ;;
    m) MODES="$OPTARG" ;;
    n) WRITE_DOC=0 ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
  esac
done
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
AP="${ASYNC_PROFILER:-}"
[ -r "$AGENT" ] || { echo "coverage: no agent at $AGENT (scripts/build.sh, or set STACKFRAG_AGENT)" >&2; exit 2; }
[ -z "$AP" ] || [ -r "$AP" ] || { echo "coverage: ASYNC_PROFILER=$AP is not readable" >&2; exit 2; }
SCRATCH="$(mktemp -d /dev/shm/sf-coverage.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT
REAL_JAVA="$(command -v "$JAVA")"

ns_of() { case "$1" in *us) echo $(( ${1%us} * 1000 )) ;; *ms) echo $(( ${1%ms} * 1000000 )) ;; *) echo "$1" ;; esac; }

# Shares of a collapsed profile's samples by the kind of thread (its first frame) and in the kernel:
# prints "total java gc compiler vm other kernel". `threads_root`: 1 when every stack starts with a
# thread frame "[name tid=N]" (async-profiler's `threads`), 0 for stackfrag's kind roots.
kinds() {
  awk -v threads_root="$2" '
    function kind(name) {
      if (name ~ /^(GC Thread|G1 |Shenandoah|Parallel GC|Z[A-Z])/) return "gc"
      if (name ~ /CompilerThre|^Sweeper thread|^JVMCI/) return "compiler"
      if (name ~ /^(VM |Service Thread|Monitor Deflati|Notification Th)/) return "vm"
      return "other"
    }
    {
      n = $NF; stack = $0; sub(/ [0-9]+$/, "", stack)
      split(stack, f, ";"); root = f[1]; k = "java"
      if (threads_root) {
        name = root; sub(/^\[/, "", name); sub(/ tid=[0-9]+\]$/, "", name)
        # async-profiler names Java threads as Java does; the JVM-internal names decide the rest.
        k = kind(name); if (k == "other" && stack ~ /(_\[j\]|_\[i\]|_\[0\]|\/)/) k = "java"
      } else if (root ~ /^\[/ && root != "[truncated]" && root !~ /^\[failed/) {
        name = root; gsub(/^\[|\]$/, "", name); k = kind(name)
      }
      s[k] += n; total += n
      if (stack ~ /(\[kernel\]|\[k\])$/) kernel += n
    }
    END { printf "%d %d %d %d %d %d %d\n", total, s["java"], s["gc"], s["compiler"], s["vm"], s["other"], kernel }' "$1"
}

# One run; prints "cpu_s user_s sys_s samples java gc compiler vm other kernel agent_pct before_ms lost_ms stop_ms
# partial_ms wakeup_ms open_ms": stackfrag's stop summary also says how much CPU time the process had used before its
# events opened (before_ms), how much the kernel ticked but could not store (lost_ms), the process's CPU time when it
# stopped sampling (stop_ms) and three parts of the rest: the clock events' last partial periods and the periods their
# timer skipped (partial_ms; mode=cpu too since 2026-12-02), the CPU time of threads still running at their event's
# close that it did not count (wakeup_ms: the scheduler's work at each wake-up; mode=thread) and, in mode=thread, the
# threads' CPU time before their events opened (open_ms); "-" where not known;
# last, the hypervisor's steal during the run as a share of the machine's busy CPU time (steal_pct).
# The machine's busy and stolen CPU ticks so far (/proc/stat: user..steal less idle and iowait; steal).
host_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $9; exit }' /proc/stat; }

run_once() {
  local workload="$1" opts="$2" tag="$3" profiler="$4"
  local out="$SCRATCH/$tag.collapsed"
  opts="${opts//OUTFILE/$out}"
  rm -f "$SCRATCH/time"
  local busy0 steal0 busy1 steal1
  read -r busy0 steal0 < <(host_ticks)
  # The JVM's own CPU time, not the workload's load generator (bench/common/java-cpu.sh).
  if ! env ITER="$ITER" JAVA_OPTS="$opts" JAVA="$ROOT/bench/common/java-cpu.sh" SF_REAL_JAVA="$REAL_JAVA" SF_JVM_TIMES="$SCRATCH/time" \
      "$WORKLOADS_DIR/$workload/run.sh" >"$SCRATCH/out" 2>"$SCRATCH/err"; then
    echo "coverage: $workload failed with '$opts':" >&2
    tail -20 "$SCRATCH/err" >&2
    exit 1
  fi
  read -r busy1 steal1 < <(host_ticks)
  [ -s "$out" ] || { echo "coverage: no profile from $workload with '$opts'" >&2; tail -5 "$SCRATCH/err" >&2; exit 1; }
  local samples agent_pct before_ms=- lost_ms=- stop_ms=- partial_ms=- wakeup_ms=- open_ms=-
  if [ "$profiler" = stackfrag ]; then
    samples="$(sed -n 's/.*stop summary: \([0-9]*\) samples taken.*/\1/p' "$SCRATCH/err" | tail -1)"
    agent_pct="$(sed -n 's/.*agent threads CPU: .* = \([0-9.]*\)% of.*/\1/p' "$SCRATCH/err" | tail -1)"
    local line; line="$(grep -o 'coverage [0-9.]*% of the process.*' "$SCRATCH/err" | tail -1)"
    stop_ms="$(sed -n 's/.*samples [0-9.]* ms of \([0-9.]*\) ms.*/\1/p' <<<"$line")"
    before_ms="$(sed -n 's/.*before sampling began \([0-9.]*\) ms.*/\1/p' <<<"$line")"
    lost_ms="$(sed -n 's/.*lost in full rings [0-9]* samples (\([0-9.]*\) ms.*/\1/p' <<<"$line")"
    stop_ms="${stop_ms:--}"; before_ms="${before_ms:--}"; lost_ms="${lost_ms:-0}"
    partial_ms="$(sed -n 's/.*clock events: .*; \([0-9.]*\) ms (.*counted after a thread.s last tick.*/\1/p' "$SCRATCH/err" | tail -1)"
    wakeup_ms="$(sed -n 's/.*clock events: \([0-9.]*\) ms (.*was not counted by it.*/\1/p' "$SCRATCH/err" | tail -1)"
    open_ms="$(sed -n 's/.*before their events opened.*: the threads ran \([0-9.]*\) ms.*/\1/p' "$SCRATCH/err" | tail -1)"
    partial_ms="${partial_ms:--}"; wakeup_ms="${wakeup_ms:--}"; open_ms="${open_ms:--}"
    read -r _ java gc compiler vm other kernel < <(kinds "$out" 0)
  else
    read -r samples java gc compiler vm other kernel < <(kinds "$out" 1)
    agent_pct=-
  fi
  [ -s "$SCRATCH/time" ] || { echo "coverage: no CPU time of the JVM from $workload" >&2; exit 1; }
  read -r user sys <"$SCRATCH/time"
  echo "$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }') $user $sys ${samples:-0} $java $gc $compiler $vm $other $kernel ${agent_pct:--} $before_ms $lost_ms $stop_ms $partial_ms $wakeup_ms $open_ms $(awk -v b=$((busy1 - busy0)) -v s=$((steal1 - steal0)) 'BEGIN { printf "%.1f", (b > 0 ? 100 * s / b : 0) }')"
  rm -f "$out"
}

selected=()
for w in $WORKLOADS; do
  if [ -x "$WORKLOADS_DIR/$w/run.sh" ] && ITER=1 "$WORKLOADS_DIR/$w/run.sh" >/dev/null 2>"$SCRATCH/warm.err"; then
    selected+=("$w")
  else
    echo "coverage: skipping $w (not runnable: $(tail -1 "$SCRATCH/warm.err" 2>/dev/null))" >&2
  fi
done
[ "${#selected[@]}" -gt 0 ] || { echo "coverage: no workload to run" >&2; exit 2; }

uptime_before="$(uptime | sed 's/.*load average: //')"
rows=()
for w in "${selected[@]}"; do
  for interval in $INTERVALS; do
    configs=()
    for mode in $MODES; do
      configs+=("stackfrag mode=$mode|stackfrag|-agentpath:$AGENT=interval=$interval,mode=$mode,file=OUTFILE")
    done
    [ -n "$AP" ] && configs+=("async-profiler event=cpu|ap|-agentpath:$AP=start,event=cpu,interval=$(ns_of "$interval"),threads,file=OUTFILE")
    for c in "${configs[@]}"; do
      IFS='|' read -r name profiler opts <<<"$c"
      read -r cpu user sys samples java gc compiler vm other kernel agent before lost stop partial wakeup open steal < <(run_once "$w" "$opts" "$w-$interval" "$profiler")
      period_ns="$(ns_of "$interval")"
      row="$(awk -v w="$w" -v i="$interval" -v n="$name" -v cpu="$cpu" -v u="$user" -v s="$sys" -v samples="$samples" \
        -v java="$java" -v gc="$gc" -v comp="$compiler" -v vm="$vm" -v other="$other" -v kernel="$kernel" -v p="$period_ns" -v a="$agent" \
        -v before="$before" -v lost="$lost" -v stop="$stop" -v partial="$partial" -v wakeup="$wakeup" -v open="$open" -v steal="$steal" '
        function pct(x, t) { return t > 0 ? sprintf("%.1f", 100 * x / t) : "-" }
        BEGIN {
          decoded = java + gc + comp + vm + other
          cov = 100 * samples * p / 1e9 / cpu
          # The agent threads are sampled too (under [stackfrag-...] roots, in other); their exact share:
          excl = a != "-" ? sprintf("%.1f %%", a) : "-"
          # Where the rest went (stackfrag): before its events opened / ticked but lost in a full ring /
          # after it stopped sampling (writing the profile, the JVM exit) / while sampling, unexplained
          # (partial periods at a thread end or a fragment-size reopen, threads not yet found).
          gone = "-"; parts = "-"; at_stop = "-"
          # Issue 13 defines coverage against the process CPU time when stackfrag stops (what the stop
          # summary prints); the whole-run figure above also charges the JVM exit after it.
          if (stop != "-" && stop > 0) at_stop = sprintf("%.1f %%", 100 * samples * p / 1e6 / stop)
          if (stop != "-" && before != "-") {
            total = cpu * 1000; sampled = samples * p / 1e6
            rest = stop - before - sampled - lost
            gone = sprintf("%.1f / %.1f / %.1f / %.1f", 100 * before / total, 100 * lost / total,
                           100 * (total - stop) / total, 100 * rest / total)
            # mode=thread: what of "other" the stop summary measured, and what is left.
            if (partial != "-" && wakeup != "-" && open != "-")
              parts = sprintf("%.2f / %.2f / %.2f / %.2f", 100 * partial / total, 100 * wakeup / total,
                              100 * open / total, 100 * (rest - partial - wakeup - open) / total)
          }
          printf "| %s | %s | %s | %.2f (%.0f %% sys) | %d | **%.1f %%** | %s | %s %% | %s | %s | %s | %s / %s / %s / %s / %s | %s |\n",
            w, i, n, cpu, 100 * s / (u + s), samples, cov, at_stop, steal, gone, parts, excl,
            pct(java, decoded), pct(gc, decoded), pct(comp, decoded), pct(vm, decoded), pct(other, decoded), pct(kernel, decoded)
        }')"
      rows+=("$row")
      echo "coverage: $row" >&2
    done
  done
done
uptime_after="$(uptime | sed 's/.*load average: //')"

cpu_model="$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
java_version="$("$JAVA" -version 2>&1 | head -1)"
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`${JAVA_HOME:+JAVA_HOME=$JAVA_HOME }bench/coverage.sh -i $ITER -w \"${selected[*]}\" -t \"$INTERVALS\" -m \"$MODES\"\`${AP:+ and ASYNC_PROFILER set}, as $(id -un) (kernel.perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)): $(nproc) CPUs ($cpu_model), kernel $(uname -r), $java_version. Load average (1/5/15 min) $uptime_before before, $uptime_after after: the machine was shared with other work, which changes the CPU times but not what a run's samples explain of its own."
  echo
  echo "One run per cell. coverage = samples taken × interval ÷ the process's CPU time (user + sys, the java command alone, bench/common/java-cpu.sh, so JVM start and exit count and the load generator does not). \"at stop\": the same samples ÷ the process's CPU time when stackfrag stopped sampling (issue 13's definition, the stop summary's coverage line): it leaves out only the time after the stop (the profile written, the JVM's exit). \"agent threads\": stackfrag's own threads' share of that CPU time (its stop summary's \"agent threads CPU\"); they are sampled too, under \`[stackfrag-...]\` roots (in \"other\"). Kind shares are of the decoded samples in the collapsed profile (stackfrag: by the root frame its non-Java threads get; async-profiler: by the thread frame of its \`threads\` option); kernel: samples whose leaf is \`[kernel]\` (stackfrag) or a kernel frame (async-profiler \`_[k]\`)."
  echo
  echo "host steal: the time the hypervisor gave other guests while the run's CPUs had work, as a share of the machine's busy CPU time during the run (/proc/stat). Both profilers' clock events count it as the running thread's and the process's CPU time does not, so coverage can exceed 100 % by about that much (stackfrag's coverage line says so)."
  echo
  echo "Not sampled, % of the process's CPU time (stackfrag, from its stop summary): before its events opened (the JVM's start to VMInit) / ticked but lost in a full ring / after it stopped sampling (the rest of the stream decoded, the profile written, the JVM's exit and the freeing of its heap) / while sampling, unexplained (a thread's last partial period, a fragment-size reopen, a thread not yet found)."
  echo
  echo "Other, split (stackfrag mode=thread, % of the process's CPU time, from its stop summary): the clock events' last partial periods / CPU time of threads still running at their event's close that it did not count (the scheduler's work at each wake-up; Java threads' events close after the thread ended and are not in it) / the threads' CPU time before their events opened / the rest (mostly the Java threads' own wake-ups)."
  echo
  echo "| workload | interval | profiler | process CPU s (sys) | samples | coverage | at stop | host steal | not sampled: before / lost / after / other % | other: partial periods / wake-ups / before open / rest % | agent threads | Java / GC / compiler / VM / other % | kernel % |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---|---|---:|---|---:|"
  printf '%s\n' "${rows[@]}"
} >"$SCRATCH/table.md"

cat "$SCRATCH/table.md"
if [ "$WRITE_DOC" = 1 ]; then
  python3 "$ROOT/bench/capture-jvm/update_section.py" "$ROOT/docs/benchmarks.md" \
    "Coverage (bench/coverage.sh)" "$SCRATCH/table.md"
  echo "coverage: updated docs/benchmarks.md" >&2
fi
