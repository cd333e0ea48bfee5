#!/usr/bin/env python3
"""Protocol events from recorded runs, repeated to a realistic replay size.

Usage: corpus_events.py CALLS.jsonl[.gz] COPIES > events.jsonl
Each recorded call becomes a `call` and a `result` event (exit code, HTTP status and the
recorded output head as the outcome text), each run ends with an `end`; copy k renames
every session `<session>#k`, so COPIES copies are COPIES times as many independent runs.
The same file drives `toolbrake replay` and the original JavaScript breaker's driver.
"""
import gzip
import json
import sys
from collections import defaultdict

path, copies = sys.argv[1], int(sys.argv[2])
opener = gzip.open if path.endswith(".gz") else open
runs = defaultdict(list)
with opener(path, "rt") as f:
    for line in f:
        row = json.loads(line)
        runs[row["session"]].append(row)
out = sys.stdout
for k in range(copies):
    for session, rows in runs.items():
        s = f"{session}#{k}"
        for row in sorted(rows, key=lambda r: r["seq"]):
            cid = f"{s}/{row['seq']}"
            out.write(json.dumps({"event": "call", "session": s, "id": cid, "tool": row["tool"], "args": row["args"]}) + "\n")
            outcome = {}
            if isinstance(row.get("exit_code"), int):
                outcome["exit_code"] = row["exit_code"]
            if isinstance(row.get("status"), int):
                outcome["status_code"] = row["status"]
            if row.get("ok") is False and "exit_code" not in outcome and "status_code" not in outcome:
                outcome["is_error"] = True
            if isinstance(row.get("output_head"), str):
                outcome["text"] = row["output_head"]
            out.write(json.dumps({"event": "result", "id": cid, "outcome": outcome}) + "\n")
        out.write(json.dumps({"event": "end", "session": s}) + "\n")
