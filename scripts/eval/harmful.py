#!/usr/bin/env python3
"""Measures toolbrake's stops on recorded runs: how many were harmful (progress, not waste).

A stop (a denial, or an ask, which an unattended replay settles as declined) is *harmful*
when the stopped call, in the real run, returned output different from the last identical
call's (same tool, same canonical arguments), with numbers of 3+ digits and hex addresses
masked. A call with no recorded output is never harmful.

Usage: scripts/eval/harmful.py [--config toolbrake.toml] [--binary target/release/toolbrake]
                               [--calls examples/trajectories/calls.jsonl.gz]
                               [--labels examples/trajectories/labels.jsonl] [--verbose]

Prints, per source and in total: resolved runs with a harmful stop, harmful stops, runs
with any stop, and for runs that look stuck (unresolved and at their step limit, or with
3+ consecutive identical calls returning the same output) how many were stopped and the
median call of the first stop.
"""
import argparse, gzip, json, re, statistics, subprocess, sys
from collections import defaultdict

MASK = re.compile(r"0x[0-9a-fA-F]+|\d{3,}")


def norm(text):
    return None if text is None or text == "" else MASK.sub("#", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config")
    ap.add_argument("--binary", default="target/release/toolbrake")
    ap.add_argument("--calls", default="examples/trajectories/calls.jsonl.gz")
    ap.add_argument("--labels", default="examples/trajectories/labels.jsonl")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()

    labels = {}
    with open(a.labels) as f:
        for line in f:
            r = json.loads(line)
            labels[r["session"]] = r
    opener = gzip.open if a.calls.endswith(".gz") else open
    records = []
    with opener(a.calls, "rt") as f:
        for line in f:
            records.append(json.loads(line))

    events, meta = [], []  # meta[i]: what event i was
    current = None
    for n, r in enumerate(records):
        if r["session"] != current:
            if current is not None:
                events.append({"event": "end", "session": current})
                meta.append(None)
            current = r["session"]
        cid = f"c{n}"
        events.append({"event": "call", "session": r["session"], "id": cid,
                       "tool": r["tool"], "args": r.get("args") or {}})
        meta.append(("call", r))
        outcome = {}
        if r.get("exit_code") is not None:
            outcome["exit_code"] = r["exit_code"]
        if r.get("status") is not None:
            outcome["status_code"] = r["status"]
        if r.get("ok") is False and "exit_code" not in outcome and "status_code" not in outcome:
            outcome["is_error"] = True
        if r.get("output_head") is not None:
            outcome["text"] = r["output_head"]
        events.append({"event": "result", "id": cid, "outcome": outcome})
        meta.append(("result", r))
    if current is not None:
        events.append({"event": "end", "session": current})
        meta.append(None)

    cmd = [a.binary, "replay"] + (["--config", a.config] if a.config else []) + ["-"]
    p = subprocess.run(cmd, input="\n".join(json.dumps(e) for e in events) + "\n",
                       capture_output=True, text=True)
    out = p.stdout.splitlines()
    if len(out) != len(events):
        sys.exit(f"expected {len(events)} output lines, got {len(out)}: {p.stderr}")

    per = defaultdict(lambda: {"calls": 0, "stops": 0, "harmful": 0, "first": None,
                               "last": {}, "details": []})
    for m, line in zip(meta, out):
        if not m or m[0] != "call":
            continue
        r = m[1]
        s = per[r["session"]]
        s["calls"] += 1
        d = json.loads(line)
        key = r["tool"] + "\n" + json.dumps(r.get("args") or {}, sort_keys=True)
        text = norm(r.get("output_head"))
        if d.get("verdict") in ("deny", "ask"):
            s["stops"] += 1
            if s["first"] is None:
                s["first"] = s["calls"]
            prev = s["last"].get(key)
            harmful = text is not None and prev is not None and prev != text
            # The first call of its kind that is stopped also brought new output.
            if text is not None and key not in s["last"]:
                harmful = True
            if harmful:
                s["harmful"] += 1
            s["details"].append((s["calls"], d.get("verdict"), d.get("engine"),
                                 (d.get("hits") or [{}])[0].get("track", "streak"), harmful))
        if text is not None:
            s["last"][key] = text

    groups = defaultdict(lambda: defaultdict(int))
    firsts = defaultdict(list)
    for name, s in per.items():
        lab = labels.get(name, {})
        src = lab.get("source", name.split("/")[0])
        stuck = (not lab.get("resolved") and lab.get("hit_limit")) or \
            lab.get("max_consec_identical_same_output", 0) >= 3
        for g in (src, "total"):
            G = groups[g]
            G["runs"] += 1
            G["resolved"] += bool(lab.get("resolved"))
            G["resolved_harmful"] += bool(lab.get("resolved") and s["harmful"])
            G["harmful"] += s["harmful"]
            G["stops"] += s["stops"]
            G["stopped_runs"] += s["stops"] > 0
            G["stuck"] += bool(stuck)
            G["stuck_caught"] += bool(stuck and s["stops"])
            if stuck and s["first"]:
                firsts[g].append(s["first"])
        if a.verbose and s["stops"]:
            print(f"{name} resolved={lab.get('resolved')} stuck={bool(stuck)} {s['details']}")
    for g, G in sorted(groups.items()):
        med = statistics.median(firsts[g]) if firsts[g] else "-"
        print(f"{g}: {G['runs']} runs; resolved runs with a harmful stop {G['resolved_harmful']}/"
              f"{G['resolved']}; harmful stops {G['harmful']}/{G['stops']}; runs stopped "
              f"{G['stopped_runs']}; stuck runs caught {G['stuck_caught']}/{G['stuck']} "
              f"(median first stop {med})")


if __name__ == "__main__":
    main()
