"""toolbrake.integrations.claude_agent_sdk: the callbacks on Claude Code's hook payloads, then
end to end inside the real Claude Agent SDK (claude-agent-sdk 0.2.189, which runs its bundled
Claude Code 2.1.332) against the scripted stand-in model of the agent end-to-end tests
(crates/toolbrake/tests/e2e/mock_model.py: the Anthropic Messages API on 127.0.0.1). The
end-to-end assertions are on what the model was sent: what it was shown."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk import ClaudeAgentOptions, PermissionResultAllow, ResultMessage, query  # noqa: E402
from toolbrake import Brake, ToolBrakeConfigError  # noqa: E402
from toolbrake.integrations.claude_agent_sdk import HOOK_EVENTS, hooks  # noqa: E402

HERE = Path(__file__).resolve().parent
STAND_IN = HERE.parents[2] / "crates/toolbrake/tests/e2e/mock_model.py"


def pre(tool_use_id: str, command: str = "make test", **extra: Any) -> Dict[str, Any]:
    return {
        "session_id": "s1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": tool_use_id,
        **extra,
    }


def post(tool_use_id: str, stdout: str, command: str = "make test") -> Dict[str, Any]:
    return {**pre(tool_use_id, command), "hook_event_name": "PostToolUse",
            "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False}}


def fire(matchers: Dict[str, Any], payload: Dict[str, Any]) -> Dict[str, Any]:
    callback = matchers[payload["hook_event_name"]][0].hooks[0]
    return asyncio.run(callback(payload, payload.get("tool_use_id"), {"signal": None}))


def decision(out: Dict[str, Any]) -> Tuple[str, str]:
    spec = out.get("hookSpecificOutput", {})
    return spec.get("permissionDecision", ""), spec.get("permissionDecisionReason", "")


# -- the callbacks ------------------------------------------------------------------------


def test_the_third_identical_call_is_denied_with_the_text_the_model_reads() -> None:
    m = hooks()
    assert list(m) == list(HOOK_EVENTS)
    assert m["PreToolUse"][0].on_failure is None, "fail open by default"
    for i in ("t1", "t2"):
        assert fire(m, pre(i)) == {}, "no opinion: the host decides"
        assert fire(m, post(i, "ok")) == {}
    verdict, reason = decision(fire(m, pre("t3")))
    assert verdict == "deny"
    assert reason.startswith('loop brake: tool "Bash" called 3 times in a row with identical arguments')
    # Another SDK session counts on its own.
    assert fire(m, pre("u1", session_id="s2")) == {}


def test_output_that_changes_is_progress_and_failures_feed_the_failure_track() -> None:
    brake = Brake({"breaker": {"on_limit": "deny"}})
    m = hooks(brake)
    for i in range(1, 7):
        assert fire(m, pre(f"p{i}", "cat progress")) == {}, f"call {i} runs"
        fire(m, post(f"p{i}", f"step {i}", "cat progress"))
    advisories = []
    for n in range(1, 4):
        cmd = f"curl -sSf --max-time {n} http://127.0.0.1:9/x"
        fire(m, {**pre(f"f{n}", cmd), "session_id": "f"})
        out = fire(m, {**pre(f"f{n}", cmd), "session_id": "f", "hook_event_name": "PostToolUseFailure",
                       "error": "Exit code 7\ncurl: (7) Failed to connect"})
        advisories.append(out.get("hookSpecificOutput", {}).get("additionalContext", ""))
    assert advisories[:2] == ["", ""]
    assert "has failed 3 times in a row" in advisories[2]
    seen = brake.explain("Bash", {"command": "curl -sSf --max-time 4 http://127.0.0.1:9/x"}, session="f")
    assert "fail" in json.dumps(seen["breaker"]), seen


def test_an_unreadable_payload_runs_with_a_warning_or_is_refused_when_failing_closed() -> None:
    warnings: List[str] = []
    m = hooks(on_warning=warnings.append)
    bad = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"password": "hunter2"}}
    assert fire(m, bad) == {}
    assert len(warnings) == 1 and "the payload has no session_id" in warnings[0]
    assert "hunter2" not in "".join(warnings), "never an argument value"

    closed = hooks(Brake(fail_closed=True), on_warning=lambda w: None)
    assert closed["PreToolUse"][0].on_failure == "block", "a failing callback blocks the call"
    assert closed["PostToolUse"][0].on_failure is None, "only the event that guards a call blocks"
    verdict, reason = decision(fire(closed, bad))
    assert verdict == "deny" and "toolbrake could not judge this call" in reason


def test_the_configuration_says_fail_closed(tmp_path: Path) -> None:
    cfg = tmp_path / "toolbrake.toml"
    cfg.write_text("[store]\nfail_closed = true\n")
    assert hooks(Brake(str(cfg)))["PreToolUse"][0].on_failure == "block"
    with pytest.raises(ToolBrakeConfigError):
        Brake({"streak": {"max_repeats": 0}})


def test_session_override_counts_several_sdk_sessions_together() -> None:
    m = hooks(session="app")
    for i, sid in enumerate(("a", "b")):
        fire(m, {**pre(f"x{i}"), "session_id": sid})
        fire(m, {**post(f"x{i}", "ok"), "session_id": sid})
    assert decision(fire(m, {**pre("x3"), "session_id": "c"}))[0] == "deny"


def test_sqlite_sessions_are_shared_with_other_processes(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 's.db'}"
    script = f"""
import asyncio, sys
sys.path.insert(0, {str(HERE)!r})
from test_claude_agent_sdk import fire, pre, post
from toolbrake import Brake
from toolbrake.integrations.claude_agent_sdk import hooks
m = hooks(Brake(store={store!r}))
for i in ("t1", "t2"):
    assert fire(m, pre(i)) == {{}}
    fire(m, post(i, "ok"))
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert decision(fire(hooks(Brake(store=store)), pre("t3")))[0] == "deny"


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)
    monkeypatch.delitem(sys.modules, "toolbrake.integrations.claude_agent_sdk", raising=False)
    with pytest.raises(ImportError, match=r'pip install "\./bindings/python\[claude-agent-sdk\]"'):
        importlib.import_module("toolbrake.integrations.claude_agent_sdk")


# -- end to end, inside the real SDK ------------------------------------------------------


class StandIn:
    """The scripted stand-in model: the same Bash command every turn, up to ``calls``."""

    def __init__(self, tmp: Path, command: str, calls: int) -> None:
        self.log = tmp / "requests.jsonl"
        portfile = tmp / "port"
        self.proc = subprocess.Popen(
            [sys.executable, str(STAND_IN), str(self.log), str(portfile), command, str(calls)]
        )
        start = time.monotonic()
        while not portfile.exists():
            assert time.monotonic() - start < 10, "the stand-in model did not start"
            time.sleep(0.02)
        self.port = int(portfile.read_text().strip())

    def tool_results(self) -> List[Tuple[bool, str]]:
        """(is_error, text) of the tool results in the request that carried the most."""
        best: List[Tuple[bool, str]] = []
        for line in self.log.read_text().splitlines():
            body = json.loads(line)["body"]
            got = [
                (blk.get("is_error") is True, json.dumps(blk.get("content")))
                for m in body.get("messages", [])
                if isinstance(m.get("content"), list)
                for blk in m["content"]
                if blk.get("type") == "tool_result"
            ]
            if len(got) > len(best):
                best = got
        return best

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def run_agent(tmp: Path, port: int, matchers: Dict[str, Any], **extra: Any) -> List[Any]:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    (tmp / "claude-config").mkdir(exist_ok=True)
    options = ClaudeAgentOptions(
        cwd=str(work),
        hooks=matchers,
        allowed_tools=["Bash"],
        permission_mode="default",
        setting_sources=[],
        env={
            "HOME": str(tmp),
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "CLAUDE_CONFIG_DIR": str(tmp / "claude-config"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
        **extra,
    )

    async def go() -> List[Any]:
        return [m async for m in query(prompt="run the command", options=options)]

    return asyncio.run(asyncio.wait_for(go(), 240))


def test_in_the_real_sdk_the_third_identical_call_is_refused_before_it_runs(tmp_path: Path) -> None:
    ran = tmp_path / "ran.log"
    model = StandIn(tmp_path, f"echo same-call; echo x >> {ran}", 8)
    try:
        messages = run_agent(tmp_path, model.port, hooks())
        assert isinstance(messages[-1], ResultMessage)
        results = model.tool_results()
    finally:
        model.close()
    assert len(results) == 3, f"two calls ran, the third was refused, the model stopped: {results}"
    assert not results[0][0] and "same-call" in results[0][1]
    assert not results[1][0] and "same-call" in results[1][1]
    is_error, text = results[2]
    assert is_error, "the refused call is an error result"
    assert 'loop brake: tool \\"Bash\\" called 3 times in a row with identical arguments' in text, text
    assert ran.read_text() == "x\nx\n", "the third call never ran"


def test_in_the_real_sdk_a_call_whose_output_changes_is_not_stopped(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    command = f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}; echo step-$n"
    model = StandIn(tmp_path, command, 5)
    try:
        run_agent(tmp_path, model.port, hooks())
        results = model.tool_results()
    finally:
        model.close()
    assert len(results) == 5, results
    for i, (is_error, text) in enumerate(results, 1):
        assert not is_error and f"step-{i}" in text, (i, text)
    assert counter.read_text().strip() == "5"


# A gate that asks: the breaker's exact gate at the 2nd identical call, the streak brake out of
# the way. The SDK hands the ask to ``can_use_tool`` with toolbrake's question.
ASKING = {"streak": {"max_repeats": 10}, "breaker": {"limits": {"exact": 2}, "on_limit": "ask"}}


# The SDK warns that allowed_tools=["Bash"] keeps can_use_tool from being consulted; a
# PreToolUse hook's ask still reaches it, which is what this test shows.
@pytest.mark.filterwarnings("ignore:can_use_tool will not be invoked")
def test_in_the_real_sdk_an_ask_reaches_can_use_tool_and_an_approved_call_runs(tmp_path: Path) -> None:
    asked: List[Tuple[str, str]] = []

    async def can_use_tool(tool: str, input: Dict[str, Any], context: Any) -> Any:
        asked.append((tool, context.decision_reason or ""))
        return PermissionResultAllow(updated_input=input)

    model = StandIn(tmp_path, "echo same-call", 4)
    try:
        run_agent(tmp_path, model.port, hooks(Brake(ASKING)), can_use_tool=can_use_tool)
        results = model.tool_results()
    finally:
        model.close()
    assert len(asked) == 1, f"asked once: the approval holds for the rest of the turn: {asked}"
    assert asked[0][0] == "Bash" and "this call is about to be blocked as a repeat" in asked[0][1], asked
    assert len(results) == 4 and all(not e and "same-call" in t for e, t in results), results


def test_in_the_real_sdk_an_ask_without_can_use_tool_is_refused(tmp_path: Path) -> None:
    model = StandIn(tmp_path, "echo same-call", 4)
    try:
        run_agent(tmp_path, model.port, hooks(Brake(ASKING)))
        results = model.tool_results()
    finally:
        model.close()
    assert len(results) == 3, results
    assert not results[0][0]
    assert results[1][0] and "this call is about to be blocked as a repeat" in results[1][1], results[1]
    assert results[2][0] and "REPEAT_TOOL_BLOCKED" in results[2][1], results[2]
