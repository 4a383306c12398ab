#!/usr/bin/env bash
# Builds and runs bench_capture (perf sample delivery and ring-reader cost), prints its Markdown
# table and puts it in docs/benchmarks.md under "## Capture (bench/capture)".
# Usage: bench/capture.sh [SECONDS_PER_ROW]   (default 2)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${STACKFRAG_BUILD_DIR:-$ROOT/build}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_capture >/dev/null

TABLE="$(mktemp)"
trap 'rm -f "$TABLE"' EXIT
"$BUILD/bin/bench_capture" "${1:-2}" | tee "$TABLE"

DOC="$ROOT/docs/benchmarks.md"
SECTION="$(mktemp)"
trap 'rm -f "$TABLE" "$SECTION"' EXIT
{
  echo "## Capture (bench/capture)"
  echo
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/capture.sh\` (nproc $(nproc))."
  echo
  cat "$TABLE"
  if [[ -f "$ROOT/bench/capture/NOTES.md" ]]; then
    echo
    cat "$ROOT/bench/capture/NOTES.md"
  fi
} >"$SECTION"

# Replace the section (up to the next "## " heading) or append it.
[[ -f "$DOC" ]] || printf '# Benchmarks\n' >"$DOC"
awk -v section="$SECTION" '
  function emit() { while ((getline line < section) > 0) print line; print "" }
  /^## Capture \(bench\/capture\)/ { emit(); skipping = 1; done = 1; next }
  skipping && /^## / { skipping = 0 }
  !skipping { print }
  END { if (!done) { print ""; emit() } }
' "$DOC" >"$DOC.new"
mv "$DOC.new" "$DOC"
echo "updated $DOC"
