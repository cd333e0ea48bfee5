//! The `toolbrake` command as the hooks' tests run it: in a home folder of its own, with
//! its state file there, fed a Claude Code payload.

use super::assert_success;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub fn bin(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    c.env_remove("TOOLBRAKE_CONFIG")
        .env_remove("TOOLBRAKE_MAX_REPEATS")
        .env("TOOLBRAKE_STATE", dir.join("state/state.db"))
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .env("HOME", dir)
        .current_dir(dir);
    for v in super::AGENT_VARS {
        c.env_remove(v);
    }
    c
}

pub fn spawn_hook(dir: &Path, payload: &Value, config: Option<&Path>) -> Child {
    let mut c = bin(dir);
    if let Some(cfg) = config {
        c.arg("--config").arg(cfg);
    }
    let mut child = c
        .args(["hook", "claude"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    child
}

pub fn pre(session: &str, id: &str, command: &str) -> Value {
    json!({"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Bash",
           "tool_input": {"command": command}, "tool_use_id": id})
}

pub fn sessions_json(dir: &Path, config: Option<&Path>) -> Vec<Value> {
    let mut c = bin(dir);
    if let Some(cfg) = config {
        c.arg("--config").arg(cfg);
    }
    let out = c.args(["sessions", "--json"]).output().unwrap();
    assert_success(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}
