#!/usr/bin/env bash
# What traces cost a hook, side by side in one run (hooks.py): the binary of BASE_REV (before
# traces), this tree's binary with traces off (nothing configured: no exporter is built), and
# the same binary with OTEL_EXPORTER_OTLP_ENDPOINT set to a local sink that answers 200.
# Release builds without LTO (CARGO_PROFILE_RELEASE_LTO=false, 16 codegen units) for both, to
# keep two builds affordable; the comparison is like for like.
# Usage: scripts/bench/hooks_otel.sh [BASE_REV] [RUNS] (defaults: ec88b4c, 300).
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:-ec88b4c}
runs=${2:-300}
export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
export CARGO_TARGET_DIR="$PWD/target/bench-otel"
tmp=$(mktemp -d)
trap 'kill "${sink:-0}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
cargo build --release -q -p toolbrake --bin toolbrake
cp "$CARGO_TARGET_DIR/release/toolbrake" "$tmp/now"
mkdir "$tmp/base-src"
git archive "$base" | tar -x -C "$tmp/base-src"
(cd "$tmp/base-src" && cargo build --release -q -p toolbrake --bin toolbrake)
cp "$CARGO_TARGET_DIR/release/toolbrake" "$tmp/base"
# The OTLP/HTTP sink: accepts every POST and answers 200.
python3 - "$tmp/port" <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
sink=$!
while [ ! -s "$tmp/port" ]; do sleep 0.05; done
for b in base now; do for _ in $(seq 50); do "$tmp/$b" --version > /dev/null; done; done
cp "$tmp/now" "$tmp/now-on"
HOOKS_ENV_traces_on="OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$tmp/port")" \
    python3 scripts/bench/hooks.py "$runs" "before=$tmp/base" "traces_off=$tmp/now" "traces_on=$tmp/now-on"
