"""Fixtures the adapter tests share: no network, and a second Python process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Callable

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
#: The package's Python sources (with the native module `maturin develop` put there).
PKG = os.path.join(os.path.dirname(HERE), "python")


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to reach the network fails the test (adapters run on scripted models)."""

    def refuse(self, address, *a, **k):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"network access attempted: {address}")
        return real_connect(self, address, *a, **k)

    real_connect = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture
def run_python() -> Callable[[str], str]:
    """Runs Python code in another process (this package and the tests importable) and
    returns what it printed; a failure fails the test with its stderr."""

    def run(code: str) -> str:
        path = os.pathsep.join(p for p in [PKG, HERE, os.environ.get("PYTHONPATH", "")] if p)
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, PYTHONPATH=path),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run
