"""End-to-end tests of toolbrake.integrations.crewai against the real CrewAI.

The model is a scripted ``BaseLLM`` subclass (no network): it answers with native tool
calls (or ReAct text) from its script and keeps every message list it received, so the
tests assert on what the model read. Telemetry and tracing are off, and an autouse
fixture makes any network connection fail.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import textwrap
import time
from typing import Any, List

import pytest

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_DISABLE_TRACKING"] = "true"
os.environ["OTEL_SDK_DISABLED"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ.setdefault("CREWAI_STORAGE_DIR", os.path.join(tempfile.gettempdir(), "toolbrake-crewai-tests"))
os.environ.setdefault("OPENAI_API_KEY", "dummy-key-no-network")

pytest.importorskip("crewai")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import tool  # noqa: E402
from crewai.tools.tool_failure import ToolFailure, ToolFailureReason  # noqa: E402
from pydantic import Field  # noqa: E402

from toolbrake import Brake  # noqa: E402
from toolbrake.integrations.crewai import ToolBrakeHooks  # noqa: E402

from conftest import HERE, PKG  # noqa: E402


# Any attempt to reach the network fails a test (conftest.py).
pytestmark = pytest.mark.usefixtures("no_network")


# -- the scripted model ----------------------------------------------------------------------------


class ScriptedLLM(BaseLLM):
    """Plays a script: a list of ``(tool, args)`` is one turn of native tool calls, a
    string is text (the final answer, or ReAct text when ``native`` is off).
    When the script is exhausted it answers "done"."""

    script: List[Any] = Field(default_factory=list)
    seen: List[Any] = Field(default_factory=list)
    native: bool = True

    def call(self, messages, tools=None, callbacks=None, available_functions=None, from_task=None,
             from_agent=None, response_model=None, **kw):
        self.seen.append(json.loads(json.dumps(messages, default=str)))
        step = self.script.pop(0) if self.script else "done"
        if isinstance(step, str):
            return step
        n = len(self.seen)
        return [{"id": f"call_{n}_{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}} for i, (name, args) in enumerate(step)]

    def supports_function_calling(self) -> bool:
        return self.native

    def tool_messages(self, index: int = -1) -> List[str]:
        """The tool results in the messages the model got at ``index``."""
        return [m["content"] for m in self.seen[index] if isinstance(m, dict) and m.get("role") == "tool"]


def turns(name: str, args: dict, times: int) -> list:
    return [[(name, args)]] * times + ["done"]


def crew_of(llm: ScriptedLLM, tools: list, role: str = "worker", **crew_kw: Any) -> Crew:
    agent = Agent(role=role, goal="get it done", backstory="b", llm=llm, tools=tools, verbose=False,
                  allow_delegation=False, max_iter=12)
    task = Task(description="do the thing", expected_output="a result", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False, cache=False, **crew_kw)


class Counter:
    """Tools that count their runs."""

    def __init__(self) -> None:
        self.runs = 0
        counter = self

        @tool("ping")
        def ping(x: int) -> str:
            """Returns the same text every time."""
            counter.runs += 1
            return "pong"

        @tool("poll")
        def poll(job: str) -> str:
            """Returns a different text every time."""
            counter.runs += 1
            return f"{job}: {counter.runs * 10}% done"

        @tool("boom")
        def boom(path: str) -> str:
            """Always fails."""
            counter.runs += 1
            raise FileNotFoundError(f"no such file: {path}")

        @tool("lookup")
        def lookup(key: str) -> Any:
            """Declares its failure the CrewAI way."""
            counter.runs += 1
            return ToolFailure(message=f"{key} not found", reason=ToolFailureReason.TOOL_REPORTED)

        @tool("slow_ping")
        def slow_ping(x: int) -> str:
            """Returns the same text, slowly."""
            time.sleep(0.05)
            counter.runs += 1
            return "pong"

        self.ping, self.poll, self.boom, self.lookup, self.slow_ping = ping, poll, boom, lookup, slow_ping


# -- 1. the third identical call is refused -----------------------------------------------------------


def test_third_identical_call_is_refused_and_the_model_reads_why():
    c = Counter()
    llm = ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 3))
    with ToolBrakeHooks(Brake()):
        crew_of(llm, [c.ping]).kickoff()
    assert c.runs == 2
    results = llm.tool_messages()
    assert results[:2] == ["pong", "pong"]
    assert results[2].startswith('loop brake: tool "ping" called 3 times in a row')
    assert "blocked by hook" not in results[2]


def test_the_hooks_are_gone_after_the_with_block():
    c = Counter()
    with ToolBrakeHooks(Brake()):
        pass
    llm = ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 3))
    crew_of(llm, [c.ping]).kickoff()
    assert c.runs == 3


# -- 2. progress is not a loop --------------------------------------------------------------------------


def test_a_call_whose_output_changes_is_not_stopped():
    c = Counter()
    llm = ScriptedLLM(model="scripted", script=turns("poll", {"job": "build"}, 5))
    with ToolBrakeHooks(Brake()):
        crew_of(llm, [c.poll]).kickoff()
    assert c.runs == 5
    assert llm.tool_messages() == [f"build: {n}% done" for n in (10, 20, 30, 40, 50)]


# -- 3. failures feed the failure track -------------------------------------------------------------------


def test_a_raising_tool_is_recorded_as_a_failure():
    c = Counter()
    brake = Brake()
    llm = ScriptedLLM(model="scripted", script=turns("boom", {"path": "/x"}, 2))
    with ToolBrakeHooks(brake, session="s"):
        crew_of(llm, [c.boom]).kickoff()
    assert c.runs == 2
    assert llm.tool_messages()[0] == "Error executing tool: no such file: /x"
    fp = brake.explain("boom", {"path": "/x"}, session="s#agent:worker")["breaker"]["fingerprints"][0]
    assert fp["failures"] == 2 and fp["failures_since_success"] == 2


def test_repeated_failures_bring_the_breakers_advice_to_the_model():
    c = Counter()
    llm = ScriptedLLM(model="scripted", script=turns("boom", {"path": "/x"}, 3))
    with ToolBrakeHooks(Brake({"streak": {"enabled": False}})):
        crew_of(llm, [c.boom]).kickoff()
    assert c.runs == 3
    results = llm.tool_messages()
    assert results[1] == "Error executing tool: no such file: /x"
    assert results[2].startswith("Error executing tool: no such file: /x\n\nCONVERGENCE_CHECK:")
    assert "has failed 3 times in a row" in results[2]


def test_a_returned_tool_failure_counts_as_a_failure():
    c = Counter()
    brake = Brake()
    llm = ScriptedLLM(model="scripted", script=turns("lookup", {"key": "k"}, 2))
    with ToolBrakeHooks(brake, session="s"):
        crew_of(llm, [c.lookup]).kickoff()
    fp = brake.explain("lookup", {"key": "k"}, session="s#agent:worker")["breaker"]["fingerprints"][0]
    assert fp["count"] == 2 and fp["failures"] == 2


# -- 4. sessions: crews, and agents within a crew ------------------------------------------------------------


def test_two_crews_do_not_interfere():
    c = Counter()
    brake = Brake()
    with ToolBrakeHooks(brake):
        for _ in range(2):
            crew_of(ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 2)), [c.ping]).kickoff()
    assert c.runs == 4


def test_one_crew_object_is_one_session_across_kickoffs():
    c = Counter()
    llm = ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 2) + turns("ping", {"x": 1}, 1))
    crew = crew_of(llm, [c.ping])
    with ToolBrakeHooks(Brake()):
        crew.kickoff()
        crew.kickoff()
    assert c.runs == 2
    assert llm.tool_messages()[-1].startswith("loop brake:")


def test_agents_of_one_crew_count_separately():
    c = Counter()
    brake = Brake()
    agents = [Agent(role=role, goal="g", backstory="b", tools=[c.ping], verbose=False, allow_delegation=False,
                    llm=ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 2)))
              for role in ("first", "second")]
    tasks = [Task(description=f"task {i}", expected_output="r", agent=a) for i, a in enumerate(agents)]
    crew = Crew(agents=agents, tasks=tasks, verbose=False, cache=False)
    with ToolBrakeHooks(brake):
        crew.kickoff()
    assert c.runs == 4
    key = f"crewai-crew-{crew.id}"
    assert brake.explain("ping", {"x": 1}, session=f"{key}#agent:first")["streak"]["in_a_row"] == 2
    assert brake.explain("ping", {"x": 1}, session=f"{key}#agent:second")["streak"]["in_a_row"] == 2


def test_parallel_tool_calls_in_one_turn_are_each_judged_and_recorded():
    c = Counter()
    brake = Brake()
    llm = ScriptedLLM(model="scripted", script=[[("ping", {"x": 1}), ("ping", {"x": 1})]] * 2 + ["done"])
    with ToolBrakeHooks(brake, session="s"):
        crew_of(llm, [c.ping]).kickoff()
    # CrewAI runs the two calls of a turn on threads: each after hook finds its own call.
    assert c.runs == 2
    results = llm.tool_messages()
    assert results[:2] == ["pong"] * 2
    assert all(r.startswith("loop brake:") for r in results[2:4]), results


def test_parallel_calls_with_different_outcomes_are_recorded_on_their_own_calls():
    c = Counter()
    brake = Brake()
    # The slow call's before hook runs first and its after hook last.
    llm = ScriptedLLM(model="scripted", script=[[("slow_ping", {"x": 1}), ("boom", {"path": "/x"})]] * 2 + ["done"])
    with ToolBrakeHooks(brake, session="s"):
        crew_of(llm, [c.slow_ping, c.boom]).kickoff()
    assert c.runs == 4
    boom = brake.explain("boom", {"path": "/x"}, session="s#agent:worker")["breaker"]["fingerprints"][0]
    ping = brake.explain("slow_ping", {"x": 1}, session="s#agent:worker")["breaker"]["fingerprints"][0]
    assert (boom["count"], boom["failures"]) == (2, 2)
    assert (ping["count"], ping["failures"]) == (2, 0)


def test_react_text_tool_calls_are_braked_too():
    c = Counter()
    react = 'Thought: I should ping.\nAction: ping\nAction Input: {"x": 1}'
    llm = ScriptedLLM(model="scripted", native=False,
                      script=[react] * 2 + ["Thought: I know it.\nFinal Answer: done"])
    with ToolBrakeHooks(Brake({"streak": {"max_repeats": 2}})):
        crew_of(llm, [c.ping]).kickoff()
    # CrewAI's own repeat check would say "I tried reusing the same input"; toolbrake's
    # before hook refuses first, and its message is what the model reads.
    assert c.runs == 1
    last = json.dumps(llm.seen[-1])
    assert 'loop brake: tool \\"ping\\" called 2 times in a row' in last
    assert "blocked by hook" not in last


# -- 5. two processes share one session through SQLite ---------------------------------------------------------

SUBPROCESS = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{here!r}, {pkg!r}]
    from test_crewai import Counter, ScriptedLLM, crew_of, turns
    from toolbrake import Brake
    from toolbrake.integrations.crewai import ToolBrakeHooks

    c = Counter()
    with ToolBrakeHooks(Brake(store={store!r}), session="X"):
        crew_of(ScriptedLLM(model="scripted", script=turns("ping", {{"x": 1}}, 2)), [c.ping]).kickoff()
    assert c.runs == 2, c.runs
    print("ran", c.runs)
    """
)


def test_two_processes_share_one_session_through_sqlite(tmp_path, run_python):
    store = "sqlite:" + str(tmp_path / "s.db")
    assert "ran 2" in run_python(SUBPROCESS.format(here=HERE, pkg=PKG, store=store))

    c = Counter()
    llm = ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 1))
    with ToolBrakeHooks(Brake(store=store), session="X"):
        crew_of(llm, [c.ping]).kickoff()
    assert c.runs == 0
    assert llm.tool_messages()[-1].startswith("loop brake:")


# -- 6. asks: CrewAI's human input in a hook, or the Brake's approver -----------------------------------------------

ASKS = {
    "streak": {"enabled": False},
    "breaker": {"warn_at": 2, "summarize_at": 3, "limits": {"exact": 4}, "on_limit": "ask"},
}


class Terminal:
    """A stdin that is a terminal (CrewAI's request_human_input reads it with input())."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("reply", ["approve", ""])
def test_ask_goes_to_crewais_human_input(monkeypatch, reply):
    c = Counter()
    prompts: List[str] = []
    monkeypatch.setattr(sys, "stdin", Terminal())

    def fake_input(prompt: str = "") -> str:
        prompts.append(prompt)
        return reply

    monkeypatch.setattr("builtins.input", fake_input)
    llm = ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 4))
    with ToolBrakeHooks(Brake(ASKS)):
        crew_of(llm, [c.ping]).kickoff()
    assert len(prompts) == 1
    results = llm.tool_messages()
    assert "CONVERGENCE_CHECK" in results[1]  # advisories before the gate reach the model
    if reply == "approve":
        assert c.runs == 4
        assert results[3].startswith("pong")
    else:
        assert c.runs == 3
        assert results[3].startswith("REPEAT_TOOL_BLOCKED")


@pytest.mark.parametrize("approve", [True, False])
def test_ask_resolve_and_no_terminal_use_the_brakes_approver(monkeypatch, approve):
    c = Counter()
    seen: List[str] = []
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("no console prompt expected"))

    def approver(d) -> bool:
        seen.append(d.verdict)
        return approve

    llm = ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 4))
    with ToolBrakeHooks(Brake(ASKS, approver=approver)):  # stdin is not a terminal under pytest
        crew_of(llm, [c.ping]).kickoff()
    assert seen == ["ask"]
    assert c.runs == (4 if approve else 3)


# -- never break the host -----------------------------------------------------------------------------------------------


class BrokenBrake:
    """A Brake whose every method fails (a bug in toolbrake, not a refusal)."""

    def __getattr__(self, name: str) -> Any:
        def fail(*a: Any, **k: Any) -> Any:
            raise RuntimeError("toolbrake is broken")

        return fail


def test_an_error_inside_toolbrake_does_not_break_the_run():
    c = Counter()
    llm = ScriptedLLM(model="scripted", script=turns("ping", {"x": 1}, 3))
    with ToolBrakeHooks(BrokenBrake()):  # type: ignore[arg-type]
        crew_of(llm, [c.ping]).kickoff()
    assert c.runs == 3
    assert llm.tool_messages() == ["pong"] * 3


# -- 7. without the framework ------------------------------------------------------------------------------------------------


def test_import_without_crewai_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "crewai", None)
    monkeypatch.delitem(sys.modules, "toolbrake.integrations.crewai", raising=False)
    with pytest.raises(ImportError) as err:
        importlib.import_module("toolbrake.integrations.crewai")
    assert 'pip install "./bindings/python[crewai]"' in str(err.value)
