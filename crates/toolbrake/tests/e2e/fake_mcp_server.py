#!/usr/bin/env python3
"""A misbehaving MCP server for the proxy's failure tests.

Usage: fake_mcp_server.py MODE
Answers `initialize` and `tools/list`; on `tools/call`:
  ok       answers normally
  crash    exits with status 3 without answering
  garbage  writes a line that is not JSON-RPC
  hang     never answers (and keeps running)
and in mode `quit` exits (status 0) right after answering `initialize`.
"""
import json
import sys
import time

mode = sys.argv[1]
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
        reply = {"content": [{"type": "text", "text": "done"}]}
    elif mid is None:
        continue
    else:
        reply = {}
    print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": reply}), flush=True)
    if mode == "quit" and method == "initialize":
        sys.exit(0)
