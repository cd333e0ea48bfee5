"""toolbrake.integrations.pydantic_ai against the real Pydantic AI, driven by its
``FunctionModel`` (a scripted model that records every request it receives): no network."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

pytest.importorskip("pydantic_ai")
from pydantic_ai import (  # noqa: E402
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunContext,
    ToolDenied,
)
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from toolbrake import Brake  # noqa: E402
from toolbrake.integrations.pydantic_ai import ToolBrake  # noqa: E402

PACKAGE_DIR = str(Path(__file__).resolve().parents[1] / "python")
ASK_CONFIG = {"streak": {"enabled": False}, "breaker": {"on_limit": "ask", "limits": {"exact": 2}}}

Step = Tuple[str, Dict[str, Any]]


class Script:
    """A FunctionModel that calls the given tools, one per request, then answers "done"; it
    keeps every message list it was sent."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.received: List[List[ModelMessage]] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.received.append(list(messages))
        if not self.steps:
            return ModelResponse(parts=[TextPart("done")])
        tool, args = self.steps.pop(0)
        return ModelResponse(parts=[ToolCallPart(tool, args)])

    def returns(self) -> List[ToolReturnPart]:
        """Every tool result the model was sent, in order (from the last request it received)."""
        last = self.received[-1]
        return [p for m in last if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]

    def notes_with_last_result(self) -> List[str]:
        """The text parts the model was sent beside the last tool result (same request)."""
        request = self.received[-1][-1]
        assert isinstance(request, ModelRequest) and isinstance(request.parts[0], ToolReturnPart)
        return [str(p.content) for p in request.parts[1:]]


def repeat(tool: str, args: Dict[str, Any], n: int) -> List[Step]:
    return [(tool, dict(args)) for _ in range(n)]


def make_agent(script: Script, capability: ToolBrake, ran: List[str], output_type: Any = str) -> Agent[None, Any]:
    """An agent with a tool returning the same text each time (``lookup``), one whose output
    moves on (``poll``), one that asks the model to retry (``deploy``) and one that raises
    (``crash``)."""
    agent: Agent[None, Any] = Agent(script.model, output_type=output_type, capabilities=[capability], name="assistant")

    @agent.tool_plain
    def lookup(q: str) -> str:
        ran.append(q)
        return f"result for {q}"

    @agent.tool_plain
    def poll(job: str) -> str:
        ran.append(job)
        return f"{job}: {len(ran) * 10}% done"

    @agent.tool_plain(retries=5)
    def deploy(target: str) -> str:
        ran.append(target)
        raise ModelRetry(f"connection refused by {target}")

    @agent.tool_plain
    def crash(target: str) -> str:
        ran.append(target)
        raise RuntimeError(f"disk full on {target}")

    return agent


def exact(brake: Brake, tool: str, args: Dict[str, Any], session: str) -> List[Dict[str, Any]]:
    """The call's own identity (`exact:`); the tool's failure target (`tool:`) is left out."""
    return [f for f in brake.explain(tool, args, session=session)["breaker"]["fingerprints"] if f["kind"] == "exact"]


def counts(brake: Brake, tool: str, args: Dict[str, Any], session: str) -> List[int]:
    return [f["count"] for f in exact(brake, tool, args, session)]


def failures(brake: Brake, tool: str, args: Dict[str, Any], session: str) -> List[int]:
    return [f["failures"] for f in exact(brake, tool, args, session)]


def test_third_identical_call_is_refused_and_the_model_reads_why() -> None:
    ran: List[str] = []
    script = Script(repeat("lookup", {"q": "x"}, 3))
    agent = make_agent(script, ToolBrake(Brake()), ran)

    result = agent.run_sync("go")

    assert ran == ["x", "x"]  # the 3rd call never reached the tool body
    r = script.returns()
    assert [p.outcome for p in r] == ["success", "success", "failed"]  # refused as a failed result
    assert r[0].content == r[1].content == "result for x"
    assert "loop brake" in r[2].content and "lookup" in r[2].content
    assert result.output == "done"


def test_a_call_whose_output_changes_is_not_stopped() -> None:
    ran: List[str] = []
    script = Script(repeat("poll", {"job": "build"}, 5))
    make_agent(script, ToolBrake(Brake()), ran).run_sync("go")

    assert len(ran) == 5
    assert [p.content for p in script.returns()] == [f"build: {10 * (i + 1)}% done" for i in range(5)]


def test_a_failing_tool_feeds_the_failure_track() -> None:
    ran: List[str] = []
    brake = Brake()
    script = Script(repeat("deploy", {"target": "prod"}, 2))
    make_agent(script, ToolBrake(brake, session="s-fail"), ran).run_sync("go")

    assert ran == ["prod", "prod"]
    assert [p.outcome for p in script.returns()] == ["retried", "retried"]  # the model still sees the error
    assert failures(brake, "deploy", {"target": "prod"}, "s-fail") == [2]

    # an exception that ends the run is recorded too (and still ends the run)
    with pytest.raises(RuntimeError, match="disk full"):
        make_agent(Script(repeat("crash", {"target": "db"}, 1)), ToolBrake(brake, session="s-crash"), ran).run_sync("go")
    assert failures(brake, "crash", {"target": "db"}, "s-crash") == [1]

    # the same calls succeeding are recorded as successes
    make_agent(Script(repeat("lookup", {"q": "x"}, 2)), ToolBrake(brake, session="s-ok"), ran).run_sync("go")
    assert failures(brake, "lookup", {"q": "x"}, "s-ok") == [0]


def test_conversations_do_not_interfere() -> None:
    ran: List[str] = []
    brake = Brake()

    def run(conversation: str, n: int) -> Script:
        script = Script(repeat("lookup", {"q": "x"}, n))
        make_agent(script, ToolBrake(brake), ran).run_sync("go", conversation_id=conversation)
        return script

    run("A", 2)
    b = run("B", 2)
    assert len(ran) == 4  # two per conversation, none refused
    assert [p.outcome for p in b.returns()] == ["success", "success"]

    # the key is the conversation: A's third identical call, in a new run, is refused
    a = run("A", 1)
    assert len(ran) == 4
    assert a.returns()[-1].outcome == "failed" and "loop brake" in a.returns()[-1].content


def test_a_delegated_agent_counts_in_a_sub_agent_session() -> None:
    ran: List[str] = []
    brake = Brake()
    specialist_script = Script(repeat("lookup", {"q": "x"}, 3))
    specialist = make_agent(specialist_script, ToolBrake(brake), ran)
    specialist.name = "specialist"

    lead_script = Script([*repeat("lookup", {"q": "x"}, 2), ("delegate", {"task": "dig"})])
    lead = make_agent(lead_script, ToolBrake(brake), ran)

    @lead.tool
    async def delegate(ctx: RunContext[None], task: str) -> str:
        result = await specialist.run(task, usage=ctx.usage)
        return result.output

    lead.run_sync("go", conversation_id="conv")

    # the lead ran it twice; the specialist's first two identical calls are its own (not
    # refused), its third is refused
    assert len(ran) == 4
    assert [p.outcome for p in specialist_script.returns()] == ["success", "success", "failed"]
    assert counts(brake, "lookup", {"q": "x"}, "conv#agent:specialist") == [2]  # calls that ran
    assert brake.explain("lookup", {"q": "x"}, session="conv#agent:specialist")["streak"]["in_a_row"] == 3
    assert counts(brake, "lookup", {"q": "x"}, "conv") == [2]


def test_two_processes_share_one_session_through_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    child = textwrap.dedent(
        f"""
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel
        from toolbrake import Brake
        from toolbrake.integrations.pydantic_ai import ToolBrake
        steps = [ToolCallPart("lookup", {{"q": "x"}}) for _ in range(2)]
        model = FunctionModel(lambda messages, info: ModelResponse(parts=[steps.pop(0)] if steps else [TextPart("done")]))
        agent = Agent(model, capabilities=[ToolBrake(Brake(store={('sqlite:' + str(db))!r}))])
        ran = []
        @agent.tool_plain
        def lookup(q: str) -> str:
            ran.append(q)
            return "result for " + q
        agent.run_sync("go", conversation_id="X")
        print(len(ran))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([PACKAGE_DIR, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"

    ran: List[str] = []
    script = Script(repeat("lookup", {"q": "x"}, 1))
    make_agent(script, ToolBrake(Brake(store=f"sqlite:{db}")), ran).run_sync("go", conversation_id="X")
    assert ran == []
    assert script.returns()[-1].outcome == "failed" and "loop brake" in script.returns()[-1].content


def test_an_ask_defers_the_call_for_approval_and_runs_when_approved() -> None:
    ran: List[str] = []
    script = Script(repeat("lookup", {"q": "x"}, 3))
    agent = make_agent(script, ToolBrake(Brake(ASK_CONFIG)), ran, output_type=[str, DeferredToolRequests])

    result = agent.run_sync("go")

    requests = result.output
    assert isinstance(requests, DeferredToolRequests)
    assert ran == ["x"]  # the 2nd call reached the gate and waits
    (pending,) = requests.approvals
    assert pending.tool_name == "lookup"
    reason = requests.metadata[pending.tool_call_id]["toolbrake"]
    assert reason["engine"] == "breaker" and "repeat" in reason["message"]

    result = agent.run_sync(
        message_history=result.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={pending.tool_call_id: True}),
    )
    assert result.output == "done"
    assert ran == ["x", "x", "x"]  # the approved call ran, and the operator's exemption holds


def test_a_denied_ask_does_not_run_and_the_model_reads_the_denial() -> None:
    ran: List[str] = []
    script = Script(repeat("lookup", {"q": "x"}, 2))
    agent = make_agent(script, ToolBrake(Brake(ASK_CONFIG)), ran, output_type=[str, DeferredToolRequests])
    result = agent.run_sync("go")
    (pending,) = result.output.approvals
    reason = result.output.metadata[pending.tool_call_id]["toolbrake"]["message"]

    result = agent.run_sync(
        message_history=result.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={pending.tool_call_id: ToolDenied(reason)}),
    )
    assert ran == ["x"]
    assert script.returns()[-1].content == reason
    assert result.output == "done"


def test_without_deferred_output_an_ask_goes_to_the_brakes_approver() -> None:
    asked: List[str] = []

    def approver(d: Any) -> bool:
        asked.append(d.verdict)
        return True

    ran: List[str] = []
    make_agent(Script(repeat("lookup", {"q": "x"}, 2)), ToolBrake(Brake(ASK_CONFIG, approver=approver)), ran).run_sync("go")
    assert asked == ["ask"] and ran == ["x", "x"]

    # no approver: refused (fail-closed), the model reads why, the run is not broken
    ran = []
    script = Script(repeat("lookup", {"q": "x"}, 2))
    result = make_agent(script, ToolBrake(Brake(ASK_CONFIG)), ran).run_sync("go")
    assert ran == ["x"] and result.output == "done"
    assert script.returns()[-1].outcome == "failed" and "repeat" in script.returns()[-1].content


def test_advisories_reach_the_model_with_the_result() -> None:
    ran: List[str] = []
    script = Script(repeat("poll", {"job": "build"}, 2))
    make_agent(script, ToolBrake(Brake({"breaker": {"warn_at": 2}})), ran).run_sync("go")

    r = script.returns()
    assert r[0].content == "build: 10% done"
    assert r[1].content.startswith("build: 20% done\n\n")  # the tool's real result is kept
    assert "CONVERGENCE_CHECK" in r[1].content


def test_advisories_for_a_structured_result_are_a_system_note() -> None:
    brake = Brake({"breaker": {"warn_at": 2}})
    script = Script(repeat("status", {"job": "build"}, 2))
    agent: Agent[None, str] = Agent(script.model, capabilities=[ToolBrake(brake)])
    n: List[int] = []

    @agent.tool_plain
    def status(job: str) -> Dict[str, Any]:
        n.append(1)
        return {"job": job, "percent": 10 * len(n)}

    agent.run_sync("go")
    assert [p.content for p in script.returns()] == [{"job": "build", "percent": 10}, {"job": "build", "percent": 20}]
    # enqueued as a system part right after the result; Pydantic AI delivers it mid-conversation
    # as a user prompt part reading "<system>...</system>" (what the module docstring says)
    notes = script.notes_with_last_result()
    assert len(notes) == 1 and "CONVERGENCE_CHECK" in notes[0] and notes[0].startswith("<system>")


def test_a_toolbrake_error_does_not_break_the_run() -> None:
    def broken_session(ctx: RunContext[Any]) -> Optional[str]:
        raise RuntimeError("session lookup failed")

    ran: List[str] = []
    result = make_agent(Script(repeat("lookup", {"q": "x"}, 3)), ToolBrake(Brake(), session=broken_session), ran).run_sync("go")
    assert ran == ["x", "x", "x"]  # toolbrake could not judge: every call ran
    assert result.output == "done"


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "toolbrake.integrations.pydantic_ai", raising=False)
    with pytest.raises(ImportError, match=r'pip install "\./bindings/python\[pydantic-ai\]"'):
        importlib.import_module("toolbrake.integrations.pydantic_ai")


def test_typed_parameters_are_judged_as_the_model_sent_them() -> None:
    # Issue 41, defect 1: a date, an Enum, a UUID and a Decimal reached before() as Python
    # objects, which raised TypeError: every identical call ran unjudged (5 of 5).
    ran: List[str] = []
    args = {"day": "2026-12-03", "room": "small", "ref": "12345678-1234-5678-1234-567812345678", "price": "9.50"}
    script = Script(repeat("book", args, 5))
    agent: Agent[None, str] = Agent(script.model, capabilities=[ToolBrake(Brake())])

    @agent.tool_plain
    def book(day: datetime.date, room: Room, ref: uuid.UUID, price: decimal.Decimal) -> str:
        ran.append(str(day))
        return "booked"

    agent.run_sync("go")
    assert len(ran) == 2
    assert [p.outcome for p in script.returns()][:3] == ["success", "success", "failed"]


import datetime  # noqa: E402
import decimal  # noqa: E402
import enum  # noqa: E402
import uuid  # noqa: E402


class Room(enum.Enum):
    SMALL = "small"


def test_a_runs_session_ends_with_the_run() -> None:
    # Issue 41, defect 6: one session per run, never ended (3 KB each for idle_ttl, 7 days).
    brake = Brake()
    ran: List[str] = []
    result = make_agent(Script(repeat("lookup", {"q": "x"}, 2)), ToolBrake(brake), ran).run_sync("go")
    assert ran == ["x", "x"]
    assert counts(brake, "lookup", {"q": "x"}, result.conversation_id) == [0]
    # A conversation the caller named goes on (the next run, another process, continue it).
    make_agent(Script(repeat("lookup", {"q": "x"}, 2)), ToolBrake(brake), ran).run_sync("go", conversation_id="c1")
    assert counts(brake, "lookup", {"q": "x"}, "c1") == [2]
    # A fixed session spans runs: the caller ends it.
    make_agent(Script(repeat("lookup", {"q": "x"}, 2)), ToolBrake(brake, session="mine"), ran).run_sync("go")
    assert counts(brake, "lookup", {"q": "x"}, "mine") == [2]
