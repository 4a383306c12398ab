#!/usr/bin/env bash
# Decoder cost per sample: `stackfrag replay --json` over recordings, the decode_ns median and p99
# (replay's own clock around each decode, docs/decoding.md), each recording replayed ROUNDS times by
# every binary in turn (round-robin, so that a change in the machine's load hits all alike); the table
# gives the median over the rounds of each figure (the median also for Java threads' and the JVM's own
# threads' samples apart, and of the replay's CPU time, user + sys, which
# also counts reading the recording and building the profile), and the frames per trace and the
# share of samples whose walk took over steps of the thread's last one. With --check, also requires
# every binary's collapsed profile and json counters (all but timings) to equal the first one's.
# Usage: bench/decode-cost.sh [-n ROUNDS] [-b "BIN1 BIN2 ..."] [--check] REC.sfr...
#   (default: -n 3, -b build/bin/stackfrag)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${STACKFRAG_BUILD_DIR:-$ROOT/build}"
ROUNDS=3 BINS="$BUILD/bin/stackfrag" CHECK=0 RECS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) ROUNDS="$2"; shift 2 ;;
    -b) BINS="$2"; shift 2 ;;
    --check) CHECK=1; shift ;;
    -*) echo "usage: $0 [-n ROUNDS] [-b \"BIN1 BIN2 ...\"] [--check] REC.sfr..." >&2; exit 2 ;;
    *) RECS+=("$1"); shift ;;
  esac
done
[ ${#RECS[@]} -gt 0 ] || { echo "usage: $0 [-n ROUNDS] [-b \"BIN1 BIN2 ...\"] [--check] REC.sfr..." >&2; exit 2; }
read -r -a BIN <<<"$BINS"
WORK="$(mktemp -d /dev/shm/sf-deccost.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  for rec in "${RECS[@]}"; do
    for b in "${!BIN[@]}"; do
      out="$WORK/$(basename "$rec" .sfr).$b.$r"
      if [ "$CHECK" = 1 ] && [ "$r" = 1 ]; then
        /usr/bin/time -f "%U %S" -o "$out.cpu" "${BIN[$b]}" replay --json --collapsed "$out.collapsed" "$rec" >"$out.json" 2>/dev/null
      else
        /usr/bin/time -f "%U %S" -o "$out.cpu" "${BIN[$b]}" replay --json "$rec" >"$out.json" 2>/dev/null
      fi
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$ROUNDS" "$CHECK" "${#BIN[@]}" "${RECS[@]}" <<'EOF'
import json, os, statistics, sys
work, rounds, check, nbins = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
recs = sys.argv[5:]
head = "| recording | samples | frames/trace |"
for b in range(nbins):
    tag = f" (binary {b + 1})" if nbins > 1 else ""
    head += f" decode ns median{tag} | Java threads{tag} | JVM threads{tag} | p99{tag} | taken over %{tag} | replay CPU s{tag} |"
print(head)
print("|---|---:|---:|" + "---:|---:|---:|---:|---:|---:|" * nbins)
bad = False
for rec in recs:
    name = os.path.basename(rec)[:-4] if rec.endswith(".sfr") else os.path.basename(rec)
    row, first = None, None
    for b in range(nbins):
        runs = [json.load(open(f"{work}/{name}.{b}.{r}.json")) for r in range(1, rounds + 1)]
        j = runs[0]
        if row is None:
            row = f"| {name} | {j['samples']} | {j['frames_per_trace']:.1f} |"
        med = statistics.median(x["decode_ns_median"] for x in runs)
        # By the kind of thread sampled (replay --json since 2026-11-26; "-" from older binaries).
        def kind_median(pick):
            got = [pick(x) for x in runs if pick(x) is not None]
            return f"{statistics.median(got):.0f}" if got else "-"
        java = kind_median(lambda x: x.get("decode_ns_by_thread_kind", {}).get("java", {}).get("median"))
        jvm = kind_median(lambda x: (x.get("decode_ns_jvm_threads") or {}).get("median") if (x.get("decode_ns_jvm_threads") or {}).get("samples") else None)
        p99 = statistics.median(x["decode_ns_p99"] for x in runs)
        taken = 100.0 * j["incremental"]["samples"] / max(1, j["samples"])
        cpu = statistics.median(sum(float(x) for x in open(f"{work}/{name}.{b}.{r}.cpu").read().split()[-2:])
                                for r in range(1, rounds + 1))
        row += f" {med:.0f} | {java} | {jvm} | {p99:.0f} | {taken:.1f} | {cpu:.2f} |"
        if check:
            counters = {k: v for k, v in j.items() if k not in ("decode_ns_median", "decode_ns_p99", "decode_ns_by_thread_kind", "decode_ns_jvm_threads", "incremental")}
            collapsed = open(f"{work}/{name}.{b}.1.collapsed", "rb").read()
            if first is None:
                first = (counters, collapsed)
            elif (counters, collapsed) != first:
                print(f"{name}: binary {b + 1} differs from binary 1 ({'counters' if counters != first[0] else 'collapsed profile'})",
                      file=sys.stderr)
                bad = True
    print(row)
sys.exit(1 if bad else 0)
EOF
