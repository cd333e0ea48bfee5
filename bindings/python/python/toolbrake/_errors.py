"""The exceptions of the toolbrake package (raised by the native module too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover
    from ._native import Decision


class ToolBrakeError(Exception):
    """toolbrake itself failed: a store that cannot be opened or reached, a bug."""


class ToolBrakeConfigError(ToolBrakeError, ValueError):
    """A configuration broke a rule. ``key`` is the dotted key (``breaker.warn_at``),
    ``value`` the value as written, ``rule`` what it must be."""

    def __init__(self, message: str, key: str = "", value: str = "", rule: str = "") -> None:
        super().__init__(message)
        self.key = key
        self.value = value
        self.rule = rule


class ToolBrakeDenied(ToolBrakeError):
    """A call toolbrake refused: the tool did not run. ``message`` is the text the model
    should read instead of a result; ``decision`` the whole :class:`Decision`."""

    def __init__(self, decision: "Decision", message: Optional[str] = None) -> None:
        self.decision = decision
        self.message: str = message if message is not None else (decision.message or "")
        super().__init__(self.message)
