#!/usr/bin/env bash
# Hook latency against the floor, side by side in one run: `/bin/true`, the ordinary
# (dynamically linked) release build and the static build scripts/install makes, all timed in
# the same loop by hooks.py. Usage: scripts/bench/hooks.sh [RUNS] (default 300).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-300}
cargo build --release -q -p toolbrake --bin toolbrake
scripts/install --root target/install --target-dir target/install-build --force --quiet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Copies, read once before timing: a binary the linker has just written starts slower for its
# first few hundred runs here (its pages are new to the page cache).
cp target/release/toolbrake "$tmp/dynamic"
cp target/install/bin/toolbrake "$tmp/static"
for b in dynamic static; do for _ in $(seq 50); do "$tmp/$b" --version > /dev/null; done; done
python3 scripts/bench/hooks.py "$runs" "dynamic=$tmp/dynamic" "static=$tmp/static"
