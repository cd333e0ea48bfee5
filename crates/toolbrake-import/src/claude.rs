//! Claude Code session transcripts (`~/.claude/projects/*/*.jsonl`): assistant
//! `tool_use` blocks are calls, user `tool_result` blocks are outcomes (`is_error`; a
//! Bash error's first line `Exit code N`), and real user prompts (a user message with
//! text and no tool result, not `isMeta`) are `user` events. Sub-agent lines
//! (`isSidechain` with an `agentId`) are counted in their own session.

use crate::{content_text, parse_line, Importer, Warnings};
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashSet};

/// Importer for Claude Code transcripts.
#[derive(Debug)]
pub struct ClaudeCode {
    default_session: String,
    sessions: BTreeSet<String>,
    calls: HashSet<String>,
    warnings: Warnings,
}

impl ClaudeCode {
    /// An importer; `source` names the session when lines carry no `sessionId`.
    pub fn new(source: &str) -> Self {
        ClaudeCode {
            default_session: source.to_string(),
            sessions: BTreeSet::new(),
            calls: HashSet::new(),
            warnings: Warnings::default(),
        }
    }
}

/// Record types that carry nothing for toolbrake.
const QUIET: &[&str] = &[
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "attachment",
];

fn exit_code_of(text: &str) -> Option<i64> {
    let first = text.lines().next()?.trim();
    first.strip_prefix("Exit code ")?.trim().parse().ok()
}

impl ClaudeCode {
    fn user_prompt(content: &Value) -> bool {
        match content {
            Value::String(s) => {
                let t = s.trim_start();
                !t.is_empty() && !t.starts_with("<local-command-") && !t.starts_with("Caveat:")
            }
            Value::Array(blocks) => {
                !blocks
                    .iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                    && blocks
                        .iter()
                        .any(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            }
            _ => false,
        }
    }
}

impl Importer for ClaudeCode {
    fn feed(&mut self, line: &[u8], out: &mut Vec<Value>) {
        let Some(rec) = parse_line(line, &mut self.warnings) else {
            return;
        };
        let kind = rec.get("type").and_then(Value::as_str).unwrap_or("");
        if QUIET.contains(&kind) {
            return;
        }
        if kind != "user" && kind != "assistant" {
            self.warnings.add("records of unknown type");
            return;
        }
        let session = rec
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or(&self.default_session)
            .to_string();
        self.sessions.insert(session.clone());
        let agent = (rec.get("isSidechain") == Some(&Value::Bool(true)))
            .then(|| rec.get("agentId").and_then(Value::as_str))
            .flatten();
        let Some(content) = rec.get("message").and_then(|m| m.get("content")) else {
            self.warnings.add("messages without content");
            return;
        };
        if kind == "assistant" {
            for block in content.as_array().into_iter().flatten() {
                if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                    continue;
                }
                let (Some(id), Some(name)) = (
                    block.get("id").and_then(Value::as_str),
                    block.get("name").and_then(Value::as_str),
                ) else {
                    self.warnings.add("tool_use blocks without id or name");
                    continue;
                };
                let args = block
                    .get("input")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Map::new()));
                let mut ev = json!({"event": "call", "session": session, "id": id, "tool": name, "args": args});
                if let Some(a) = agent {
                    ev["agent"] = json!(a);
                }
                self.calls.insert(id.to_string());
                out.push(ev);
            }
            return;
        }
        if rec.get("isMeta") == Some(&Value::Bool(true)) {
            return;
        }
        if agent.is_none() && Self::user_prompt(content) {
            out.push(json!({"event": "user", "session": session}));
            return;
        }
        for block in content.as_array().into_iter().flatten() {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
                self.warnings.add("tool_result blocks without tool_use_id");
                continue;
            };
            if !self.calls.remove(id) {
                self.warnings.add("results with no call");
                continue;
            }
            let text = block.get("content").map(content_text).unwrap_or_default();
            let mut outcome = Map::new();
            let interrupted = rec
                .get("toolUseResult")
                .and_then(|r| r.get("interrupted"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
                || text.contains("[Request interrupted by user");
            if interrupted {
                outcome.insert("aborted".into(), json!(true));
            } else if block.get("is_error") == Some(&Value::Bool(true)) {
                match exit_code_of(&text) {
                    Some(code) => outcome.insert("exit_code".into(), json!(code)),
                    None => outcome.insert("is_error".into(), json!(true)),
                };
            }
            outcome.insert("text".into(), json!(text));
            out.push(json!({"event": "result", "id": id, "outcome": outcome}));
        }
    }

    fn finish(&mut self, out: &mut Vec<Value>) {
        for s in std::mem::take(&mut self.sessions) {
            out.push(json!({"event": "end", "session": s}));
        }
    }

    fn warnings(&self) -> &Warnings {
        &self.warnings
    }

    fn warn(&mut self, reason: &'static str) {
        self.warnings.add(reason);
    }
}
