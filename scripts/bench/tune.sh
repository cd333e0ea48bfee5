#!/usr/bin/env bash
# Wall time and peak memory of `toolbrake tune`: the default sweep (about 30 settings) over
# ~100k events of recorded runs (the bundled corpus as protocol events, 21 copies),
# `toolbrake tune --calibrate` (the calibration ladder, about 10 settings, and the
# split-conformal promise) over the same input, and a replay of the same input for
# comparison (one setting). Three runs each, the median.
# Usage: scripts/bench/tune.sh (from the repo root).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p toolbrake
bin=target/release/toolbrake
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 scripts/bench/corpus_events.py examples/trajectories/calls.jsonl.gz 21 > "$tmp/events.jsonl"
events=$(wc -l < "$tmp/events.jsonl")
settings=$("$bin" tune --json "$tmp/events.jsonl" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["settings"]))')
rungs=$(TOOLBRAKE_STATE="$tmp/none.db" "$bin" tune --calibrate --json "$tmp/events.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["rungs"])')
echo "input: $events events, $settings settings ($rungs on the calibration ladder); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
measure() { # label, settings judged, command...
  local label=$1 settings=$2; shift 2
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" > /dev/null
    cat "$tmp/t" >> "$tmp/$label.runs"
  done
  sort -n "$tmp/$label.runs" | awk -v l="$label" -v ev="$events" -v n="$settings" 'NR==2 {printf "%s: median %.2f s, %.0f setting-events/s, peak RSS %.1f MiB\n", l, $1, ev*n/($1>0?$1:0.001), $2/1024}'
}
measure "tune_all_cores" "$settings" "$bin" tune "$tmp/events.jsonl"
# Calibration reads `toolbrake feedback` marks from the store: none here.
TOOLBRAKE_STATE="$tmp/none.db" measure "tune_calibrate" "$rungs" "$bin" tune --calibrate "$tmp/events.jsonl"
measure "replay_report" 1 "$bin" replay --report "$tmp/events.jsonl"
