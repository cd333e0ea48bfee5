"""Type stubs of the native module (``toolbrake._native``, Rust via PyO3)."""

from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Union

Verdict = Literal["allow", "advise", "ask", "deny"]

VERSION: str

class Decision:
    """What toolbrake decided about a call before it runs (frozen)."""

    @property
    def verdict(self) -> Verdict:
        """``"allow"``, ``"advise"``, ``"ask"`` or ``"deny"``."""
    @property
    def runs(self) -> bool:
        """Whether the tool may run now (``allow`` or ``advise``)."""
    @property
    def message(self) -> Optional[str]:
        """For ``deny`` and ``ask``: the text the model reads instead of a result."""
    @property
    def advisories(self) -> List[str]:
        """Advice for the model to read with the result."""
    @property
    def engine(self) -> Optional[str]:
        """``"streak"``, ``"breaker"`` or ``"toolbrake"`` (for a refusal or an ask)."""
    @property
    def code(self) -> Optional[str]:
        """``LOOP_BRAKE``, ``REPEAT_TOOL_BLOCKED``, ``SHELL_HTTP_BLOCKED`` or ``STORE_UNAVAILABLE``."""
    @property
    def hits(self) -> List[Dict[str, Any]]:
        """The fingerprints that reached a gate."""
    @property
    def call_id(self) -> str:
        """The call's id, for ``after`` and ``answer``."""
    @property
    def session(self) -> str:
        """The session key the call counted in (a sub-agent's ends in ``#agent:<id>``)."""
    @property
    def degraded(self) -> Optional[str]:
        """Why toolbrake could not judge the call (it runs: failing open), else ``None``."""

class Recorded:
    """What toolbrake made of a call's outcome (frozen)."""

    @property
    def advisories(self) -> List[str]:
        """Advice for the model to read after the result (the failure track)."""
    @property
    def failure(self) -> Optional[Dict[str, Any]]:
        """The failure toolbrake classified, or ``None`` for a success."""
    @property
    def degraded(self) -> Optional[str]:
        """Why the outcome could not be recorded (the store failed, or too many calls were
        in flight), or could not be read (recorded as unknown output), else ``None``."""

class Outcome:
    """What a call did, said explicitly."""

    text: Optional[str]
    is_error: Optional[bool]
    exit_code: Optional[int]
    status_code: Optional[int]
    def __init__(
        self,
        text: Optional[str] = None,
        *,
        is_error: Optional[bool] = None,
        exit_code: Optional[int] = None,
        status_code: Optional[int] = None,
    ) -> None: ...

class NativeBrake:
    def __init__(
        self,
        config: Union[None, str, Dict[str, Any]] = None,
        store: Optional[str] = None,
        fail_closed: Optional[bool] = None,
    ) -> None: ...
    @property
    def store(self) -> str: ...
    @property
    def fail_closed(self) -> bool: ...
    def before(
        self,
        tool: str,
        args: Any = None,
        session: str = "default",
        call_id: Optional[str] = None,
        agent: Optional[str] = None,
        default: Optional[Callable[[Any], Any]] = None,
    ) -> Decision: ...
    def answer(
        self, call_id: str, approved: bool, session: str = "default", agent: Optional[str] = None
    ) -> Decision: ...
    def after(
        self, call_id: str, outcome: Any = None, session: str = "default", agent: Optional[str] = None
    ) -> Recorded: ...
    def user_message(self, session: str) -> None: ...
    def end(self, session: str) -> None: ...
    def claude_hook(self, payload_json: str) -> Tuple[Optional[str], List[str]]: ...
    def explain(self, tool: str, args: Any = None, session: Optional[str] = None) -> Dict[str, Any]: ...
    def config(self) -> Dict[str, Any]: ...

def call_hash(tool: str, args: Any = None) -> str:
    """The SHA-256 of the tool name, a newline and the canonical JSON of the arguments."""

def redact(text: str) -> str:
    """Text with credentials replaced, as toolbrake shows text."""

def _fork_before() -> None: ...
def _fork_after_parent() -> None: ...
def _fork_after_child() -> None: ...
