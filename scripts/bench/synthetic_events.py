#!/usr/bin/env python3
"""Writes N protocol events (calls and results, many sessions interleaved) to stdout.

Usage: synthetic_events.py N [SESSIONS]
A mix of shell fetches over a few hosts, file reads and edits, with ~5% failures, so
both engines and the failure track do real work. Deterministic (fixed seed).
"""
import json
import random
import sys

n = int(sys.argv[1])
sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 200
rng = random.Random(42)
out = sys.stdout
written = 0
call_no = 0
open_calls = []
while written < n:
    if open_calls and (rng.random() < 0.5 or len(open_calls) > 8):
        cid, shell = open_calls.pop(0)
        fail = rng.random() < 0.05
        outcome = {"exit_code": 1 if fail else 0, "text": "boom" if fail else "ok"} if shell else {"text": "ok"}
        out.write(json.dumps({"event": "result", "id": cid, "outcome": outcome}) + "\n")
    else:
        call_no += 1
        s = f"s{rng.randrange(sessions)}"
        cid = f"c{call_no}"
        kind = rng.random()
        if kind < 0.4:
            host = rng.choice(["api.example.com", "open.canada.ca", "api.github.com"])
            page = rng.randrange(30)
            args = {"command": f"curl -s --max-time {rng.randrange(5, 60)} https://{host}/v1/items?page={page} -o out{page}.json",
                    "description": rng.choice(["1st", "2nd", "3rd"])}
            tool, shell = "Bash", True
        elif kind < 0.7:
            args = {"file_path": f"/work/src/mod{rng.randrange(40)}.rs", "offset": rng.randrange(5) * 100}
            tool, shell = "Read", False
        else:
            args = {"file_path": f"/work/src/mod{rng.randrange(40)}.rs", "old_string": "a", "new_string": f"b{rng.randrange(9)}"}
            tool, shell = "Edit", False
        out.write(json.dumps({"event": "call", "session": s, "id": cid, "tool": tool, "args": args}) + "\n")
        open_calls.append((cid, shell))
    written += 1
