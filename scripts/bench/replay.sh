#!/usr/bin/env bash
# Throughput and peak memory of `toolbrake replay`: the bundled corpus, and a synthetic
# stream of one million events. Usage: scripts/bench/replay.sh (from the repo root).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q
bin=target/release/toolbrake
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
measure() { # label, events, command...
  local label=$1 events=$2; shift 2
  local best=""
  for _ in 1 2 3 4 5; do
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" > /dev/null
    read -r secs kb < "$tmp/t"
    echo "$secs $kb" >> "$tmp/$label.runs"
  done
  sort -n "$tmp/$label.runs" | awk -v l="$label" -v ev="$events" 'NR==3 {printf "%s: median %.3f s, %.0f events/s, peak RSS %.1f MiB\n", l, $1, ev/($1>0?$1:0.001), $2/1024}'
}
corpus_events=$(( $(zcat examples/trajectories/calls.jsonl.gz | wc -l) * 2 ))
measure corpus "$corpus_events" "$bin" replay --from trajectory examples/trajectories/calls.jsonl.gz
python3 scripts/bench/synthetic_events.py 1000000 > "$tmp/events.jsonl"
measure synthetic_1M 1000000 "$bin" replay "$tmp/events.jsonl"
# The same stream under the seeds' rules (no output memory), side by side.
printf '[streak]\nprogress = false\n[breaker]\nprogress = false\n' > "$tmp/seed.toml"
measure synthetic_1M_seed 1000000 "$bin" replay --config "$tmp/seed.toml" "$tmp/events.jsonl"
python3 scripts/bench/synthetic_events.py 1000000 20000 > "$tmp/events20k.jsonl"
measure synthetic_1M_20k_sessions 1000000 "$bin" replay "$tmp/events20k.jsonl"
