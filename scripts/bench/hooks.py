#!/usr/bin/env python3
"""Whole-process latency of `loopbrake hook claude` (PreToolUse and PostToolUse) against the
floor of starting a trivial process, and the throughput of parallel hooks on one session.

Usage: hooks.py PATH/TO/loopbrake [RUNS]
Each invocation is timed from spawn to exit, with the payload on stdin, as Claude Code runs
its command hooks. State goes to a fresh SQLite file in a temporary directory.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

binary = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 300
tmp = tempfile.mkdtemp()
env = dict(os.environ, LOOPBRAKE_STATE=os.path.join(tmp, "state.db"), XDG_CONFIG_HOME=tmp, HOME=tmp)
env.pop("LOOPBRAKE_CONFIG", None)


payload_file = os.path.join(tmp, "payload.json")


def timed(argv, payload):
    """Spawn to exit of one process with `payload` on stdin, read from a file as a shell's
    `< file` gives it (posix_spawn: the same small overhead for the floor and the hook)."""
    with open(payload_file, "wb") as f:
        f.write(payload)
    actions = [(os.POSIX_SPAWN_OPEN, 0, payload_file, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status = os.waitpid(pid, 0)
    took = (time.perf_counter_ns() - t0) / 1e6
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{argv} failed with status {status}")
    return took


def pre(i, session="bench"):
    return json.dumps({"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": f"curl -s https://api.example.com/v1/items?page={i % 40}"},
                       "tool_use_id": f"toolu_{i}"}).encode()


def post(i, session="bench"):
    return json.dumps({"session_id": session, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                       "tool_input": {"command": f"curl -s https://api.example.com/v1/items?page={i % 40}"},
                       "tool_use_id": f"toolu_{i}",
                       "tool_response": {"stdout": "{}", "stderr": "", "interrupted": False}}).encode()


def summary(xs):
    xs = sorted(xs)
    return {"median_ms": round(statistics.median(xs), 3), "p99_ms": round(xs[int(len(xs) * 0.99) - 1], 3)}


floor, version, pres, posts = [], [], [], []
for i in range(runs):
    # The floor and the start-up of the binary, interleaved with the hooks so that all
    # rows see the same machine.
    floor.append(timed(["/bin/true"], b"{}"))
    version.append(timed([binary, "--version"], b""))
    # A user prompt every 10 calls keeps the session realistic (never gated).
    if i % 10 == 0:
        subprocess.run([binary, "hook", "claude"], input=json.dumps(
            {"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": "go"}).encode(), env=env, check=True)
    pres.append(timed([binary, "hook", "claude"], pre(i)))
    posts.append(timed([binary, "hook", "claude"], post(i)))

par_n = 256
t0 = time.perf_counter()
with ThreadPoolExecutor(max_workers=16) as ex:
    list(ex.map(lambda i: timed([binary, "hook", "claude"], pre(10_000 + i, "parallel")), range(par_n)))
elapsed = time.perf_counter() - t0
print(json.dumps({
    "runs": runs,
    "floor_true": summary(floor),
    "version": summary(version),
    "pre_tool_use": summary(pres),
    "post_tool_use": summary(posts),
    "parallel_16_workers_one_session": {"hooks": par_n, "seconds": round(elapsed, 3), "hooks_per_s": round(par_n / elapsed, 1)},
}, indent=1))
