"""toolbrake: a circuit breaker for AI agents' tool calls, in-process.

Before each tool call, ask :meth:`Brake.before`: the call may run (``allow``), run with
advice for the model (``advise``), wait for an operator (``ask``), or must not run
(``deny``: the model reads ``decision.message`` instead of a result). After it ran, tell
:meth:`Brake.after` what it returned or raised: failures feed the failure track, and a
call whose output moves on (a poll, a build getting further) is not a loop.

>>> from toolbrake import Brake
>>> brake = Brake()
>>> for _ in range(3):
...     d = brake.before("search", {"q": "weather"}, session="s1")
...     if not d.runs:
...         print(d.verdict, d.engine)
...         break
...     brake.after(d.call_id, "sunny", session="s1")  # doctest: +ELLIPSIS
Recorded(...)
Recorded(...)
deny streak

The decisions are the Rust core's, the same as in every other toolbrake host (hooks, MCP
proxy, the Node package); session state lives in memory, a SQLite file, or Redis.
Framework adapters are in :mod:`toolbrake.integrations`.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import functools
import inspect
import ipaddress
import logging
import os
import pathlib
import uuid
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union, overload

from . import _native
from ._errors import ToolBrakeConfigError, ToolBrakeDenied, ToolBrakeError
from ._native import VERSION, Decision, NativeBrake, Outcome, Recorded, call_hash, redact

# A fork while another thread is inside the native module waits for it to leave, so the
# child never inherits a lock held by a thread it does not have.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_native._fork_before,
        after_in_parent=_native._fork_after_parent,
        after_in_child=_native._fork_after_child,
    )

__all__ = [
    "Brake",
    "Decision",
    "Recorded",
    "Outcome",
    "ToolBrakeError",
    "ToolBrakeConfigError",
    "ToolBrakeDenied",
    "call_hash",
    "redact",
    "json_default",
    "__version__",
]

__version__ = VERSION

_log = logging.getLogger("toolbrake")

F = TypeVar("F", bound=Callable[..., Any])
Approver = Callable[[Decision], bool]
SessionArg = Union[str, Callable[[], str]]
AdviceHandler = Callable[[List[str]], None]
"""Receives the advisories of a call (text for the model)."""
JsonDefault = Callable[[Any], Any]
"""Turns an object with no JSON form into one that has (as ``json.dumps``'s ``default=``)."""


def _duration(td: datetime.timedelta) -> str:
    """A ``timedelta`` as ISO 8601, as pydantic writes it (``P1DT2H3M4.5S``, ``-PT1S``)."""
    sign = "-" if td < datetime.timedelta(0) else ""
    td = abs(td)
    days, secs, micros = td.days, td.seconds, td.microseconds
    out = f"{sign}P"
    if days:
        out += f"{days}D"
    if secs or micros or not days:
        out += "T"
        h, rem = divmod(secs, 3600)
        m, s = divmod(rem, 60)
        if h:
            out += f"{h}H"
        if m:
            out += f"{m}M"
        if s or micros or not (h or m):
            out += f"{s}.{micros:06d}".rstrip("0").rstrip(".") + "S"
    return out


def json_default(obj: Any) -> Any:
    """The JSON form of the common types with none of their own, as pydantic's JSON mode
    writes them: dates and times in ISO 8601 (UTC as ``Z``), ``timedelta`` as an ISO
    duration, ``Decimal``, ``UUID``, paths and IP addresses as text, an ``Enum`` as its
    value, numpy scalars and arrays as numbers and lists. Raises ``TypeError`` for anything
    else. ``@guard`` uses it for its arguments; pass it to :meth:`Brake.before` as
    ``default=`` to do the same."""
    if isinstance(obj, datetime.datetime):
        text = obj.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(obj, (datetime.date, datetime.time)):
        return obj.isoformat()
    if isinstance(obj, datetime.timedelta):
        return _duration(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, (uuid.UUID, pathlib.PurePath)):
        return str(obj)
    if isinstance(obj, (ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network, ipaddress.IPv6Network)):
        return str(obj)
    if type(obj).__module__.split(".")[0] == "numpy":
        if hasattr(obj, "tolist"):  # arrays and scalars alike (a scalar's tolist is its item)
            return obj.tolist()
    raise TypeError(f"no JSON form for {type(obj).__qualname__}")


def _chain(hook: Optional[JsonDefault]) -> JsonDefault:
    """:func:`json_default`, then ``hook`` for what it does not know."""
    if hook is None:
        return json_default

    def default(obj: Any) -> Any:
        try:
            return json_default(obj)
        except TypeError:
            return hook(obj)

    return default


class Brake:
    """Both engines (the streak brake and the breaker) over a session store.

    :param config: ``None`` (the built-in defaults), a path to a ``toolbrake.toml``, or a
        ``dict`` of the same tables (``{"streak": {"max_repeats": 3}, "breaker": {...},
        "store": {...}}``). Invalid settings raise :class:`ToolBrakeConfigError` naming
        the key, the value and the rule, here and not at the first call.
    :param store: ``None`` (the configuration's ``[store]``, else memory), ``"memory"``,
        ``"sqlite"`` (the default state file: ``$TOOLBRAKE_STATE``, else the configuration's
        ``[store] path``, else ``$XDG_STATE_HOME/toolbrake/state.db``), ``"sqlite:PATH"``
        (that file, whatever the environment says), or a ``redis://`` / ``rediss://`` URL.
        SQLite and Redis share sessions between processes.
    :param fail_closed: what a call gets when toolbrake cannot judge it (its store is
        down): ``True`` refuses it, ``False`` lets it run (``decision.degraded`` says
        why); ``None`` takes the configuration's ``[store] fail_closed`` (default False).
    :param approver: answers ``ask`` verdicts in :meth:`resolve` and :meth:`guard`:
        called with the :class:`Decision`, returns ``True`` to let the call run. Without
        one, an ``ask`` is refused.

    A ``Brake`` is safe to share between threads and asyncio tasks; store I/O runs with
    the GIL released.
    """

    __slots__ = ("_native", "approver")

    def __init__(
        self,
        config: Union[None, str, "os.PathLike[str]", Dict[str, Any]] = None,
        *,
        store: Optional[str] = None,
        fail_closed: Optional[bool] = None,
        approver: Optional[Approver] = None,
    ) -> None:
        if isinstance(config, os.PathLike):
            config = os.fspath(config)
        if fail_closed is not None and not isinstance(fail_closed, bool):
            raise TypeError(f"toolbrake: fail_closed must be a bool or None, not {type(fail_closed).__name__}")
        if store is not None and not isinstance(store, str):
            raise TypeError(f"toolbrake: store must be a str or None, not {type(store).__name__}")
        self._native = NativeBrake(config, store, fail_closed)
        self.approver = approver

    def __repr__(self) -> str:
        return f"Brake(store={self._native.store!r}, fail_closed={self._native.fail_closed})"

    @property
    def store(self) -> str:
        """Where session state lives: ``memory``, the SQLite file, or the Redis server."""
        return self._native.store

    @property
    def fail_closed(self) -> bool:
        """Whether calls toolbrake cannot judge are refused."""
        return self._native.fail_closed

    def config(self) -> Dict[str, Any]:
        """The effective configuration of both engines, every key written out."""
        return self._native.config()

    def before(
        self,
        tool: str,
        args: Any = None,
        *,
        session: str = "default",
        call_id: Optional[str] = None,
        agent: Optional[str] = None,
        default: Optional[JsonDefault] = None,
    ) -> Decision:
        """Judges a call before it runs. Run the tool only if ``decision.runs``.

        ``args`` must have a JSON form (dicts with text keys, lists, tuples, text,
        numbers, booleans, ``None``, pydantic models, dataclasses), or get one from
        ``default`` (called with each object that has none, as ``json.dumps``'s;
        :func:`json_default` knows dates, decimals, UUIDs, paths, enums, numpy):
        anything else (a set, bytes, NaN, a cycle) raises ``TypeError`` naming where, and
        nothing is counted. Judge the arguments as the model sent them (its JSON) when
        you have them. ``call_id`` defaults to a fresh unique id (``decision.call_id``).
        With ``agent``, the call counts in that sub-agent's own session.
        """
        return self._native.before(tool, args, session, call_id, agent, default)

    def after(
        self,
        call_id: str,
        outcome: Any = None,
        *,
        session: str = "default",
        agent: Optional[str] = None,
    ) -> Recorded:
        """Records what a call that ran did.

        ``outcome``: ``None`` (no output), the text it returned, the exception it raised
        (a failure), an :class:`Outcome` (exit code, HTTP status, error flag, text), or
        any other value it returned (recorded as its canonical JSON, else its ``str()``).
        Reading the outcome never raises: a value with neither (its ``__str__`` raises, it
        nests too deep to print) is recorded as a call whose output is unknown, with a
        ``RuntimeWarning`` and ``recorded.degraded`` saying so.

        A session remembers at most 64 calls between ``before`` and ``after``: with more
        in flight, the oldest is forgotten and its ``after`` records nothing
        (``recorded.degraded`` says so) instead of failing. An id this brake never judged
        raises ``ValueError``.
        """
        return self._native.after(call_id, outcome, session, agent)

    def answer(
        self,
        call_id: str,
        approved: bool,
        *,
        session: str = "default",
        agent: Optional[str] = None,
    ) -> Decision:
        """The operator's answer to an ``ask``: the call's final decision."""
        return self._native.answer(call_id, bool(approved), session, agent)

    def resolve(self, decision: Decision) -> Decision:
        """Settles an ``ask`` through the approver (refused without one, or when the
        approver raises); any other decision is returned as it is."""
        if decision.verdict != "ask":
            return decision
        approved = False
        if self.approver is not None:
            try:
                approved = bool(self.approver(decision))
            except Exception:
                approved = False
        # decision.session is the full key (a sub-agent's included).
        return self._native.answer(decision.call_id, approved, decision.session, None)

    def user_message(self, session: str = "default") -> None:
        """A real human message arrived: the session (and its sub-agents) start afresh."""
        self._native.user_message(session)

    def end(self, session: str = "default") -> None:
        """The session is over: its state (and its sub-agents') is forgotten."""
        self._native.end(session)

    def explain(self, tool: str, args: Any = None, *, session: Optional[str] = None) -> Dict[str, Any]:
        """What toolbrake sees in a call: its canonical form and hash, the streak
        identity, the breaker's fingerprints (kind, gate) and, with ``session``, that
        session's counts, failure streaks and unchanged results for it. Read-only."""
        return self._native.explain(tool, args, session)

    @overload
    def guard(self, fn: F) -> F: ...

    @overload
    def guard(
        self,
        fn: None = None,
        *,
        tool: Optional[str] = None,
        session: SessionArg = "default",
        on_advice: Optional[AdviceHandler] = None,
        default: Optional[JsonDefault] = None,
    ) -> Callable[[F], F]: ...

    def guard(
        self,
        fn: Optional[F] = None,
        *,
        tool: Optional[str] = None,
        session: SessionArg = "default",
        on_advice: Optional[AdviceHandler] = None,
        default: Optional[JsonDefault] = None,
    ) -> Any:
        """Decorates a function (sync or async) so that it runs only when allowed.

        The call's arguments are bound to the function's parameters by name (defaults
        applied) and judged under ``tool`` (default: the function's name) in ``session``
        (a string, or a function returning one per call). A refused call raises
        :class:`ToolBrakeDenied` and the body does not run; an exception from the body is
        recorded as a failure and raised again; a return value is recorded (a result that
        changes is progress) and returned as it is: recording never raises.
        ``on_advice`` receives advisories for the model, if any.

        Arguments are judged as JSON: dates, times, decimals, UUIDs, paths, enums and numpy
        values (also inside dataclasses and models) are encoded as pydantic's JSON mode
        writes them (:func:`json_default`); ``default`` (called with any other object,
        as ``json.dumps``'s) encodes the rest, else the call raises ``TypeError``.

        >>> brake = Brake()
        >>> @brake.guard
        ... def search(query: str) -> str:
        ...     return "sunny"
        """

        def decorate(f: F) -> F:
            name = tool or getattr(f, "__name__", "tool")
            try:
                sig: Optional[inspect.Signature] = inspect.signature(f)
            except (TypeError, ValueError):
                sig = None

            # The common case, parameters that are all plain (no *args, **kwargs or
            # positional-only ones), binds without inspect's machinery.
            plain = sig is not None and all(
                p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
                or p.kind is inspect.Parameter.KEYWORD_ONLY
                for p in sig.parameters.values()
            )
            names = list(sig.parameters) if sig is not None else []
            name_set = set(names)
            positional = [
                n
                for n in names
                if sig is not None
                and sig.parameters[n].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
            ]
            defaults = {
                n: p.default
                for n, p in (sig.parameters.items() if sig is not None else ())
                if p.default is not inspect.Parameter.empty
            }

            def bind(args: tuple, kwargs: dict) -> Dict[str, Any]:
                if sig is None:
                    return {"args": list(args), "kwargs": kwargs}
                if plain and len(args) <= len(positional) and not (
                    kwargs.keys() - name_set
                ):
                    out = dict(zip(positional, args))
                    if not (out.keys() & kwargs.keys()):
                        out.update(kwargs)
                        if len(out) == len(names):
                            return {n: out[n] for n in names}
                        if all(n in out or n in defaults for n in names):
                            return {n: out[n] if n in out else defaults[n] for n in names}
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                out: Dict[str, Any] = {}
                for k, v in bound.arguments.items():
                    kind = sig.parameters[k].kind
                    if kind is inspect.Parameter.VAR_KEYWORD:
                        out.update(v)
                    elif kind is inspect.Parameter.VAR_POSITIONAL:
                        out[k] = list(v)
                    else:
                        out[k] = v
                return out

            encode = _chain(default)

            def admit(args: tuple, kwargs: dict) -> Decision:
                key = session() if callable(session) else session
                d = self.resolve(self._native.before(name, bind(args, kwargs), key, None, None, encode))
                if not d.runs:
                    raise ToolBrakeDenied(d)
                if d.advisories and on_advice is not None:
                    on_advice(list(d.advisories))
                return d

            def record(d: Decision, outcome: Any) -> None:
                # The tool has run: what it returned or raised reaches the caller whatever
                # recording it does (a result toolbrake cannot read is recorded as unknown
                # output by the native module; anything else is logged, never raised).
                try:
                    r = self._native.after(d.call_id, outcome, d.session, None)
                except Exception:
                    _log.warning("toolbrake: could not record the outcome of %s", name, exc_info=True)
                    return
                if r.advisories and on_advice is not None:
                    on_advice(list(r.advisories))

            if inspect.iscoroutinefunction(f):

                @functools.wraps(f)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    d = admit(args, kwargs)
                    try:
                        value = await f(*args, **kwargs)
                    except BaseException as e:
                        record(d, e)
                        raise
                    record(d, value)
                    return value

                return async_wrapper  # type: ignore[return-value]

            @functools.wraps(f)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                d = admit(args, kwargs)
                try:
                    value = f(*args, **kwargs)
                except BaseException as e:
                    record(d, e)
                    raise
                record(d, value)
                return value

            return wrapper  # type: ignore[return-value]

        if fn is not None:
            return decorate(fn)
        return decorate

