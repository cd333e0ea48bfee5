#!/usr/bin/env python3
"""Whole-process latency of `toolbrake hook claude` (PreToolUse and PostToolUse) against the
floor of starting a trivial process (`/bin/true`), and the throughput of parallel hooks on one
session.

Usage: hooks.py [RUNS] LABEL=PATH/TO/toolbrake [LABEL=PATH ...]   (or just PATH [RUNS])
Every run of the loop times `/bin/true`, then, for each binary in turn, `--version`, a
PreToolUse and its PostToolUse: the floor and every binary see the same machine. Each
invocation is timed from spawn to exit, with the payload on stdin read from a file, as Claude
Code runs its command hooks. Each binary keeps its own fresh SQLite state file.
"""
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

args = sys.argv[1:]
runs = 300
# RUNS may come first or last (`hooks.py PATH 300`, as older notes in BENCHMARKS.md run it).
for a in [a for a in args if a.isdigit()]:
    runs = int(a)
    args.remove(a)
if not args:
    sys.exit(__doc__)
binaries = []
for a in args:
    label, _, path = a.rpartition("=")
    binaries.append((label or os.path.basename(path), os.path.abspath(path)))
tmp = tempfile.mkdtemp()
payload_file = os.path.join(tmp, "payload.json")


def env_for(label):
    d = os.path.join(tmp, label)
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, TOOLBRAKE_STATE=os.path.join(d, "state.db"), XDG_CONFIG_HOME=d, HOME=d)
    env.pop("TOOLBRAKE_CONFIG", None)
    # Extra variables for one binary: HOOKS_ENV_<LABEL>="K=V K2=V2" (e.g. traces on).
    for kv in os.environ.get(f"HOOKS_ENV_{label}", "").split():
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def run(argv, payload, env, path=payload_file):
    """Spawn to exit of one process with `payload` on stdin, read from a file as a shell's
    `< file` gives it (posix_spawn: the same small overhead for the floor and the hook)."""
    with open(path, "wb") as f:
        f.write(payload)
    actions = [(os.POSIX_SPAWN_OPEN, 0, path, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status = os.waitpid(pid, 0)
    took = (time.perf_counter_ns() - t0) / 1e6
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{argv} failed with status {status}")
    return took


def call(i, session, event):
    ev = {"session_id": session, "hook_event_name": event, "tool_name": "Bash",
          "tool_input": {"command": f"curl -s https://api.example.com/v1/items?page={i % 40}"},
          "tool_use_id": f"toolu_{i}"}
    if event == "PostToolUse":
        ev["tool_response"] = {"stdout": "{}", "stderr": "", "interrupted": False}
    return json.dumps(ev).encode()


def summary(xs):
    xs = sorted(xs)
    return {"median_ms": round(statistics.median(xs), 3), "p99_ms": round(xs[int(len(xs) * 0.99) - 1], 3)}


envs = {label: env_for(label) for label, _ in binaries}
floor = []
rows = {label: {"version": [], "pre_tool_use": [], "post_tool_use": []} for label, _ in binaries}
prompt = json.dumps({"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": "go"}).encode()
for i in range(runs):
    floor.append(run(["/bin/true"], b"{}", {}))
    for label, path in binaries:
        env, row = envs[label], rows[label]
        # A user prompt every 10 calls keeps the session realistic (never gated).
        if i % 10 == 0:
            run([path, "hook", "claude"], prompt, env)
        row["version"].append(run([path, "--version"], b"", env))
        row["pre_tool_use"].append(run([path, "hook", "claude"], call(i, "bench", "PreToolUse"), env))
        row["post_tool_use"].append(run([path, "hook", "claude"], call(i, "bench", "PostToolUse"), env))

out = {"runs": runs, "floor_true": summary(floor)}
for label, path in binaries:
    r = {k: summary(v) for k, v in rows[label].items()}
    r["pre_over_floor_ms"] = round(r["pre_tool_use"]["median_ms"] - out["floor_true"]["median_ms"], 3)
    # 16 workers, 256 PreToolUse hooks on one session: every update is a transaction.
    par_n = 256
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as ex:
        list(ex.map(lambda i: run([path, "hook", "claude"], call(10_000 + i, "parallel", "PreToolUse"),
                                  envs[label], os.path.join(tmp, f"p{i}.json")), range(par_n)))
    r["parallel_16_workers_hooks_per_s"] = round(par_n / (time.perf_counter() - t0), 1)
    out[label] = r
print(json.dumps(out, indent=1))
