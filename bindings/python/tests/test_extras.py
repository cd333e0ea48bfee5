"""The extras a user installs (`pip install "toolbrake[langchain]"`) never pin the user's
framework: each states the version the tests run against as its lower bound, and the tests
run against exactly those versions (tests/constraints.txt, which scripts/test installs with)."""

from __future__ import annotations

import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYPROJECT = os.path.join(os.path.dirname(HERE), "pyproject.toml")
CONSTRAINTS = os.path.join(HERE, "constraints.txt")
SCRIPTS_TEST = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "scripts", "test")

REQUIREMENT = re.compile(r"^([A-Za-z0-9._-]+)\s*(.*)$")


def _extras() -> dict[str, list[str]]:
    if sys.version_info < (3, 11):
        pytest.skip("reading pyproject.toml needs tomllib (Python 3.11)")
    import tomllib

    with open(PYPROJECT, "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def _pins() -> dict[str, str]:
    pins = {}
    with open(CONSTRAINTS) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, version = line.split("==")
                pins[name.strip().lower()] = version.strip()
    return pins


def test_no_extra_pins_a_framework_and_each_lower_bound_is_the_tested_version() -> None:
    pins = _pins()
    for extra, requirements in _extras().items():
        for requirement in requirements:
            name, spec = REQUIREMENT.match(requirement).groups()
            assert "==" not in spec and "~=" not in spec, f"[{extra}] pins {requirement}"
            lower = [c.strip()[2:] for c in spec.split(",") if c.strip().startswith(">=")]
            assert lower, f"[{extra}] {requirement} states no lower bound"
            assert pins.get(name.lower()) == lower[0], (
                f"[{extra}] {requirement}: its lower bound is not the version the tests pin "
                f"({name}=={pins.get(name.lower())} in tests/constraints.txt)"
            )


def test_the_test_environments_are_built_with_the_constraints() -> None:
    with open(SCRIPTS_TEST) as f:
        script = f.read()
    assert "bindings/python/tests/constraints.txt" in script
    assert re.search(r"pip\" install .*-c ", script), "scripts/test installs the extras with -c constraints"
