//! Importers of recorded agent runs: each turns a run into toolbrake protocol events
//! (JSON values: `call`, `result`, `user`, `end`), so "what would toolbrake have done to my
//! sessions?" is one `toolbrake replay --from FORMAT` away, and a hook can read the output
//! a host recorded (a Codex rollout) the same way the replay does.
//!
//! Every importer streams: one input line in, zero or more events out. Input it cannot
//! use (truncated lines, unknown record types, results with no call) is skipped and
//! counted in [`Warnings`], never fatal.

#![deny(missing_docs)]

mod claude;
pub mod codex;
mod trajectory;

pub use claude::ClaudeCode;
pub use codex::Codex;
pub use trajectory::Trajectory;

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// Counted reasons for skipped input.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Warnings(BTreeMap<&'static str, u64>);

impl Warnings {
    /// Counts one skipped input for `reason`.
    pub fn add(&mut self, reason: &'static str) {
        *self.0.entry(reason).or_default() += 1;
    }

    /// Total skipped inputs.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &Warnings) {
        for (k, v) in &other.0 {
            *self.0.entry(k).or_default() += v;
        }
    }

    /// Count for one reason.
    ///
    /// ```
    /// let mut w = toolbrake_import::Warnings::default();
    /// w.add("lines not JSON (truncated?)");
    /// w.add("response items of unknown type");
    /// w.add("records of unknown type");
    /// w.add("records of unknown type");
    /// assert_eq!(w.to_string(), "1 line not JSON (truncated?), 2 records of unknown type, 1 response item of unknown type");
    /// assert_eq!(w.count("records of unknown type"), 2);
    /// ```
    pub fn count(&self, reason: &str) -> u64 {
        self.0.get(reason).copied().unwrap_or(0)
    }
}

/// A reason counted once: its counted noun in the singular ("1 line not JSON", "1 response
/// item of unknown type").
fn singular(reason: &str) -> String {
    const NOUNS: &[&str] = &[
        "blocks", "calls", "items", "lines", "messages", "outputs", "records", "results",
    ];
    let mut done = false;
    reason
        .split(' ')
        .map(|w| match w.strip_suffix('s') {
            Some(one) if !done && NOUNS.contains(&w) => {
                done = true;
                one
            }
            _ => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl fmt::Display for Warnings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{v} {}", if *v == 1 { singular(k) } else { k.to_string() }))
            .collect();
        write!(f, "{}", parts.join(", "))
    }
}

/// Turns a recorded run into protocol events.
pub trait Importer {
    /// Events for one input line.
    fn feed(&mut self, line: &[u8], out: &mut Vec<Value>);
    /// Events due at the end of the input (closing open sessions).
    fn finish(&mut self, out: &mut Vec<Value>);
    /// What was skipped.
    fn warnings(&self) -> &Warnings;
    /// Counts input skipped before it reached the importer.
    fn warn(&mut self, reason: &'static str);
}

/// The importer for a format name (`trajectory`, `claude-code`, `codex`).
pub fn by_name(name: &str, source: &str) -> Option<Box<dyn Importer>> {
    match name {
        "trajectory" => Some(Box::new(Trajectory::default())),
        "claude-code" | "claude" => Some(Box::new(ClaudeCode::new(source))),
        "codex" => Some(Box::new(Codex::new(source))),
        _ => None,
    }
}

/// Names accepted by [`by_name`].
pub const FORMATS: &[&str] = &["trajectory", "claude-code", "codex"];

/// The importer format a line of a recorded run is in, when it is one (a JSON object
/// that is not a protocol event): so `replay` without `--from` can say which to use.
///
/// ```
/// use toolbrake_import::detect;
/// assert_eq!(detect(br#"{"session": "s", "seq": 0, "tool": "bash", "args": {}}"#), Some("trajectory"));
/// assert_eq!(detect(br#"{"type": "assistant", "sessionId": "x", "message": {}}"#), Some("claude-code"));
/// assert_eq!(detect(br#"{"type": "session_meta", "payload": {"id": "x"}}"#), Some("codex"));
/// assert_eq!(detect(br#"{"event": "call", "session": "s", "id": "1", "tool": "t"}"#), None);
/// ```
pub fn detect(line: &[u8]) -> Option<&'static str> {
    let v: serde_json::Map<String, Value> = serde_json::from_slice(line).ok()?;
    if v.contains_key("event") {
        return None;
    }
    let kind = v.get("type").and_then(Value::as_str);
    if v.contains_key("session") && v.contains_key("tool") && v.contains_key("seq") {
        Some("trajectory")
    } else if v.contains_key("payload")
        && matches!(
            kind,
            Some("session_meta" | "response_item" | "event_msg" | "turn_context")
        )
    {
        Some("codex")
    } else if v.contains_key("sessionId")
        || (matches!(kind, Some("user" | "assistant" | "summary" | "system"))
            && (v.contains_key("message") || v.contains_key("uuid")))
    {
        Some("claude-code")
    } else {
        None
    }
}

fn parse_line(line: &[u8], w: &mut Warnings) -> Option<serde_json::Map<String, Value>> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t.trim(),
        Err(_) => {
            w.add("lines not UTF-8");
            return None;
        }
    };
    if text.is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Some(m),
        Ok(_) => {
            w.add("lines not a JSON object");
            None
        }
        Err(_) => {
            w.add("lines not JSON (truncated?)");
            None
        }
    }
}

/// The text of a tool result's content: a string, or the `text` of its blocks.
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
