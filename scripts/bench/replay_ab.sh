#!/usr/bin/env bash
# Two or more toolbrake binaries replaying the same events, side by side in one run: the
# binaries take turns, five runs each, on one thread, on every core and as the perfect split
# (the sessions in two halves, scripts/bench/split_sessions.py, each half replayed on one
# thread by its own process, both at once: the floor of the sharded replay); prints the
# median wall time, peak RSS and user CPU of each (the split's: one half's), and the md5 of
# each output (they must agree).
# Usage: scripts/bench/replay_ab.sh EVENTS.jsonl BINARY... (e.g. a copy of
# target/release/toolbrake built at the commit before a change, and the one after).
set -euo pipefail
events=$1; shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$(dirname "$0")/split_sessions.py" "$events" "$tmp/half0.jsonl" "$tmp/half1.jsonl"
for mode in one all split; do
  args=(); [ "$mode" = one ] && args=(--jobs 1)
  for _ in 1 2 3 4 5; do
    n=0
    for b in "$@"; do
      n=$((n + 1))
      if [ "$mode" = split ]; then
        /usr/bin/time -f "%e %M %U" -o "$tmp/t" bash -c '"$1" replay --jobs 1 "$2" > /dev/null &
          "$1" replay --jobs 1 "$3" > /dev/null; wait' _ "$b" "$tmp/half0.jsonl" "$tmp/half1.jsonl"
      else
        /usr/bin/time -f "%e %M %U" -o "$tmp/t" "$b" replay "${args[@]}" "$events" > "$tmp/out.$n"
      fi
      cat "$tmp/t" >> "$tmp/runs.$mode.$n"
    done
  done
  n=0
  for b in "$@"; do
    n=$((n + 1))
    sort -n "$tmp/runs.$mode.$n" | awk -v b="$b" -v m="$mode" \
      'NR==3 {printf "%-40s %-5s median %.3f s, peak RSS %.1f MiB, user %.2f s\n", b, m, $1, $2/1024, $3}'
  done
done
n=0
for b in "$@"; do n=$((n + 1)); echo "$(md5sum < "$tmp/out.$n" | cut -c1-32)  $b"; done
