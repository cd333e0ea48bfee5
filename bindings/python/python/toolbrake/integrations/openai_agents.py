"""toolbrake for the OpenAI Agents SDK (``openai-agents``): tool guardrails on every function tool.

``protect(agent, brake)`` attaches a toolbrake tool *input* guardrail and tool *output*
guardrail to every function tool of ``agent``, of the agents it hands off to and of the agents
it uses as tools, recursively. Before a call, the input guardrail asks the brake; a refused
call never reaches the tool, and the model reads toolbrake's message as the tool's output
(``ToolGuardrailFunctionOutput.reject_content``). After the call, the output guardrail records
the outcome (a tool that raised is recorded as a failure) and appends toolbrake's advisories
to a text result.

Example::

    from agents import Agent, Runner, function_tool
    from toolbrake import Brake
    from toolbrake.integrations.openai_agents import protect

    @function_tool
    def search(query: str) -> str:
        return "..."

    agent = protect(Agent(name="assistant", tools=[search]), Brake())
    result = await Runner.run(agent, "Find the release date", context=my_ctx)

Sessions: without ``session=``, each ``Runner.run`` (with everything it runs: handoffs, agents
used as tools) is one toolbrake session, ended when the run ends (the final agent's
``on_end`` hook; ``protect`` keeps the agent's own ``hooks``). To count across the runs of one conversation, pass
``session="thread-42"`` or a callable that reads it from the run context, e.g.
``protect(agent, brake, session=lambda ctx: ctx.context.thread_id)`` (``ctx`` is the SDK's
``RunContextWrapper``; ``ctx.context`` is what you passed as ``Runner.run(context=...)``).
A tool run by another agent than ``agent`` (a handoff target, an agent used as a tool) counts
in that agent's sub-agent session (``agent=<its name>``).

Asks: by default an ``ask`` verdict goes to ``brake.resolve`` (the Brake's ``approver``, else a
refusal). With ``approvals=True`` it becomes the SDK's human-in-the-loop approval instead: the run
stops with ``result.interruptions``; ``pending_ask(item)`` gives toolbrake's question for the
operator; ``state.approve(item)``, or ``state.reject(item, rejection_message=decline(item))``
(the model reads why the call did not run), on ``result.to_state()``, then run again::

    result = await Runner.run(agent, "go")
    for item in result.interruptions:
        ask = pending_ask(item)           # None: an approval of the tool's own
        state = result.to_state()
        if ask is not None and operator_says_yes(ask.message):
            state.approve(item)
        else:
            state.reject(item, rejection_message=decline(item))
        result = await Runner.run(agent, state)

Notes: the SDK's output guardrails see a failed tool's error *text*, not that it failed, so
``protect`` also wraps each tool's own invocation (inside the SDK's failure handler, which still
formats the error for the model) to record the exception. Advisories are appended through the
output guardrail's ``reject_content`` (the result text plus the advisories), so such a call shows
as rejected in ``result.tool_output_guardrail_results`` with ``output_info`` saying so.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

from toolbrake.integrations import require

require("agents", "openai-agents")

from agents import (  # noqa: E402
    Agent,
    AgentHooks,
    FunctionTool,
    RunContextWrapper,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)

from toolbrake import Brake, Decision, Recorded  # noqa: E402

__all__ = ["protect", "pending_ask", "decline", "GUARDRAIL_NAME"]

logger = logging.getLogger("toolbrake.integrations.openai_agents")

GUARDRAIL_NAME = "toolbrake"
"""The name of the tool guardrails toolbrake attaches (see ``result.tool_input_guardrail_results``)."""

SessionSpec = Union[None, str, Callable[[RunContextWrapper[Any]], Optional[str]]]
"""``None`` (one session per ``Runner.run``), a fixed key, or ``ctx -> key`` (``None``: per run)."""

_CALL_ATTR = "_toolbrake_call"
_RUN_KEY_ATTR = "_toolbrake_run_key"
_MARK_ATTR = "_toolbrake_protector"

# The protectors with approvals on, for pending_ask.
_APPROVING: "weakref.WeakSet[_Protector]" = weakref.WeakSet()
_PENDING_MAX = 10_000
_REFUSED = "toolbrake refused this call."


@dataclass
class _Call:
    """What toolbrake knows about one tool call between its guardrails."""

    brake: Brake
    tool: str
    call_id: str
    session: str
    agent: Optional[str]
    decision: Decision
    args: Any = None
    runs: bool = True
    done: bool = False  # brake.after was called
    recorded: Optional[Recorded] = None
    advisories: List[str] = field(default_factory=list)


def pending_ask(item: Any) -> Optional[Decision]:
    """The toolbrake ``ask`` behind an approval interruption, or ``None``.

    ``item`` is a ``ToolApprovalItem`` from ``result.interruptions`` (or its tool call id).
    Show ``decision.message`` to the operator (it is written for them). To refuse, tell
    toolbrake and give the model its refusal: ``state.reject(item,
    rejection_message=decline(item))``.
    """
    found = _pending_for(item)
    return found[1].decision if found is not None else None


def _pending_for(item: Any) -> "Optional[tuple[_Protector, _Call]]":
    """The protector and pending ask behind ``item`` (matched by call id and, when the item
    names it, by tool: call ids repeat between runs)."""
    call_id = item if isinstance(item, str) else _item_call_id(item)
    if call_id is None:
        return None
    tool = None if isinstance(item, str) else _item_tool(item)
    for protector in list(_APPROVING):
        with protector.lock:
            call = protector.pending.get(call_id)
        if call is not None and call.decision.verdict == "ask" and (tool is None or call.tool == tool):
            return protector, call
    return None


def decline(item: Any) -> Optional[str]:
    """The operator declined toolbrake's ``ask`` behind an approval interruption: toolbrake
    records it, and this returns the text for the model (why the call did not run, written
    for the model, not the operator's question), or ``None`` if no ask of toolbrake's is
    behind ``item``. Use it as ``state.reject(item, rejection_message=decline(item))``."""
    found = _pending_for(item)
    if found is None:
        return None
    protector, call = found
    with protector.lock:
        protector.pending.pop(call.call_id, None)
    try:
        d = call.brake.answer(call.call_id, False, session=call.session, agent=call.agent)
        return d.message or _REFUSED
    except Exception:
        logger.warning("toolbrake could not record the refusal of %s", call.call_id, exc_info=True)
        return _REFUSED


def protect(
    agent: Agent[Any],
    brake: Brake,
    session: SessionSpec = None,
    *,
    approvals: bool = False,
) -> Agent[Any]:
    """Guard every function tool of ``agent`` and of the agents it reaches, and return ``agent``.

    Args:
        agent: the agent given to ``Runner.run``. Its function tools, and recursively those of
            its handoff targets and of agents it uses as tools (``agent.as_tool``), get a
            toolbrake tool input guardrail and tool output guardrail (appended; a tool already
            protected has its toolbrake guardrails replaced).
        brake: the ``toolbrake.Brake`` that judges the calls.
        session: the session key: ``None`` (each ``Runner.run`` is a session), a string, or a
            callable ``(RunContextWrapper) -> str | None`` reading it from the run context.
        approvals: ``True`` to turn toolbrake's ``ask`` into the SDK's tool approval
            (``needs_approval``: the run is interrupted; see ``pending_ask``). ``False``
            (default): an ask is settled by ``brake.resolve`` (the Brake's approver, else refused).
            The SDK's rule for callable approval policies (a call whose validated arguments
            differ from the model's, such as an omitted default, needs manual approval without
            asking the policy) stays for the tool's own ``needs_approval``; toolbrake's judges
            the model's arguments and interrupts only for its own ``ask``.

    Tools the SDK builds at run time (MCP servers' tools) and hosted, shell, computer or
    apply-patch tools have no tool guardrails in the SDK and are not judged.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"protect() takes an agents.Agent, not {type(agent).__name__}")
    protector = _Protector(brake, session, root=agent.name, approvals=approvals)
    seen: set = set()
    _walk(agent, protector, seen, final=True)
    return agent


def _walk(agent: Any, protector: "_Protector", seen: set, *, final: bool) -> None:
    """Protect ``agent``'s function tools, then its handoff targets and agent tools.
    ``final``: the agent can end the run (the root, a handoff target), not an agent used as
    a tool (its end is inside the run)."""
    if id(agent) in seen:
        return
    seen.add(id(agent))
    if final:
        protector.end_with(agent)
    for tool in list(getattr(agent, "tools", None) or []):
        if isinstance(tool, FunctionTool):
            protector.attach(tool, agent.name)
            inner = getattr(tool, "_agent_instance", None)  # agent.as_tool(...)
            if isinstance(inner, Agent):
                _walk(inner, protector, seen, final=False)
    for h in list(getattr(agent, "handoffs", None) or []):
        target: Any = h
        if not isinstance(h, Agent):
            ref = getattr(h, "_agent_ref", None)  # agents.handoff(agent) keeps a weak reference
            target = ref() if callable(ref) else None
        if isinstance(target, Agent):
            _walk(target, protector, seen, final=True)


class _EndingHooks(AgentHooks[Any]):
    """The agent's own hooks, plus: when it ends the run, the run's session ends."""

    def __init__(self, inner: Optional[Any], protector: "_Protector") -> None:
        self.inner = inner
        self.protector = protector

    async def on_start(self, context: Any, agent: Any) -> None:
        if self.inner is not None:
            await self.inner.on_start(context, agent)

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        try:
            if self.inner is not None:
                await self.inner.on_end(context, agent, output)
        finally:
            self.protector.end_run(context)

    async def on_handoff(self, context: Any, agent: Any, source: Any) -> None:
        if self.inner is not None:
            await self.inner.on_handoff(context, agent, source)

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        if self.inner is not None:
            await self.inner.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        if self.inner is not None:
            await self.inner.on_tool_end(context, agent, tool, result)

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)


class _Protector:
    """The guardrails of one ``protect`` call: one brake, one session rule, one root agent."""

    def __init__(self, brake: Brake, session: SessionSpec, *, root: str, approvals: bool) -> None:
        self.brake = brake
        self.session_spec = session
        self.root = root
        self.approvals = approvals
        self.input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=self._before, name=GUARDRAIL_NAME
        )
        self.output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            guardrail_function=self._after, name=GUARDRAIL_NAME
        )
        self.input_guardrail.__dict__[_MARK_ATTR] = True
        self.output_guardrail.__dict__[_MARK_ATTR] = True
        # Calls judged in needs_approval (approvals=True), by the SDK's tool call id, until
        # their input guardrail runs.
        self.pending: Dict[str, _Call] = {}
        self.lock = threading.Lock()
        if approvals:
            _APPROVING.add(self)

    # -- wiring -------------------------------------------------------------------------------

    def attach(self, tool: FunctionTool, agent_name: str) -> None:
        """Add this protector's guardrails (and failure capture, approvals) to ``tool``."""
        tool.tool_input_guardrails = [
            g for g in (tool.tool_input_guardrails or []) if not _is_ours(g)
        ] + [self.input_guardrail]
        tool.tool_output_guardrails = [
            g for g in (tool.tool_output_guardrails or []) if not _is_ours(g)
        ] + [self.output_guardrail]
        _capture_failures(tool)
        if self.approvals:
            # needs_approval is not told which agent runs the tool: the agent it was found in.
            self._wrap_needs_approval(tool, None if agent_name == self.root else agent_name)
        elif "_toolbrake_own_needs_approval" in tool.__dict__:  # protected before with approvals
            tool.needs_approval = tool.__dict__.pop("_toolbrake_own_needs_approval")
            _restore_prepare(tool)

    def _wrap_needs_approval(self, tool: FunctionTool, agent: Optional[str]) -> None:
        original = getattr(tool, "_toolbrake_own_needs_approval", tool.needs_approval)
        tool.__dict__["_toolbrake_own_needs_approval"] = original
        protector = self
        # The SDK's rule for a callable policy: a call whose validated arguments differ from
        # the model's (an omitted default, a coerced value) needs manual approval, and the
        # policy is never asked. toolbrake judges the model's arguments, so for its policy the
        # rule does not apply: the SDK is told the arguments cannot be prepared ahead (as for
        # a tool without a callable policy; the tool validates them when it runs), and the
        # rule is kept for the tool's own policy below.
        prepare = _own_prepare(tool)

        async def needs_approval(ctx: RunContextWrapper[Any], params: Dict[str, Any], call_id: str) -> bool:
            own = original
            if callable(own):
                prepared = None
                if prepare is not None:
                    try:
                        prepared = prepare(json.dumps(params), tool.name)
                    except Exception:
                        prepared = None
                if prepared is not None and not getattr(prepared, "unchanged", True):
                    own = True  # what the SDK would decide without toolbrake
                else:
                    res = own(ctx, params, call_id)
                    if hasattr(res, "__await__"):
                        res = await res
                    own = bool(res)
            call = protector._judge(ctx, tool.name, params, call_id, agent)
            if call is None:
                return bool(own)
            with protector.lock:
                if len(protector.pending) >= _PENDING_MAX:
                    protector.pending.pop(next(iter(protector.pending)))
                protector.pending[call_id] = call
            return bool(own) or call.decision.verdict == "ask"

        tool.needs_approval = needs_approval

    def end_with(self, agent: Agent[Any]) -> None:
        """End the run's own session when ``agent`` ends the run (its ``hooks``, kept)."""
        hooks = agent.hooks
        if isinstance(hooks, _EndingHooks):
            hooks = hooks.inner
        agent.hooks = _EndingHooks(hooks, self)

    def end_run(self, ctx: Any) -> None:
        """The run is over: the session made for it (no ``session=`` key) is freed."""
        try:
            spec = self.session_spec
            if isinstance(spec, str) or (callable(spec) and spec(ctx) is not None):
                return  # the caller's session goes on across runs
            key = getattr(getattr(ctx, "usage", None), _RUN_KEY_ATTR, None)
            if isinstance(key, str):
                self.brake.end(key)
        except Exception:  # never break the host
            logger.warning("toolbrake could not end the run's session", exc_info=True)

    # -- sessions -----------------------------------------------------------------------------

    def _session(self, ctx: RunContextWrapper[Any]) -> str:
        spec = self.session_spec
        if isinstance(spec, str):
            return spec
        if callable(spec):
            key = spec(ctx)
            if key is not None:
                return str(key)
        return _run_key(ctx)

    def _agent(self, agent: Any) -> Optional[str]:
        name = getattr(agent, "name", None)
        return None if name is None or name == self.root else str(name)

    # -- judging ------------------------------------------------------------------------------

    def _judge(
        self, ctx: RunContextWrapper[Any], tool: str, args: Any, call_id: str, agent: Optional[str]
    ) -> Optional[_Call]:
        """``brake.before`` for one call; ``None`` when toolbrake itself failed (the call runs)."""
        try:
            session = self._session(ctx)
            d = self.brake.before(tool, args, session=session, call_id=call_id, agent=agent)
        except Exception:  # never break the host
            logger.warning("toolbrake could not judge %s; the call runs", tool, exc_info=True)
            return None
        return _Call(self.brake, tool, call_id, session, agent, d, args, runs=d.runs)

    async def _before(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        call_id = ctx.tool_call_id
        approved = _approval(ctx)
        args = _parse_args(ctx.tool_arguments)
        with self.lock:
            call = self.pending.get(call_id)
            if call is not None and (call.tool != ctx.tool_name or call.args != args):
                call = None  # a stale entry under a reused call id
            elif call is not None and call.decision.verdict == "ask" and approved is None:
                # Input guardrails run before the approval (RunConfig pre-approval guardrails):
                # the operator has not answered toolbrake's ask yet.
                return ToolGuardrailFunctionOutput.allow(output_info=_info(call.decision))
            self.pending.pop(call_id, None)
        if call is not None and call.decision.verdict == "ask":
            # The run stopped for this ask and the operator approved it (a rejected call never
            # reaches its guardrails).
            self._approve(call)
        if call is None:
            call = self._judge_here(ctx, args, approved, self._agent(data.agent))
            if call is None:
                return ToolGuardrailFunctionOutput.allow()
        d = call.decision
        if not call.runs:
            return ToolGuardrailFunctionOutput.reject_content(d.message or _REFUSED, output_info=_info(d))
        call.advisories = list(d.advisories or [])
        setattr(ctx, _CALL_ATTR, call)
        return ToolGuardrailFunctionOutput.allow(output_info=_info(d))

    def _judge_here(self, ctx: Any, args: Any, approved: Optional[bool], agent: Optional[str]) -> Optional[_Call]:
        """Judge a call in its input guardrail (no judgement from ``needs_approval`` to reuse)."""
        call_id = ctx.tool_call_id
        if approved and self.approvals:
            # Approved in a run resumed elsewhere (another process, after a restart): an ask still
            # pending in a shared store is answered, not asked again.
            try:
                session = self._session(ctx)
                d = self.brake.answer(call_id, True, session=session, agent=agent)
                return _Call(self.brake, ctx.tool_name, call_id, session, agent, d, args, runs=d.runs)
            except ValueError:
                pass  # toolbrake did not ask about this call: judge it
            except Exception:
                logger.warning("toolbrake could not record the approval of %s", call_id, exc_info=True)
        call = self._judge(ctx, ctx.tool_name, args, call_id, agent)
        if call is None or call.decision.verdict != "ask":
            return call
        if approved:  # the operator approved this very call already (the tool's own approval)
            self._approve(call)
            return call
        try:
            call.decision = self.brake.resolve(call.decision)
        except Exception:  # an ask nobody could answer is refused
            logger.warning("toolbrake could not resolve an ask; refusing", exc_info=True)
        call.runs = call.decision.runs
        return call

    def _approve(self, call: _Call) -> None:
        """Tell the brake the operator approved ``call``'s ask."""
        try:
            call.decision = self.brake.answer(call.call_id, True, session=call.session, agent=call.agent)
            call.runs = call.decision.runs
        except Exception:  # the operator said yes: a toolbrake failure must not overrule that
            logger.warning("toolbrake could not record the approval of %s", call.call_id, exc_info=True)
            call.runs = True

    async def _after(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        call: Optional[_Call] = getattr(data.context, _CALL_ATTR, None)
        if call is None:
            return ToolGuardrailFunctionOutput.allow()
        try:
            delattr(data.context, _CALL_ATTR)
        except AttributeError:
            pass
        output = data.output
        if not call.done:  # else already recorded as a failure by _capture_failures
            call.done = True
            call.recorded = _record(call, output)
        advisories = call.advisories + (list(call.recorded.advisories) if call.recorded else [])
        if not advisories:
            return ToolGuardrailFunctionOutput.allow()
        if isinstance(output, str):
            text = "\n\n".join([output, *advisories])
            return ToolGuardrailFunctionOutput.reject_content(
                text, output_info={"toolbrake": "advisories appended", "advisories": advisories}
            )
        logger.info("toolbrake advisories not shown (the tool's result is not text): %s", advisories)
        return ToolGuardrailFunctionOutput.allow(output_info={"toolbrake_advisories": advisories})


def _record(call: _Call, outcome: Any) -> Optional[Recorded]:
    """``brake.after`` that never raises; values JSON cannot hold are recorded as their text."""
    try:
        try:
            return call.brake.after(call.call_id, outcome, session=call.session, agent=call.agent)
        except TypeError:
            text = str(outcome)
            return call.brake.after(call.call_id, text, session=call.session, agent=call.agent)
    except Exception:
        logger.warning("toolbrake could not record the outcome of %s", call.call_id, exc_info=True)
        return None


def _capture_failures(tool: FunctionTool) -> None:
    """Record a tool's exception as a failure before the SDK turns it into an error text.

    The output guardrail only sees the SDK's error message ("An error occurred while running
    the tool..."), not that the tool failed; toolbrake's failure track needs the exception.
    Tools made by ``function_tool`` catch it inside ``on_invoke_tool``, so the capture goes
    around the tool's own invocation, inside that handler; other ``FunctionTool``s are wrapped
    whole (their exceptions end the run, as before).
    """
    invoker = tool.on_invoke_tool
    target_owner: Any = invoker
    attr = "_invoke_tool_impl"
    impl = getattr(invoker, attr, None)
    if not callable(impl):
        target_owner, attr, impl = tool, "on_invoke_tool", invoker
    if getattr(impl, "_toolbrake_captures", False):
        return

    async def invoke(ctx: Any, input: str) -> Any:
        try:
            return await impl(ctx, input)
        except Exception as exc:
            call: Optional[_Call] = getattr(ctx, _CALL_ATTR, None)
            if call is not None and not call.done:
                call.done = True
                call.recorded = _record(call, exc)
            raise

    functools.update_wrapper(invoke, impl)
    invoke.__dict__["_toolbrake_captures"] = True
    setattr(target_owner, attr, invoke)


_PREPARE = "__agents_prepare_arguments__"
_OWN_PREPARE = "_toolbrake_own_prepare"


def _own_prepare(tool: FunctionTool) -> Optional[Callable[[str, str], Any]]:
    """Turns off the SDK's argument preparation for approval policies on ``tool`` (see
    ``_wrap_needs_approval``) and returns the tool's own, to apply the SDK's rule to the
    tool's own policy."""
    impl = getattr(tool.on_invoke_tool, "_invoke_tool_impl", None)
    d = getattr(impl, "__dict__", None)
    if not isinstance(d, dict):
        return None
    if _OWN_PREPARE not in d:
        if _PREPARE not in d:
            return None
        d[_OWN_PREPARE] = d[_PREPARE]
        d[_PREPARE] = lambda input, tool_name: None
    return d[_OWN_PREPARE]


def _restore_prepare(tool: FunctionTool) -> None:
    impl = getattr(tool.on_invoke_tool, "_invoke_tool_impl", None)
    d = getattr(impl, "__dict__", None)
    if isinstance(d, dict) and _OWN_PREPARE in d:
        d[_PREPARE] = d.pop(_OWN_PREPARE)


def _is_ours(guardrail: Any) -> bool:
    return getattr(guardrail, "name", None) == GUARDRAIL_NAME and bool(
        getattr(guardrail, "__dict__", {}).get(_MARK_ATTR)
    )


def _run_key(ctx: RunContextWrapper[Any]) -> str:
    """One key per ``Runner.run``: kept on the run's usage counter, which the run shares with
    every context it derives (tool contexts, agents used as tools)."""
    usage = getattr(ctx, "usage", None)
    key = getattr(usage, _RUN_KEY_ATTR, None)
    if isinstance(key, str):
        return key
    key = f"openai-agents:run:{uuid.uuid4().hex}"
    try:
        setattr(usage, _RUN_KEY_ATTR, key)
    except Exception:
        return "default"
    return key


def _parse_args(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _approval(ctx: Any) -> Optional[bool]:
    """The operator's answer to this call's approval: ``True``, ``False`` or ``None`` (none)."""
    try:
        return ctx.is_tool_approved(ctx.tool_name, ctx.tool_call_id)
    except Exception:
        return None


def _info(d: Decision) -> Dict[str, Any]:
    return {"toolbrake": d.verdict, "code": d.code, "engine": d.engine}


def _item_tool(item: Any) -> Optional[str]:
    for obj in (getattr(item, "raw_item", None), item):
        if obj is None:
            continue
        name = obj.get("name") if isinstance(obj, dict) else getattr(obj, "name", None)
        if isinstance(name, str):
            return name
    name = getattr(item, "tool_name", None)
    return name if isinstance(name, str) else None


def _item_call_id(item: Any) -> Optional[str]:
    raw = getattr(item, "raw_item", None)
    for obj in (raw, item):
        if obj is None:
            continue
        cid = obj.get("call_id") if isinstance(obj, dict) else getattr(obj, "call_id", None)
        if isinstance(cid, str):
            return cid
    return None
