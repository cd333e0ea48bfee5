#!/usr/bin/env python3
"""A misbehaving Streamable HTTP MCP server for the proxy's memory tests.

Usage: fake_mcp_http_server.py MODE
Prints its port, then serves /mcp on 127.0.0.1: answers `initialize` (with a session id)
and `tools/list` as JSON and notifications with 202, and
  flood    on the GET stream, writes notifications without end
  endless  answers `tools/call` with an SSE event whose data never ends
and says on stderr how much of either it wrote so far (`wrote N MiB`, every 16 MiB).
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

mode = sys.argv[1]


def write_forever(out, block):
    """Writes `block` until the peer is gone, saying how much it wrote."""
    written = said = 0
    try:
        while True:
            out.write(block)
            written += len(block)
            if written - said >= 16 << 20:
                said = written
                print("wrote %d MiB" % (written >> 20), file=sys.stderr, flush=True)
    except OSError:
        return


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer_json(self, value, session=False):
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if session:
            self.send_header("Mcp-Session-Id", "s-1")
        self.end_headers()
        self.wfile.write(body)

    def sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif method == "initialize":
            self.answer_json({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-http", "version": "9.9.9"}}}, session=True)
        elif method == "tools/call" and mode == "endless":
            self.sse()
            self.wfile.write(b'data: {"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' % mid)
            write_forever(self.wfile, b"a" * (1 << 20))
        else:
            self.answer_json({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "done"}]}})

    def do_GET(self):
        if mode != "flood":
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.sse()
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "info", "data": "x" * 1000}})
        write_forever(self.wfile, ("data: %s\n\n" % note).encode() * 64)

    def do_DELETE(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
