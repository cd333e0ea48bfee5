"""toolbrake for LangChain 1.x agents and LangGraph graphs.

:class:`ToolBrakeMiddleware` is agent middleware for ``langchain.agents.create_agent``
(its ``wrap_tool_call`` / ``awrap_tool_call`` hooks); the same hooks plug into LangGraph's
prebuilt ``ToolNode``, so plain graphs get it too (:meth:`ToolBrakeMiddleware.tool_node`)::

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from toolbrake import Brake
    from toolbrake.integrations.langchain import ToolBrakeMiddleware

    brake = Brake()  # or Brake(store="sqlite:/var/lib/app/toolbrake.db") to share sessions
    agent = create_agent(model, tools=[search], middleware=[ToolBrakeMiddleware(brake)],
                         checkpointer=InMemorySaver())  # asks become LangGraph interrupts
    agent.invoke({"messages": [("user", "find it")]}, {"configurable": {"thread_id": "t1"}})
    # plain LangGraph: builder.add_node("tools", ToolBrakeMiddleware(brake).tool_node([search]))

Every tool call is judged before it runs. A refused call never reaches the tool: the model
reads toolbrake's message as the tool's result, a ``ToolMessage`` with ``status="error"``.
After a call ran, its result (or the exception it raised, or an error ``ToolMessage``) is
recorded, and toolbrake's advisories are appended to the result the model reads.

Sessions: the LangGraph ``thread_id`` (``config["configurable"]["thread_id"]``), else one
session per invocation (``"run:"`` and the id of the run's first message), ended when the
run ends; ``session=`` overrides it. A named agent (``create_agent(name=...)``) that
runs inside another graph's tool (a sub-agent) counts in its own sub-agent session
(``agent=``). When the graph has a checkpointer, an ``ask`` becomes a LangGraph
``interrupt`` whose value also has the shape of ``HumanInTheLoopMiddleware``'s requests
(``action_requests``, ``review_configs``), so one UI serves both (resume with
``Command(resume={"decisions": [{"type": "approve"}]})``, ``{"type": "reject"}``, or ``True`` /
``False``); without one, ``brake.resolve`` decides (the Brake's approver, else
refusal). A new human message at the start of a run starts the session afresh.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Literal,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from toolbrake.integrations import require

require("langchain.agents.middleware", "langchain")
require("langgraph.prebuilt", "langchain")

from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain_core.messages import HumanMessage, ToolMessage  # noqa: E402
from langgraph.config import get_config  # noqa: E402
from langgraph.errors import GraphBubbleUp  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

from toolbrake import Brake, Decision, Outcome  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime

try:  # where LangGraph keeps the graph's checkpointer in the run config
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER as _CHECKPOINTER_KEY
except ImportError:  # pragma: no cover - older layouts
    _CHECKPOINTER_KEY = "__pregel_checkpointer"

# `interrupt(response_schema=...)` shows clients what the resume value may be (newer LangGraph).
_INTERRUPT_TAKES_SCHEMA = "response_schema" in inspect.signature(interrupt).parameters

__all__ = ["ToolBrakeMiddleware", "approved_from"]

log = logging.getLogger(__name__)

#: A session: a fixed key, or a function of the run config returning one.
SessionArg = Union[str, Callable[["RunnableConfig"], str], None]
#: How an ``ask`` reaches the operator (see :class:`ToolBrakeMiddleware`).
AskMode = Literal["auto", "interrupt", "resolve"]

_AGENT_SEPARATOR = "#agent:"
_SUCCESS_WORDS = frozenset({"approve", "approved", "accept", "accepted", "allow", "yes", "y", "ok", "true"})

#: What an approval interrupt accepts on resume (shown to clients; not validated).
_RESPONSE_SCHEMA: Dict[str, Any] = {
    "oneOf": [
        {"type": "object", "properties": {"type": {"const": "approve"}}, "required": ["type"]},
        {
            "type": "object",
            "properties": {"type": {"const": "reject"}, "message": {"type": "string"}},
            "required": ["type"],
        },
        {"type": "boolean"},
    ]
}


def approved_from(value: Any) -> Tuple[bool, Optional[str]]:
    """Reads the operator's answer from an interrupt's resume value.

    Accepts LangChain's per-call approval decisions (``{"type": "approve"}``,
    ``{"type": "reject", "message": "..."}``), a ``HITLResponse``-style
    ``{"decisions": [...]}`` (its first decision), ``{"approved": bool}``, a bool, or a word
    (``"approve"``, ``"yes"``, ...). Anything else is a refusal. Returns ``(approved,
    operator message or None)``.
    """
    if isinstance(value, bool):
        return value, None
    if isinstance(value, str):
        return value.strip().lower() in _SUCCESS_WORDS, None
    if isinstance(value, dict):
        decisions = value.get("decisions")
        if isinstance(decisions, list) and decisions:
            return approved_from(decisions[0])
        message = value.get("message")
        message = message if isinstance(message, str) and message else None
        if isinstance(value.get("approved"), bool):
            return value["approved"], message
        kind = value.get("type")
        if isinstance(kind, str):
            return kind.strip().lower() in _SUCCESS_WORDS, message
    return False, None


@dataclass
class _Admitted:
    """A call that may run, and what to do after it did."""

    call_id: Optional[str]  # None: toolbrake could not judge it; nothing to record
    session: str
    tool_call_id: Optional[str]
    advisories: List[str] = field(default_factory=list)


class ToolBrakeMiddleware(AgentMiddleware):
    """Judges every tool call of a LangChain agent (or a LangGraph ``ToolNode``) with a
    :class:`toolbrake.Brake`.

    :param brake: the :class:`~toolbrake.Brake` (share one per process, or a SQLite /
        Redis store between processes).
    :param session: ``None`` keys sessions by the run's LangGraph ``thread_id`` (else one
        session per invocation, ended with it); a string, or a function of the run config
        returning one, overrides it.
    :param agent: a sub-agent id: this agent's calls count in the sub-agent session
        ``"{session}#agent:{agent}"``. ``None`` detects sub-agents: a named agent
        (``create_agent(name=...)``) running inside another graph (a tool that runs it).
    :param ask: how an ``ask`` verdict reaches the operator: ``"auto"`` (a LangGraph
        ``interrupt`` when the graph has a checkpointer, else ``brake.resolve``),
        ``"interrupt"`` or ``"resolve"`` (the Brake's approver, refusal without one).
    :param reset_on_user_message: a run that starts with a human message starts the
        session afresh (``brake.user_message``). Needs ``create_agent``; in a plain graph,
        call ``brake.user_message(thread_id)`` yourself.

    A refused call returns ``ToolMessage(status="error")`` carrying toolbrake's message
    (its ``response_metadata["toolbrake"]`` has the verdict, code, engine and call id);
    the tool does not run. Errors inside toolbrake never stop the run: the call runs
    unjudged and the error is logged (``toolbrake.integrations.langchain``).
    """

    # Asks waiting for the operator, process-wide: (brake, session key, call id) -> Decision.
    _asks: "OrderedDict[Tuple[int, str, str], Decision]" = OrderedDict()
    _asks_lock = threading.Lock()
    _ASKS_MAX = 4096

    def __init__(
        self,
        brake: Brake,
        session: SessionArg = None,
        *,
        agent: Optional[str] = None,
        ask: AskMode = "auto",
        reset_on_user_message: bool = True,
    ) -> None:
        super().__init__()
        if ask not in ("auto", "interrupt", "resolve"):
            raise ValueError(f"toolbrake: ask must be 'auto', 'interrupt' or 'resolve', not {ask!r}")
        self.brake = brake
        self.session = session
        self.agent = agent
        self.ask = ask
        self.reset_on_user_message = reset_on_user_message
        self.tools = []

    # -- sessions ----------------------------------------------------------------------

    def session_for(self, config: Optional["RunnableConfig"] = None, state: Any = None) -> str:
        """The session key (with its sub-agent suffix) the calls of a run count in.

        ``config`` defaults to the current LangGraph run's config; without a ``thread_id``
        the key is the invocation's, read from ``state`` (its first message). Use it with
        ``brake.explain(tool, args, session=...)`` or ``brake.end(...)``.
        """
        base, agent = self._keys(config if config is not None else _current_config(), state)
        return base + _AGENT_SEPARATOR + agent if agent else base

    def _keys(self, config: Optional["RunnableConfig"], state: Any = None) -> Tuple[str, Optional[str]]:
        config = config or {}
        conf = config.get("configurable") or {}
        meta = config.get("metadata") or {}
        if self.session is None:
            thread = conf.get("thread_id")
            if thread is not None and str(thread) != "":
                base = str(thread)
            else:
                # No thread: the invocation is the session (two users' runs never share
                # one). Its first message's id (LangGraph gives each message one) is the
                # same in every step of the run and new in the next invocation.
                run = _first_message_id(state)
                base = f"run:{run}" if run else "default"
        elif callable(self.session):
            base = str(self.session(config))
        else:
            base = self.session
        agent = self.agent
        if agent is None:
            # A named agent running inside another graph (a tool that runs it): LangGraph
            # nests its checkpoint namespace; create_agent(name=...) names it.
            ns = conf.get("checkpoint_ns") or meta.get("langgraph_checkpoint_ns") or ""
            name = meta.get("lc_agent_name")
            if "|" in str(ns) and isinstance(name, str) and name:
                agent = name
        return base, agent

    # -- agent hooks -------------------------------------------------------------------

    def before_agent(self, state: Any, runtime: "Runtime") -> None:
        """A run that starts with a human message starts the session afresh."""
        self._user_message(state)
        return None

    async def abefore_agent(self, state: Any, runtime: "Runtime") -> None:
        """Async variant of :meth:`before_agent`."""
        self._user_message(state)
        return None

    def after_agent(self, state: Any, runtime: "Runtime") -> None:
        """A run's own session (no ``thread_id``) ends with the run: its state is freed."""
        self._end_run(state)
        return None

    async def aafter_agent(self, state: Any, runtime: "Runtime") -> None:
        """Async variant of :meth:`after_agent`."""
        self._end_run(state)
        return None

    def _end_run(self, state: Any) -> None:
        if self.session is not None:
            return
        config = _current_config() or {}
        if (config.get("configurable") or {}).get("thread_id") not in (None, ""):
            return  # a thread goes on in the next invocation
        base, agent = self._keys(config, state)
        if not base.startswith("run:") or agent:
            return  # a sub-agent's session ends with its parent's run
        try:
            self.brake.end(base)
        except Exception:  # never break the host
            log.warning("toolbrake: could not end the run's session", exc_info=True)

    def _user_message(self, state: Any) -> None:
        if not self.reset_on_user_message:
            return
        messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
        if not messages or not isinstance(messages[-1], HumanMessage):
            return
        try:
            self.brake.user_message(self.session_for(_current_config(), state))
        except Exception:  # never break the host
            log.warning("toolbrake: could not start the session afresh", exc_info=True)

    def wrap_tool_call(
        self,
        request: "ToolCallRequest",
        handler: Callable[["ToolCallRequest"], Union[ToolMessage, Command]],
    ) -> Union[ToolMessage, Command]:
        """Judges the call, runs it only when allowed (``handler``), records its outcome."""
        admitted = self._admit(request)
        if isinstance(admitted, ToolMessage):
            return admitted
        try:
            result = handler(request)
        except GraphBubbleUp:
            # An interrupt inside the tool: it has not finished. On resume LangGraph runs it
            # again under the same call id (judged again, counted once).
            raise
        except Exception as exc:
            self._record(admitted, exc)
            raise
        return self._record(admitted, result)

    async def awrap_tool_call(
        self,
        request: "ToolCallRequest",
        handler: Callable[["ToolCallRequest"], Awaitable[Union[ToolMessage, Command]]],
    ) -> Union[ToolMessage, Command]:
        """Async variant of :meth:`wrap_tool_call`."""
        admitted = self._admit(request)
        if isinstance(admitted, ToolMessage):
            return admitted
        try:
            result = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            self._record(admitted, exc)
            raise
        return self._record(admitted, result)

    def tool_node(self, tools: Sequence[Union["BaseTool", Callable[..., Any]]], **kwargs: Any) -> ToolNode:
        """A LangGraph ``ToolNode`` over ``tools`` whose calls this middleware judges.

        ``kwargs`` go to ``ToolNode`` (``name``, ``handle_tool_errors``, ...). Equivalent to
        ``ToolNode(tools, wrap_tool_call=mw.wrap_tool_call, awrap_tool_call=mw.awrap_tool_call)``.
        """
        return ToolNode(
            tools, wrap_tool_call=self.wrap_tool_call, awrap_tool_call=self.awrap_tool_call, **kwargs
        )

    # -- before ------------------------------------------------------------------------

    def _admit(self, request: "ToolCallRequest") -> Union[ToolMessage, _Admitted]:
        call = request.tool_call
        tool = str(call.get("name") or "")
        args = call.get("args")
        tool_call_id = call.get("id")
        config = _request_config(request)
        base, agent = self._keys(config, getattr(request, "state", None))
        session = base + _AGENT_SEPARATOR + agent if agent else base
        call_id = _call_id(tool_call_id, config)

        pending = self._pending(session, call_id)
        if pending is not None:
            # Resumed after an approval interrupt: the call was judged before the pause.
            return self._settle_interrupt(pending, call, session, call_id)

        d = self._before(tool, args, base, agent, call_id)
        if d is None:
            return _Admitted(None, session, tool_call_id)
        if d.verdict == "ask":
            if self._interrupts(config):
                return self._settle_interrupt(d, call, session, call_id, fresh=True)
            try:
                d = self.brake.resolve(d)
            except Exception:
                log.warning("toolbrake: could not settle an ask; the call is refused", exc_info=True)
                return self._refusal(d, call)
        return self._admitted_or_refused(d, call)

    def _before(
        self, tool: str, args: Any, base: str, agent: Optional[str], call_id: Optional[str]
    ) -> Optional[Decision]:
        """``brake.before``, or ``None`` when toolbrake cannot judge the call (it runs)."""
        try:
            return self.brake.before(tool, args, session=base, call_id=call_id, agent=agent)
        except Exception:
            if call_id is None:
                log.warning("toolbrake: could not judge a %s call; it runs unjudged", tool, exc_info=True)
                return None
        try:  # the model reused a tool call id for another call: judge it under a fresh id
            return self.brake.before(tool, args, session=base, agent=agent)
        except Exception:
            log.warning("toolbrake: could not judge a %s call; it runs unjudged", tool, exc_info=True)
            return None

    def _interrupts(self, config: Optional["RunnableConfig"]) -> bool:
        if self.ask != "auto":
            return self.ask == "interrupt"
        conf = (config or {}).get("configurable") or {}
        return conf.get(_CHECKPOINTER_KEY) is not None

    def _settle_interrupt(
        self,
        d: Decision,
        call: Dict[str, Any],
        session: str,
        call_id: Optional[str],
        fresh: bool = False,
    ) -> Union[ToolMessage, _Admitted]:
        """Asks the operator through a LangGraph interrupt, then answers the ask."""
        key = (id(self.brake), session, call_id or d.call_id)
        if fresh:
            with self._asks_lock:
                self._asks[key] = d
                while len(self._asks) > self._ASKS_MAX:
                    self._asks.popitem(last=False)
        payload = {
            "type": "tool_approval",
            "tool_call_id": call.get("id"),
            "name": call.get("name"),
            "args": call.get("args"),
            "description": d.message or "",
            "toolbrake": _meta(d),
            # The shape of LangChain's HumanInTheLoopMiddleware requests, so one UI serves
            # both (answer with {"decisions": [{"type": "approve"}]} or "reject").
            "action_requests": [
                {"name": call.get("name"), "args": call.get("args"), "description": d.message or ""}
            ],
            "review_configs": [{"action_name": call.get("name"), "allowed_decisions": ["approve", "reject"]}],
        }
        if _INTERRUPT_TAKES_SCHEMA:
            value = interrupt(payload, response_schema=_RESPONSE_SCHEMA)  # raises until resumed
        else:  # pragma: no cover - older LangGraph
            value = interrupt(payload)
        with self._asks_lock:
            self._asks.pop(key, None)
        approved, said = approved_from(value)
        try:
            answered = self.brake.answer(d.call_id, approved, session=d.session)
        except Exception:
            # The ask is no longer pending (another call in the session settled it as
            # declined meanwhile), or toolbrake failed.
            log.warning("toolbrake: could not record the operator's answer", exc_info=True)
            if approved:
                return _Admitted(None, session, call.get("id"))
            return self._refusal(d, call, said)
        return self._admitted_or_refused(answered, call, said)

    def _pending(self, session: str, call_id: Optional[str]) -> Optional[Decision]:
        if call_id is None:
            return None
        with self._asks_lock:
            return self._asks.get((id(self.brake), session, call_id))

    def _admitted_or_refused(
        self, d: Decision, call: Dict[str, Any], said: Optional[str] = None
    ) -> Union[ToolMessage, _Admitted]:
        if d.runs:
            return _Admitted(d.call_id, d.session, call.get("id"), list(d.advisories))
        return self._refusal(d, call, said)

    def _refusal(self, d: Decision, call: Dict[str, Any], said: Optional[str] = None) -> ToolMessage:
        text = d.message or f"toolbrake refused this {call.get('name')} call."
        if said:
            text = f"{text}\n\nThe operator said: {said}"
        if d.verdict == "deny":
            # The refused call is over: free its id (toolbrake ignores the outcome).
            try:
                self.brake.after(d.call_id, None, session=d.session)
            except Exception:
                log.debug("toolbrake: could not close a refused call", exc_info=True)
        return ToolMessage(
            content=text,
            name=call.get("name"),
            tool_call_id=call.get("id") or "",
            status="error",
            response_metadata={"toolbrake": _meta(d)},
        )

    # -- after -------------------------------------------------------------------------

    def _record(self, admitted: _Admitted, result: Any) -> Any:
        """Records what the call did; returns ``result`` with the advisories appended."""
        advisories = list(admitted.advisories)
        if admitted.call_id is not None:
            try:
                outcome = (
                    result if isinstance(result, BaseException) else _outcome(result, admitted.tool_call_id)
                )
                recorded = self.brake.after(admitted.call_id, outcome, session=admitted.session)
                advisories.extend(recorded.advisories)
            except Exception:
                log.warning("toolbrake: could not record a call's outcome", exc_info=True)
        if not advisories or isinstance(result, BaseException):
            return result
        return _with_text(result, "\n\n".join(advisories), admitted.tool_call_id)


# -- helpers -------------------------------------------------------------------------------


def _first_message_id(state: Any) -> Optional[str]:
    """The id of the first message of a run's state, if it has one."""
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    if not messages:
        return None
    first = messages[0]
    mid = first.get("id") if isinstance(first, dict) else getattr(first, "id", None)
    return str(mid) if mid else None


def _current_config() -> Optional["RunnableConfig"]:
    try:
        return get_config()
    except Exception:  # outside a LangGraph run
        return None


def _request_config(request: "ToolCallRequest") -> Optional["RunnableConfig"]:
    runtime = getattr(request, "runtime", None)
    config = getattr(runtime, "config", None)
    return config if isinstance(config, dict) else _current_config()


def _call_id(tool_call_id: Any, config: Optional["RunnableConfig"]) -> Optional[str]:
    """A call id stable across LangGraph re-runs of the same task (resume after an
    interrupt), unique per model turn: the tool call id and the task's namespace."""
    if not tool_call_id:
        return None
    conf = (config or {}).get("configurable") or {}
    task = str(conf.get("checkpoint_ns") or "").rsplit("|", 1)[-1]
    return f"{tool_call_id}@{task}" if task else str(tool_call_id)


def _meta(d: Decision) -> Dict[str, Any]:
    return {
        "verdict": d.verdict,
        "code": d.code,
        "engine": d.engine,
        "call_id": d.call_id,
        "session": d.session,
    }


def _text(content: Any) -> Optional[str]:
    """A message's content as text: text blocks joined, other blocks as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif (
                isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
            ):
                parts.append(block["text"])
            else:
                parts.append(json.dumps(block, sort_keys=True, default=str))
        return "\n".join(parts)
    return str(content)


def _message_outcome(message: ToolMessage) -> Any:
    text = _text(message.content)
    if message.status == "error":
        return Outcome(text, is_error=True)
    return text


def _tool_messages(result: Any) -> List[ToolMessage]:
    if isinstance(result, ToolMessage):
        return [result]
    if isinstance(result, Command):
        update = result.update
        messages = update.get("messages") if isinstance(update, dict) else None
        return [m for m in messages or [] if isinstance(m, ToolMessage)]
    if isinstance(result, list):
        return [m for item in result for m in _tool_messages(item)]
    return []


def _outcome(result: Any, tool_call_id: Optional[str]) -> Any:
    """What toolbrake records of a tool's result: the text of its ``ToolMessage``."""
    messages = _tool_messages(result)
    mine = [m for m in messages if tool_call_id is None or m.tool_call_id == tool_call_id] or messages
    if not mine:
        return None  # a Command without a message: the call produced no output
    return _message_outcome(mine[0])


def _appended(message: ToolMessage, text: str) -> ToolMessage:
    content = message.content
    if isinstance(content, str):
        new: Any = f"{content}\n\n{text}" if content else text
    elif isinstance(content, list):
        block: Any = (
            text if content and all(isinstance(b, str) for b in content) else {"type": "text", "text": text}
        )
        new = [*content, block]
    else:
        return message
    return message.model_copy(update={"content": new})


def _with_text(result: Any, text: str, tool_call_id: Optional[str]) -> Any:
    """``result`` with ``text`` appended to the call's ``ToolMessage`` (the real result
    is kept; a result with no message for the call is returned as it is)."""
    if isinstance(result, ToolMessage):
        return _appended(result, text)
    if isinstance(result, Command) and isinstance(result.update, dict):
        messages = result.update.get("messages")
        if isinstance(messages, list):
            done = False
            out = []
            for m in messages:
                if (
                    not done
                    and isinstance(m, ToolMessage)
                    and (tool_call_id is None or m.tool_call_id == tool_call_id)
                ):
                    m = _appended(m, text)
                    done = True
                out.append(m)
            if done:
                return replace(result, update={**result.update, "messages": out})
    if isinstance(result, list):
        for i, item in enumerate(result):
            changed = _with_text(item, text, tool_call_id)
            if changed is not item:
                return [*result[:i], changed, *result[i + 1 :]]
    return result
