"""toolbrake for Google ADK: a Runner plugin that judges every tool call before it runs.

Usage::

    from google.adk.apps import App
    from google.adk.runners import InMemoryRunner
    from toolbrake import Brake
    from toolbrake.integrations.google_adk import ToolBrakePlugin

    brake = Brake()  # or Brake(store="sqlite:/var/lib/app/toolbrake.db") across processes
    app = App(name="my_app", root_agent=root_agent, plugins=[ToolBrakePlugin(brake)])
    runner = InMemoryRunner(app=app)
    # The third identical call in a row with the same result never reaches the tool: the
    # model reads {"error": "loop brake: tool ... called 3 times in a row ..."} instead.
    async for event in runner.run_async(user_id="u", session_id=sid, new_message=msg):
        ...

How it maps onto ADK:

- ``before_tool_callback`` asks :meth:`Brake.before`. A refused call is answered with
  ``{"error": decision.message}`` as its function response, so the tool never runs and
  the model reads why. Register the plugin first in ``plugins=[...]``: ADK stops at the
  first plugin that answers a callback.
- ``after_tool_callback`` records what the tool returned (a dict with a truthy
  ``"error"`` or ``"status": "error"``, ADK's convention for a failed tool, is recorded as
  a failure); ``on_tool_error_callback`` records an exception as a failure. Advisories
  are added to the result under ``"advisories"`` (the result itself is kept).
- Sessions are keyed by ADK's session id (``session=`` overrides it). A call made by an
  agent other than the root agent (a transfer target) counts in the sub-agent session
  ``agent=<its name>``; so does a call made inside an ``AgentTool`` run.
- ``ask`` verdicts use ADK's tool confirmation (``tool_context.request_confirmation``):
  the run pauses with an ``adk_request_confirmation`` call; the user's ``confirmed``
  answer goes to :meth:`Brake.answer`. ``ask="resolve"`` uses the Brake's approver.
- A real user message (text, not a function response) starts the session afresh
  (:meth:`Brake.user_message`); ``reset_on_user_message=False`` keeps counting.
- An error inside toolbrake is logged and the call runs: the agent run is never broken by
  toolbrake itself (store failures follow the Brake's ``fail_closed`` policy).
"""

from __future__ import annotations

import contextvars
import json
import logging
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import require

require("google.adk", "google-adk")

from google.adk.plugins.base_plugin import BasePlugin  # noqa: E402
from google.adk.tools.base_tool import BaseTool  # noqa: E402
from google.adk.tools.tool_context import ToolContext  # noqa: E402
from google.genai import types  # noqa: E402

from .. import Brake, Decision, Outcome  # noqa: E402

__all__ = ["ToolBrakePlugin", "SessionKey"]

logger = logging.getLogger("toolbrake.integrations.google_adk")

#: ``session=``: a fixed key, or a function of the ADK ``Session`` returning one.
SessionKey = Union[str, Callable[[Any], str], None]

# The (session, agent path) of the tool call that is running in this context: a Runner
# started inside a tool (an AgentTool) counts its calls as that session's sub-agent.
_OUTER: contextvars.ContextVar[Optional[Tuple[str, Optional[str]]]] = contextvars.ContextVar(
    "toolbrake_google_adk_outer", default=None
)


@dataclass
class _Pending:
    """One admitted call on its way to the tool."""

    decision: Decision
    session: str
    agent: Optional[str]
    token: Optional[contextvars.Token] = None


class ToolBrakePlugin(BasePlugin):
    """An ADK plugin that puts a :class:`~toolbrake.Brake` in front of every tool call.

    :param brake: the Brake that judges the calls (shared by all runs of the runner).
    :param session: ``None`` (ADK's session id), a fixed key, or a function of the ADK
        ``Session`` returning the key (e.g. ``lambda s: f"{s.user_id}/{s.id}"``).
    :param ask: ``"confirm"`` (default): an ``ask`` verdict pauses the run with ADK's tool
        confirmation; ``"resolve"``: the Brake's approver answers it (refused without one).
    :param reset_on_user_message: a user message with text starts the session afresh
        (:meth:`Brake.user_message`); function responses (confirmations) do not.
    :param errors_to_model: ``False`` (default): a tool that raises is recorded and the
        exception propagates as ADK does it; ``True``: the model reads
        ``{"error": "<Type>: <text>"}`` instead and the run goes on.
    :param name: the plugin's name in the runner.
    """

    def __init__(
        self,
        brake: Brake,
        *,
        session: SessionKey = None,
        ask: str = "confirm",
        reset_on_user_message: bool = True,
        errors_to_model: bool = False,
        name: str = "toolbrake",
    ) -> None:
        super().__init__(name=name)
        if ask not in ("confirm", "resolve"):
            raise ValueError(f'toolbrake: ask must be "confirm" or "resolve", not {ask!r}')
        self.brake = brake
        self.session = session
        self.ask = ask
        self.reset_on_user_message = reset_on_user_message
        self.errors_to_model = errors_to_model
        self._pending: "weakref.WeakKeyDictionary[Any, _Pending]" = weakref.WeakKeyDictionary()

    # -- keys ---------------------------------------------------------------------------

    def _session_key(self, adk_session: Any) -> str:
        if isinstance(self.session, str):
            return self.session
        if callable(self.session):
            return str(self.session(adk_session))
        return str(getattr(adk_session, "id", None) or "default")

    def _key(self, tool_context: ToolContext) -> Tuple[str, Optional[str]]:
        """The session key and sub-agent id a call counts under."""
        name = getattr(tool_context, "agent_name", None)
        outer = _OUTER.get()
        if outer is not None:
            session, parent = outer
            if not name:
                return session, parent
            return session, f"{parent}/{name}" if parent else name
        session = self._session_key(tool_context.session)
        ic = getattr(tool_context, "_invocation_context", None)
        agent = getattr(ic, "agent", None)
        root = getattr(agent, "root_agent", agent)
        if agent is not None and root is not None and agent is not root and name:
            return session, name
        return session, None

    # -- callbacks ----------------------------------------------------------------------

    async def on_user_message_callback(
        self, *, invocation_context: Any, user_message: types.Content
    ) -> Optional[types.Content]:
        """A real user message (with text) starts the session afresh."""
        if not self.reset_on_user_message or _OUTER.get() is not None:
            return None
        try:
            parts = getattr(user_message, "parts", None) or []
            if any(getattr(p, "text", None) for p in parts):
                self.brake.user_message(self._session_key(invocation_context.session))
        except Exception:  # never break the run
            logger.warning("toolbrake: user_message failed", exc_info=True)
        return None

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: Dict[str, Any], tool_context: ToolContext
    ) -> Optional[Dict[str, Any]]:
        """Judges the call; a refused call is answered with ``{"error": message}``."""
        try:
            return self._before(tool, tool_args, tool_context)
        except Exception:  # an error in toolbrake: the call runs
            logger.warning("toolbrake: judging %s failed; the call runs", tool.name, exc_info=True)
            return None

    def _before(
        self, tool: BaseTool, tool_args: Dict[str, Any], tool_context: ToolContext
    ) -> Optional[Dict[str, Any]]:
        session, agent = self._key(tool_context)
        call_id = tool_context.function_call_id or None
        confirmation = tool_context.tool_confirmation
        if confirmation is not None and call_id:
            # The user's answer to an ask this plugin raised (or to the tool's own gate:
            # then toolbrake has no pending ask for the id and judges the call afresh).
            d = self._answer(call_id, bool(confirmation.confirmed), session, agent)
            if d is None:
                d = self.brake.before(tool.name, tool_args, session=session, call_id=call_id, agent=agent)
        else:
            d = self.brake.before(tool.name, tool_args, session=session, call_id=call_id, agent=agent)
        if d.verdict == "ask":
            if self.ask == "confirm" and call_id:
                tool_context.request_confirmation(
                    hint=d.message or "",
                    payload={"toolbrake": {"call_id": d.call_id, "code": d.code, "engine": d.engine}},
                )
                # A pause, not a result to summarize (as ADK's own confirmation gate does).
                tool_context.actions.skip_summarization = True
                return {"error": d.message or "toolbrake: this call waits for approval"}
            d = self.brake.resolve(d)
        if not d.runs:
            return {"error": d.message or "toolbrake: the call was refused"}
        pending = _Pending(d, session, agent)
        try:
            pending.token = _OUTER.set((session, agent))
        except Exception:  # pragma: no cover - a ContextVar set does not fail
            pending.token = None
        self._pending[tool_context] = pending
        return None

    def _answer(self, call_id: str, approved: bool, session: str, agent: Optional[str]) -> Optional[Decision]:
        try:
            return self.brake.answer(call_id, approved, session=session, agent=agent)
        except Exception:
            logger.debug("toolbrake: no pending ask for %s", call_id, exc_info=True)
            return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: Dict[str, Any],
        tool_context: ToolContext,
        result: Any,
    ) -> Optional[Dict[str, Any]]:
        """Records what the tool returned; adds advisories to the result."""
        pending = self._pop(tool_context)
        if pending is None:  # refused here, or answered by another callback
            return None
        if _paused(tool_context):
            # The tool's own confirmation or credential request: it did not run. The call
            # stays open; its re-run (same call id) after the user's answer counts once.
            return None
        try:
            outcome = _outcome(tool, result)
            r = self.brake.after(pending.decision.call_id, outcome, session=pending.session, agent=pending.agent)
            advisories = list(pending.decision.advisories) + list(r.advisories)
        except Exception:
            logger.warning("toolbrake: recording %s failed", tool.name, exc_info=True)
            return None
        if not advisories:
            return None
        if isinstance(result, dict):
            # In place: returning a value would skip the agent's own after_tool_callbacks.
            result[_advice_key(result)] = advisories
            return None
        return {"result": result, "advisories": advisories}

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: Dict[str, Any],
        tool_context: ToolContext,
        error: BaseException,
    ) -> Optional[Dict[str, Any]]:
        """Records the exception as a failure (a cancellation is not one)."""
        pending = self._pop(tool_context)
        if pending is None or not isinstance(error, Exception):
            return None
        advisories: List[str] = []
        try:
            r = self.brake.after(pending.decision.call_id, error, session=pending.session, agent=pending.agent)
            advisories = list(pending.decision.advisories) + list(r.advisories)
        except Exception:
            logger.warning("toolbrake: recording %s failed", tool.name, exc_info=True)
        if not self.errors_to_model:
            return None
        response: Dict[str, Any] = {"error": f"{type(error).__name__}: {error}"}
        if advisories:
            response["advisories"] = advisories
        return response

    def _pop(self, tool_context: ToolContext) -> Optional[_Pending]:
        pending = self._pending.pop(tool_context, None)
        if pending is not None and pending.token is not None:
            try:
                _OUTER.reset(pending.token)
            except (ValueError, RuntimeError):  # set in another context: nothing to undo
                pass
        return pending


def _paused(tool_context: ToolContext) -> bool:
    """Whether the call is waiting for the user (confirmation or credentials)."""
    try:
        actions = tool_context.actions
        call_id = tool_context.function_call_id
        return bool(call_id) and (
            call_id in (actions.requested_tool_confirmations or {})
            or call_id in (actions.requested_auth_configs or {})
        )
    except Exception:
        return False


def _advice_key(result: Dict[str, Any]) -> str:
    return "toolbrake_advisories" if "advisories" in result else "advisories"


def _outcome(tool: BaseTool, result: Any) -> Any:
    """What the call did, as :meth:`Brake.after` takes it."""
    detector = getattr(tool, "_detect_error_in_response", None)
    failed = False
    if detector is not None:
        try:
            failed = bool(detector(result))
        except Exception:
            failed = False
    if isinstance(result, dict):
        status = result.get("status")
        if result.get("error") or (isinstance(status, str) and status.lower() == "error"):
            failed = True
    if failed:
        return Outcome(_text(result), is_error=True)
    if isinstance(result, (str, type(None))):
        return result
    return _text(result)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except Exception:
        return str(value)
