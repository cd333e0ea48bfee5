//! Helpers for the end-to-end tests with real agent programs: where the pinned npm
//! packages are, the scripted stand-in model (`tests/e2e/mock_model.py`), and `toolbrake`
//! run with a test's own state and configuration.

use super::repo;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The npm packages `scripts/test` installs (`TOOLBRAKE_E2E_NODE_MODULES` overrides).
pub fn node_modules() -> PathBuf {
    std::env::var_os("TOOLBRAKE_E2E_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/e2e-npm/node_modules"))
}

/// A file of an npm package under [`node_modules`], which must exist.
#[track_caller]
pub fn npm_file(path: &str, package: &str) -> PathBuf {
    let p = node_modules().join(path);
    assert!(
        p.exists(),
        "{} is missing: run ./scripts/test (it installs {package})",
        p.display()
    );
    p
}

/// The stand-in model, killed when dropped.
pub struct Mock {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Every request body it got, one JSON line each.
    pub log: PathBuf,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the stand-in model: it asks for `command` (its shell tool) until `max_calls`
/// calls or toolbrake's refusal.
pub fn start_mock(dir: &Path, command: &str, max_calls: u32) -> Mock {
    start_mock_with(dir, command, max_calls, None)
}

/// [`start_mock`] calling `tool` with `command` as its JSON arguments instead.
pub fn start_mock_with(dir: &Path, command: &str, max_calls: u32, tool: Option<&str>) -> Mock {
    let log = dir.join("requests.jsonl");
    let portfile = dir.join("port");
    let mut c = Command::new("python3");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mock_model.py"))
        .arg(&log)
        .arg(&portfile)
        .arg(command)
        .arg(max_calls.to_string());
    if let Some(t) = tool {
        c.arg(t);
    }
    let child = c.spawn().expect("python3 runs the stand-in model");
    let start = Instant::now();
    while !portfile.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the mock model did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let port = std::fs::read_to_string(&portfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    Mock { child, port, log }
}

/// `toolbrake` with the test's state and configuration.
pub fn toolbrake(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    c.env("TOOLBRAKE_STATE", dir.join("state/state.db"))
        .env("TOOLBRAKE_CONFIG", dir.join("toolbrake.toml"))
        .env_remove("TOOLBRAKE_MAX_REPEATS");
    c
}

/// Points an agent's hooks at the test's toolbrake state and configuration.
pub fn with_toolbrake_env<'c>(c: &'c mut Command, dir: &Path) -> &'c mut Command {
    c.env("TOOLBRAKE_STATE", dir.join("state/state.db"))
        .env("TOOLBRAKE_CONFIG", dir.join("toolbrake.toml"))
        .env_remove("TOOLBRAKE_MAX_REPEATS")
}

/// The request bodies the stand-in model got, in order.
pub fn requests(mock: &Mock) -> Vec<Value> {
    std::fs::read_to_string(&mock.log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["body"].clone())
        .collect()
}

/// Chat Completions: the tool results the model was shown in its last request, in order.
pub fn chat_tool_results(reqs: &[Value]) -> Vec<String> {
    let Some(last) = reqs.last() else {
        return Vec::new();
    };
    last["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            // Text blocks (Qwen Code sends `[{"type": "text", "text": …}]`).
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        })
        .collect()
}

/// Chat Completions: the whole conversation of the last request, as text (tool results
/// and any context a host added as a message of its own).
pub fn chat_last_request_text(reqs: &[Value]) -> String {
    reqs.last()
        .map(|b| b["messages"].to_string())
        .unwrap_or_default()
}
