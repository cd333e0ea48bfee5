//! Codex CLI rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): lines
//! `{"timestamp", "type", "payload"}`. `response_item` payloads of type
//! `function_call` / `custom_tool_call` / `local_shell_call` are calls, their `*_output`
//! payloads are outcomes (the exit code is read from the output text or its metadata),
//! and `event_msg` payloads of type `user_message` are real user prompts.

use crate::{content_text, parse_line, Importer, Warnings};
use regex::Regex;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::LazyLock;

static EXIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)(?:Process exited with code (-?\d+)|^Exit code: (-?\d+))")
        .expect("constant pattern")
});

/// Importer for Codex rollouts.
#[derive(Debug)]
pub struct Codex {
    session: String,
    started: bool,
    calls: HashSet<String>,
    warnings: Warnings,
}

impl Codex {
    /// An importer; `source` names the session until a `session_meta` line does.
    pub fn new(source: &str) -> Self {
        Codex {
            session: source.to_string(),
            started: false,
            calls: HashSet::new(),
            warnings: Warnings::default(),
        }
    }
}

/// Top-level records that carry nothing for toolbrake (Codex 0.171.0 writes all of them).
const QUIET_TOP: &[&str] = &[
    "turn_context",
    "compacted",
    "token_usage_record",
    "world_state",
];

/// The exit code a Codex tool output reports in its text (`Process exited with code N`,
/// or `Exit code: N` on a line of its own).
pub fn exit_code_in_text(text: &str) -> Option<i64> {
    EXIT.captures(text)
        .and_then(|c| c.get(1).or(c.get(2)))
        .and_then(|m| m.as_str().parse().ok())
}

/// The outcome of a Codex `function_call_output` payload's `output`.
pub fn output_outcome(output: &Value) -> Map<String, Value> {
    let mut o = Map::new();
    // Older rollouts store `{"output": "...", "metadata": {"exit_code": N}}` as a string.
    let (text, meta_exit) = match output {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) if m.contains_key("output") => (
                m.get("output")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                m.get("metadata")
                    .and_then(|x| x.get("exit_code"))
                    .and_then(Value::as_i64),
            ),
            _ => (s.clone(), None),
        },
        Value::Object(m) => (m.get("content").map(content_text).unwrap_or_default(), None),
        other => (content_text(other), None),
    };
    let exit = meta_exit.or_else(|| exit_code_in_text(&text));
    if let Some(e) = exit {
        o.insert("exit_code".into(), json!(e));
    }
    if output.get("success") == Some(&Value::Bool(false)) && exit.is_none() {
        o.insert("is_error".into(), json!(true));
    }
    o.insert("text".into(), json!(text));
    o
}

impl Importer for Codex {
    fn feed(&mut self, line: &[u8], out: &mut Vec<Value>) {
        let Some(rec) = parse_line(line, &mut self.warnings) else {
            return;
        };
        let top = rec.get("type").and_then(Value::as_str).unwrap_or("");
        let payload = rec.get("payload").cloned().unwrap_or(Value::Null);
        let ptype = payload.get("type").and_then(Value::as_str).unwrap_or("");
        match top {
            "session_meta" => {
                if let Some(id) = payload.get("id").and_then(Value::as_str) {
                    self.session = id.to_string();
                }
            }
            "event_msg" => {
                if ptype == "user_message" {
                    self.started = true;
                    out.push(json!({"event": "user", "session": self.session}));
                }
            }
            "response_item" => match ptype {
                "function_call" | "custom_tool_call" | "local_shell_call" => {
                    let id = payload
                        .get("call_id")
                        .or_else(|| payload.get("id"))
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let Some(id) = id else {
                        self.warnings.add("calls without call_id");
                        return;
                    };
                    let (tool, args) = match ptype {
                        "function_call" => {
                            let raw = payload
                                .get("arguments")
                                .and_then(Value::as_str)
                                .unwrap_or("{}");
                            let args = serde_json::from_str(raw).unwrap_or_else(|_| {
                                self.warnings
                                    .add("calls with unparsable arguments (kept as text)");
                                json!({"arguments": raw})
                            });
                            (
                                payload
                                    .get("name")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_string(),
                                args,
                            )
                        }
                        "custom_tool_call" => (
                            payload
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            json!({"input": payload.get("input").cloned().unwrap_or(Value::Null)}),
                        ),
                        _ => (
                            "shell".to_string(),
                            json!({"command": payload.get("action").and_then(|a| a.get("command")).cloned().unwrap_or(Value::Null)}),
                        ),
                    };
                    if tool.is_empty() {
                        self.warnings.add("calls without a tool name");
                        return;
                    }
                    self.started = true;
                    self.calls.insert(id.clone());
                    out.push(json!({"event": "call", "session": self.session, "id": id, "tool": tool, "args": args}));
                }
                "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                    let Some(id) = payload.get("call_id").and_then(Value::as_str) else {
                        self.warnings.add("outputs without call_id");
                        return;
                    };
                    if !self.calls.remove(id) {
                        self.warnings.add("results with no call");
                        return;
                    }
                    let outcome = output_outcome(payload.get("output").unwrap_or(&Value::Null));
                    out.push(json!({"event": "result", "id": id, "outcome": outcome}));
                }
                "message" | "reasoning" | "web_search_call" => {}
                _ => self.warnings.add("response items of unknown type"),
            },
            t if QUIET_TOP.contains(&t) => {}
            _ => self.warnings.add("records of unknown type"),
        }
    }

    fn finish(&mut self, out: &mut Vec<Value>) {
        if self.started {
            out.push(json!({"event": "end", "session": self.session}));
        }
    }

    fn warnings(&self) -> &Warnings {
        &self.warnings
    }

    fn warn(&mut self, reason: &'static str) {
        self.warnings.add(reason);
    }
}
