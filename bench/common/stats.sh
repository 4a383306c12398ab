# Statistics over the rounds of a bench, for its table; lists are space-separated numbers.
# Sourced by bench scripts (bench/overhead.sh, bench/perf-floor.sh).

# "median (min–max)" of a list, with printf format $2 and suffix $3.
spread() {
  tr ' ' '\n' <<<"$1" | grep . | sort -g | awk -v f="$2" -v s="$3" '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf f s " (" f "–" f ")", m, v[1], v[NR] }'
}
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Round-by-round ratios of two lists of the same length.
ratios() { paste -d' ' <(tr ' ' '\n' <<<"$1" | grep .) <(tr ' ' '\n' <<<"$2" | grep .) | awk '{ printf "%.4f ", $1 / $2 }'; }
