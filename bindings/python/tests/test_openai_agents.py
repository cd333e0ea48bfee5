"""toolbrake.integrations.openai_agents against the real OpenAI Agents SDK, driven by the SDK's
own scripted test model (``agents.testing.ScriptedModel``): no network, tracing off."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List

import pytest

os.environ.setdefault("OPENAI_API_KEY", "dummy")
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

agents = pytest.importorskip("agents")
from agents import Agent, Runner, function_tool, handoff, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from toolbrake import Brake  # noqa: E402
from toolbrake.integrations.openai_agents import pending_ask, protect  # noqa: E402

set_tracing_disabled(True)

PACKAGE_DIR = str(Path(__file__).resolve().parents[1] / "python")
ASK_CONFIG = {"streak": {"enabled": False}, "breaker": {"on_limit": "ask", "limits": {"exact": 2}}}


def calls_of(tool: str, args: Dict[str, Any], n: int, prefix: str = "c") -> List[List[Any]]:
    """``n`` model turns, each calling ``tool`` with ``args`` (call ids prefix0, prefix1, ...)."""
    return [[function_call(tool, args, call_id=f"{prefix}{i}")] for i in range(n)]


def script(*turns: Any) -> ScriptedModel:
    """A scripted model: the given turns, then a final answer."""
    return ScriptedModel([*turns, [assistant_message("done")]])


def tool_outputs(model: ScriptedModel) -> Dict[str, Any]:
    """Every tool result the model was sent, by call id (from the last input it received)."""
    out: Dict[str, Any] = {}
    for call in model.calls:
        for item in call.input if isinstance(call.input, list) else []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                out[item["call_id"]] = item["output"]
    return out


def run(agent: Agent[Any], input: Any = "go", **kwargs: Any) -> Any:
    return asyncio.run(Runner.run(agent, input, **kwargs))


class Counter:
    """Tools that count how often their body ran."""

    def __init__(self) -> None:
        self.ran: List[str] = []

    def same(self):
        @function_tool
        def lookup(q: str) -> str:
            """Look something up."""
            self.ran.append(q)
            return f"result for {q}"

        return lookup

    def moving(self):
        @function_tool
        def poll(job: str) -> str:
            """Poll a job."""
            self.ran.append(job)
            return f"{job}: {len(self.ran) * 10}% done"

        return poll

    def failing(self):
        @function_tool
        def deploy(target: str) -> str:
            """Deploy."""
            self.ran.append(target)
            raise RuntimeError(f"connection refused by {target}")

        return deploy


def test_third_identical_call_is_refused_and_the_model_reads_why() -> None:
    c = Counter()
    model = script(*calls_of("lookup", {"q": "x"}, 3))
    brake = Brake()
    agent = protect(Agent(name="assistant", tools=[c.same()], model=model), brake)

    result = run(agent)

    assert c.ran == ["x", "x"]  # the 3rd call never reached the tool body
    outputs = tool_outputs(model)
    assert outputs["c0"] == outputs["c1"] == "result for x"
    refusal = outputs["c2"]
    assert "loop brake" in refusal and "lookup" in refusal
    # it is toolbrake's guardrail that rejected it, with the streak brake's code
    rejected = [
        r for r in result.tool_input_guardrail_results if r.output.behavior["type"] == "reject_content"
    ]
    assert len(rejected) == 1 and rejected[0].guardrail.get_name() == "toolbrake"
    assert rejected[0].output.behavior["message"] == refusal
    assert rejected[0].output.output_info["code"] == "LOOP_BRAKE"
    assert result.final_output == "done"


def test_a_call_whose_output_changes_is_not_stopped() -> None:
    c = Counter()
    model = script(*calls_of("poll", {"job": "build"}, 5))
    agent = protect(Agent(name="assistant", tools=[c.moving()], model=model), Brake())

    run(agent)

    assert len(c.ran) == 5
    assert [tool_outputs(model)[f"c{i}"] for i in range(5)] == [f"build: {10 * (i + 1)}% done" for i in range(5)]


def test_a_failing_tool_feeds_the_failure_track() -> None:
    c = Counter()
    model = script(*calls_of("deploy", {"target": "prod"}, 2))
    brake = Brake()
    agent = protect(Agent(name="assistant", tools=[c.failing()], model=model), brake, session="s-fail")

    run(agent)

    assert c.ran == ["prod", "prod"]
    # the model still gets the SDK's own error text for the failure
    assert tool_outputs(model)["c0"].startswith("An error occurred while running the tool")
    fp = brake.explain("deploy", {"target": "prod"}, session="s-fail")["breaker"]["fingerprints"]
    assert [f["failures"] for f in fp if f["kind"] == "exact"] == [2], fp

    # the same calls succeeding are recorded as successes
    ok = Brake()
    model = script(*calls_of("lookup", {"q": "x"}, 2))
    run(protect(Agent(name="assistant", tools=[Counter().same()], model=model), ok, session="s-ok"))
    assert [f["failures"] for f in ok.explain("lookup", {"q": "x"}, session="s-ok")["breaker"]["fingerprints"]] == [0, 0]


def test_conversations_do_not_interfere() -> None:
    c = Counter()
    tool = c.same()
    brake = Brake()
    model = script(*calls_of("lookup", {"q": "x"}, 2, "a"))
    agent = protect(Agent(name="assistant", tools=[tool], model=model), brake, session=lambda ctx: ctx.context["thread"])

    run(agent, context={"thread": "A"})
    agent.model = model = script(*calls_of("lookup", {"q": "x"}, 2, "b"))
    run(agent, context={"thread": "B"})
    assert len(c.ran) == 4  # two per thread, none refused
    assert "loop brake" not in str(tool_outputs(model))

    # the key is the thread: thread A's third identical call, in a new run, is refused
    agent.model = model = script(*calls_of("lookup", {"q": "x"}, 1, "a2-"))
    run(agent, context={"thread": "A"})
    assert len(c.ran) == 4
    assert "loop brake" in tool_outputs(model)["a2-0"]


def test_without_a_session_each_run_is_its_own_session() -> None:
    c = Counter()
    brake = Brake()
    agent = Agent(name="assistant", tools=[c.same()], model=script(*calls_of("lookup", {"q": "x"}, 2, "a")))
    protect(agent, brake)
    run(agent)
    agent.model = script(*calls_of("lookup", {"q": "x"}, 2, "b"))
    run(agent)
    assert len(c.ran) == 4


def test_handoff_target_counts_in_a_sub_agent_session() -> None:
    c = Counter()
    tool = c.same()
    specialist_model = script(*calls_of("lookup", {"q": "x"}, 3, "s"))
    specialist = Agent(name="specialist", tools=[tool], model=specialist_model)
    triage_model = ScriptedModel(
        [*calls_of("lookup", {"q": "x"}, 2, "t"), [function_call("transfer_to_specialist", {}, call_id="h")]]
    )
    triage = Agent(name="triage", tools=[tool], model=triage_model, handoffs=[handoff(specialist)])
    brake = Brake()
    protect(triage, brake, session="conv")

    result = run(triage)

    # triage ran it twice; the specialist's first two identical calls are its own (not refused),
    # its third is refused
    assert len(c.ran) == 4
    outputs = tool_outputs(specialist_model)
    assert outputs["s0"] == outputs["s1"] == "result for x"
    assert "loop brake" in outputs["s2"]
    assert result.last_agent.name == "specialist"
    assert brake.explain("lookup", {"q": "x"}, session="conv#agent:specialist")["streak"]["in_a_row"] == 3
    assert brake.explain("lookup", {"q": "x"}, session="conv")["streak"]["in_a_row"] == 2


def test_two_processes_share_one_session_through_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    child = textwrap.dedent(
        f"""
        import asyncio, os
        os.environ.setdefault("OPENAI_API_KEY", "dummy")
        from agents import Agent, Runner, function_tool, set_tracing_disabled
        from agents.testing import ScriptedModel, assistant_message, function_call
        from toolbrake import Brake
        from toolbrake.integrations.openai_agents import protect
        set_tracing_disabled(True)
        ran = []
        @function_tool
        def lookup(q: str) -> str:
            \"\"\"Look something up.\"\"\"
            ran.append(q)
            return "result for " + q
        model = ScriptedModel([[function_call("lookup", {{"q": "x"}}, call_id="p" + str(i))] for i in range(2)]
                              + [[assistant_message("done")]])
        agent = protect(Agent(name="assistant", tools=[lookup], model=model), Brake(store={('sqlite:' + str(db))!r}), session="X")
        asyncio.run(Runner.run(agent, "go"))
        print(len(ran))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([PACKAGE_DIR, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"

    c = Counter()
    model = script(*calls_of("lookup", {"q": "x"}, 1))
    run(protect(Agent(name="assistant", tools=[c.same()], model=model), Brake(store=f"sqlite:{db}"), session="X"))
    assert c.ran == []
    assert "loop brake" in tool_outputs(model)["c0"]


def test_an_ask_interrupts_the_run_for_approval_and_runs_when_approved() -> None:
    c = Counter()
    model = script(*calls_of("lookup", {"q": "x"}, 3))
    agent = protect(Agent(name="assistant", tools=[c.same()], model=model), Brake(ASK_CONFIG), approvals=True)

    result = run(agent)

    assert [i.raw_item.call_id for i in result.interruptions] == ["c1"]  # the 2nd call reached the gate
    assert c.ran == ["x"]
    item = result.interruptions[0]
    ask = pending_ask(item)
    assert ask is not None and ask.verdict == "ask" and ask.engine == "breaker"
    assert "repeat" in ask.message

    state = result.to_state()
    state.approve(item)
    result = run(agent, state)

    assert result.interruptions == []
    assert c.ran == ["x", "x", "x"]  # the approved call ran, and the operator's exemption holds
    assert result.final_output == "done"
    assert pending_ask(item) is None


def test_a_rejected_ask_does_not_run_and_the_model_reads_toolbrakes_reason() -> None:
    c = Counter()
    model = script(*calls_of("lookup", {"q": "x"}, 2))
    agent = protect(Agent(name="assistant", tools=[c.same()], model=model), Brake(ASK_CONFIG), approvals=True)

    result = run(agent)
    item = result.interruptions[0]
    state = result.to_state()
    state.reject(item, rejection_message=pending_ask(item).message)
    result = run(agent, state)

    assert c.ran == ["x"]
    assert "repeat" in tool_outputs(model)["c1"]
    assert result.final_output == "done"


def test_without_approvals_an_ask_goes_to_the_brakes_approver() -> None:
    asked: List[str] = []

    def approver(d: Any) -> bool:
        asked.append(d.verdict)
        return True

    c = Counter()
    model = script(*calls_of("lookup", {"q": "x"}, 2))
    run(protect(Agent(name="assistant", tools=[c.same()], model=model), Brake(ASK_CONFIG, approver=approver)))
    assert asked == ["ask"] and c.ran == ["x", "x"]

    # no approver: the ask is refused (fail-closed) and the model reads why
    c = Counter()
    model = script(*calls_of("lookup", {"q": "x"}, 2))
    result = run(protect(Agent(name="assistant", tools=[c.same()], model=model), Brake(ASK_CONFIG)))
    assert c.ran == ["x"] and result.interruptions == []
    assert "repeat" in tool_outputs(model)["c1"]


def test_advisories_are_appended_to_the_result() -> None:
    c = Counter()
    model = script(*calls_of("poll", {"job": "build"}, 2))
    run(protect(Agent(name="assistant", tools=[c.moving()], model=model), Brake({"breaker": {"warn_at": 2}})))

    outputs = tool_outputs(model)
    assert outputs["c0"] == "build: 10% done"
    assert outputs["c1"].startswith("build: 20% done\n\n")  # the tool's real result is kept
    assert "CONVERGENCE_CHECK" in outputs["c1"]


def test_a_toolbrake_error_does_not_break_the_run() -> None:
    def broken_session(ctx: Any) -> str:
        raise RuntimeError("session lookup failed")

    c = Counter()
    model = script(*calls_of("lookup", {"q": "x"}, 3))
    result = run(protect(Agent(name="assistant", tools=[c.same()], model=model), Brake(), session=broken_session))
    assert c.ran == ["x", "x", "x"]  # toolbrake could not judge: every call ran
    assert result.final_output == "done"


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "toolbrake.integrations.openai_agents", raising=False)
    with pytest.raises(ImportError, match=r'pip install "\./bindings/python\[openai-agents\]"'):
        importlib.import_module("toolbrake.integrations.openai_agents")


def test_a_runs_own_session_ends_with_the_run_and_the_agents_hooks_still_run() -> None:
    # Issue 41, defect 6: each run's session was never ended (3 KB each for 7 days).
    from agents import AgentHooks

    ended: List[str] = []

    class Mine(AgentHooks[Any]):
        async def on_end(self, context: Any, agent: Any, output: Any) -> None:
            ended.append(agent.name)

    c = Counter()
    brake = Brake()
    agent = Agent(name="assistant", tools=[c.same()], model=script(*calls_of("lookup", {"q": "x"}, 2)), hooks=Mine())
    protect(agent, brake)
    result = run(agent)
    key = getattr(result.context_wrapper.usage, "_toolbrake_run_key")
    assert len(c.ran) == 2 and ended == ["assistant"]
    fps = brake.explain("lookup", {"q": "x"}, session=key)["breaker"]["fingerprints"]
    assert fps[0]["count"] == 0


def test_approvals_interrupt_only_for_toolbrakes_ask_even_with_omitted_defaults() -> None:
    # Issue 41, defect 8: with approvals=True a call omitting an optional argument was always
    # interrupted (the SDK's rule for callable policies) and pending_ask returned None.
    from toolbrake.integrations.openai_agents import decline

    ran: List[str] = []

    @function_tool
    def search(q: str, limit: int = 5) -> str:
        """Search."""
        ran.append(q)
        return "same"

    model = script(*calls_of("search", {"q": "x"}, 2))
    agent = protect(Agent(name="assistant", tools=[search], model=model), Brake(ASK_CONFIG), approvals=True)
    result = run(agent)
    assert ran == ["x"]  # the first call ran without an approval
    assert [i.raw_item.call_id for i in result.interruptions] == ["c1"]
    item = result.interruptions[0]
    ask = pending_ask(item)
    assert ask is not None and ask.verdict == "ask"
    # The documented reject path: the model reads a refusal written for it, not the
    # operator's question.
    text = decline(item)
    assert text and "Approve" not in text and "Decline" not in text
    state = result.to_state()
    state.reject(item, rejection_message=text)
    result = run(agent, state)
    assert ran == ["x"]
    assert tool_outputs(model)["c1"] == text
    assert pending_ask(item) is None
