"""End-to-end tests of toolbrake.integrations.google_adk against the real Google ADK.

The model is a scripted ``BaseLlm`` subclass (no network): it answers each request with
the next step of its script and keeps every request it received, so the tests assert on
what the model read.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import textwrap
from typing import Any, AsyncGenerator, List, Optional

import pytest

os.environ.setdefault("GOOGLE_API_KEY", "dummy-key-no-network")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("ADK_DISABLE_TELEMETRY", "true")

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools.agent_tool import AgentTool  # noqa: E402
from google.genai import types  # noqa: E402
from pydantic import Field  # noqa: E402

from toolbrake import Brake  # noqa: E402
from toolbrake.integrations.google_adk import ToolBrakePlugin  # noqa: E402

from conftest import HERE, PKG  # noqa: E402


# Any attempt to reach the network fails a test (conftest.py).
pytestmark = pytest.mark.usefixtures("no_network")


# -- the scripted model -------------------------------------------------------------------


def call(name: str, **args: Any) -> types.Part:
    """A function-call part of a model turn."""
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


class ScriptedLlm(BaseLlm):
    """A model that plays a script: each entry is a list of parts or a text answer.

    When the script is exhausted it answers "done".
    """

    model: str = "scripted"
    script: List[Any] = Field(default_factory=list)
    requests: List[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request.model_copy(deep=True))
        step = self.script.pop(0) if self.script else "done"
        parts = [types.Part(text=step)] if isinstance(step, str) else list(step)
        yield LlmResponse(content=types.Content(role="model", parts=parts))

    def function_responses(self, index: int = -1) -> List[types.FunctionResponse]:
        """The function responses in the request the model got at ``index``."""
        out = []
        for content in self.requests[index].contents:
            for part in content.parts or []:
                if part.function_response is not None:
                    out.append(part.function_response)
        return out


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def turn(runner: InMemoryRunner, session_id: str, message: types.Content, user_id: str = "u") -> list:
    """One run of the agent: every event it produced."""
    return [e async for e in runner.run_async(user_id=user_id, session_id=session_id, new_message=message)]


async def new_session(runner: InMemoryRunner, session_id: Optional[str] = None, user_id: str = "u") -> str:
    s = await runner.session_service.create_session(app_name=runner.app_name, user_id=user_id, session_id=session_id)
    return s.id


def make(brake: Brake, script: list, tools: list, **plugin_kw: Any):
    model = ScriptedLlm(script=script)
    agent = LlmAgent(name="root", model=model, tools=tools, instruction="Use the tools.")
    return model, runner_for(agent, ToolBrakePlugin(brake, **plugin_kw))


def runner_for(agent: LlmAgent, plugin: ToolBrakePlugin) -> InMemoryRunner:
    """An in-memory runner of an App with the plugin."""
    return InMemoryRunner(app=App(name="test_app", root_agent=agent, plugins=[plugin]))


class Counter:
    """Tool bodies that count their runs."""

    def __init__(self) -> None:
        self.runs = 0

    def ping(self, x: int) -> str:
        """Returns the same text every time."""
        self.runs += 1
        return "pong"

    def poll(self, job: str) -> str:
        """Returns a different text every time (a job making progress)."""
        self.runs += 1
        return f"{job}: {self.runs * 10}% done"

    def boom(self, path: str) -> str:
        """Always fails."""
        self.runs += 1
        raise FileNotFoundError(f"no such file: {path}")


# -- 1. the third identical call is refused -------------------------------------------------


def test_third_identical_call_is_refused_and_the_model_reads_why():
    c = Counter()
    model, runner = make(Brake(), [[call("ping", x=1)]] * 3, [c.ping])

    async def go():
        sid = await new_session(runner)
        await turn(runner, sid, user("ping it"))

    asyncio.run(go())
    assert c.runs == 2
    responses = model.function_responses()
    assert [r.response for r in responses[:2]] == [{"result": "pong"}] * 2
    refused = responses[2].response
    assert set(refused) == {"error"}
    assert refused["error"].startswith("loop brake:")
    assert 'tool "ping" called 3 times in a row' in refused["error"]


# -- 2. progress is not a loop ----------------------------------------------------------------


def test_a_call_whose_output_changes_is_not_stopped():
    c = Counter()
    model, runner = make(Brake(), [[call("poll", job="build")]] * 5, [c.poll])

    async def go():
        sid = await new_session(runner)
        await turn(runner, sid, user("wait for the build"))

    asyncio.run(go())
    assert c.runs == 5
    outputs = [r.response for r in model.function_responses()]
    assert outputs == [{"result": f"build: {n}% done"} for n in (10, 20, 30, 40, 50)]


# -- 3. failures feed the failure track ---------------------------------------------------------


def test_a_raising_tool_is_recorded_as_a_failure_and_adk_still_raises():
    c = Counter()
    brake = Brake()
    model, runner = make(brake, [[call("boom", path="/x")]], [c.boom])

    async def go():
        sid = await new_session(runner)
        with pytest.raises(FileNotFoundError):
            await turn(runner, sid, user("read it"))
        return sid

    sid = asyncio.run(go())
    assert c.runs == 1
    fp = brake.explain("boom", {"path": "/x"}, session=sid)["breaker"]["fingerprints"][0]
    assert fp["failures"] == 1 and fp["failures_since_success"] == 1


def test_repeated_failures_reach_the_model_as_the_breakers_advice():
    c = Counter()
    brake = Brake({"streak": {"enabled": False}})
    model, runner = make(brake, [[call("boom", path="/x")]] * 3, [c.boom], errors_to_model=True)

    async def go():
        sid = await new_session(runner)
        await turn(runner, sid, user("read it"))
        return sid

    sid = asyncio.run(go())
    assert c.runs == 3
    responses = [r.response for r in model.function_responses()]
    assert all(r["error"] == "FileNotFoundError: no such file: /x" for r in responses)
    assert "advisories" not in responses[0] and "advisories" not in responses[1]
    (advice,) = responses[2]["advisories"]
    assert "has failed 3 times in a row" in advice
    assert brake.explain("boom", {"path": "/x"}, session=sid)["breaker"]["fingerprints"][0]["failures"] == 3


def test_a_dict_with_error_status_counts_as_a_failure():
    brake = Brake()

    def lookup(key: str) -> dict:
        """ADK's convention for a failed tool: a status field."""
        return {"status": "error", "error_message": f"{key} not found"}

    model, runner = make(brake, [[call("lookup", key="k")]] * 2, [lookup])

    async def go():
        sid = await new_session(runner)
        await turn(runner, sid, user("look up k"))
        return sid

    sid = asyncio.run(go())
    fp = brake.explain("lookup", {"key": "k"}, session=sid)["breaker"]["fingerprints"][0]
    assert fp["count"] == 2 and fp["failures"] == 2


# -- 4. sessions are ADK's sessions ---------------------------------------------------------------


def test_two_adk_sessions_do_not_interfere():
    c = Counter()
    brake = Brake()
    model, runner = make(brake, [[call("ping", x=1)]] * 2 + ["ok"] + [[call("ping", x=1)]] * 2, [c.ping])

    async def go():
        a = await new_session(runner)
        b = await new_session(runner)
        await turn(runner, a, user("ping"))
        await turn(runner, b, user("ping"))

    asyncio.run(go())
    assert c.runs == 4
    assert not any("error" in r.response for r in model.function_responses())


def test_explicit_session_override_shares_one_count():
    c = Counter()
    model, runner = make(Brake(), [[call("ping", x=1)]] * 2 + ["ok"] + [[call("ping", x=1)]], [c.ping],
                         session=lambda s: s.user_id, reset_on_user_message=False)

    async def go():
        a = await new_session(runner)
        b = await new_session(runner)
        await turn(runner, a, user("ping"))
        await turn(runner, b, user("ping"))

    asyncio.run(go())
    assert c.runs == 2
    assert model.function_responses()[-1].response["error"].startswith("loop brake:")


def test_a_real_user_message_starts_the_session_afresh():
    def run(reset: bool) -> int:
        c = Counter()
        model, runner = make(Brake(), [[call("ping", x=1)]] * 2 + ["ok"] + [[call("ping", x=1)]], [c.ping],
                             reset_on_user_message=reset)

        async def go():
            sid = await new_session(runner)
            await turn(runner, sid, user("ping twice"))
            await turn(runner, sid, user("ping once more"))

        asyncio.run(go())
        return c.runs

    assert run(reset=True) == 3
    assert run(reset=False) == 2


def test_a_transfer_target_counts_as_a_sub_agent_session():
    c = Counter()
    brake = Brake()
    model = ScriptedLlm(script=[[call("transfer_to_agent", agent_name="helper")]] + [[call("ping", x=1)]] * 2)
    helper = LlmAgent(name="helper", model=model, tools=[c.ping], description="pings")
    root = LlmAgent(name="root", model=model, sub_agents=[helper], description="root")
    runner = runner_for(root, ToolBrakePlugin(brake))

    async def go():
        sid = await new_session(runner)
        await turn(runner, sid, user("ask the helper"))
        return sid

    sid = asyncio.run(go())
    assert c.runs == 2
    sub = brake.explain("ping", {"x": 1}, session=f"{sid}#agent:helper")
    assert sub["streak"]["in_a_row"] == 2
    assert brake.explain("ping", {"x": 1}, session=sid)["streak"]["in_a_row"] == 0


def test_calls_inside_an_agent_tool_count_under_the_callers_session():
    c = Counter()
    brake = Brake()
    inner_model = ScriptedLlm(script=[[call("ping", x=1)]] * 2 + ["pinged"] + [[call("ping", x=1)]] + ["pinged"])
    helper = LlmAgent(name="helper", model=inner_model, tools=[c.ping], description="pings")
    outer_model = ScriptedLlm(script=[[call("helper", request="ping")]] * 2)
    root = LlmAgent(name="root", model=outer_model, tools=[AgentTool(agent=helper)])
    runner = runner_for(root, ToolBrakePlugin(brake))

    async def go():
        sid = await new_session(runner)
        await turn(runner, sid, user("use the helper twice"))
        return sid

    sid = asyncio.run(go())
    # The AgentTool's second run is a fresh ADK session, but its calls count under the
    # caller's session as sub-agent "helper": its first ping there is the third in a row.
    assert c.runs == 2
    inner_responses = [r.response for r in inner_model.function_responses()]
    assert inner_responses[-1]["error"].startswith("loop brake:")
    assert brake.explain("ping", {"x": 1}, session=f"{sid}#agent:helper")["streak"]["in_a_row"] == 3


# -- 5. two processes share one session through SQLite -----------------------------------------------


SUBPROCESS = textwrap.dedent(
    """
    import asyncio, sys
    sys.path[:0] = [{here!r}, {pkg!r}]
    from test_google_adk import Counter, ScriptedLlm, call, make, new_session, turn, user
    from toolbrake import Brake

    c = Counter()
    model, runner = make(Brake(store={store!r}), [[call("ping", x=1)]] * 2, [c.ping],
                         reset_on_user_message=False)

    async def go():
        sid = await new_session(runner, session_id="X")
        await turn(runner, sid, user("ping"))

    asyncio.run(go())
    assert c.runs == 2, c.runs
    print("ran", c.runs)
    """
)


def test_two_processes_share_one_session_through_sqlite(tmp_path, run_python):
    store = "sqlite:" + str(tmp_path / "s.db")
    assert "ran 2" in run_python(SUBPROCESS.format(here=HERE, pkg=PKG, store=store))

    c = Counter()
    model, runner = make(Brake(store=store), [[call("ping", x=1)]], [c.ping], reset_on_user_message=False)

    async def go():
        sid = await new_session(runner, session_id="X")
        await turn(runner, sid, user("ping"))

    asyncio.run(go())
    assert c.runs == 0
    assert model.function_responses()[-1].response["error"].startswith("loop brake:")


# -- 6. asks go through ADK's tool confirmation ---------------------------------------------------------

ASKS = {
    "streak": {"enabled": False},
    "breaker": {"warn_at": 2, "summarize_at": 3, "limits": {"exact": 4}, "on_limit": "ask"},
}


def confirmation_request(events: list) -> types.FunctionCall:
    calls = [fc for e in events for fc in e.get_function_calls() if fc.name == "adk_request_confirmation"]
    assert len(calls) == 1, calls
    return calls[0]


def confirm(request: types.FunctionCall, confirmed: bool) -> types.Content:
    return types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(
            name="adk_request_confirmation", id=request.id, response={"confirmed": confirmed}))],
    )


@pytest.mark.parametrize("confirmed", [True, False])
def test_ask_pauses_the_run_for_adk_confirmation(confirmed):
    c = Counter()
    model, runner = make(Brake(ASKS), [[call("ping", x=1)]] * 4 + ["after the answer"], [c.ping])

    async def go():
        sid = await new_session(runner)
        events = await turn(runner, sid, user("ping four times"))
        request = confirmation_request(events)
        assert c.runs == 3  # the fourth call waits for the user
        hint = request.args["toolConfirmation"]["hint"]
        assert hint.startswith("toolbrake: this call is about to be blocked as a repeat")
        asked = len(model.requests)
        await turn(runner, sid, confirm(request, confirmed))
        return asked

    asked = asyncio.run(go())
    # Advisories before the gate reached the model with the results.
    responses = model.function_responses()
    assert "CONVERGENCE_CHECK" in responses[1].response["advisories"][0]
    assert responses[0].response == {"result": "pong"}
    last = responses[-1].response
    if confirmed:
        assert c.runs == 4
        assert last["result"] == "pong"
    else:
        assert c.runs == 3
        assert last["error"].startswith("REPEAT_TOOL_BLOCKED")
    assert len(model.requests) == asked + 1


@pytest.mark.parametrize("approve", [True, False])
def test_ask_resolve_uses_the_brakes_approver(approve):
    c = Counter()
    seen = []

    def approver(d):
        seen.append(d.verdict)
        return approve

    model, runner = make(Brake(ASKS, approver=approver), [[call("ping", x=1)]] * 4, [c.ping], ask="resolve")

    async def go():
        sid = await new_session(runner)
        events = await turn(runner, sid, user("ping four times"))
        assert not [fc for e in events for fc in e.get_function_calls() if fc.name == "adk_request_confirmation"]

    asyncio.run(go())
    assert seen == ["ask"]
    assert c.runs == (4 if approve else 3)


# -- never break the host -------------------------------------------------------------------------------------


class BrokenBrake:
    """A Brake whose every method fails (a bug in toolbrake, not a refusal)."""

    def __getattr__(self, name: str) -> Any:
        def fail(*a: Any, **k: Any) -> Any:
            raise RuntimeError("toolbrake is broken")

        return fail


def test_an_error_inside_toolbrake_does_not_break_the_run():
    c = Counter()
    model, runner = make(BrokenBrake(), [[call("ping", x=1)]] * 3, [c.ping])  # type: ignore[arg-type]

    async def go():
        sid = await new_session(runner)
        await turn(runner, sid, user("ping"))

    asyncio.run(go())
    assert c.runs == 3
    assert [r.response for r in model.function_responses()] == [{"result": "pong"}] * 3


# -- 7. without the framework ------------------------------------------------------------------------------


def test_import_without_google_adk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.adk", None)
    monkeypatch.delitem(sys.modules, "toolbrake.integrations.google_adk", raising=False)
    with pytest.raises(ImportError) as err:
        importlib.import_module("toolbrake.integrations.google_adk")
    assert 'pip install "./bindings/python[google-adk]"' in str(err.value)
