"""The wheel people install without Rust: scripts/package builds it (abi3, manylinux) into
target/package/python/; this installs it into a fresh virtualenv whose PATH has no compiler and runs
the README's plain-API example with it. Skipped when no wheel was built (set
$TOOLBRAKE_WHEEL to test another one)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _wheel() -> str:
    given = os.environ.get("TOOLBRAKE_WHEEL")
    if given:
        return given
    found = sorted(glob.glob(os.path.join(ROOT, "target", "package", "python", "toolbrake-*-abi3-*.whl")), key=os.path.getmtime)
    if not found:
        pytest.skip("no wheel: run scripts/package (or set TOOLBRAKE_WHEEL)")
    return found[-1]


def test_the_wheel_installs_without_a_compiler_and_runs_the_plain_api(tmp_path) -> None:
    wheel = _wheel()
    name = os.path.basename(wheel)
    assert "-cp39-abi3-" in name and "manylinux" in name, name
    with zipfile.ZipFile(wheel) as z:
        files = z.namelist()
    assert any(f.startswith("toolbrake/_native") and f.endswith(".so") for f in files), files
    assert "toolbrake/py.typed" in files and "toolbrake/_native.pyi" in files

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / "bin"
    # Nothing on PATH but the virtualenv: no cc, no cargo, no rustc.
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for tool in ("cc", "gcc", "cargo", "rustc"):
        assert subprocess.run(["/bin/sh", "-c", f"command -v {tool}"], env=env).returncode != 0
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", wheel],
        check=True,
        env=env,
        timeout=300,
    )
    example = textwrap.dedent(
        """
        from toolbrake import Brake
        brake = Brake()
        ran = 0
        def search(q):
            global ran
            ran += 1
            return "sunny"
        for _ in range(3):
            d = brake.before("search", {"q": "weather"}, session="run-42")
            if d.runs:
                result = search(q="weather")
                brake.after(d.call_id, result, session="run-42")
            else:
                result = d.message
        print(ran, d.verdict)
        """
    )
    out = subprocess.run(
        [str(bin_dir / "python"), "-c", example], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "deny"]
