#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into build-fuzz/ and runs each for SECONDS (default 300),
# one job per target, one target after the other. Prints executions, coverage and any crash file.
#
#   scripts/fuzz.sh [SECONDS] [--save-corpus] [--only recording|decoder]
#
# The working corpora live in build-fuzz/corpus/<target>/ (seeded from tests/data/fuzz/<target>/);
# --save-corpus merges what the run found back into tests/data/fuzz/<target>/ (minimised with
# -merge=1, so only inputs adding coverage are kept). Keep the committed corpus small: it is
# replayed by test_fuzz_corpus in every scripts/test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH=300
SAVE=0
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --save-corpus) SAVE=1 ;;
    --only) ONLY="$2"; shift ;;
    [0-9]*) SECONDS_EACH="$1" ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (expected SECONDS, --save-corpus or --only TARGET)" >&2; exit 2 ;;
  esac
  shift
done

"$ROOT/scripts/setup.sh"
BUILD="${STACKFRAG_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
cmake -S "$ROOT" -B "$BUILD" -DSTACKFRAG_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$BUILD" --target fuzz_recording fuzz_decoder -j"$(nproc)"

# Bytes per input: a recording needs room for a few chunks (the reader's caps are far above
# this; they are checked by length fields, not by bytes present); a snapshot is at most the
# 16 KB fragment plus its registers, with room to spare.
max_len_of() {
  case "$1" in
    recording) echo $((1 << 20)) ;;
    decoder) echo $((64 << 10)) ;;
  esac
}

status=0
for target in recording decoder; do
  [ -z "$ONLY" ] || [ "$ONLY" = "$target" ] || continue
  corpus="$BUILD/corpus/$target"
  artifacts="$BUILD/artifacts/$target"
  seeds="$ROOT/tests/data/fuzz/$target"
  mkdir -p "$corpus" "$artifacts"
  log="$BUILD/fuzz-$target.log"
  echo "== fuzz_$target for ${SECONDS_EACH}s (log $log)"
  rc=0
  # -rss_limit_mb: a chunk may legitimately need its 64 MiB raw buffer plus decoded events.
  "$BUILD/bin/fuzz_$target" -max_len="$(max_len_of "$target")" -max_total_time="$SECONDS_EACH" \
    -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
  last="$(grep -E '^#[0-9]+' "$log" | tail -1 || true)"
  echo "   last status: ${last:-none}"
  grep -E 'stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added' "$log" | sed 's/^/   /' || true
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "   FAILED (exit $rc):"
    grep -E 'ERROR|SUMMARY|broke a promise|Test unit written to' "$log" | sed 's/^/   /' || true
  fi
  if [ "$SAVE" = 1 ]; then
    mkdir -p "$seeds"
    before="$(ls "$seeds" | wc -l)"
    # Edges only (no hit counts): keeps the committed corpus to the inputs that reach new code.
    "$BUILD/bin/fuzz_$target" -merge=1 -use_counters=0 -max_len="$(max_len_of "$target")" "$seeds" "$corpus" >>"$log" 2>&1
    echo "   saved: $before -> $(ls "$seeds" | wc -l) files in $seeds ($(du -sh "$seeds" | cut -f1))"
  fi
done
exit "$status"
