"""toolbrake for CrewAI: before/after tool-call hooks that judge every tool call.

Usage::

    from crewai import Agent, Crew, Task
    from toolbrake import Brake
    from toolbrake.integrations.crewai import ToolBrakeHooks

    brake = Brake()  # or Brake(store="sqlite:/var/lib/app/toolbrake.db") across processes
    with ToolBrakeHooks(brake):  # or ToolBrakeHooks(brake).register() for the process
        crew = Crew(agents=[researcher], tasks=[task])
        crew.kickoff()
    # The third identical call in a row with the same result is blocked by the before
    # hook; the model reads toolbrake's message where CrewAI would say "blocked by hook".

How it maps onto CrewAI (``crewai.hooks``; native function calling and ReAct alike):

- The before hook asks :meth:`Brake.before` and returns ``False`` for a refused call, so
  CrewAI never runs the tool. The after hook replaces CrewAI's fixed
  ``"Tool execution blocked by hook. Tool: ..."`` with ``decision.message``.
- The after hook records what the call did: an exception CrewAI caught (``"Error
  executing tool: ..."``), a returned ``ToolFailure`` or an exhausted retry is a failure;
  anything else is the output. Advisories are appended to the text the model reads.
- Sessions: ``session=`` (a key, or a function of the hook context), else the crew's id,
  else the agent's id (``Agent.kickoff``). In a crew each agent's calls count in the
  sub-agent session ``agent=<its role>``, so a delegation is its own sub-agent.
- ``ask``: ``"human"`` (default) asks through CrewAI's ``context.request_human_input``
  when there is a terminal (type ``approve``), else the Brake's approver;
  ``"resolve"`` always uses the Brake's approver (:meth:`Brake.resolve`).
- An error inside toolbrake is logged and the call runs (CrewAI swallows hook errors too).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import require

require("crewai", "crewai")

from crewai.hooks import (  # noqa: E402
    register_after_tool_call_hook,
    register_before_tool_call_hook,
    unregister_after_tool_call_hook,
    unregister_before_tool_call_hook,
)
from crewai.hooks.tool_hooks import ToolCallHookContext  # noqa: E402

from .. import Brake, Decision, Outcome, json_default  # noqa: E402

try:  # declared failures (CrewAI >= 1.x)
    from crewai.tools.tool_failure import ToolFailure as _ToolFailure  # noqa: E402
except ImportError:  # pragma: no cover - older CrewAI
    _ToolFailure = None  # type: ignore[assignment,misc]

__all__ = ["ToolBrakeHooks", "protect", "SessionKey"]

logger = logging.getLogger("toolbrake.integrations.crewai")

#: ``session=``: a fixed key, or a function of the ``ToolCallHookContext`` returning one.
SessionKey = Union[str, Callable[[ToolCallHookContext], str], None]

#: CrewAI's text for a call a before hook blocked (``tool_utils``, ``agent_executor``).
BLOCKED_PREFIX = "Tool execution blocked by hook."
#: CrewAI's text for an exception a native tool call raised.
EXCEPTION_PREFIX = "Error executing tool: "
#: CrewAI's text for a ReAct tool call that raised on every attempt (translations/en.json).
RETRIES_PREFIX = "I encountered an error while trying to use the tool."
APPROVE_WORDS = frozenset({"approve", "approved", "yes", "y"})


@dataclass
class _Pending:
    """A call between the before and the after hook (``args`` pins the dict's id)."""

    args: Dict[str, Any]
    decision: Optional[Decision]  # None: toolbrake could not judge it
    refused: bool


class ToolBrakeHooks:
    """CrewAI tool-call hooks backed by a :class:`~toolbrake.Brake`.

    :param brake: the Brake that judges the calls.
    :param session: ``None`` (the crew's id, else the agent's id), a fixed key, or a function
        of the ``ToolCallHookContext`` returning the key.
    :param agents_as_sub_agents: in a crew, count each agent's calls in the sub-agent
        session named by its role (default ``True``).
    :param ask: ``"human"`` (CrewAI's console prompt when stdin is a terminal, else the
        Brake's approver) or ``"resolve"`` (the Brake's approver; refused without one).

    Use :meth:`register` / :meth:`unregister` (or ``with hooks:``) to install the hooks
    globally, or pass :meth:`before_tool_call` / :meth:`after_tool_call` to CrewAI yourself.
    """

    def __init__(
        self,
        brake: Brake,
        *,
        session: SessionKey = None,
        agents_as_sub_agents: bool = True,
        ask: str = "human",
    ) -> None:
        if ask not in ("human", "resolve"):
            raise ValueError(f'toolbrake: ask must be "human" or "resolve", not {ask!r}')
        self.brake = brake
        self.session = session
        self.agents_as_sub_agents = agents_as_sub_agents
        self.ask = ask
        self._pending: Dict[int, _Pending] = {}
        self._lock = threading.Lock()

    # -- installation --------------------------------------------------------------------

    def register(self) -> "ToolBrakeHooks":
        """Registers both hooks globally (every crew and agent of the process); returns self."""
        register_before_tool_call_hook(self.before_tool_call)
        register_after_tool_call_hook(self.after_tool_call)
        return self

    def unregister(self) -> None:
        """Removes both hooks."""
        unregister_before_tool_call_hook(self.before_tool_call)
        unregister_after_tool_call_hook(self.after_tool_call)

    def __enter__(self) -> "ToolBrakeHooks":
        return self.register()

    def __exit__(self, *exc: Any) -> None:
        self.unregister()

    # -- keys ----------------------------------------------------------------------------

    def key(self, context: ToolCallHookContext) -> Tuple[str, Optional[str]]:
        """The session key and sub-agent id a call counts under."""
        crew = getattr(context, "crew", None)
        agent = getattr(context, "agent", None)
        if isinstance(self.session, str):
            session = self.session
        elif callable(self.session):
            session = str(self.session(context))
        elif crew is not None and getattr(crew, "id", None) is not None:
            session = f"crewai-crew-{crew.id}"
        elif agent is not None and getattr(agent, "id", None) is not None:
            return f"crewai-agent-{agent.id}", None
        else:
            session = "default"
        role = getattr(agent, "role", None) if crew is not None or self.session is not None else None
        return session, (str(role) if role and self.agents_as_sub_agents else None)

    # -- hooks ---------------------------------------------------------------------------

    def before_tool_call(self, context: ToolCallHookContext) -> Optional[bool]:
        """Judges the call: ``False`` (blocked) when toolbrake refuses it, else ``None``."""
        args = context.tool_input
        try:
            d = self._judge(context)
        except Exception:
            logger.warning("toolbrake: judging %s failed; the call runs", context.tool_name, exc_info=True)
            d = None
        refused = d is not None and not d.runs
        if d is not None:
            with self._lock:
                self._pending[id(args)] = _Pending(args, d, refused)
        return False if refused else None

    def _judge(self, context: ToolCallHookContext) -> Decision:
        session, agent = self.key(context)
        args = context.tool_input
        try:
            d = self.brake.before(context.tool_name, args, session=session, agent=agent, default=json_default)
        except TypeError:  # a value JSON cannot hold: judged by its repr
            d = self.brake.before(context.tool_name, _jsonable(args), session=session, agent=agent)
        if d.verdict != "ask":
            return d
        if self.ask == "human" and _interactive():
            try:
                reply = context.request_human_input(
                    prompt=d.message or "toolbrake asks before this call runs.",
                    default_message="Type 'approve' to run it anyway; anything else refuses it:",
                )
            except Exception:  # no one at the console after all
                reply = ""
            return self.brake.answer(d.call_id, reply.strip().lower() in APPROVE_WORDS, session=d.session)
        return self.brake.resolve(d)

    def after_tool_call(self, context: ToolCallHookContext) -> Optional[str]:
        """Records what the call did; returns the text the model reads, if changed."""
        with self._lock:
            pending = self._pending.pop(id(context.tool_input), None)
        if pending is None or pending.args is not context.tool_input or pending.decision is None:
            return None
        d = pending.decision
        if pending.refused:
            return d.message or "toolbrake: the call was refused"
        text = context.tool_result if isinstance(context.tool_result, str) else str(context.tool_result)
        if text.startswith(BLOCKED_PREFIX):
            return None  # another hook blocked it: it did not run
        try:
            r = self.brake.after(d.call_id, _outcome(context.raw_tool_result, text), session=d.session)
            advisories: List[str] = list(d.advisories) + list(r.advisories)
        except Exception:
            logger.warning("toolbrake: recording %s failed", context.tool_name, exc_info=True)
            return None
        if not advisories:
            return None
        return text + "\n\n" + "\n\n".join(advisories)


def protect(brake: Brake, **options: Any) -> ToolBrakeHooks:
    """Registers :class:`ToolBrakeHooks` globally and returns them (``.unregister()`` undoes).

    ``options`` are :class:`ToolBrakeHooks`' keyword arguments.
    """
    return ToolBrakeHooks(brake, **options).register()


def _interactive() -> bool:
    try:
        return bool(sys.stdin) and sys.stdin.isatty()
    except Exception:
        return False


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


def _outcome(raw: Any, text: str) -> Any:
    """What :meth:`Brake.after` gets for the call's raw result and its text."""
    if _ToolFailure is not None and isinstance(raw, _ToolFailure):
        return Outcome(str(getattr(raw, "message", "") or text), is_error=True)
    if isinstance(raw, str):
        if raw.startswith(EXCEPTION_PREFIX):
            return Outcome(raw[len(EXCEPTION_PREFIX):], is_error=True)
        if raw.lstrip().startswith(RETRIES_PREFIX):
            return Outcome(raw.strip(), is_error=True)
        return raw
    if raw is None:
        return text
    try:
        json.dumps(raw)
        return raw
    except (TypeError, ValueError):
        return text
