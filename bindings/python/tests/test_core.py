"""The plain API of the toolbrake package, as a Python agent builder uses it."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import toolbrake
from toolbrake import (
    Brake,
    Decision,
    ToolBrakeConfigError,
    ToolBrakeDenied,
    ToolBrakeError,
    Outcome,
)


def run(brake: Brake, tool: str, args, output, session: str = "s") -> Decision:
    """One call through the brake: judged, and recorded with `output` when it ran."""
    d = brake.before(tool, args, session=session)
    if d.runs:
        brake.after(d.call_id, output, session=session)
    return d


# --- verdicts -------------------------------------------------------------------------


def test_the_third_identical_call_with_the_same_result_is_denied_and_says_why():
    brake = Brake()
    verdicts = [run(brake, "search", {"q": "weather"}, "sunny").verdict for _ in range(2)]
    d = brake.before("search", {"q": "weather"}, session="s")
    assert verdicts == ["allow", "allow"]
    assert (d.verdict, d.runs, d.engine, d.code) == ("deny", False, "streak", "LOOP_BRAKE")
    assert 'tool "search" called 3 times in a row' in d.message
    assert d.session == "s" and d.call_id


def test_a_call_whose_output_moves_on_is_not_stopped():
    brake = Brake()
    for pct in range(10, 100, 10):
        d = run(brake, "job_status", {"job": 7}, f"progress {pct}%")
        assert d.runs, (pct, d.message)


def test_returned_values_of_any_json_shape_are_told_apart():
    brake = Brake()
    for i in range(6):
        assert run(brake, "poll", {}, {"items": [i], "done": False}).runs


def test_sessions_and_sub_agents_count_apart():
    brake = Brake()
    for session in ("a", "b"):
        for _ in range(2):
            assert run(brake, "search", {"q": "x"}, "same", session=session).runs
    d = brake.before("search", {"q": "x"}, session="a", agent="helper")
    assert d.runs and d.session == "a#agent:helper"
    brake.after(d.call_id, "same", session="a", agent="helper")
    assert not brake.before("search", {"q": "x"}, session="a").runs


def test_advise_then_ask_then_an_answer_decides():
    cfg = {
        "streak": {"enabled": False},
        "breaker": {"warn_at": 2, "summarize_at": 3, "limits": {"exact": 4}, "on_limit": "ask"},
    }
    brake = Brake(cfg)
    # The same page, the same answer: with progress awareness, only calls that brought
    # nothing new count towards the breaker's stages.
    seen = [run(brake, "fetch_page", {"url": "https://example.com/a"}, "same") for i in range(3)]
    assert [d.verdict for d in seen] == ["allow", "advise", "advise"]
    assert seen[1].advisories and all(isinstance(a, str) and a for a in seen[1].advisories)
    ask = brake.before("fetch_page", {"url": "https://example.com/a"}, session="s")
    assert (ask.verdict, ask.runs, ask.engine) == ("ask", False, "breaker")
    assert ask.message and ask.hits and ask.hits[0]["count"] == 4
    approved = brake.answer(ask.call_id, True, session="s")
    assert approved.runs
    brake.after(approved.call_id, "same", session="s")
    # An operator's approval holds for the rest of the turn; a user message starts afresh.
    brake.user_message("s")
    assert run(brake, "fetch_page", {"url": "https://example.com/a"}, "same").verdict == "allow"


def test_resolve_uses_the_approver_and_refuses_without_one():
    cfg = {"streak": {"enabled": False}, "breaker": {"limits": {"exact": 2}, "warn_at": 2, "summarize_at": 2}}
    asked = []

    def approver(d: Decision) -> bool:
        asked.append(d.message)
        return True

    for approver_fn, runs in ((approver, True), (None, False)):
        brake = Brake(cfg, approver=approver_fn)
        run(brake, "search", {"q": "a"}, "1")
        d = brake.before("search", {"q": "a"}, session="s")
        assert d.verdict == "ask"
        final = brake.resolve(d)
        assert final.runs is runs
        if not runs:
            assert final.verdict == "deny" and final.message
    assert asked and asked[0]


def test_an_approver_that_raises_refuses():
    cfg = {"streak": {"enabled": False}, "breaker": {"limits": {"exact": 2}, "warn_at": 2, "summarize_at": 2}}

    def broken(_d):
        raise RuntimeError("approver down")

    brake = Brake(cfg, approver=broken)
    run(brake, "search", {"q": "a"}, "1")
    assert not brake.resolve(brake.before("search", {"q": "a"}, session="s")).runs


def test_failures_feed_the_failure_track():
    brake = Brake({"streak": {"enabled": False}})
    advice = []
    for i in range(4):
        d = brake.before("run_tests", {"path": "tests/"}, session="s")
        if not d.runs:
            break
        r = brake.after(d.call_id, RuntimeError("AssertionError: 1 != 2"), session="s")
        assert r.failure is not None
        advice += r.advisories
    signals = brake.explain("run_tests", {"path": "tests/"}, session="s")
    fps = signals["breaker"]["fingerprints"]
    assert any(f["failures"] >= 3 for f in fps), fps
    assert advice, "the failure track advised after repeated identical failures"


def test_an_explicit_outcome_carries_exit_codes_and_statuses():
    brake = Brake({"streak": {"enabled": False}})
    d = brake.before("Bash", {"command": "make"}, session="s")
    r = brake.after(d.call_id, Outcome("make: *** [all] Error 2", exit_code=2), session="s")
    assert r.failure is not None
    d = brake.before("fetch", {"url": "https://example.com/"}, session="s")
    assert brake.after(d.call_id, Outcome("gone", status_code=404), session="s").failure is not None
    d = brake.before("fetch", {"url": "https://example.com/ok"}, session="s")
    assert brake.after(d.call_id, Outcome("fine", status_code=200), session="s").failure is None
    assert repr(Outcome("x", exit_code=2)) == "Outcome(text='x', is_error=None, exit_code=2, status_code=None)"


def test_end_forgets_a_session():
    brake = Brake()
    for _ in range(2):
        run(brake, "search", {"q": "x"}, "same")
    brake.end("s")
    assert run(brake, "search", {"q": "x"}, "same").runs


# --- values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        ({"tags": {"a", "b"}}, 'a set (pass a sorted list) at ["tags"]'),
        ({"blob": b"\x00"}, 'bytes (decode them to text first) at ["blob"]'),
        ({"x": [1, math.nan]}, 'NaN at ["x"][1]'),
        ({"x": math.inf}, 'inf at ["x"]'),
        ({1: "one"}, "a key 1 (int)"),
        ({"when": object()}, 'an object of type object at ["when"]'),
        ({"n": 2**70}, 'an integer at ["n"] beyond 64 bits'),
        ({"s": "\ud800"}, "lone surrogate"),
    ],
)
def test_values_json_cannot_hold_are_a_type_error_naming_the_path_and_nothing_is_counted(args, needle):
    brake = Brake()
    with pytest.raises(TypeError) as e:
        brake.before("search", args, session="s")
    assert needle in str(e.value) and "the arguments of search" in str(e.value)
    # Nothing was counted: two good calls and the third is the first refusal.
    assert [run(brake, "search", {"q": 1}, "r").runs for _ in range(3)] == [True, True, False]


def test_a_cycle_is_named():
    cyclic: dict = {"a": []}
    cyclic["a"].append(cyclic)
    with pytest.raises(TypeError, match=r'refer back to themselves at \["a"\]\[0\] \(a cycle\)'):
        Brake().before("search", cyclic)


def test_nesting_deeper_than_toolbrake_reads_is_refused():
    deep: list = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(ValueError, match="nest deeper than toolbrake reads"):
        Brake().before("search", {"d": deep})


def test_models_dataclasses_and_tuples_have_json_forms():
    @dataclasses.dataclass
    class Query:
        q: str
        limit: int = 10

    brake = Brake()
    a = brake.explain("search", {"query": Query("w"), "pair": (1, 2)})
    b = brake.explain("search", {"pair": [1, 2], "query": {"limit": 10, "q": "w"}})
    assert a["hash"] == b["hash"]
    assert a["hash"] == toolbrake.call_hash("search", {"query": {"q": "w", "limit": 10}, "pair": [1, 2]})


def test_secrets_never_appear_in_what_toolbrake_shows():
    brake = Brake()
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    args = {"url": "https://api.github.com/", "headers": {"Authorization": f"Bearer {token}"}}
    for _ in range(2):
        run(brake, "web_fetch", args, "same")
    d = brake.before("web_fetch", args, session="s")
    assert not d.runs
    shown = [d.message, str(d.hits), str(brake.explain("web_fetch", args, session="s"))]
    assert all(token not in s for s in shown), shown
    assert token not in toolbrake.redact(f"token={token}")


def test_an_unknown_call_id_is_a_clear_error():
    with pytest.raises(ValueError, match="toolbrake: "):
        Brake().after("never-judged", "x", session="s")


# --- configuration --------------------------------------------------------------------


def test_a_config_dict_is_validated_with_the_files_errors():
    with pytest.raises(ToolBrakeConfigError) as e:
        Brake({"breaker": {"window": 0}})
    assert (e.value.key, e.value.value) == ("breaker.window", "0")
    assert e.value.rule == "must be an integer from 4 to 4096"

    assert isinstance(e.value, ValueError)
    with pytest.raises(ToolBrakeConfigError) as e:
        Brake({"breaker": {"warn_att": 7}})
    assert "warn_att" in str(e.value) and "warn_at" in str(e.value)
    with pytest.raises(TypeError, match="config must be None, a path or a dict"):
        Brake(42)  # type: ignore[arg-type]


def test_a_config_file_is_read_like_the_hooks_read_it(tmp_path):
    path = tmp_path / "toolbrake.toml"
    path.write_text("[streak]\nmax_repeats = 4\n")
    brake = Brake(path)
    assert brake.config()["streak"]["max_repeats"] == 4
    assert [run(brake, "search", {"q": 1}, "r").runs for _ in range(4)] == [True, True, True, False]
    path.write_text("[streak]\nmax_repeats = 4\n\n[breaker]\nwindow = 2\n")
    with pytest.raises(ToolBrakeConfigError) as e:
        Brake(str(path))
    assert e.value.key == "breaker.window" and "line 5" in str(e.value)
    with pytest.raises(ToolBrakeConfigError, match="cannot read configuration file"):
        Brake(tmp_path / "missing.toml")


def test_a_broken_config_that_asks_to_fail_closed_never_silently_opens(tmp_path):
    path = tmp_path / "toolbrake.toml"
    path.write_text('[store]\nfail_closed = true\n\n[breaker]\nwarn_at = "seven"\n')
    with pytest.raises(ToolBrakeConfigError, match="breaker.warn_at"):
        Brake(path)


def test_store_specs_are_checked():
    with pytest.raises(ToolBrakeConfigError, match='must be "memory", "sqlite", "sqlite:PATH"'):
        Brake(store="postgres://u:hunter2@db/x")
    with pytest.raises(ToolBrakeConfigError) as e:
        Brake(store="mysql://u:hunter2@db/x")
    assert "hunter2" not in str(e.value)
    assert Brake(store="memory").store == "memory"


# --- stores ---------------------------------------------------------------------------


def test_two_processes_share_a_sqlite_session(tmp_path):
    db = tmp_path / "state.db"
    child = textwrap.dedent(
        f"""
        from toolbrake import Brake
        b = Brake(store={("sqlite:" + str(db))!r})
        for _ in range(2):
            d = b.before("search", {{"q": "shared"}}, session="team")
            assert d.runs, d.message
            b.after(d.call_id, "same", session="team")
        """
    )
    subprocess.run([sys.executable, "-c", child], check=True, timeout=60)
    brake = Brake(store=f"sqlite:{db}")
    assert str(db) in brake.store
    d = brake.before("search", {"q": "shared"}, session="team")
    assert (d.verdict, d.code) == ("deny", "LOOP_BRAKE")
    assert oct(os.stat(db).st_mode & 0o777) == "0o600"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("fail_closed", [False, True])
def test_an_unreachable_redis_follows_the_failure_policy(fail_closed):
    brake = Brake(
        {"store": {"connect_timeout": "200ms", "command_timeout": "200ms"}},
        store=f"redis://127.0.0.1:{free_port()}",
        fail_closed=fail_closed,
    )
    started = time.monotonic()
    d = brake.before("search", {"q": "x"}, session="s")
    assert time.monotonic() - started < 5
    assert d.degraded and "could not judge" in d.degraded
    if fail_closed:
        assert (d.verdict, d.code, d.engine) == ("deny", "STORE_UNAVAILABLE", "toolbrake")
        assert "fail_closed = true" in d.message
    else:
        assert d.verdict == "allow" and d.message is None
        assert brake.after(d.call_id, "x", session="s").degraded


@pytest.fixture
def redis_url(tmp_path):
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (scripts/test installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_two_brakes_share_a_redis_session(redis_url):
    a, b = Brake(store=redis_url), Brake(store=redis_url)
    run(a, "search", {"q": "r"}, "same", session="team")
    run(b, "search", {"q": "r"}, "same", session="team")
    d = a.before("search", {"q": "r"}, session="team")
    assert (d.verdict, d.code) == ("deny", "LOOP_BRAKE")


# --- guard, threads, asyncio -----------------------------------------------------------


def test_guard_runs_the_body_only_when_allowed():
    brake = Brake()
    runs = []

    @brake.guard
    def search(query: str, limit: int = 5) -> str:
        runs.append(query)
        return "same"

    search("w")
    search(query="w", limit=5)  # the same call, bound by signature
    with pytest.raises(ToolBrakeDenied) as e:
        search("w")
    assert runs == ["w", "w"]
    assert e.value.message == e.value.decision.message and "search" in str(e.value)


def test_guard_records_exceptions_and_reraises_them():
    brake = Brake({"streak": {"enabled": False}})

    @brake.guard(tool="compile", session=lambda: "build-1")
    def compile_it(path: str) -> None:
        raise RuntimeError("error: expected ';'")

    for _ in range(3):
        with pytest.raises(RuntimeError):
            compile_it("main.c")
    fps = brake.explain("compile", {"path": "main.c"}, session="build-1")["breaker"]["fingerprints"]
    assert max(f["failures"] for f in fps) == 3


def test_guard_on_coroutines():
    brake = Brake()
    runs = 0

    @brake.guard(session="async")
    async def status(job: int) -> str:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0)
        return f"step {runs}"

    async def main():
        return [await status(1) for _ in range(5)]

    assert asyncio.run(main()) == [f"step {i}" for i in range(1, 6)]
    assert runs == 5

    @brake.guard(session="async")
    async def same(job: int) -> str:
        return "queued"

    async def stuck():
        for _ in range(3):
            await same(2)

    with pytest.raises(ToolBrakeDenied, match="called 3 times in a row"):
        asyncio.run(stuck())


def test_one_brake_serves_many_threads():
    brake = Brake(store="memory")
    errors = []

    def worker(n: int) -> None:
        try:
            for i in range(200):
                d = run(brake, "search", {"q": i}, f"r{i}", session=f"t{n}")
                assert d.runs
            for _ in range(2):
                run(brake, "search", {"q": "same"}, "same", session=f"t{n}")
            assert not brake.before("search", {"q": "same"}, session=f"t{n}").runs
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_errors_are_package_errors():
    assert issubclass(ToolBrakeConfigError, ToolBrakeError)
    assert issubclass(ToolBrakeDenied, ToolBrakeError)
    assert toolbrake.__version__
