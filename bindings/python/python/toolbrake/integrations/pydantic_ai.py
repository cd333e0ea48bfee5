"""toolbrake for Pydantic AI: a capability that judges every tool call of an agent.

``ToolBrake(brake)`` is a Pydantic AI capability (``Agent(capabilities=[...])``). Around each
tool execution (``wrap_tool_execute``) it asks the brake first: a refused call never reaches the
tool, and the model reads toolbrake's message as a failed tool result (``ToolFailed``); an ``ask``
becomes a human-in-the-loop approval (``ApprovalRequired``, a deferred tool call) when the run
can take one. After the call it records the outcome: the tool's return value, or its failure
(an exception, ``ModelRetry``, ``ToolFailed``). Advisories are appended to a text result; for
other results they are enqueued as a system prompt part right after the tool's result, which
Pydantic AI delivers in the middle of a conversation as a user prompt part reading
``<system>…</system>``.

Example::

    from pydantic_ai import Agent
    from toolbrake import Brake
    from toolbrake.integrations.pydantic_ai import ToolBrake

    agent = Agent("openai:gpt-5", capabilities=[ToolBrake(Brake())])

    @agent.tool_plain
    def search(query: str) -> str:
        return "..."

    result = agent.run_sync("Find the release date")

Sessions are keyed by Pydantic AI's ``conversation_id`` (``ctx.conversation_id``: the
``conversation_id=`` you pass to ``agent.run``, else the one on ``message_history``, else a fresh
one per run), or by ``session=`` (a string, or ``ctx -> str``). A conversation Pydantic AI made
up for the run (you passed no ``conversation_id`` and no ``message_history``) ends with the run
(``after_run``), except while deferred approvals wait; other sessions go on until
``brake.end(key)`` or the store's idle expiry. An agent run from inside a
protected tool (agent delegation) counts in a sub-agent session of the delegating call's
session: ``agent=`` (default: the delegate agent's ``name``).

Asks: ``approvals="auto"`` (default) defers the call for approval when the agent's
``output_type`` includes ``DeferredToolRequests`` (the run ends with it; its ``metadata[id]
["toolbrake"]`` holds toolbrake's reason; resume with ``DeferredToolResults``), and otherwise
settles it with ``brake.resolve`` (the Brake's approver, else refused). ``approvals=True``
always defers (for a ``HandleDeferredToolCalls`` capability or a per-run ``output_type``);
``False`` always resolves.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import typing
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Union

from toolbrake.integrations import require

require("pydantic_ai", "pydantic-ai")

from pydantic_ai import (  # noqa: E402
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    RunContext,
    SkipToolExecution,
    ToolFailed,
)
from pydantic_ai.capabilities import AbstractCapability, ValidatedToolArgs, WrapToolExecuteHandler  # noqa: E402
from pydantic_ai.exceptions import ToolFailedError, ToolRetryError  # noqa: E402
from pydantic_ai.messages import SystemPromptPart, ToolCallPart, ToolReturn  # noqa: E402
from pydantic_ai.tools import ToolDefinition  # noqa: E402

from toolbrake import Brake, Decision, Recorded, json_default  # noqa: E402

__all__ = ["ToolBrake", "SessionSpec"]

logger = logging.getLogger("toolbrake.integrations.pydantic_ai")

SessionSpec = Union[None, str, Callable[[RunContext[Any]], Optional[str]]]
"""``None`` (Pydantic AI's ``conversation_id``), a fixed key, or ``ctx -> key`` (``None``: default)."""

# The tool call being executed under a ToolBrake, seen by agents it runs (delegation).
_PARENT: contextvars.ContextVar[Optional[Tuple[str, Optional[str], str]]] = contextvars.ContextVar(
    "toolbrake_pydantic_ai_parent", default=None
)

_DEFERRED_MAX = 10_000
_REFUSED = "toolbrake refused this call."


@dataclass
class _Call:
    """One judged call, kept while it waits for an approval or another deferral."""

    call_id: str
    session: str
    agent: Optional[str]
    decision: Decision


@dataclass(init=False)
class ToolBrake(AbstractCapability[Any]):
    """A Pydantic AI capability that puts a ``toolbrake.Brake`` in front of every tool call.

    Args:
        brake: the ``toolbrake.Brake`` that judges the calls.
        session: the session key: ``None`` (Pydantic AI's ``ctx.conversation_id``), a string, or
            a callable ``(RunContext) -> str | None``.
        agent: the sub-agent id used when this agent runs inside another protected agent's tool
            (default: the agent's ``name``, else the delegating tool's name).
        approvals: ``"auto"``: an ``ask`` defers the call for approval (``ApprovalRequired``)
            when the agent's ``output_type`` includes ``DeferredToolRequests``, else it is settled
            by ``brake.resolve``; ``True``: always defer; ``False``: always ``brake.resolve``.
        id: the capability's id (Pydantic AI), default none.
    """

    brake: Brake
    session: SessionSpec
    agent: Optional[str]
    approvals: Union[bool, Literal["auto"]]

    def __init__(
        self,
        brake: Brake,
        *,
        session: SessionSpec = None,
        agent: Optional[str] = None,
        approvals: Union[bool, Literal["auto"]] = "auto",
        id: Optional[str] = None,
    ) -> None:
        if approvals not in (True, False, "auto"):
            raise ValueError(f'approvals must be True, False or "auto", not {approvals!r}')
        self.brake = brake
        self.session = session
        self.agent = agent
        self.approvals = approvals
        self.id = id
        self._deferred: Dict[str, _Call] = {}
        self._lock = threading.Lock()

    @classmethod
    def get_serialization_name(cls) -> Optional[str]:
        """Not constructible from an agent spec: it holds a live ``Brake``."""
        return None

    # -- sessions -----------------------------------------------------------------------------

    def _key(self, ctx: RunContext[Any], tool: str) -> Tuple[str, Optional[str]]:
        """(session, sub-agent) for a call made in ``ctx``."""
        parent = _PARENT.get()
        if parent is not None:
            session, parent_agent, parent_tool = parent
            name = self.agent or getattr(ctx.agent, "name", None) or parent_tool
            return session, f"{parent_agent}/{name}" if parent_agent else name
        spec = self.session
        if isinstance(spec, str):
            return spec, None
        if callable(spec):
            key = spec(ctx)
            if key is not None:
                return str(key), None
        return ctx.conversation_id or "default", None

    def _defers(self, ctx: RunContext[Any]) -> bool:
        if self.approvals != "auto":
            return bool(self.approvals)
        return _allows_deferred(getattr(ctx.agent, "output_type", None))

    # -- the run's end ------------------------------------------------------------------------

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        """The run is over: its session ends (its state is freed), unless it waits for
        deferred calls (approvals) that a later run resumes."""
        if not _allows_deferred(type(getattr(result, "output", None))):
            self._end(ctx)
        return result

    async def on_run_error(self, ctx: RunContext[Any], *, error: BaseException) -> Any:
        """A failed run ends its session too."""
        self._end(ctx)
        raise error

    def _end(self, ctx: RunContext[Any]) -> None:
        # Only the session this adapter chose per run (the conversation's), not a key the
        # caller gave (it may span runs), nor a delegated agent's (its parent's run goes on).
        if self.session is not None or _PARENT.get() is not None:
            return
        if not _minted_for_run(ctx):
            return  # a conversation you named, or one continued from message_history, goes on
        with self._lock:
            if self._deferred:
                return  # calls waiting for an approval keep their session
        try:
            self.brake.end(ctx.conversation_id or "default")
        except Exception:  # never break the host
            logger.warning("toolbrake could not end the run's session", exc_info=True)

    # -- the hook -----------------------------------------------------------------------------

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Judge the call (refuse with ``ToolFailed``, ask with ``ApprovalRequired``), run it, record it."""
        tool_call_id = call.tool_call_id
        with self._lock:
            pending = self._deferred.pop(tool_call_id, None)
        judged = self._judge(ctx, call, args, pending)
        if judged is None:  # toolbrake could not judge: run as if it were not there
            return await handler(args)
        state, runs, message = judged
        if not runs:
            raise ToolFailed(message)
        d = state.decision
        token = _PARENT.set((state.session, state.agent, call.tool_name))
        try:
            result = await handler(args)
        except (ApprovalRequired, CallDeferred):
            # Deferred by the tool or another capability: it has not run. Keep the judgement for
            # when it comes back approved, instead of counting the call twice.
            self._remember(tool_call_id, state)
            raise
        except SkipToolExecution as skip:  # another capability supplied the result
            _with_advisories(ctx, None, self._after(ctx, state, skip.result, list(d.advisories or [])))
            raise
        except (ToolRetryError, ToolFailedError) as failure:  # ModelRetry / ToolFailed from the tool
            _with_advisories(ctx, None, self._after(ctx, state, failure.__cause__ or failure, []))
            raise
        except Exception as failure:
            _with_advisories(ctx, None, self._after(ctx, state, failure, []))
            raise
        finally:
            _PARENT.reset(token)
        advisories = self._after(ctx, state, result, list(d.advisories or []))
        return _with_advisories(ctx, result, advisories)

    def _judge(
        self,
        ctx: RunContext[Any],
        call: ToolCallPart,
        args: Any,
        pending: Optional[_Call],
    ) -> Optional[Tuple[_Call, bool, str]]:
        """(call, runs, refusal text); ``None`` if toolbrake failed. Raises ``ApprovalRequired``
        for an ask to defer."""
        if pending is not None:
            if pending.decision.verdict != "ask":
                return pending, True, ""  # judged before another deferral: it runs now
            if ctx.tool_call_approved:
                return self._approve(pending)
        try:
            session, agent = self._key(ctx, call.tool_name)
            if ctx.tool_call_approved and pending is None:
                # Approved in a run resumed elsewhere (another process, after a restart): an
                # ask still pending in a shared store is answered, not asked again.
                try:
                    d = self.brake.answer(call.tool_call_id, True, session=session, agent=agent)
                    return _Call(d.call_id, session, agent, d), d.runs, d.message or _REFUSED
                except ValueError:
                    pass  # toolbrake did not ask about this call: judge it
            d = self.brake.before(
                call.tool_name,
                _model_args(call, args),
                session=session,
                call_id=call.tool_call_id or None,
                agent=agent,
                default=json_default,
            )
        except Exception:  # never break the host
            logger.warning("toolbrake could not judge %s; the call runs", call.tool_name, exc_info=True)
            return None
        state = _Call(d.call_id, session, agent, d)
        if d.verdict != "ask":
            return state, d.runs, d.message or _REFUSED
        if ctx.tool_call_approved:  # the operator approved this call already (the tool's own approval)
            return self._approve(state)
        if self._defers(ctx):
            self._remember(call.tool_call_id, state)
            raise ApprovalRequired(metadata={"toolbrake": {"message": d.message, "engine": d.engine, "code": d.code}})
        try:
            state.decision = self.brake.resolve(d)
        except Exception:  # an ask nobody could answer is refused
            logger.warning("toolbrake could not resolve an ask; refusing", exc_info=True)
            return state, False, d.message or _REFUSED
        return state, state.decision.runs, state.decision.message or d.message or _REFUSED

    def _approve(self, state: _Call) -> Tuple[_Call, bool, str]:
        """Tell the brake the operator approved ``state``'s ask."""
        try:
            state.decision = self.brake.answer(state.call_id, True, session=state.session, agent=state.agent)
        except Exception:  # the operator said yes: a toolbrake failure must not overrule it
            logger.warning("toolbrake could not record an approval", exc_info=True)
            return state, True, ""
        return state, state.decision.runs, state.decision.message or _REFUSED

    def _remember(self, tool_call_id: str, state: _Call) -> None:
        with self._lock:
            if len(self._deferred) >= _DEFERRED_MAX:
                self._deferred.pop(next(iter(self._deferred)))
            self._deferred[tool_call_id] = state

    def _after(self, ctx: RunContext[Any], state: _Call, outcome: Any, advisories: List[str]) -> List[str]:
        """``brake.after`` that never raises; returns every advisory owed to the model."""
        recorded: Optional[Recorded] = None
        try:
            value = outcome.return_value if isinstance(outcome, ToolReturn) else outcome
            try:
                recorded = self.brake.after(state.call_id, value, session=state.session, agent=state.agent)
            except TypeError:  # a value JSON cannot hold: record its text
                recorded = self.brake.after(state.call_id, str(value), session=state.session, agent=state.agent)
        except Exception:
            logger.warning("toolbrake could not record the outcome of %s", state.call_id, exc_info=True)
        if recorded is not None:
            advisories = advisories + list(recorded.advisories or [])
        return advisories


def _minted_for_run(ctx: RunContext[Any]) -> bool:
    """Whether the run's ``conversation_id`` is one Pydantic AI made up for this run: a UUID7
    minted in the same millisecond or so as the run's UUID7 ``run_id`` (a conversation passed
    in, or continued from ``message_history``, was made before the run)."""
    try:
        conv, run = uuid.UUID(str(ctx.conversation_id)), uuid.UUID(str(ctx.run_id))
    except (TypeError, ValueError, AttributeError):
        return False
    if conv.version != 7 or run.version != 7:
        return False
    return abs((conv.int >> 80) - (run.int >> 80)) <= 5  # their millisecond timestamps


def _model_args(call: ToolCallPart, validated: Any) -> Any:
    """The arguments as the model sent them (its JSON), which is what repeats: the validated
    ones hold Python objects (a ``date``, an ``Enum``, a ``UUID``). The validated ones only
    when the model's are not a JSON object."""
    try:
        return call.args_as_dict(raise_if_invalid=True)
    except Exception:
        return validated


def _with_advisories(ctx: RunContext[Any], result: Any, advisories: List[str]) -> Any:
    """The tool's result with toolbrake's advisories for the model (never losing the result)."""
    if not advisories:
        return result
    note = "\n\n".join(advisories)
    if isinstance(result, str):
        return f"{result}\n\n{note}"
    if isinstance(result, ToolReturn) and isinstance(result.return_value, str):
        result.return_value = f"{result.return_value}\n\n{note}"
        return result
    try:
        ctx.enqueue(SystemPromptPart(content=note, metadata={"toolbrake": "advisory"}), priority="asap")
    except Exception:
        logger.info("toolbrake advisories not shown: %s", advisories, exc_info=True)
    return result


def _allows_deferred(spec: Any) -> bool:
    """Whether an ``output_type`` spec includes ``DeferredToolRequests``."""
    if spec is DeferredToolRequests:
        return True
    if isinstance(spec, (list, tuple, set, frozenset)):
        return any(_allows_deferred(s) for s in spec)
    args = typing.get_args(spec)
    return bool(args) and any(_allows_deferred(a) for a in args)
