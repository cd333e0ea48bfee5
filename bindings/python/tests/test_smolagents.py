"""End-to-end tests of toolbrake.integrations.smolagents against the real smolagents.

The model is a scripted ``Model`` subclass (no network): each step of its script is a tool
call (for ``ToolCallingAgent``) or a code block (for ``CodeAgent``), and it keeps the text
of every request it received, so the tests assert on what the model read.
"""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from typing import Any, List, Optional

import pytest

pytest.importorskip("smolagents")

from smolagents import CodeAgent, ToolCallingAgent, tool  # noqa: E402
from smolagents.models import (  # noqa: E402
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)

from toolbrake import Brake  # noqa: E402
from toolbrake.integrations.smolagents import ToolBrakeTool, protect_agent, protect_tools  # noqa: E402

from conftest import HERE, PKG  # noqa: E402
KINDS = ["tool_calling", "code"]


# Any attempt to reach the network fails a test (conftest.py).
pytestmark = pytest.mark.usefixtures("no_network")


# -- the scripted model ---------------------------------------------------------------------------


class ScriptedModel(Model):
    """Plays a script: ``(tool, args)`` tuples become tool calls, strings are code steps.

    Every request's text is kept in :attr:`seen`.
    """

    def __init__(self, script: List[Any]) -> None:
        super().__init__(model_id="scripted")
        self.script = list(script)
        self.seen: List[str] = []

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kw):
        self.seen.append("\n".join(_text(m) for m in messages))
        step = self.script.pop(0)
        if isinstance(step, tuple):
            name, args = step
            call = ChatMessageToolCall(
                id=f"call_{len(self.seen)}", type="function",
                function=ChatMessageToolCallFunction(name=name, arguments=args),
            )
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])
        return ChatMessage(role=MessageRole.ASSISTANT, content=step)


def _text(message: Any) -> str:
    content = message.content if hasattr(message, "content") else message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def steps(kind: str, name: str, args: dict, times: int, answer: str = "done") -> list:
    """``times`` calls of ``name(**args)`` then the final answer, in the agent kind's form."""
    if kind == "tool_calling":
        return [(name, args)] * times + [("final_answer", {"answer": answer})]
    call = f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
    return [f"Thought: again.\n<code>\nprint({call})\n</code>"] * times + [
        f"Thought: finish.\n<code>\nfinal_answer({answer!r})\n</code>"
    ]


def build(kind: str, tools: list, model: Model, **kw: Any):
    cls = ToolCallingAgent if kind == "tool_calling" else CodeAgent
    return cls(tools=tools, model=model, verbosity_level=-1, max_steps=12, **kw)


class Counter:
    """Tools that count their runs."""

    def __init__(self) -> None:
        self.runs = 0
        counter = self

        @tool
        def ping(x: int) -> str:
            """Returns the same text every time.

            Args:
                x: a number
            """
            counter.runs += 1
            return "pong"

        @tool
        def poll(job: str) -> str:
            """Returns a different text every time.

            Args:
                job: the job's name
            """
            counter.runs += 1
            return f"{job}: {counter.runs * 10}% done"

        @tool
        def boom(path: str) -> str:
            """Always fails.

            Args:
                path: a file
            """
            counter.runs += 1
            raise FileNotFoundError(f"no such file: {path}")

        self.ping, self.poll, self.boom = ping, poll, boom


# -- 1. the third identical call is refused --------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_third_identical_call_is_refused_and_the_model_reads_why(kind):
    c = Counter()
    model = ScriptedModel(steps(kind, "ping", {"x": 1}, 3))
    agent = build(kind, protect_tools([c.ping], Brake(), session="s"), model)
    assert agent.run("ping it") == "done"
    assert c.runs == 2
    after_third = model.seen[3]
    assert 'ToolBrakeDenied: loop brake: tool "ping" called 3 times in a row' in after_third
    assert "ToolBrakeDenied" not in model.seen[2]


# -- 2. progress is not a loop ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_whose_output_changes_is_not_stopped(kind):
    c = Counter()
    model = ScriptedModel(steps(kind, "poll", {"job": "build"}, 5))
    agent = build(kind, protect_tools([c.poll], Brake(), session="s"), model)
    agent.run("wait for the build")
    assert c.runs == 5
    assert "build: 50% done" in model.seen[5]
    assert "ToolBrakeDenied" not in model.seen[5]


# -- 3. failures feed the failure track ------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_raising_tool_is_recorded_as_a_failure(kind):
    c = Counter()
    brake = Brake()
    model = ScriptedModel(steps(kind, "boom", {"path": "/x"}, 2))
    agent = build(kind, protect_tools([c.boom], brake, session="s"), model)
    agent.run("read it")
    assert c.runs == 2
    assert "FileNotFoundError: no such file: /x" in model.seen[1]
    fp = brake.explain("boom", {"path": "/x"}, session="s")["breaker"]["fingerprints"][0]
    assert fp["failures"] == 2 and fp["failures_since_success"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_repeated_failures_bring_the_breakers_advice_with_the_error(kind):
    c = Counter()
    model = ScriptedModel(steps(kind, "boom", {"path": "/x"}, 3))
    agent = build(kind, protect_tools([c.boom], Brake({"streak": {"enabled": False}}), session="s"), model)
    agent.run("read it")
    assert c.runs == 3
    assert "has failed 3 times in a row" not in model.seen[2]
    assert "AdvisedToolError: FileNotFoundError: no such file: /x" in model.seen[3]
    assert "has failed 3 times in a row" in model.seen[3]


def test_advice_is_appended_to_a_text_result():
    c = Counter()
    model = ScriptedModel(steps("tool_calling", "ping", {"x": 1}, 2))
    brake = Brake({"streak": {"enabled": False}, "breaker": {"warn_at": 2}})
    agent = build("tool_calling", protect_tools([c.ping], brake, session="s"), model)
    agent.run("ping")
    assert c.runs == 2
    assert "CONVERGENCE_CHECK" not in model.seen[1]
    assert "pong\n\nCONVERGENCE_CHECK: you are repeating yourself" in model.seen[2]


# -- 4. sessions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_two_agents_do_not_interfere(kind):
    c = Counter()
    brake = Brake()
    agents = [protect_agent(build(kind, [c.ping], ScriptedModel(steps(kind, "ping", {"x": 1}, 2))), brake)
              for _ in range(2)]
    for agent in agents:
        agent.run("ping twice")
    assert c.runs == 4


def test_explicit_sessions_share_or_separate_counts():
    c = Counter()
    brake = Brake()
    current = {"key": "a"}
    tools = protect_tools([c.ping], brake, session=lambda: current["key"])
    for key in ("a", "b", "a"):
        current["key"] = key
        build("tool_calling", tools, ScriptedModel(steps("tool_calling", "ping", {"x": 1}, 1))).run("ping")
    # a, b, a: the second "a" call is the second in a row in "a", not the third.
    assert c.runs == 3
    current["key"] = "a"
    model = ScriptedModel(steps("tool_calling", "ping", {"x": 1}, 1))
    build("tool_calling", tools, model).run("ping")
    assert c.runs == 3
    assert "ToolBrakeDenied" in model.seen[1]


@pytest.mark.parametrize("reset", [True, False])
def test_a_new_task_starts_the_agents_session_afresh(reset):
    c = Counter()
    model = ScriptedModel(steps("tool_calling", "ping", {"x": 1}, 2) + steps("tool_calling", "ping", {"x": 1}, 1))
    agent = protect_agent(build("tool_calling", [c.ping], model), Brake(), session="s", reset_on_task=reset)
    agent.run("ping twice")
    agent.run("ping once more")
    assert c.runs == (3 if reset else 2)


def test_managed_agents_count_in_sub_agent_sessions():
    c = Counter()
    brake = Brake()
    helper_model = ScriptedModel(steps("tool_calling", "ping", {"x": 1}, 2, "pinged")
                                 + steps("tool_calling", "ping", {"x": 1}, 1, "pinged"))
    helper = ToolCallingAgent(tools=[c.ping], model=helper_model, name="helper", description="Pings.",
                              verbosity_level=-1)
    boss_model = ScriptedModel([("helper", {"task": "ping"})] * 2 + [("final_answer", {"answer": "ok"})])
    boss = ToolCallingAgent(tools=[], model=boss_model, managed_agents=[helper], verbosity_level=-1)
    protect_agent(boss, brake, session="S")
    boss.run("have the helper ping")
    # The manager's second task does not reset the helper: its next ping is the third.
    assert c.runs == 2
    assert "ToolBrakeDenied: loop brake" in helper_model.seen[-1]
    assert brake.explain("ping", {"x": 1}, session="S#agent:helper")["streak"]["in_a_row"] == 3
    assert brake.explain("ping", {"x": 1}, session="S")["streak"]["in_a_row"] == 0


# -- 5. two processes share one session through SQLite -------------------------------------------------

SUBPROCESS = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{here!r}, {pkg!r}]
    from test_smolagents import Counter, ScriptedModel, build, steps
    from toolbrake import Brake
    from toolbrake.integrations.smolagents import protect_tools

    c = Counter()
    model = ScriptedModel(steps("tool_calling", "ping", {{"x": 1}}, 2))
    build("tool_calling", protect_tools([c.ping], Brake(store={store!r}), session="X"), model).run("ping")
    assert c.runs == 2, c.runs
    print("ran", c.runs)
    """
)


def test_two_processes_share_one_session_through_sqlite(tmp_path, run_python):
    store = "sqlite:" + str(tmp_path / "s.db")
    assert "ran 2" in run_python(SUBPROCESS.format(here=HERE, pkg=PKG, store=store))

    c = Counter()
    model = ScriptedModel(steps("code", "ping", {"x": 1}, 1))
    build("code", protect_tools([c.ping], Brake(store=store), session="X"), model).run("ping")
    assert c.runs == 0
    assert "ToolBrakeDenied: loop brake" in model.seen[1]


# -- 6. asks: smolagents has no approvals, so the Brake's approver answers -----------------------------

ASKS = {
    "streak": {"enabled": False},
    "breaker": {"warn_at": 2, "summarize_at": 3, "limits": {"exact": 4}, "on_limit": "ask"},
}


@pytest.mark.parametrize("approve", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_ask_goes_to_the_brakes_approver(kind, approve):
    c = Counter()
    asked: List[str] = []

    def approver(d) -> bool:
        asked.append(d.message)
        return approve

    model = ScriptedModel(steps(kind, "ping", {"x": 1}, 4))
    build(kind, protect_tools([c.ping], Brake(ASKS, approver=approver), session="s"), model).run("ping")
    assert len(asked) == 1 and asked[0].startswith("toolbrake: this call is about to be blocked")
    assert c.runs == (4 if approve else 3)
    assert ("REPEAT_TOOL_BLOCKED" in model.seen[4]) is (not approve)


# -- never break the host -----------------------------------------------------------------------------------


class BrokenBrake:
    """A Brake whose every method fails (a bug in toolbrake, not a refusal)."""

    def __getattr__(self, name: str) -> Any:
        def fail(*a: Any, **k: Any) -> Any:
            raise RuntimeError("toolbrake is broken")

        return fail


@pytest.mark.parametrize("kind", KINDS)
def test_an_error_inside_toolbrake_does_not_break_the_run(kind):
    c = Counter()
    model = ScriptedModel(steps(kind, "ping", {"x": 1}, 3))
    agent = build(kind, [ToolBrakeTool(c.ping, BrokenBrake())], model)  # type: ignore[arg-type]
    assert agent.run("ping") == "done"
    assert c.runs == 3


def test_positional_and_keyword_calls_in_code_are_the_same_call():
    c = Counter()
    code = ["Thought: p.\n<code>\nprint(ping(1))\n</code>", "Thought: k.\n<code>\nprint(ping(x=1))\n</code>",
            "Thought: p.\n<code>\nprint(ping(1))\n</code>", "Thought: end.\n<code>\nfinal_answer('done')\n</code>"]
    model = ScriptedModel(code)
    build("code", protect_tools([c.ping], Brake(), session="s"), model).run("ping")
    assert c.runs == 2
    assert "ToolBrakeDenied: loop brake" in model.seen[3]


def test_arguments_json_cannot_hold_are_judged_by_their_repr():
    c = Counter()

    @tool
    def count(items: Any) -> str:
        """Counts items.

        Args:
            items: anything
        """
        c.runs += 1
        return str(len(items))

    code = "Thought: count.\n<code>\nprint(count({1, 2}))\n</code>"
    model = ScriptedModel([code] * 3 + ["Thought: end.\n<code>\nfinal_answer('done')\n</code>"])
    build("code", protect_tools([count], Brake(), session="s"), model).run("count")
    assert c.runs == 2
    assert "ToolBrakeDenied: loop brake" in model.seen[3]


# -- 7. without the framework --------------------------------------------------------------------------------


def test_import_without_smolagents_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "smolagents", None)
    monkeypatch.delitem(sys.modules, "toolbrake.integrations.smolagents", raising=False)
    with pytest.raises(ImportError) as err:
        importlib.import_module("toolbrake.integrations.smolagents")
    assert 'pip install "./bindings/python[smolagents]"' in str(err.value)
