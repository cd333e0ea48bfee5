"""toolbrake for the Claude Agent SDK (``claude-agent-sdk``): programmatic hook callbacks.

:func:`hooks` returns the ``hooks`` option of ``ClaudeAgentOptions``::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from toolbrake import Brake
    from toolbrake.integrations.claude_agent_sdk import hooks

    brake = Brake()  # or Brake("toolbrake.toml"), Brake(store="sqlite:/var/lib/app/lb.db")
    options = ClaudeAgentOptions(hooks=hooks(brake), allowed_tools=["Bash"])
    async for message in query(prompt="fix the failing test", options=options):
        print(message)

The SDK runs Claude Code underneath and hands each callback the payload a Claude Code
command hook reads on stdin; a callback answers with the JSON such a hook prints. So these
callbacks answer exactly as ``toolbrake hook claude`` does (the same adapter, in Rust): a
refused call gets ``permissionDecision: "deny"`` with the text the model reads (the tool
never runs), an ask ``permissionDecision: "ask"`` (the SDK's ``can_use_tool`` decides), an
advisory ``additionalContext``. ``PostToolUse`` and ``PostToolUseFailure`` record the
outcome (the failure track, progress), ``UserPromptSubmit`` starts the session afresh,
``Stop`` and ``SubagentStop`` close calls that never got an outcome.

Sessions: the SDK's ``session_id`` (a sub-agent's calls, ``agent_id``, count in their own
sub-agent session), or ``session=`` for all of them. When the brake fails closed
(``Brake(fail_closed=True)`` or ``[store] fail_closed = true``), a call toolbrake cannot
judge is refused and the ``PreToolUse`` matcher is set to ``on_failure="block"``, so a
callback that fails blocks the call too.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, List, Optional, Union

from toolbrake.integrations import require

require("claude_agent_sdk", "claude-agent-sdk")

from claude_agent_sdk import HookMatcher  # noqa: E402

from toolbrake import Brake  # noqa: E402

__all__ = ["hooks", "HOOK_EVENTS"]

log = logging.getLogger(__name__)

#: The hook events toolbrake listens to (those the Python SDK declares).
HOOK_EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
)

#: A session: a fixed key, or a function of a hook input returning one.
SessionArg = Union[str, Callable[[Dict[str, Any]], str], None]


def hooks(
    brake: Optional[Brake] = None,
    *,
    session: SessionArg = None,
    timeout: Optional[float] = None,
    on_warning: Optional[Callable[[str], None]] = None,
) -> Dict[str, List[HookMatcher]]:
    """The ``hooks`` option of ``ClaudeAgentOptions``, with toolbrake's callbacks.

    :param brake: the :class:`~toolbrake.Brake` that judges the calls (its engines, store
        and failure policy); a fresh in-memory ``Brake()`` by default.
    :param session: count every call in this session (or the one the function returns for
        a hook input) instead of the SDK's ``session_id``.
    :param timeout: the matchers' timeout in seconds (the SDK's default otherwise).
    :param on_warning: receives problems toolbrake met (never argument values); by default
        they are logged as warnings on this module's logger.

    Returns one :class:`HookMatcher` per event of :data:`HOOK_EVENTS`. To keep hooks of
    your own, add their matchers to the lists.
    """
    brake = brake if brake is not None else Brake()
    warn = on_warning if on_warning is not None else log.warning
    native = brake._native

    def judge(payload: str) -> Dict[str, Any]:
        output, warnings = native.claude_hook(payload)
        for w in warnings:
            try:
                warn(w)
            except Exception:  # a warning sink never breaks the call
                pass
        # ``{}`` is "no opinion": with on_failure="block", None would block the call.
        return json.loads(output) if output is not None else {}

    in_memory = brake.store == "memory"

    async def callback(input: Dict[str, Any], tool_use_id: Optional[str], context: Any) -> Dict[str, Any]:
        payload: Any = input
        if session is not None and isinstance(input, dict):
            payload = dict(input)
            payload["session_id"] = session(input) if callable(session) else session
        try:
            text = json.dumps(payload)
        except (TypeError, ValueError):
            text = ""  # not JSON: the adapter reports it and the failure policy answers
        if in_memory:
            return judge(text)
        # SQLite and Redis wait on I/O: off the event loop.
        import anyio

        return await anyio.to_thread.run_sync(judge, text)

    matchers: Dict[str, List[HookMatcher]] = {}
    for event in HOOK_EVENTS:
        on_failure = "block" if brake.fail_closed and event == "PreToolUse" else None
        matchers[event] = [HookMatcher(hooks=[callback], timeout=timeout, on_failure=on_failure)]
    return matchers
