#!/usr/bin/env python3
"""Detection figures of toolbrake on a corpus of recorded runs (EVALUATION.md; docs/how-it-decides.md, "Measured on the bundled corpus").

A corpus is a folder (or two files) in the trajectory format:
  calls.jsonl[.gz]  one tool call a line, in session order:
                    {"session", "seq", "tool", "args", "ok", "exit_code", "status", "output_head"}
  labels.jsonl      one line per run: {"session", "resolved", ...}; optional fields
                    `max_consec_identical` and `max_identical_failing_anywhere` (computed
                    from the calls when absent)

Each run is replayed through `toolbrake replay` (a `call` and a `result` event per call; the
outcome: `exit_code`, `status_code`, `is_error` when `ok` is false with neither, `text` =
`output_head`). A call is *stopped* when it is denied or asked about (nobody answers).

- waste: a call whose output equals the output of the last identical call (same tool, same
  canonical arguments) in its run, after masking `0x…` and numbers of 3+ digits, with the
  same exit status (the exit code, and failed or not: a run that now passes is new even
  when the head of its output is the same);
- harmful stop: a stopped call that is not waste and has a recorded output;
- harmed run: a resolved run with a harmful stop;
- stuck run: unresolved, with 5+ identical calls in a row, or the same failing call 8+ times
  anywhere; caught: at least one of its calls stopped;
- waste stopped: of the waste calls in stuck runs, how many were stopped;
- first stop: the call number (1-based) of the first stop in each caught stuck run;
- calls saved: the calls stopped, as a share of all calls; output bytes saved: the bytes
  (UTF-8) of the recorded outputs of the calls stopped (the closest measure of tokens the
  corpus holds: `output_head` is the first 300 characters).

`--compare-step-line` prints, on the runs of `--half H`, four stop rules side by side, each
calibrated per agent setup (the `source` label) on the other half at `--alpha` (default
0.05) by split conformal (the line is the k-th smallest of the n resolved runs' scores,
k = ceil((n+1)(1-alpha)), exact fractions; a setup with too few resolved runs gets no line):
  1. the calibrated step count (a run is stopped once its calls exceed the line);
  2. the calibrated step count plus the calls toolbrake stopped so far (the score of
     toolbrake's `[budget]` line);
  3. toolbrake's call-level configuration as given (`--config`, default the defaults);
  4. `toolbrake tune --calibrate` per setup on the other half (its promise: at most alpha
     of resolved runs get a harmful stop), replayed on this half.
For rules 1 and 2, the calls saved are the calls from the crossing on, for 3 and 4 the calls
stopped.

Usage:
  scripts/eval/detect.py CORPUS_DIR [--config FILE] [--binary PATH] [--half 0|1] [--verbose] [--json]
  scripts/eval/detect.py --calls FILE --labels FILE ...
  scripts/eval/detect.py CORPUS_DIR --half 1 --compare-step-line [--alpha 0.05] [--json]

`--half H` keeps only the runs whose session id hashes to H: the first byte of the SHA-256
of the session id (UTF-8), modulo 2. The split is stable (it depends on nothing but the id)
and is how EVALUATION.md cross-validates a rule: chosen on one half, reported on the other.

An empty output counts as no output (it is never waste and never harmful).
"""
import argparse, gzip, hashlib, json, math, os, re, statistics, subprocess, sys, tempfile
from collections import defaultdict
from fractions import Fraction

MASK = re.compile(r"0x[0-9a-fA-F]+|\d{3,}")


def norm(text):
    return None if text is None or text == "" else MASK.sub("#", text)


def key_of(r):
    return r["tool"] + "\n" + json.dumps(r.get("args") or {}, sort_keys=True, separators=(",", ":"))


def failing(r):
    if r.get("ok") is False:
        return True
    ec = r.get("exit_code")
    return ec is not None and ec != 0


def load(calls_path, labels_path):
    opener = gzip.open if calls_path.endswith(".gz") else open
    runs = defaultdict(list)
    order = []
    with opener(calls_path, "rt") as f:
        for line in f:
            r = json.loads(line)
            if r["session"] not in runs:
                order.append(r["session"])
            runs[r["session"]].append(r)
    labels = {}
    if labels_path and os.path.exists(labels_path):
        with open(labels_path) as f:
            for line in f:
                lab = json.loads(line)
                labels[lab["session"]] = lab
    return order, runs, labels


def status_of(r):
    """What a call's outcome says besides its text: its exit code, and whether it failed."""
    return r.get("exit_code"), failing(r)


def half_of(session):
    """0 or 1: the first byte of the SHA-256 of the session id, modulo 2."""
    return hashlib.sha256(session.encode("utf-8")).digest()[0] % 2


def stuck(calls, lab):
    if lab.get("resolved"):
        return False
    consec = lab.get("max_consec_identical")
    fail_any = lab.get("max_identical_failing_anywhere")
    if consec is None or fail_any is None:
        consec, run, prev = 0, 0, None
        fails = defaultdict(int)
        for r in calls:
            k = key_of(r)
            run = run + 1 if k == prev else 1
            prev = k
            consec = max(consec, run)
            if failing(r):
                fails[k] += 1
        fail_any = max(fails.values(), default=0)
    return consec >= 5 or fail_any >= 8


def events_of(order, runs):
    events = []
    for s in order:
        for n, r in enumerate(runs[s]):
            cid = f"c{n}"
            events.append({"event": "call", "session": s, "id": cid, "tool": r["tool"],
                           "args": r.get("args") or {}})
            outcome = {}
            if r.get("exit_code") is not None:
                outcome["exit_code"] = r["exit_code"]
            if r.get("status") is not None:
                outcome["status_code"] = r["status"]
            if r.get("ok") is False and "exit_code" not in outcome and "status_code" not in outcome:
                outcome["is_error"] = True
            if r.get("output_head") is not None:
                outcome["text"] = r["output_head"]
            events.append({"event": "result", "session": s, "id": cid, "outcome": outcome})
        events.append({"event": "end", "session": s})
    return events


def judge(binary, config, events):
    cmd = [binary, "replay"] + (["--config", config] if config else []) + ["-"]
    p = subprocess.run(cmd, input="\n".join(json.dumps(e) for e in events) + "\n",
                       capture_output=True, text=True)
    out = p.stdout.splitlines()
    if p.returncode != 0 or len(out) != len(events):
        sys.exit(f"replay failed ({p.returncode}): expected {len(events)} lines, got {len(out)}\n"
                 f"{p.stderr}")
    return [json.loads(l) for l in out]


def measure(order, runs, labels, answers):
    per_call = iter(a for e, a in answers if e["event"] == "call")
    T = defaultdict(int)
    firsts, details = [], []
    for s in order:
        lab = labels.get(s, {})
        is_stuck = stuck(runs[s], lab)
        last = {}
        repeats = defaultdict(int)
        first = None
        harmful = 0
        stops = []
        for n, r in enumerate(runs[s], 1):
            d = next(per_call)
            k = key_of(r)
            text = norm(r.get("output_head"))
            # The exit status is part of what a call returned: the same text with another
            # exit code (a test run that now passes, its head unchanged) is new.
            seen = (text, status_of(r))
            waste = text is not None and last.get(k) == seen
            stopped = d.get("verdict") in ("deny", "ask")
            if waste:
                T["waste"] += 1
                repeats[k] += 1
                if is_stuck:
                    T["stuck_waste"] += 1
                    # The first time an identity comes back the same, nothing before the
                    # call says it will: only the waste after it is knowable.
                    if repeats[k] == 1:
                        T["stuck_waste_first"] += 1
            T["calls"] += 1
            if stopped:
                T["stops"] += 1
                T["bytes_saved"] += len((r.get("output_head") or "").encode("utf-8"))
                first = first or n
                hit = (d.get("hits") or [{}])[0]
                bad = not waste and text is not None
                harmful += bad
                stops.append((n, d["verdict"], d.get("engine"), hit.get("track", "streak"),
                              "HARMFUL" if bad else "waste" if waste else "no-output"))
                if waste:
                    T["waste_stopped"] += 1
                    if is_stuck:
                        T["stuck_waste_stopped"] += 1
                        if repeats[k] > 1:
                            T["stuck_knowable_stopped"] += 1
            if text is not None:
                last[k] = seen
        T["runs"] += 1
        T["resolved"] += bool(lab.get("resolved"))
        T["harmful"] += harmful
        T["harmed_runs"] += bool(lab.get("resolved") and harmful)
        T["runs_with_harmful"] += bool(harmful)
        T["stuck"] += is_stuck
        if is_stuck and first:
            T["caught"] += 1
            firsts.append(first)
        details.append({"session": s, "resolved": lab.get("resolved"), "stuck": is_stuck,
                        "calls": len(runs[s]), "stops": stops})
    T["median_first_stop"] = statistics.median(firsts) if firsts else None
    return dict(T), details


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", nargs="?", help="a folder with calls.jsonl[.gz] and labels.jsonl")
    ap.add_argument("--calls")
    ap.add_argument("--labels")
    ap.add_argument("--config", help="a toolbrake.toml (default: the built-in defaults)")
    ap.add_argument("--binary", default=os.environ.get("TOOLBRAKE", "target/release/toolbrake"))
    ap.add_argument("--half", type=int, choices=(0, 1),
                    help="only the runs whose session id hashes to this half (cross-validation)")
    ap.add_argument("--verbose", action="store_true", help="list every stopped run's stops")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    ap.add_argument("--compare-step-line", action="store_true",
                    help="the calibrated step-count line beside toolbrake's rules (needs --half)")
    ap.add_argument("--alpha", default="0.05",
                    help="the share of resolved runs a calibrated line may stop (exact: 0.05, 1/20)")
    a = ap.parse_args()
    calls, labels_path = a.calls, a.labels
    if a.corpus:
        for name in ("calls.jsonl.gz", "calls.jsonl"):
            if os.path.exists(os.path.join(a.corpus, name)):
                calls = calls or os.path.join(a.corpus, name)
        labels_path = labels_path or os.path.join(a.corpus, "labels.jsonl")
    if not calls:
        ap.error("name a corpus folder or --calls FILE")
    order, runs, labels = load(calls, labels_path)
    if a.compare_step_line:
        if a.half is None:
            ap.error("--compare-step-line scores one half: give --half 0 or 1")
        compare(a, order, runs, labels)
        return
    if a.half is not None:
        order = [s for s in order if half_of(s) == a.half]
    events = events_of(order, runs)
    answers = list(zip(events, judge(a.binary, a.config, events)))
    T, details = measure(order, runs, labels, answers)
    if a.verbose:
        for d in details:
            if d["stops"] or d["stuck"]:
                print(f"{d['session']} resolved={d['resolved']} stuck={d['stuck']} "
                      f"calls={d['calls']} stops={d['stops']}")
    if a.json:
        print(json.dumps(T, sort_keys=True))
        return
    pct = 100 * T.get("stuck_waste_stopped", 0) / max(1, T.get("stuck_waste", 0))
    print(f"runs {T['runs']} ({T['resolved']} resolved)")
    print(f"resolved runs with a harmful stop: {T.get('harmed_runs', 0)}")
    print(f"harmful stops: {T.get('harmful', 0)} of {T.get('stops', 0)} stops "
          f"(in {T.get('runs_with_harmful', 0)} runs)")
    print(f"calls saved: {T.get('stops', 0)} of {T.get('calls', 0)} stopped "
          f"({100 * T.get('stops', 0) / max(1, T.get('calls', 0)):.1f}%); output bytes saved: "
          f"{T.get('bytes_saved', 0)}")
    print(f"stuck runs caught: {T.get('caught', 0)} of {T['stuck']}; median first stop: "
          f"call {T['median_first_stop']}")
    print(f"waste stopped in stuck runs: {T.get('stuck_waste_stopped', 0)} of "
          f"{T.get('stuck_waste', 0)} ({pct:.0f}%); waste stopped in all runs: "
          f"{T.get('waste_stopped', 0)} of {T.get('waste', 0)}")
    knowable = T.get("stuck_waste", 0) - T.get("stuck_waste_first", 0)
    print(f"knowable waste in stuck runs (after the first repeat of its call): "
          f"{T.get('stuck_knowable_stopped', 0)} of {knowable} stopped "
          f"({100 * T.get('stuck_knowable_stopped', 0) / max(1, knowable):.0f}%); "
          f"first repeats: {T.get('stuck_waste_first', 0)}")


def conformal_line(scores, alpha):
    """The k-th smallest score, k = ceil((n+1)(1-alpha)); None when k > n."""
    n = len(scores)
    k = math.ceil((n + 1) * (1 - alpha))
    return sorted(scores)[k - 1] if 0 < k <= n else None


def stops_of(binary, config, order, runs):
    """Per run: one flag per call, stopped (denied or asked) or not, under `config`."""
    events = events_of(order, runs)
    answers = judge(binary, config, events)
    flags = defaultdict(list)
    for e, d in zip(events, answers):
        if e["event"] == "call":
            flags[e["session"]].append(d.get("verdict") in ("deny", "ask"))
    return flags


def waste_flags(calls):
    """Per call: waste (same output and status as the last identical call) or not."""
    last, out = {}, []
    for r in calls:
        k, text = key_of(r), norm(r.get("output_head"))
        seen = (text, status_of(r))
        out.append(text is not None and last.get(k) == seen)
        if text is not None:
            last[k] = seen
    return out


def score_line(runs, order, labels, lines, stops=None):
    """A run-level line per setup over a run's calls (plus its calls stopped so far when
    `stops` is given): the run is stopped at the first call whose score exceeds it."""
    T = defaultdict(int)
    for s in order:
        calls, lab = runs[s], labels.get(s, {})
        line = lines.get(lab.get("source"))
        crossed = None
        if line is not None:
            stopped = 0
            for n in range(1, len(calls) + 1):
                if n + stopped > line:
                    crossed = n
                    break
                if stops is not None and stops[s][n - 1]:
                    stopped += 1
        T["runs"] += 1
        T["calls"] += len(calls)
        T["resolved"] += bool(lab.get("resolved"))
        st = stuck(calls, lab)
        T["stuck"] += st
        if crossed:
            T["stopped_runs"] += 1
            T["good_stopped"] += bool(lab.get("resolved"))
            T["stuck_stopped"] += st
            T["calls_saved"] += len(calls) - crossed + 1
            T["bytes_saved"] += sum(len((r.get("output_head") or "").encode("utf-8"))
                                    for r in calls[crossed - 1:])
    return T


def score_calls(runs, order, labels, stops):
    """toolbrake's call-level stops: good runs with any stop, harmed, calls refused."""
    T = defaultdict(int)
    for s in order:
        calls, lab = runs[s], labels.get(s, {})
        waste = waste_flags(calls)
        flags = stops[s]
        harmful = sum(1 for r, w, f in zip(calls, waste, flags)
                      if f and not w and norm(r.get("output_head")) is not None)
        T["runs"] += 1
        T["calls"] += len(calls)
        T["resolved"] += bool(lab.get("resolved"))
        st = stuck(calls, lab)
        T["stuck"] += st
        if any(flags):
            T["stopped_runs"] += 1
            T["good_stopped"] += bool(lab.get("resolved"))
            T["stuck_stopped"] += st
        T["good_harmed"] += bool(lab.get("resolved") and harmful)
        T["calls_saved"] += sum(flags)
        T["bytes_saved"] += sum(len((r.get("output_head") or "").encode("utf-8"))
                                for r, f in zip(calls, flags) if f)
    return T


def calibrated_config(binary, alpha, runs, labels, order, setup, workdir):
    """`toolbrake tune --calibrate` on one setup's runs: the TOML of its chosen setting
    (empty: the defaults), or None when it cannot promise anything."""
    calls_path = os.path.join(workdir, f"{setup}-calls.jsonl")
    labels_path = os.path.join(workdir, f"{setup}-labels.jsonl")
    with open(calls_path, "w") as f:
        for s in order:
            for r in runs[s]:
                f.write(json.dumps(r) + "\n")
    with open(labels_path, "w") as f:
        for s in order:
            f.write(json.dumps({"session": s, "resolved": labels.get(s, {}).get("resolved")}) + "\n")
    p = subprocess.run([binary, "tune", "--calibrate", "--json", "--alpha", str(alpha),
                        "--from", "trajectory", "--labels", labels_path, calls_path],
                       capture_output=True, text=True,
                       env={**os.environ, "TOOLBRAKE_STATE": os.path.join(workdir, "none.db")})
    if p.returncode != 0:
        return None, p.stderr.strip()
    v = json.loads(p.stdout)
    return v["toml"], f"k={v['k']} of {v['good_runs']}, rung {v['rung'] + 1}/{v['rungs']}"


def compare(a, order, runs, labels):
    alpha = Fraction(a.alpha)
    if not 0 < alpha < 1:
        sys.exit(f"--alpha {a.alpha}: must be strictly between 0 and 1")
    cal = [s for s in order if half_of(s) != a.half]
    test = [s for s in order if half_of(s) == a.half]
    setups = sorted({labels.get(s, {}).get("source") for s in order} - {None})
    base_stops = stops_of(a.binary, a.config, order, runs)
    good = lambda s: bool(labels.get(s, {}).get("resolved"))
    steps, steps_plus, notes = {}, {}, {}
    for u in setups:
        mine = [s for s in cal if labels.get(s, {}).get("source") == u and good(s)]
        steps[u] = conformal_line([len(runs[s]) for s in mine], alpha)
        steps_plus[u] = conformal_line([len(runs[s]) + sum(base_stops[s]) for s in mine], alpha)
        notes[u] = len(mine)
    rows = [("calibrated step count (theirs)", score_line(runs, test, labels, steps)),
            ("calibrated step count + calls toolbrake stopped so far",
             score_line(runs, test, labels, steps_plus, base_stops)),
            ("toolbrake's call-level configuration, no calibration",
             score_calls(runs, test, labels, base_stops))]
    # toolbrake tune --calibrate per setup, replayed on this half.
    per_setup, T = {}, defaultdict(int)
    with tempfile.TemporaryDirectory() as tmp:
        for u in setups:
            cal_u = [s for s in cal if labels.get(s, {}).get("source") == u]
            test_u = [s for s in test if labels.get(s, {}).get("source") == u]
            toml, how = calibrated_config(a.binary, a.alpha, runs, labels, cal_u, u, tmp)
            if toml is None:
                config = None  # no promise: the configuration as given
            else:
                config = os.path.join(tmp, f"{u}.toml")
                with open(config, "w") as f:
                    f.write(toml)
            stops = stops_of(a.binary, config or a.config, test_u, runs) if test_u else {}
            U = score_calls(runs, test_u, labels, stops)
            per_setup[u] = {"calibrated_on": notes[u], "how": how, "line_steps": steps[u],
                            "line_steps_plus": steps_plus[u],
                            "resolved": U["resolved"], "good_harmed": U["good_harmed"],
                            "promise_holds": U["good_harmed"] <= alpha * U["resolved"]}
            for k, v in U.items():
                T[k] += v
    rows.append(("toolbrake tune --calibrate per setup (its promise: harmed good runs)", T))
    if a.json:
        print(json.dumps({"alpha": a.alpha, "half": a.half, "rows": {n: dict(r) for n, r in rows},
                          "setups": per_setup}, sort_keys=True))
        return
    pct = lambda n, d: f"{100 * n / max(1, d):.1f}%"
    print(f"half {a.half} scored, calibrated per setup on the other half at alpha = {a.alpha}")
    print("| stop rule | good runs stopped | good runs harmed | calls saved | output bytes saved | stuck runs stopped |")
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        harmed = pct(r["good_harmed"], r["resolved"]) if "good_harmed" in r or "call-level" in name or "--calibrate" in name else "(every stop)"
        print(f"| {name} | {pct(r['good_stopped'], r['resolved'])} of {r['resolved']} | {harmed} | "
              f"{pct(r['calls_saved'], r['calls'])} of {r['calls']} | {r['bytes_saved']} | "
              f"{r['stuck_stopped']} of {r['stuck']} |")
    print()
    for u, v in per_setup.items():
        print(f"{u}: {v['calibrated_on']} resolved runs to calibrate on; step line {v['line_steps']}, "
              f"step+stops line {v['line_steps_plus']}; tune --calibrate: {v['how']}; "
              f"harmed {v['good_harmed']} of {v['resolved']} resolved here"
              f" ({'holds' if v['promise_holds'] else 'ABOVE alpha'})")


if __name__ == "__main__":
    main()
