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
    # The failure track alone: the streak brake and the same-output track, which stop an
    # identical call that came back the same sooner, are off.
    brake = Brake({"streak": {"enabled": False}, "breaker": {"same_output_limit": "off"}})
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


@pytest.mark.parametrize("depth", [129, 200, 500, 1000, 5000])
def test_nesting_deeper_than_toolbrake_reads_is_refused(depth):
    deep: list = []
    for _ in range(depth):
        deep = [deep]
    brake = Brake()
    with pytest.raises(ValueError, match="nest deeper than toolbrake reads"):
        brake.before("search", {"d": deep})
    # Nothing was counted.
    assert [run(brake, "search", {"q": 1}, "r").runs for _ in range(3)] == [True, True, False]


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


def test_an_explicit_sqlite_path_wins_over_the_environment(tmp_path, monkeypatch):
    env_db, config_db, mine = tmp_path / "env.db", tmp_path / "config.db", tmp_path / "mine.db"
    monkeypatch.setenv("TOOLBRAKE_STATE", str(env_db))
    brake = Brake(store=f"sqlite:{mine}")
    assert str(mine) in brake.store and str(env_db) not in brake.store
    for _ in range(2):
        run(brake, "search", {"q": "mine"}, "same", session="team")
    assert mine.exists() and not env_db.exists()
    # Another brake on the same explicit file shares the session (the state is there).
    d = Brake(store=f"sqlite:{mine}").before("search", {"q": "mine"}, session="team")
    assert d.code == "LOOP_BRAKE"
    # The environment still chooses the file when the caller did not: over a
    # configuration's [store] path, and for the bare "sqlite" (the default state file).
    configured = Brake({"store": {"kind": "sqlite", "path": str(config_db)}})
    assert str(env_db) in configured.store
    assert str(env_db) in Brake(store="sqlite").store


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
    brake = Brake({"streak": {"enabled": False}, "breaker": {"same_output_limit": "off"}})

    @brake.guard(tool="compile", session=lambda: "build-1")
    def compile_it(path: str) -> None:
        raise RuntimeError("error: expected ';'")

    for _ in range(3):
        with pytest.raises(RuntimeError):
            compile_it("main.c")
    fps = brake.explain("compile", {"path": "main.c"}, session="build-1")["breaker"]["fingerprints"]
    assert max(f["failures"] for f in fps) == 3


def test_a_plain_function_failing_the_same_way_with_new_arguments_is_stopped():
    # get_order(1..5) all fail alike: the tool itself is the failure target, so the 6th
    # call is refused although its arguments are new (issue: the failure track only knew
    # URL and shell targets).
    brake = Brake({"breaker": {"on_limit": "deny"}})
    runs = []

    @brake.guard
    def get_order(order_id: int) -> dict:
        runs.append(order_id)
        raise LookupError(f"order {order_id} not found")

    for i in range(1, 6):
        with pytest.raises(LookupError):
            get_order(i)
    with pytest.raises(ToolBrakeDenied, match="tool:get_order"):
        get_order(6)
    assert runs == [1, 2, 3, 4, 5]

    # Failing differently each time is exploring, not looping: never stopped.
    @brake.guard
    def get_user(name: str) -> dict:
        raise LookupError(f"no user named {name}")

    for name in ["ann", "bob", "cat", "dan", "eve", "fay", "gus"]:
        with pytest.raises(LookupError):
            get_user(name)


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


# --- issue 41 ---------------------------------------------------------------------------


def test_more_calls_in_flight_than_a_session_remembers_never_turn_a_success_into_an_error():
    # Issue 41, defect 2: 100 distinct guarded calls gathered at once; the oldest are
    # forgotten (64 in flight at most) and their outcomes go unrecorded, not raised.
    brake = Brake()

    @brake.guard(session="wide")
    async def fetch(n: int) -> str:
        await asyncio.sleep(0.01)
        return f"row {n}"

    async def main():
        return await asyncio.gather(*(fetch(n) for n in range(100)), return_exceptions=True)

    results = asyncio.run(main())
    assert results == [f"row {n}" for n in range(100)]
    # The plain API: the evicted call's after() says it recorded nothing.
    ds = [brake.before("get", {"n": n}, session="plain") for n in range(70)]
    r = brake.after(ds[0].call_id, "x", session="plain")
    assert r.degraded and "64" in r.degraded
    assert brake.after(ds[-1].call_id, "x", session="plain").degraded is None


import datetime as _dt  # noqa: E402
import decimal as _decimal  # noqa: E402
import enum as _enum  # noqa: E402
import pathlib as _pathlib  # noqa: E402
import uuid as _uuid  # noqa: E402


class _Color(_enum.Enum):
    RED = "red"


@dataclasses.dataclass
class _Booking:
    day: _dt.date
    price: _decimal.Decimal


def test_guard_encodes_the_common_types_as_pydantic_json_mode_does():
    # Issue 41, defect 4: these raised TypeError and the function never ran.
    brake = Brake()
    runs = []

    @brake.guard(session="types")
    def book(day, at, price, ref, path, color, booking, span) -> str:
        runs.append(day)
        return "booked"

    args = (
        _dt.date(2026, 12, 3),
        _dt.datetime(2026, 12, 3, 7, 30, tzinfo=_dt.timezone.utc),
        _decimal.Decimal("12.50"),
        _uuid.UUID("12345678-1234-5678-1234-567812345678"),
        _pathlib.Path("/tmp/x"),
        _Color.RED,
        _Booking(_dt.date(2026, 1, 2), _decimal.Decimal("3")),
        _dt.timedelta(days=1, hours=2, seconds=4.5),
    )
    book(*args)
    book(*args)
    with pytest.raises(ToolBrakeDenied):
        book(*args)
    assert len(runs) == 2
    assert brake.explain("book", {}, session=None)  # still readable
    assert toolbrake.json_default(args[1]) == "2026-12-03T07:30:00Z"
    assert toolbrake.json_default(args[7]) == "P1DT2H4.5S"
    assert toolbrake.json_default(_dt.timedelta(seconds=90)) == "PT1M30S"
    # The same hash as the JSON a model would send.
    d = brake.before("b", {"day": args[0], "color": args[5]}, session="h", default=toolbrake.json_default)
    assert d.runs


def test_guard_takes_a_default_hook_and_names_foreign_types_by_module():
    class Money:
        def __init__(self, cents):
            self.cents = cents

    brake = Brake()

    @brake.guard(session="hook", default=lambda o: {"cents": o.cents} if isinstance(o, Money) else str(o))
    def pay(amount) -> str:
        return "paid"

    assert pay(Money(5)) == "paid"

    # numpy's bool_ reads as "bool" by its bare name: a stand-in with numpy's module.
    FakeBool = type("bool", (), {"__module__": "numpy"})
    with pytest.raises(TypeError, match=r"an object of type numpy\.bool at \[\"flag\"\]"):
        brake.before("f", {"flag": FakeBool()}, session="n")

    @brake.guard(session="strict")
    def plain(x) -> str:
        return "ok"

    with pytest.raises(TypeError, match="Money"):
        plain(Money(1))


def test_a_fork_while_another_thread_is_inside_the_brake_never_hangs_the_child():
    # Issue 41, defect 3: the child inherited the store's lock held by a thread it lacks.
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    code = textwrap.dedent(
        """
        import os, sys, threading, time
        from toolbrake import Brake
        brake = Brake()
        stop = False
        def hammer(n):
            i = 0
            while not stop:
                d = brake.before("search", {"q": i % 50}, session=f"s{n}")
                if d.runs:
                    brake.after(d.call_id, str(i), session=f"s{n}")
                i += 1
        threads = [threading.Thread(target=hammer, args=(n,), daemon=True) for n in range(3)]
        for t in threads:
            t.start()
        hung = 0
        for _ in range(30):
            pid = os.fork()
            if pid == 0:
                d = brake.before("child", {"x": 1}, session="child")
                brake.after(d.call_id, "ok", session="child")
                os._exit(0 if d.runs else 3)
            deadline = time.time() + 5
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    assert os.waitstatus_to_exitcode(status) == 0, status
                    break
                if time.time() > deadline:
                    hung += 1
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.005)
        stop = True
        print("hung", hung)
        """
    )
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hung 0", done.stdout


def test_the_public_types_are_precise_for_strict_checkers():
    # Issue 41: on_advice typed Callable[[list], None] left every @guard "partially unknown"
    # under pyright strict; Decision.verdict is a Literal in the stubs.
    import typing

    hints = typing.get_type_hints(Brake.guard)
    assert hints["on_advice"] == typing.Optional[typing.Callable[[typing.List[str]], None]]
    stub = open(os.path.join(os.path.dirname(toolbrake.__file__), "_native.pyi")).read()
    assert 'Verdict = Literal["allow", "advise", "ask", "deny"]' in stub and "def verdict(self) -> Verdict" in stub


def test_the_memory_store_is_bounded_by_the_store_table():
    # Issue 41, defect 6: sessions never ended piled up (600 MB over 200k runs).
    brake = Brake({"store": {"max_sessions": 10}})
    for n in range(50):
        for _ in range(2):
            run(brake, "search", {"q": "x"}, "same", session=f"run-{n}")

    def count(s):
        return brake.explain("search", {"q": "x"}, session=s)["breaker"]["fingerprints"][0]["count"]

    assert count("run-49") == 2
    assert count("run-0") == 0  # the idle-longest were forgotten
    with pytest.raises(ToolBrakeConfigError, match="store.max_bytes"):
        Brake({"store": {"max_bytes": 10}})
