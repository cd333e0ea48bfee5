#!/usr/bin/env bash
# Decisions per second on the Redis store (1, 8, 32 clients; own and shared sessions) and
# redis-benchmark's raw GET/SET on the same machine (and a SET of a session state's size),
# in one run. Usage: scripts/bench/redis.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
cargo run --release -q -p toolbrake-store --features testing --example redis_bench | tee "$out"
# The floor for one client: a SET of a value the size of an own session's state (a decision
# writes it, and its write carries the state it started from as well).
bytes=$(sed -n 's/^stored state: own session \([0-9]*\) bytes.*/\1/p' "$out")
rm -f "$out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes >/dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
sleep 0.3
echo "redis-benchmark, 1 client, SET of ${bytes:-3} bytes (an own session's state):"
redis-benchmark -p "$port" -t set -d "${bytes:-3}" -n 20000 -c 1 -q 2>/dev/null | tr '\r' '\n' | grep 'requests per second'
for c in 1 8 32; do
  echo "redis-benchmark, $c clients:"
  redis-benchmark -p "$port" -t get,set -n 50000 -c "$c" -q 2>/dev/null | tr '\r' '\n' | grep 'requests per second'
done
