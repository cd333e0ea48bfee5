#!/usr/bin/env bash
# MCP proxy latency against its floors, side by side in one run: a direct connection to
# server-everything, the bare byte relay of scripts/bench/relay.c (built here with cc) and
# `toolbrake mcp` (the release build), timed call by call by mcp_latency.js.
# Usage: scripts/bench/mcp.sh [CALLS] [NAME=TOOLBRAKE...]   (default 2000 calls; each
# NAME=TOOLBRAKE adds another proxy binary to the loop, e.g. a build from before a change)
# The npm peers come from target/e2e-npm/node_modules (TOOLBRAKE_E2E_NPM overrides it).
set -euo pipefail
cd "$(dirname "$0")/../.."
calls=${1:-2000}
shift || true
nm=${TOOLBRAKE_E2E_NPM:-target/e2e-npm/node_modules}
if [ ! -d "$nm/@modelcontextprotocol/server-everything" ]; then
  echo "mcp.sh: no server-everything under $nm (scripts/test installs it; or set TOOLBRAKE_E2E_NPM)" >&2
  exit 1
fi
cargo build --release -q -p toolbrake --bin toolbrake
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -Wall -Wextra -o "$tmp/relay" scripts/bench/relay.c
# A copy, read once before timing: a binary the linker has just written starts slower (its
# pages are new to the page cache).
cp target/release/toolbrake "$tmp/toolbrake"
"$tmp/toolbrake" --version > /dev/null
also=()
for spec in "$@"; do also+=(--also "$spec"); done
node scripts/bench/mcp_latency.js "$nm" "$tmp/toolbrake" "$calls" --relay "$tmp/relay" "${also[@]}"
