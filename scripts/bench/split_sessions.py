#!/usr/bin/env python3
"""The floor of a two-core replay: an events file split in two by session.

Usage: split_sessions.py EVENTS OUT0 OUT1
Every event goes to the half of its session (a sub-agent's key, `<session>#agent:…`, with
its session); an `answer` or `result` that names no session goes with the call of its id.
Each half is a whole replay of its own, so two one-thread replays of the halves at once
are a perfect split of the sessions over two cores: no routing, nothing handed between
threads, no answers put back in order. scripts/bench/replay_vs_original.sh measures it as
the floor of `toolbrake replay` on two cores.
"""
import json
import sys
import zlib

events, out0, out1 = sys.argv[1:4]
halves = [open(out0, "w"), open(out1, "w")]
half_of_call = {}
with open(events) as f:
    for line in f:
        e = json.loads(line)
        session = e.get("session")
        if isinstance(session, str):
            half = zlib.crc32(session.split("#agent:")[0].encode()) % 2
            if e.get("event") == "call":
                half_of_call[e.get("id")] = half
        else:
            half = half_of_call.get(e.get("id"), 0)
        halves[half].write(line)
for h in halves:
    h.close()
