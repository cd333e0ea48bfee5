"""Recording what a call did never throws: the tool has run, and what it returned (or raised)
reaches its caller whatever toolbrake can read of it."""

from __future__ import annotations

import asyncio
import sys
import warnings

import pytest

from toolbrake import Brake, ToolBrakeDenied


class Unprintable:
    """A result with no JSON form whose ``__str__`` and ``__repr__`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


class NotText:
    """A result whose ``__str__`` returns something that is not text."""

    def __str__(self):  # type: ignore[override]
        return 42


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def huge_int() -> int:
    # Beyond 64 bits (no JSON form toolbrake takes), and too long for str() (Python's
    # limit on integer digits, 4,300 by default).
    return 10**5000


UNREADABLE = {
    "str-and-repr-raise": Unprintable,
    "nested-5000-deep": lambda: nested(5000),
    "int-too-long-to-print": huge_int,
    "str-returns-non-text": NotText,
}


@pytest.fixture(autouse=True)
def low_int_digits_limit():
    # Python before 3.11 prints any integer: the limit makes 10**5000 unprintable there too.
    if hasattr(sys, "set_int_max_str_digits"):
        old = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(4300)
        yield
        sys.set_int_max_str_digits(old)
    else:  # pragma: no cover
        yield


@pytest.mark.parametrize("make", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_after_records_an_unreadable_result_as_unknown_output_and_says_so(make):
    brake = Brake()
    d = brake.before("fetch", {"q": 1}, session="s")
    with pytest.warns(RuntimeWarning, match="recorded as a call whose output is unknown"):
        r = brake.after(d.call_id, make(), session="s")
    assert r.failure is None and r.advisories == []
    assert r.degraded and "recorded as a call whose output is unknown" in r.degraded
    # The tool's own text never appears (it may hold anything); its type's name does.
    assert "no text for you" not in r.degraded


@pytest.mark.parametrize("make", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_guard_returns_an_unreadable_result_unchanged(make):
    brake = Brake()
    made = []

    @brake.guard(session="g")
    def fetch(q: int):
        made.append(make())
        return made[-1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [fetch(1) for _ in range(2)]
    assert [id(x) for x in got] == [id(x) for x in made]
    # Unknown output is never progress: the third identical call is still stopped.
    with pytest.raises(ToolBrakeDenied):
        fetch(1)
    assert len(made) == 2


def test_guard_on_a_coroutine_returns_an_unreadable_result_unchanged():
    brake = Brake()
    value = nested(5000)

    @brake.guard
    async def fetch(q: int):
        return value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert asyncio.run(fetch(1)) is value


def test_a_tool_error_whose_str_raises_is_what_the_caller_gets():
    class Hostile(Exception):
        def __str__(self) -> str:
            raise RuntimeError("nope")

    brake = Brake()

    @brake.guard
    def fail():
        raise Hostile()

    with pytest.raises(Hostile):
        fail()


def test_the_warning_is_shown_once_and_warnings_as_errors_never_raise():
    brake = Brake()

    def call() -> object:
        d = brake.before("fetch", {"q": 1}, session="w")
        return brake.after(d.call_id, Unprintable(), session="w")

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        for _ in range(2):
            call()
            brake.user_message("w")
    assert len([w for w in seen if issubclass(w.category, RuntimeWarning)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert call().degraded
