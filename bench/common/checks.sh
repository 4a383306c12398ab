# Argument and tool checks the bench scripts share; source it after setting BENCH (the script's name
# for its messages). Each check exits 2 with a message naming what is wrong and how to mend it.

need_count() {   # need_count FLAG VALUE WHAT: a positive integer
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "$BENCH: $1 wants a number of $3, got '$2'" >&2; exit 2; }
}

need_java() {   # prints the java of JAVA_HOME (or PATH)
  local java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  java="$(command -v "$java" || true)"
  [ -n "$java" ] || { echo "$BENCH: no java (set JAVA_HOME)" >&2; exit 2; }
  echo "$java"
}

need_agent() {   # need_agent PATH
  [ -r "$1" ] || { echo "$BENCH: no agent at $1 (scripts/build.sh, or set STACKFRAG_AGENT)" >&2; exit 2; }
}

need_no_agent_error() {   # need_no_agent_error STDERR_FILE CONTEXT: a run the agent reported an error in ends the bench
  grep -q '\[stackfrag\] error' "$1" || return 0
  echo "$BENCH: the agent reported an error $2:" >&2
  grep '\[stackfrag\]' "$1" >&2
  exit 1
}

need_async_profiler_if_given() {   # need_async_profiler_if_given PATH_OR_EMPTY
  [ -z "$1" ] || [ -r "$1" ] || { echo "$BENCH: ASYNC_PROFILER=$1 is not a readable file" >&2; exit 2; }
}

# add_chosen_configs LIST: appends to CONFIGS the entries ("key|label|options") of the array named
# LIST that CHOSEN names (every one when CHOSEN is empty); an ap* entry needs ASYNC_PROFILER, and
# naming it without that, or naming a key LIST lacks, exits.
add_chosen_configs() {
  local -n list="$1"
  local entry key
  for entry in "${list[@]}"; do
    key="${entry%%|*}"
    if [ -n "$CHOSEN" ]; then [[ " $CHOSEN " == *" $key "* ]] || continue; fi
    if [[ "$key" == ap* ]] && [ -z "$ASYNC_PROFILER" ]; then
      [ -n "$CHOSEN" ] && { echo "$BENCH: $key needs ASYNC_PROFILER=/path/libasyncProfiler.so" >&2; exit 2; }
      continue
    fi
    CONFIGS+=("$entry")
  done
  for key in $CHOSEN; do
    printf '%s\n' "${list[@]}" | grep -q "^$key|" || { echo "$BENCH: unknown configuration '$key' (see -c in the usage)" >&2; exit 2; }
  done
}
