#!/usr/bin/env bash
# The outputs that must not change when the code is only moved: replay's protocol lines,
# `replay --report` and `tune --json` over the bundled runs, each as a sha256.
# Usage: scripts/checksums.sh [BINARY [CONFIG]]   (default: target/release/toolbrake, the
# built-in defaults; a CONFIG pins settings, so a refactor landed after a change of a default
# can still be compared with the outputs from before it)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/toolbrake}"
runs=(examples/trajectories/calls.jsonl.gz)
sum() { sha256sum | cut -c1-16; }
empty="$(mktemp)"; trap 'rm -f "$empty"' EXIT
[ -n "${2:-}" ] && cp "$2" "$empty"
export NO_COLOR=1
cfg=(--config "$empty")   # the built-in defaults, whatever ./toolbrake.toml says
printf 'replay           %s\n' "$("$bin" replay "${cfg[@]}" --from trajectory "${runs[@]}" | sum)"
printf 'replay --report  %s\n' "$("$bin" replay "${cfg[@]}" --from trajectory --report "${runs[@]}" | sum)"
printf 'tune --json      %s\n' "$("$bin" tune "${cfg[@]}" --from trajectory --json --jobs 1 "${runs[@]}" | sum)"
# An explicit sweep has no "defaults" row, so it compares across a change of a default too.
printf 'tune --sweep     %s\n' "$("$bin" tune "${cfg[@]}" --from trajectory --json --jobs 1 \
  --sweep breaker.unchanged_limit=2,3,4 --sweep streak.max_repeats=2,3 --sweep breaker.cycle_limit=2,3 \
  "${runs[@]}" | sum)"
for f in examples/*.jsonl; do
  printf 'replay %-28s %s\n' "$(basename "$f")" "$("$bin" replay "${cfg[@]}" --from trajectory "$f" 2>/dev/null | sum)"
done
