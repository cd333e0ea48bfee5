//! Factory Droid: Claude Code's dialect, with two gaps its session transcript fills.
//!
//! Its payloads carry no call id, and it runs no hook after a call that failed (no
//! `PostToolUse`, and it has no `PostToolUseFailure`). Its transcript (`transcript_path`,
//! JSON lines) holds both: each `tool_use` with its `id`, `name` and `input`, and each
//! `tool_result` with its `tool_use_id`, `is_error` and `content`. So a `PreToolUse` takes
//! the id of the newest `tool_use` of the same tool and arguments that has no result yet;
//! and before a call is judged or a turn closed, the session's open calls whose results are
//! in the transcript (a failure, which no hook reported) are recorded from it. Bounded: the
//! last 4 MiB of the file are read, a regular file only. Without a readable transcript,
//! ids are derived as for Gemini CLI and failures stay unknown.
//!
//! Its `hooks.json` holds the events object at its top level, not under `"hooks"`.

use crate::claude::{END, POST, PRE, PROMPT, START, STOP, SUBAGENT_STOP};
use crate::event::{open_regular, response_text, str_field, Event, Reading, Service};
use crate::host::{self, Host};
use crate::init::{Install, Place};
use crate::HookError;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use toolbrake_core::{EngineError, Outcome};
use toolbrake_session::SessionError;

/// Factory Droid.
pub(crate) struct Factory;

impl Host for Factory {
    fn install(&self) -> Install {
        Install {
            // No PostToolUseFailure and no PostToolBatch (a failed call comes to
            // PostToolUse).
            events: &[PRE, POST, PROMPT, START, END, STOP, SUBAGENT_STOP],
            events_at_root: true,
            ..Install::GROUPS
        }
    }

    fn place(&self) -> Place {
        Place::at("Factory Droid", ".factory/hooks.json")
    }

    /// Claude Code's reading, with call ids from the transcript; before a call is judged or
    /// a turn closed, the outcomes the transcript holds for open calls are recorded.
    fn read<'p>(&self, event: &str, p: &'p Value, sessions: &Service<'_>) -> Reading<'p> {
        let Some(t) = Transcript::of(p) else {
            return host::read(self, event, p);
        };
        if matches!(event, "PreToolUse" | "Stop" | "SubagentStop") {
            settle(self, p, &t, sessions)?;
        }
        let mut read = host::read(self, event, p)?;
        match &mut read {
            Event::Pre(call) => call.alt_ids.extend(t.pending_id(call.tool, &call.args)),
            Event::Post(call, _) => call.alt_ids = t.ids_of(call.tool, &call.args),
            _ => {}
        }
        Ok(read)
    }

    fn outcome(&self, event: &str, p: &Value) -> Outcome {
        // Its Execute ends its result with `[Process exited with code N]`.
        host::outcome(event, p, toolbrake_import::codex::exit_code_in_text)
    }
}

/// Records the outcomes the transcript holds for the session's open calls: Factory Droid
/// runs no hook after a call that failed.
fn settle(
    factory: &Factory,
    p: &Value,
    t: &Transcript,
    sessions: &Service<'_>,
) -> Result<(), HookError<'static>> {
    let key = factory.session_key(p)?;
    let Some(st) = sessions.store().get(&key).map_err(SessionError::from)? else {
        return Ok(());
    };
    let found: Vec<(String, Outcome)> = st
        .open_call_ids()
        .filter_map(|id| t.outcome(id).map(|o| (id.to_string(), o)))
        .collect();
    for (id, outcome) in found {
        match sessions.post_ran(&key, |_| id.clone(), &outcome) {
            Ok(_) | Err(SessionError::Engine(EngineError::UnknownCall(_))) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// What the transcript's tail says about tool calls.
#[derive(Default)]
pub(crate) struct Transcript {
    /// `(id, name, input)` of each `tool_use`, oldest first.
    uses: Vec<(String, String, Value)>,
    /// `tool_use_id` → (`is_error`, text) of each `tool_result`.
    results: HashMap<String, (bool, String)>,
}

impl Transcript {
    /// The transcript a payload names, if it can be read.
    pub(crate) fn of(p: &Value) -> Option<Transcript> {
        const TAIL: u64 = 4 << 20;
        let path = str_field(p, "transcript_path")?;
        let mut f = open_regular(std::path::Path::new(path))?;
        let len = f.metadata().ok()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
        let mut buf = Vec::new();
        f.take(TAIL).read_to_end(&mut buf).ok()?;
        let mut t = Transcript::default();
        for line in String::from_utf8_lossy(&buf).lines() {
            if !line.contains("\"tool_use") && !line.contains("\"tool_result") {
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let blocks = v["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for b in blocks {
                match b["type"].as_str() {
                    Some("tool_use") => {
                        if let (Some(id), Some(name)) = (b["id"].as_str(), b["name"].as_str()) {
                            t.uses.push((id.into(), name.into(), b["input"].clone()));
                        }
                    }
                    Some("tool_result") => {
                        if let Some(id) = b["tool_use_id"].as_str() {
                            let text = response_text(&b["content"]);
                            t.results
                                .insert(id.into(), (b["is_error"] == Value::Bool(true), text));
                        }
                    }
                    _ => {}
                }
            }
        }
        Some(t)
    }

    /// Ids of the `tool_use`s of this tool and these arguments, newest first.
    pub(crate) fn ids_of(&self, tool: &str, args: &Value) -> Vec<String> {
        self.uses
            .iter()
            .rev()
            .filter(|(_, name, input)| name == tool && input == args)
            .map(|(id, _, _)| id.clone())
            .collect()
    }

    /// The id of the call a `PreToolUse` is about: the newest matching `tool_use` with no
    /// result yet.
    pub(crate) fn pending_id(&self, tool: &str, args: &Value) -> Option<String> {
        self.ids_of(tool, args)
            .into_iter()
            .find(|id| !self.results.contains_key(id))
    }

    /// The outcome the transcript records for call `id`.
    pub(crate) fn outcome(&self, id: &str) -> Option<Outcome> {
        let (is_error, text) = self.results.get(id)?;
        Some(Outcome {
            exit_code: toolbrake_import::codex::exit_code_in_text(text),
            is_error: is_error.then_some(true),
            text: Some(text.clone()),
            ..Outcome::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_and_failures_come_from_the_transcript() {
        let dir = std::env::temp_dir().join(format!("toolbrake-factory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let input = json!({"command": "ls /x", "riskLevel": "low"});
        let lines = [
            json!({"type": "message", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "call_001", "name": "Execute", "input": input}]}}),
            json!({"type": "message", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_001", "is_error": true, "content": "Error: Command failed (exit code: 2)\nls: cannot access '/x'\n\n\n[Process exited with code 2]"}]}}),
            json!({"type": "message", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "call_002", "name": "Execute", "input": input}]}}),
        ];
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&path, text.join("\n") + "\n").unwrap();
        let t = Transcript::of(&json!({"transcript_path": path})).unwrap();
        assert_eq!(t.pending_id("Execute", &input).as_deref(), Some("call_002"));
        assert_eq!(t.ids_of("Execute", &input), ["call_002", "call_001"]);
        let o = t.outcome("call_001").unwrap();
        assert_eq!((o.is_error, o.exit_code), (Some(true), Some(2)));
        assert!(t.outcome("call_002").is_none());
        assert!(
            Transcript::of(&json!({"transcript_path": dir})).is_none(),
            "a directory"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
