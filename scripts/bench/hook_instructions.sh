#!/usr/bin/env bash
# Counts the instructions one `toolbrake hook claude` PreToolUse executes (callgrind: the same
# count for the same binary and input, however busy the machine), on a state file an earlier
# call made, as every call after a session's first finds it. Prints the total and where they
# went; exits 1 above the budget. A hook's start-up is paid at every tool call of every
# hooked agent, and a 4 ms regression (compiling the redaction table) once went unseen.
#
#   scripts/bench/hook_instructions.sh BINARY [BUDGET]     (BUDGET: instructions, default 3000000)
set -euo pipefail
bin=${1:?usage: hook_instructions.sh BINARY [BUDGET]}
budget=${2:-3000000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pre() {
  printf '{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls -la src"},"tool_use_id":"%s","cwd":"/tmp"}' "$1"
}
run() { env -i TOOLBRAKE_STATE="$dir/state.db" HOME="$dir" XDG_CONFIG_HOME="$dir" "$@" hook claude; }
pre t1 | run "$bin" > /dev/null
pre t2 | run valgrind --tool=callgrind --callgrind-out-file="$dir/out" "$bin" > /dev/null 2> "$dir/log"
total=$(sed -n 's/^summary: //p;s/^totals: //p' "$dir/out" | head -1)
echo "hook PreToolUse: $total instructions (budget $budget)"
if [ "$total" -gt "$budget" ]; then
  echo "over budget; where they went (inclusive):" >&2
  callgrind_annotate --inclusive=yes "$dir/out" 2>/dev/null | sed -n '/file:function/,$p' | head -40 >&2
  exit 1
fi
