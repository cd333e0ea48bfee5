#!/usr/bin/env bash
# Replay of recorded runs, side by side in one run: toolbrake (progress on, on every core and
# on one thread, and the seeds' rules), the original JavaScript breaker (npm dsh-repeat-tool-breaker 0.5.2, through its
# real DSH hooks: crates/toolbrake/tests/e2e/original_breaker.mjs), and two floors: a bare
# serde_json parse of every line of the same file, and a perfect split over two cores (the
# sessions in two halves, scripts/bench/split_sessions.py, each replayed on one thread by
# its own process, both at once). Median of five runs; peak RSS (the split's: one half's).
# Usage: scripts/bench/replay_vs_original.sh [COPIES] (default 22: ~105k events, ~43 MB,
# the size of ~1,900 recorded runs). Needs ./scripts/test's npm packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
copies=${1:-22}
cargo build --release -q -p toolbrake -p toolbrake-protocol --bin toolbrake --example parse_only
nm=${TOOLBRAKE_E2E_NODE_MODULES:-target/e2e-npm/node_modules}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 scripts/bench/corpus_events.py examples/trajectories/calls.jsonl.gz "$copies" > "$tmp/events.jsonl"
events=$(wc -l < "$tmp/events.jsonl")
python3 scripts/bench/split_sessions.py "$tmp/events.jsonl" "$tmp/half0.jsonl" "$tmp/half1.jsonl"
printf '[streak]\nprogress = false\n[breaker]\nprogress = false\n' > "$tmp/seed.toml"
echo "input: $events events, $(du -h "$tmp/events.jsonl" | cut -f1)"
measure() { # label, command... (stdin from the events file)
  local label=$1; shift
  : > "$tmp/$label.runs"
  for _ in 1 2 3 4 5; do
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" < "$tmp/events.jsonl" > /dev/null
    cat "$tmp/t" >> "$tmp/$label.runs"
  done
  sort -n "$tmp/$label.runs" | awk -v l="$label" 'NR==3 {printf "%-28s median %.3f s, peak RSS %.1f MiB\n", l, $1, $2/1024}'
}
measure parse_only target/release/examples/parse_only /dev/stdin
measure toolbrake target/release/toolbrake replay /dev/stdin
measure toolbrake_one_thread target/release/toolbrake replay --jobs 1 /dev/stdin
measure perfect_split_two_cores bash -c 'target/release/toolbrake replay --jobs 1 "$1" > /dev/null &
  target/release/toolbrake replay --jobs 1 "$2" > /dev/null; wait' _ "$tmp/half0.jsonl" "$tmp/half1.jsonl"
measure toolbrake_seed_rules target/release/toolbrake replay --config "$tmp/seed.toml" /dev/stdin
measure original_js node crates/toolbrake/tests/e2e/original_breaker.mjs "$nm"
