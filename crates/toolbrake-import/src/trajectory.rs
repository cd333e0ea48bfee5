//! The format of `examples/trajectories/calls.jsonl.gz` (the bundled recorded runs): one tool call a line,
//! `{"session", "seq", "tool", "args", "ok", "exit_code", "status", "output_head"}`.
//! Lines of one session are consecutive; a session ends when the next one starts.

use crate::{parse_line, Importer, Warnings};
use serde_json::{json, Map, Value};

/// Importer for the trajectory format.
#[derive(Debug, Default)]
pub struct Trajectory {
    current: Option<String>,
    n: u64,
    warnings: Warnings,
}

impl Importer for Trajectory {
    fn feed(&mut self, line: &[u8], out: &mut Vec<Value>) {
        let Some(rec) = parse_line(line, &mut self.warnings) else {
            return;
        };
        let (Some(session), Some(tool)) = (
            rec.get("session").and_then(Value::as_str),
            rec.get("tool").and_then(Value::as_str),
        ) else {
            self.warnings.add("records without session or tool");
            return;
        };
        if self.current.as_deref() != Some(session) {
            if let Some(prev) = self.current.take() {
                out.push(json!({"event": "end", "session": prev}));
            }
            self.current = Some(session.to_string());
        }
        self.n += 1;
        let id = format!("t{}", self.n);
        let args = rec
            .get("args")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()));
        out.push(
            json!({"event": "call", "session": session, "id": id, "tool": tool, "args": args}),
        );
        let mut outcome = Map::new();
        let exit = rec.get("exit_code").and_then(Value::as_i64);
        let status = rec.get("status").and_then(Value::as_i64);
        if let Some(e) = exit {
            outcome.insert("exit_code".into(), json!(e));
        }
        if let Some(s) = status {
            outcome.insert("status_code".into(), json!(s));
        }
        if rec.get("ok") == Some(&Value::Bool(false)) && exit.is_none() && status.is_none() {
            outcome.insert("is_error".into(), json!(true));
        }
        if let Some(t) = rec.get("output_head").and_then(Value::as_str) {
            outcome.insert("text".into(), json!(t));
        }
        out.push(json!({"event": "result", "id": id, "outcome": outcome}));
    }

    fn finish(&mut self, out: &mut Vec<Value>) {
        if let Some(prev) = self.current.take() {
            out.push(json!({"event": "end", "session": prev}));
        }
    }

    fn warnings(&self) -> &Warnings {
        &self.warnings
    }

    fn warn(&mut self, reason: &'static str) {
        self.warnings.add(reason);
    }
}
