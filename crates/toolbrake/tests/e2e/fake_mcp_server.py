#!/usr/bin/env python3
"""A misbehaving MCP server for the proxy's failure tests.

Usage: fake_mcp_server.py MODE
Answers `initialize` and `tools/list`; on `tools/call`:
  ok       answers normally
  crash    exits with status 3 without answering
  garbage  writes a line that is not JSON-RPC
  hang     never answers (and keeps running)
  endless  starts an answer and never ends its line
  huge     answers call {"n": 2} with a 65 MiB answer, others normally
and in mode `quit` exits (status 0) right after answering `initialize`; in mode `flood`
it writes notifications without end once the client says `notifications/initialized`.
"""
import json
import sys
import time

mode = sys.argv[1]


def flood():
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": "x" * 1000}}) + "\n"
    block = note * 64
    while True:
        sys.stdout.write(block)


def endless(mid):
    sys.stdout.write('{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' % mid)
    block = "a" * (1 << 20)
    while True:
        sys.stdout.write(block)


for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        reply = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                 "serverInfo": {"name": "fake", "version": "9.9.9"}}
    elif method == "tools/list":
        reply = {"tools": [{"name": "work", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        if mode == "crash":
            sys.exit(3)
        if mode == "garbage":
            print("Server starting up... oops, this is a log line on stdout", flush=True)
            time.sleep(30)
            continue
        if mode == "hang":
            time.sleep(3600)
        if mode == "endless":
            endless(mid)
        reply = {"content": [{"type": "text", "text": "done"}]}
        if mode == "huge" and msg["params"].get("arguments", {}).get("n") == 2:
            reply = {"content": [{"type": "text", "text": "a" * (65 << 20)}]}
    elif method == "notifications/initialized" and mode == "flood":
        flood()
    elif mid is None:
        continue
    else:
        reply = {}
    print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": reply}), flush=True)
    if mode == "quit" and method == "initialize":
        sys.exit(0)
