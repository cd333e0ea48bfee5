"""toolbrake.integrations.langchain against the real LangChain 1.x / LangGraph, driven by a
scripted chat model (no network): create_agent middleware, a plain LangGraph ToolNode,
sessions by thread_id, sub-agents, asks as LangGraph interrupts, SQLite between processes."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
import textwrap
from typing import Any, Callable, List

import pytest

# No tracing, no network: the model is scripted.
os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import ToolErrorMiddleware  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import ToolException, tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.types import Command  # noqa: E402
from toolbrake import Brake  # noqa: E402
from toolbrake.integrations.langchain import ToolBrakeMiddleware, approved_from  # noqa: E402
from pydantic import Field  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.join(os.path.dirname(HERE), "python")


# -- a scripted chat model -------------------------------------------------------------


class ScriptedModel(BaseChatModel):
    """Replies with the next message of ``replies``; records every input it receives."""

    replies: List[AIMessage]
    received: List[List[BaseMessage]] = Field(default_factory=list)
    index: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(
        self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.received.append(list(messages))
        reply = self.replies[self.index] if self.index < len(self.replies) else AIMessage("done")
        self.index += 1
        return ChatResult(generations=[ChatGeneration(message=reply)])


def call(name: str, args: dict, id: str) -> AIMessage:
    """A model turn that calls one tool."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": id, "type": "tool_call"}])


def repeat(name: str, args: dict, times: int, prefix: str = "c") -> List[AIMessage]:
    """``times`` turns calling the same tool with the same arguments, then a final answer."""
    return [call(name, args, f"{prefix}{i}") for i in range(times)] + [AIMessage("done")]


def tool_messages(result: dict) -> List[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def refused(messages: List[ToolMessage]) -> List[ToolMessage]:
    return [m for m in messages if "toolbrake" in (m.response_metadata or {})]


class Counter:
    """Tools whose bodies count their runs."""

    def __init__(self) -> None:
        self.runs = 0

    def same(self) -> Any:
        @tool
        def lookup(q: str) -> str:
            """Look something up."""
            self.runs += 1
            return f"result for {q}"

        return lookup

    def changing(self) -> Any:
        @tool
        def poll(job: str) -> str:
            """Poll a job."""
            self.runs += 1
            return f"{job}: {self.runs * 10}% done"

        return poll


# The breaker advises from the 2nd identical call and asks at the 4th (the streak brake,
# which would deny the 3rd, is off).
ASK = {
    "streak": {"enabled": False},
    "breaker": {"on_limit": "ask", "warn_at": 2, "summarize_at": 3, "limits": {"exact": 4}},
}


def thread(t: str) -> dict:
    return {"configurable": {"thread_id": t}}


# -- 1. the same call with the same output: the 3rd is refused, the model reads why ------


def test_repeated_call_is_refused_and_model_reads_the_refusal() -> None:
    brake = Brake()
    n = Counter()
    model = ScriptedModel(replies=repeat("lookup", {"q": "weather"}, 3))
    agent = create_agent(model, [n.same()], middleware=[ToolBrakeMiddleware(brake)])

    result = agent.invoke({"messages": [HumanMessage("weather?")]}, thread("t1"))

    assert n.runs == 2, "the tool body must run exactly twice"
    msgs = tool_messages(result)
    assert [m.status for m in msgs] == ["success", "success", "error"]
    refusal = msgs[2]
    meta = refusal.response_metadata["toolbrake"]
    assert meta["verdict"] == "deny" and meta["code"] == "LOOP_BRAKE" and meta["session"] == "t1"
    assert refusal.tool_call_id == "c2" and refusal.name == "lookup"
    # The model's next input ends with the refusal text, as the tool's result.
    last_input = model.received[-1][-1]
    assert isinstance(last_input, ToolMessage) and last_input.tool_call_id == "c2"
    assert last_input.content == refusal.content
    assert "loop brake" in refusal.content and "lookup" in refusal.content


def test_repeated_call_is_refused_async() -> None:
    brake = Brake()
    n = Counter()
    model = ScriptedModel(replies=repeat("lookup", {"q": "weather"}, 3))
    agent = create_agent(model, [n.same()], middleware=[ToolBrakeMiddleware(brake)])

    result = asyncio.run(agent.ainvoke({"messages": [HumanMessage("weather?")]}, thread("t1")))

    assert n.runs == 2
    assert [m.status for m in tool_messages(result)] == ["success", "success", "error"]
    assert "loop brake" in model.received[-1][-1].content


# -- 2. output that changes every time is progress, not a loop ---------------------------


def test_changing_output_is_not_stopped() -> None:
    brake = Brake()
    n = Counter()
    model = ScriptedModel(replies=repeat("poll", {"job": "build"}, 5))
    agent = create_agent(model, [n.changing()], middleware=[ToolBrakeMiddleware(brake)])

    result = agent.invoke({"messages": [HumanMessage("wait for the build")]}, thread("t1"))

    assert n.runs == 5
    assert [m.status for m in tool_messages(result)] == ["success"] * 5
    assert refused(tool_messages(result)) == []


# -- 3. failures feed the failure track --------------------------------------------------


def failures(brake: Brake, tool_name: str, args: dict, session: str) -> int:
    """How many failures toolbrake's session state holds for a call (brake.explain)."""
    fps = brake.explain(tool_name, args, session=session)["breaker"]["fingerprints"]
    return max(f["failures"] for f in fps)


def test_a_raised_exception_is_recorded_as_a_failure() -> None:
    brake = Brake()
    runs = []

    @tool
    def deploy(env: str) -> str:
        """Deploy."""
        runs.append(env)
        raise RuntimeError("connection refused")

    # ToolErrorMiddleware (outer) turns the exception into an error message for the
    # model; toolbrake (inner) sees the exception itself, and re-raises it.
    errors = ToolErrorMiddleware(lambda exc, req: f"failed: {exc}")
    model = ScriptedModel(
        replies=[call("deploy", {"env": "prod"}, f"d{i}") for i in range(2)] + [AIMessage("x")]
    )
    agent = create_agent(model, [deploy], middleware=[errors, ToolBrakeMiddleware(brake)])

    result = agent.invoke({"messages": [HumanMessage("deploy")]}, thread("f1"))

    assert len(runs) == 2
    assert [m.content for m in tool_messages(result)] == ["failed: connection refused"] * 2
    assert failures(brake, "deploy", {"env": "prod"}, "f1") == 2
    assert failures(brake, "deploy", {"env": "prod"}, "other") == 0


def test_error_tool_messages_feed_the_failure_track_and_its_advice_reaches_the_model() -> None:
    # Let the breaker's failure track speak (the streak brake and the same-output track
    # would stop the identical failing call sooner).
    brake = Brake({"streak": {"enabled": False}, "breaker": {"same_output_limit": "off"}})

    @tool
    def fetch(url: str) -> str:
        """Fetch."""
        raise ToolException("HTTP 503 from upstream")

    fetch.handle_tool_error = True  # LangChain returns it as ToolMessage(status="error")
    model = ScriptedModel(replies=[call("fetch", {"url": "u"}, f"e{i}") for i in range(3)] + [AIMessage("x")])
    agent = create_agent(model, [fetch], middleware=[ToolBrakeMiddleware(brake)])

    result = agent.invoke({"messages": [HumanMessage("get it")]}, thread("f2"))

    msgs = tool_messages(result)
    assert [m.status for m in msgs] == ["error"] * 3
    assert failures(brake, "fetch", {"url": "u"}, "f2") == 3
    # The real error stays; the failure track's advice follows it.
    assert msgs[0].content == "HTTP 503 from upstream"
    assert msgs[2].content.startswith("HTTP 503 from upstream\n\n") and len(msgs[2].content) > 40
    assert model.received[-1][-1].content == msgs[2].content


def test_advisories_are_appended_to_the_real_result() -> None:
    brake = Brake(ASK)
    n = Counter()
    model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, 3))
    agent = create_agent(model, [n.same()], middleware=[ToolBrakeMiddleware(brake)])

    result = agent.invoke({"messages": [HumanMessage("go")]}, thread("adv"))

    contents = [m.content for m in tool_messages(result)]
    assert n.runs == 3
    assert contents[0] == "result for x"
    for c in contents[1:]:  # the breaker advised on the 2nd and 3rd repeat
        assert c.startswith("result for x\n\n") and len(c) > len("result for x\n\n")


# -- 4. threads do not interfere ----------------------------------------------------------


def test_two_threads_do_not_interfere() -> None:
    brake = Brake()
    n = Counter()
    # No reset on the new human message: only the thread keys keep the counts apart.
    mw = ToolBrakeMiddleware(brake, reset_on_user_message=False)
    model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, 2, "a") + repeat("lookup", {"q": "x"}, 2, "b"))
    agent = create_agent(model, [n.same()], middleware=[mw])

    ra = agent.invoke({"messages": [HumanMessage("a")]}, thread("A"))
    rb = agent.invoke({"messages": [HumanMessage("b")]}, thread("B"))

    assert n.runs == 4
    assert refused(tool_messages(ra)) == [] and refused(tool_messages(rb)) == []
    # The same thread again: now the 3rd identical call in thread A is refused.
    model.replies.extend(repeat("lookup", {"q": "x"}, 1, "a2"))
    ra2 = agent.invoke({"messages": [HumanMessage("a again")]}, thread("A"))
    assert n.runs == 4
    assert len(refused(tool_messages(ra2))) == 1


def test_a_new_human_message_starts_the_session_afresh() -> None:
    brake = Brake()
    n = Counter()
    model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, 2, "a") + repeat("lookup", {"q": "x"}, 2, "b"))
    agent = create_agent(
        model, [n.same()], middleware=[ToolBrakeMiddleware(brake)], checkpointer=InMemorySaver()
    )

    agent.invoke({"messages": [HumanMessage("first")]}, thread("T"))
    r2 = agent.invoke({"messages": [HumanMessage("second")]}, thread("T"))

    assert n.runs == 4, "a new human turn must not inherit the previous turn's streak"
    assert refused(tool_messages(r2)) == []


def test_explicit_session_overrides_the_thread() -> None:
    brake = Brake()
    n = Counter()
    mw = ToolBrakeMiddleware(brake, session="shared", reset_on_user_message=False)
    model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, 2, "a") + repeat("lookup", {"q": "x"}, 1, "b"))
    agent = create_agent(model, [n.same()], middleware=[mw])

    agent.invoke({"messages": [HumanMessage("a")]}, thread("A"))
    rb = agent.invoke({"messages": [HumanMessage("b")]}, thread("B"))

    assert n.runs == 2
    assert refused(tool_messages(rb))[0].response_metadata["toolbrake"]["session"] == "shared"


# -- sub-agents -----------------------------------------------------------------------------


def test_named_sub_agent_counts_in_its_own_session() -> None:
    brake = Brake()
    n = Counter()
    lookup = n.same()
    inner_model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, 2, "in"))
    inner = create_agent(inner_model, [lookup], middleware=[ToolBrakeMiddleware(brake)], name="researcher")

    @tool
    def research(topic: str) -> str:
        """Ask the researcher."""
        return inner.invoke({"messages": [HumanMessage(topic)]})["messages"][-1].content

    # The parent calls lookup twice itself, then the sub-agent calls it twice: in one
    # session the sub-agent's calls would be the 3rd and 4th identical calls.
    outer_model = ScriptedModel(
        replies=[
            call("lookup", {"q": "x"}, "o1"),
            call("lookup", {"q": "x"}, "o2"),
            call("research", {"topic": "x"}, "o3"),
        ]
    )
    outer = create_agent(outer_model, [lookup, research], middleware=[ToolBrakeMiddleware(brake)])

    result = outer.invoke({"messages": [HumanMessage("go")]}, thread("P"))

    assert n.runs == 4
    assert refused(tool_messages(result)) == []
    # A 3rd identical call in the sub-agent's session is refused there.
    d = brake.before("lookup", {"q": "x"}, session="P", agent="researcher")
    assert d.verdict == "deny" and d.session == "P#agent:researcher"


# -- 5. two processes share one session through SQLite -----------------------------------

CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    from test_langchain import Counter, ScriptedModel, repeat, thread
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from toolbrake import Brake
    from toolbrake.integrations.langchain import ToolBrakeMiddleware

    n = Counter()
    brake = Brake(store="sqlite:" + sys.argv[1])
    agent = create_agent(ScriptedModel(replies=repeat("lookup", {{"q": "x"}}, 2, "child")), [n.same()],
                         middleware=[ToolBrakeMiddleware(brake)])
    agent.invoke({{"messages": [HumanMessage("go")]}}, thread("X"))
    print(n.runs)
    """
)


def tool_node_graph(mw: ToolBrakeMiddleware, tools: list) -> Any:
    """A plain LangGraph graph: START -> tools -> END, the ToolNode wrapped by toolbrake."""
    g = StateGraph(MessagesState)
    g.add_node("tools", mw.tool_node(tools))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def test_plain_langgraph_loop_with_the_tool_node_async() -> None:
    from langgraph.prebuilt import tools_condition

    brake = Brake()
    n = Counter()
    model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, 3))
    g = StateGraph(MessagesState)
    g.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    g.add_node("tools", ToolBrakeMiddleware(brake).tool_node([n.same()]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    graph = g.compile()

    result = asyncio.run(graph.ainvoke({"messages": [HumanMessage("go")]}, thread("g1")))

    assert n.runs == 2
    assert [m.status for m in tool_messages(result)] == ["success", "success", "error"]
    assert model.received[-1][-1].content == tool_messages(result)[-1].content


def test_two_processes_share_a_session_through_sqlite(tmp_path: Any) -> None:
    db = str(tmp_path / "s.db")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PACKAGE_DIR, os.environ.get("PYTHONPATH", "")]))
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(here=HERE), db],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip().splitlines()[-1] == "2"

    n = Counter()
    graph = tool_node_graph(ToolBrakeMiddleware(Brake(store="sqlite:" + db)), [n.same()])
    turn = {"messages": [HumanMessage("go"), call("lookup", {"q": "x"}, "parent1")]}

    out = graph.invoke(turn, thread("X"))
    assert n.runs == 0, "the 3rd identical call in session X must not run"
    assert out["messages"][-1].status == "error"
    assert out["messages"][-1].response_metadata["toolbrake"]["code"] == "LOOP_BRAKE"

    # Another thread on the same store is not affected.
    graph.invoke(turn, thread("Y"))
    assert n.runs == 1


# -- 6. asks: LangGraph interrupts with a checkpointer, the approver without ---------------


def ask_agent(brake: Brake, n: Counter, checkpointer: Any, times: int = 4) -> tuple:
    model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, times, "k"))
    agent = create_agent(
        model, [n.same()], middleware=[ToolBrakeMiddleware(brake)], checkpointer=checkpointer
    )
    return agent, model


def run_until_ask(agent: Any, config: dict) -> Any:
    result = agent.invoke({"messages": [HumanMessage("go")]}, config)
    assert "__interrupt__" in result, "the ask must reach LangGraph's interrupt"
    return result["__interrupt__"][0]


def test_ask_becomes_an_interrupt_and_approval_runs_the_call() -> None:
    brake = Brake(config=ASK)
    n = Counter()
    agent, model = ask_agent(brake, n, InMemorySaver())
    config = thread("ask1")

    pending = run_until_ask(agent, config)
    ran_before = n.runs
    assert pending.value["type"] == "tool_approval" and pending.value["name"] == "lookup"
    assert pending.value["description"] and pending.value["toolbrake"]["verdict"] == "ask"
    # Issue 41: the shape of HumanInTheLoopMiddleware's requests too, answered the same way.
    assert pending.value["action_requests"][0]["name"] == "lookup"
    assert pending.value["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]

    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)

    assert "__interrupt__" not in result
    assert n.runs == ran_before + 1, "an approved call runs"
    assert refused(tool_messages(result)) == []


def test_ask_rejected_through_the_interrupt_is_refused() -> None:
    brake = Brake(config=ASK)
    n = Counter()
    agent, model = ask_agent(brake, n, InMemorySaver())
    config = thread("ask2")

    run_until_ask(agent, config)
    ran_before = n.runs
    result = agent.invoke(Command(resume={"type": "reject", "message": "stop polling"}), config)

    assert n.runs == ran_before, "a rejected call never runs"
    last = tool_messages(result)[-1]
    assert last.status == "error" and "stop polling" in last.content
    assert model.received[-1][-1].content == last.content


def test_an_ask_inside_a_sub_agent_surfaces_through_the_parent() -> None:
    brake = Brake(ASK)
    n = Counter()
    lookup = n.same()
    inner = create_agent(
        ScriptedModel(replies=repeat("lookup", {"q": "x"}, 4, "in")),
        [lookup],
        middleware=[ToolBrakeMiddleware(brake)],
        name="researcher",
    )

    @tool
    def research(topic: str) -> str:
        """Ask the researcher."""
        return inner.invoke({"messages": [HumanMessage(topic)]})["messages"][-1].content

    outer = create_agent(
        ScriptedModel(replies=[call("research", {"topic": "x"}, "o1")]),
        [research],
        middleware=[ToolBrakeMiddleware(brake)],
        checkpointer=InMemorySaver(),
    )

    pending = run_until_ask(outer, thread("P"))
    assert pending.value["toolbrake"]["session"] == "P#agent:researcher"
    assert n.runs == 3
    result = outer.invoke(Command(resume=True), thread("P"))

    assert n.runs == 4 and tool_messages(result)[-1].content == "done"
    # The parent's call, interrupted and run again on resume, counted once and not as a failure.
    fp = brake.explain("research", {"topic": "x"}, session="P")["breaker"]["fingerprints"][0]
    assert (fp["count"], fp["failures"]) == (1, 0)


@pytest.mark.parametrize("approve", [True, False])
def test_ask_without_checkpointer_goes_to_the_approver(approve: bool) -> None:
    asked = []
    brake = Brake(config=ASK, approver=lambda d: asked.append(d.message) or approve)
    n = Counter()
    agent, _ = ask_agent(brake, n, None)

    result = agent.invoke({"messages": [HumanMessage("go")]}, thread("ask3"))

    assert asked, "the Brake's approver must be asked"
    assert "__interrupt__" not in result
    statuses = [m.status for m in tool_messages(result)]
    assert statuses[-1] == ("success" if approve else "error")


def test_approved_from_reads_the_usual_answers() -> None:
    assert approved_from({"type": "approve"}) == (True, None)
    assert approved_from({"type": "reject", "message": "no"}) == (False, "no")
    assert approved_from({"decisions": [{"type": "approve"}]}) == (True, None)
    assert approved_from(True) == (True, None) and approved_from("yes") == (True, None)
    assert approved_from(None) == (False, None) and approved_from({"type": "edit"}) == (False, None)


# -- the host never breaks ------------------------------------------------------------------


class BrokenBrake:
    """A brake whose every call fails (a bug, a store gone)."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def fail(*a: Any, **k: Any) -> Any:
            raise RuntimeError("toolbrake is broken")

        return fail


def test_a_failing_brake_does_not_break_the_run() -> None:
    n = Counter()
    model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, 3))
    agent = create_agent(model, [n.same()], middleware=[ToolBrakeMiddleware(BrokenBrake())])  # type: ignore[arg-type]

    result = agent.invoke({"messages": [HumanMessage("go")]}, thread("b"))

    assert n.runs == 3 and result["messages"][-1].content == "done"


# -- 7. the ImportError names the extra -----------------------------------------------------


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in ("langchain", "langgraph"):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.delitem(sys.modules, "toolbrake.integrations.langchain", raising=False)

    with pytest.raises(ImportError) as err:
        importlib.import_module("toolbrake.integrations.langchain")

    assert 'pip install "./bindings/python[langchain]"' in str(err.value)


def test_without_a_thread_each_invocation_is_its_own_session_and_ends_with_it() -> None:
    # Issue 41, defect 7: every run without a thread_id counted in one session "default":
    # a second user's legitimate identical calls were refused.
    brake = Brake()
    n = Counter()
    mw = ToolBrakeMiddleware(brake, reset_on_user_message=False)
    model = ScriptedModel(replies=repeat("lookup", {"q": "x"}, 2, "a") + repeat("lookup", {"q": "x"}, 2, "b"))
    agent = create_agent(model, [n.same()], middleware=[mw])

    r1 = agent.invoke({"messages": [HumanMessage("user one")]})
    r2 = agent.invoke({"messages": [HumanMessage("user two")]})

    assert n.runs == 4
    assert refused(tool_messages(r1)) == [] and refused(tool_messages(r2)) == []
    # Issue 41, defect 6: the run's session ends with the run.
    assert brake.explain("lookup", {"q": "x"}, session="default")["breaker"]["fingerprints"][0]["count"] == 0
    first_id = r1["messages"][0].id
    fps = brake.explain("lookup", {"q": "x"}, session=f"run:{first_id}")["breaker"]["fingerprints"]
    assert fps[0]["count"] == 0  # forgotten: ended
