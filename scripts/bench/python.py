#!/usr/bin/env python3
"""Overhead of toolbrake per guarded tool call from Python, beside its floors.

Usage: python scripts/bench/python.py [ROUNDS]   (in a virtualenv with `toolbrake` installed,
       built with `maturin develop --release` or `pip install ./bindings/python`)

Every round times, interleaved so that each row sees the same machine:
  bare call         a plain Python function call (the tool body: returns a string)
  before+after      Brake.before + the body + Brake.after, memory store, fresh arguments
                    each call (as an agent's calls mostly are), the body's time included
  guard             the same through the @brake.guard decorator
  <framework>       one step of a framework's own tool dispatch for the same body, when
                    that framework is installed (LangChain StructuredTool.invoke, smolagents
                    Tool.__call__, CrewAI BaseTool.run)
Each call is timed on its own with perf_counter_ns (the timer's own cost is in every row,
the bare call's included); rows take turns in rounds of 1,000 calls. Prints the median and
p99 over all calls, in microseconds, and the overhead (row minus bare call, medians).
"""

from __future__ import annotations

import statistics
import sys
import time

from toolbrake import Brake

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
BATCH = 1000


def body(query: str) -> str:
    return "sunny"


def rows():
    brake = Brake(store="memory")
    counter = [0]

    def guarded_pair():
        counter[0] += 1
        args = {"query": f"weather {counter[0]}"}
        d = brake.before("search", args, session="bench")
        out = body(**args)
        brake.after(d.call_id, out, session="bench")

    guarded_fn = brake.guard(tool="search", session="bench-guard")(body)

    def guard_call():
        counter[0] += 1
        guarded_fn(f"weather {counter[0]}")

    def bare():
        counter[0] += 1
        body(f"weather {counter[0]}")

    out = {"bare call": bare, "before+after": guarded_pair, "guard": guard_call}

    try:
        from langchain_core.tools import StructuredTool

        lc = StructuredTool.from_function(body, name="search", description="search")

        def langchain_step():
            counter[0] += 1
            lc.invoke({"query": f"weather {counter[0]}"})

        out["langchain StructuredTool.invoke"] = langchain_step
    except ImportError:
        pass
    try:
        from smolagents import tool as smol_tool

        @smol_tool
        def search(query: str) -> str:
            """Search.

            Args:
                query: what to search for.
            """
            return "sunny"

        def smolagents_step():
            counter[0] += 1
            search(query=f"weather {counter[0]}")

        out["smolagents Tool.__call__"] = smolagents_step
    except ImportError:
        pass
    try:
        from crewai.tools import tool as crew_tool

        @crew_tool("search")
        def crew_search(query: str) -> str:
            """Search."""
            return "sunny"

        def crewai_step():
            counter[0] += 1
            crew_search.run(query=f"weather {counter[0]}")

        out["crewai BaseTool.run"] = crewai_step
    except ImportError:
        pass
    return brake, out


def main() -> None:
    brake, fns = rows()
    times = {name: [] for name in fns}
    for r in range(ROUNDS):
        for name, fn in fns.items():
            ts = times[name]
            clock = time.perf_counter_ns
            for _ in range(BATCH):
                t0 = clock()
                fn()
                ts.append((clock() - t0) / 1000)
        if r % 20 == 19:
            # Fresh sessions now and then: a long-lived session's window is bounded anyway,
            # but its log of decisions would otherwise be the only state measured.
            brake.end("bench")
            brake.end("bench-guard")
    bare = statistics.median(times["bare call"])
    print(f"{'row':<34} {'median µs':>10} {'p99 µs':>8} {'overhead µs':>12}")
    for name, ts in times.items():
        ts = sorted(ts)
        med = statistics.median(ts)
        p99 = ts[min(len(ts) - 1, int(len(ts) * 0.99))]
        over = "" if name == "bare call" else f"{med - bare:12.2f}"
        print(f"{name:<34} {med:10.2f} {p99:8.2f} {over}")


if __name__ == "__main__":
    main()
