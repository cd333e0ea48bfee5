"""toolbrake for smolagents: tools that ask a Brake before they run.

Usage::

    from smolagents import CodeAgent, ToolCallingAgent
    from toolbrake import Brake
    from toolbrake.integrations.smolagents import protect_agent, protect_tools

    brake = Brake()  # or Brake(store="sqlite:/var/lib/app/toolbrake.db") across processes
    agent = protect_agent(CodeAgent(tools=[search], model=model), brake)
    agent.run("What is the weather in Paris?")
    # The third identical search in a row with the same result raises ToolBrakeDenied in
    # the tool: the agent's next step reads "ToolBrakeDenied: loop brake: tool ..." as the error.
    tools = protect_tools([search], brake, session="user-42")  # or wrap the tools yourself

How it maps onto smolagents (``ToolCallingAgent`` and ``CodeAgent`` alike):

- :class:`ToolBrakeTool` wraps a ``Tool``; its ``forward`` asks :meth:`Brake.before`. A
  refused call raises :class:`~toolbrake.ToolBrakeDenied` before the wrapped tool runs;
  smolagents turns it into the step's error, which the model reads on its next step
  (``CodeAgent`` stops the code block there, so no code runs on a made-up result).
- What the tool returned is recorded with :meth:`Brake.after`; an exception is recorded as
  a failure and raised again. Advisories are appended to a text result; after a failure
  they come with the error (:class:`AdvisedToolError`, raised from the original).
- smolagents has no approval mechanism: an ``ask`` goes to :meth:`Brake.resolve` (the
  Brake's approver, or refusal).
- Sessions: ``session=`` (a key or a function returning one), default ``"default"``.
  :func:`protect_agent` gives the agent its own session (the agent's memory is the
  conversation), starts it afresh at each new task (``reset_on_task``), and wraps the
  tools of its managed agents as sub-agent sessions (``agent=<name>``).
- An error inside toolbrake is logged and the tool runs: toolbrake never breaks the run.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from . import require

require("smolagents", "smolagents")

from smolagents.tools import Tool  # noqa: E402

from .. import Brake, Decision, ToolBrakeDenied, json_default  # noqa: E402

__all__ = ["ToolBrakeTool", "AdvisedToolError", "protect_tools", "protect_agent", "SessionKey"]

logger = logging.getLogger("toolbrake.integrations.smolagents")

#: ``session=``: a fixed key, or a function returning the key for each call.
SessionKey = Union[str, Callable[[], str]]

#: Tools that are the agent's own control flow, never braked by :func:`protect_agent`.
UNBRAKED = frozenset({"final_answer"})


class AdvisedToolError(Exception):
    """A tool's exception with toolbrake's advice for the model attached.

    Raised (``from`` the original, kept in :attr:`original`) when recording a failure
    returned advisories, so that the model reads them with the error.
    """

    def __init__(self, original: BaseException, advisories: List[str]) -> None:
        self.original = original
        self.advisories = list(advisories)
        text = f"{type(original).__name__}: {original}"
        super().__init__(text + "\n\n" + "\n\n".join(self.advisories))


class ToolBrakeTool(Tool):
    """A smolagents ``Tool`` that runs ``tool`` only when ``brake`` allows the call.

    It has the wrapped tool's name, description, inputs and output type, so the model sees
    the same tool. Positional arguments (``CodeAgent`` code calls ``search("q")``) are
    bound to the input names in order before the call is judged.

    :param tool: the tool to protect.
    :param brake: the Brake that judges the calls.
    :param session: the session key, or a function returning it for each call.
    :param agent: a sub-agent id: the calls count in that sub-agent's session.
    """

    skip_forward_signature_validation = True

    def __init__(
        self,
        tool: Tool,
        brake: Brake,
        *,
        session: SessionKey = "default",
        agent: Optional[str] = None,
    ) -> None:
        self.tool = tool
        self.brake = brake
        self.session = session
        self.agent = agent
        self.name = tool.name
        self.description = tool.description
        self.inputs = tool.inputs
        self.output_type = tool.output_type
        self.output_schema = getattr(tool, "output_schema", None)
        super().__init__()
        self.is_initialized = True  # the wrapped tool sets itself up on its first call

    def __repr__(self) -> str:
        return f"ToolBrakeTool({self.tool!r})"

    def _session_key(self) -> str:
        return self.session() if callable(self.session) else self.session

    def _bind(self, args: tuple, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """The call's arguments by input name (positional ones in the inputs' order)."""
        bound: Dict[str, Any] = {}
        names = list(self.inputs)
        for i, value in enumerate(args):
            bound[names[i] if i < len(names) else f"arg{i}"] = value
        bound.update(kwargs)
        return bound

    def _judge(self, args: tuple, kwargs: Dict[str, Any]) -> Optional[Decision]:
        """The call's decision, or ``None`` when toolbrake could not judge it."""
        try:
            session = self._session_key()
            bound = self._bind(args, kwargs)
            try:
                d = self.brake.before(self.name, bound, session=session, agent=self.agent, default=json_default)
            except TypeError:  # a value JSON cannot hold (an image, a dataframe): its repr
                d = self.brake.before(self.name, _jsonable(bound), session=session, agent=self.agent)
            return self.brake.resolve(d)
        except Exception:
            logger.warning("toolbrake: judging %s failed; the call runs", self.name, exc_info=True)
            return None

    def _record(self, d: Decision, outcome: Any) -> List[str]:
        try:
            r = self.brake.after(d.call_id, _outcome(outcome), session=d.session)
            return list(d.advisories) + list(r.advisories)
        except Exception:
            logger.warning("toolbrake: recording %s failed", self.name, exc_info=True)
            return []

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Judges the call, runs the wrapped tool if allowed, records what it did.

        :raises ToolBrakeDenied: the call was refused; the wrapped tool did not run.
        """
        d = self._judge(args, kwargs)
        if d is None:
            return self.tool(*args, **kwargs)
        if not d.runs:
            raise ToolBrakeDenied(d)
        try:
            result = self.tool(*args, **kwargs)
        except Exception as e:
            advisories = self._record(d, e)
            if advisories:
                raise AdvisedToolError(e, advisories) from e
            raise
        except BaseException:  # an interrupt: not the tool's failure, nothing to record
            raise
        advisories = self._record(d, result)
        if advisories and isinstance(result, str):
            return result + "\n\n" + "\n\n".join(advisories)
        if advisories:
            logger.info("toolbrake: advice for %s not shown (non-text result): %s", self.name, advisories)
        return result


def protect_tools(
    tools: Iterable[Tool],
    brake: Brake,
    *,
    session: SessionKey = "default",
    agent: Optional[str] = None,
) -> List[Tool]:
    """Wraps each tool in a :class:`ToolBrakeTool` (tools already wrapped are kept).

    :param tools: the tools to protect.
    :param brake: the Brake that judges the calls.
    :param session: the session key, or a function returning it for each call.
    :param agent: a sub-agent id for all of these tools' calls.
    """
    return [
        t if isinstance(t, ToolBrakeTool) else ToolBrakeTool(t, brake, session=session, agent=agent) for t in tools
    ]


class _TaskWatch:
    """Starts the session afresh when the root agent is given a new task."""

    def __init__(self, agent: Any, brake: Brake, session: str, reset: bool) -> None:
        self.agent = agent
        self.brake = brake
        self.key = session
        self.reset = reset
        self.task_step: Any = None
        self.lock = threading.Lock()

    def __call__(self) -> str:
        if self.reset:
            try:
                current = _latest_task(self.agent)
                with self.lock:
                    fresh = current is not None and current is not self.task_step
                    if fresh:
                        self.task_step = current
                if fresh:
                    self.brake.user_message(self.key)
            except Exception:
                logger.warning("toolbrake: user_message failed", exc_info=True)
        return self.key


def _latest_task(agent: Any) -> Any:
    from smolagents.memory import TaskStep

    for step in reversed(getattr(getattr(agent, "memory", None), "steps", None) or []):
        if isinstance(step, TaskStep):
            return step
    return None


def protect_agent(
    agent: Any,
    brake: Brake,
    *,
    session: Optional[str] = None,
    reset_on_task: bool = True,
) -> Any:
    """Protects an agent's tools in place (and its managed agents' tools); returns it.

    :param agent: a ``ToolCallingAgent`` or ``CodeAgent`` (any ``MultiStepAgent``).
    :param brake: the Brake that judges the calls.
    :param session: the session key; default: a fresh key for this agent
        (``smolagents-<name>-<random>``), as the agent's memory is its conversation.
    :param reset_on_task: each new task given to ``agent.run`` is a real user message:
        the session (and its sub-agents) start afresh (:meth:`Brake.user_message`).

    The tools of each managed agent count in the sub-agent session ``agent=<its name>``
    (``outer/inner`` for deeper ones); their tasks from the manager do not reset anything.
    ``final_answer`` is never braked.
    """
    key = session or f"smolagents-{getattr(agent, 'name', None) or 'agent'}-{uuid.uuid4().hex[:12]}"
    watch = _TaskWatch(agent, brake, key, reset_on_task)
    _wrap_agent(agent, brake, watch, None)
    return agent


def _wrap_agent(agent: Any, brake: Brake, watch: _TaskWatch, sub: Optional[str]) -> None:
    tools: Dict[str, Tool] = getattr(agent, "tools", {}) or {}
    for name, tool in list(tools.items()):
        if name in UNBRAKED or isinstance(tool, ToolBrakeTool):
            continue
        tools[name] = ToolBrakeTool(tool, brake, session=watch, agent=sub)
    for name, managed in (getattr(agent, "managed_agents", {}) or {}).items():
        _wrap_agent(managed, brake, watch, f"{sub}/{name}" if sub else name)


def _jsonable(value: Any) -> Any:
    """A JSON form of ``value``: what JSON cannot hold becomes its ``repr``."""
    return json.loads(json.dumps(value, default=repr))


def _outcome(value: Any) -> Any:
    """What :meth:`Brake.after` gets: text, an exception, or JSON (else the value's text)."""
    if value is None or isinstance(value, (str, BaseException, int, float, bool)):
        return value
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)
