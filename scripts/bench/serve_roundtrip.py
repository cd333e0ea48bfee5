#!/usr/bin/env python3
"""Round trip of one event through `toolbrake serve --stdio`, measured by a client.

Usage: serve_roundtrip.py PATH/TO/toolbrake [N]
Sends N call/result events one at a time, waiting for each answer before the next, and
prints p50 and p99 of the round trip in microseconds.
"""
import json
import statistics
import subprocess
import sys
import time

binary = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
p = subprocess.Popen([binary, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
samples = []
for i in range(n):
    if i % 2 == 0:
        ev = {"event": "call", "session": f"s{i % 50}", "id": f"c{i}", "tool": "Bash",
              "args": {"command": f"curl -s https://api.example.com/v1/items?page={i % 30}"}}
    else:
        ev = {"event": "result", "id": f"c{i - 1}", "outcome": {"exit_code": 0, "text": "ok"}}
    line = (json.dumps(ev) + "\n").encode()
    t0 = time.perf_counter_ns()
    p.stdin.write(line)
    answer = p.stdout.readline()
    samples.append((time.perf_counter_ns() - t0) / 1000.0)
    if not answer:
        sys.exit("serve closed the stream")
p.stdin.close()
p.wait()
samples.sort()
p50 = statistics.median(samples)
p99 = samples[int(len(samples) * 0.99) - 1]
print(json.dumps({"events": n, "p50_us": round(p50, 1), "p99_us": round(p99, 1)}))
