//! OpenAI Codex CLI's hooks (`.codex/hooks.json`): Claude Code's dialect without
//! `PostToolUseFailure` or `PostToolBatch`, and without an exit code in its payloads, which
//! is read from its rollout transcript (the same `function_call_output` the model saw),
//! else from the result's text.

use crate::claude::{POST, PRE, PROMPT, START, STOP};
use crate::event::{open_regular, str_field};
use crate::host::{self, Host};
use crate::init::{Install, Place};
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use toolbrake_core::Outcome;

/// OpenAI Codex CLI.
pub(crate) struct Codex;

impl Host for Codex {
    fn install(&self) -> Install {
        Install {
            events: &[PRE, POST, PROMPT, START, STOP],
            ..Install::GROUPS
        }
    }

    fn place(&self) -> Place {
        let file = ".codex/hooks.json";
        Place::with_env("Codex", file, file, ("CODEX_HOME", "hooks.json"))
    }

    fn outcome(&self, event: &str, p: &Value) -> Outcome {
        host::outcome(event, p, |text| {
            str_field(p, "tool_use_id")
                .and_then(|id| {
                    str_field(p, "transcript_path")
                        .and_then(|t| codex_exit_code(std::path::Path::new(t), id))
                })
                .or_else(|| toolbrake_import::codex::exit_code_in_text(text))
        })
    }
}

/// Reads the tail of a Codex rollout file for the output of call `id` and returns its exit
/// code. Bounded: at most the last 4 MiB are read. Best effort: `None` when not found.
pub fn codex_exit_code(path: &std::path::Path, id: &str) -> Option<i64> {
    const TAIL: u64 = 4 << 20;
    let mut f = open_regular(path)?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut buf = Vec::new();
    f.take(TAIL).read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    for line in text.lines().rev() {
        if !line.contains(id) || !line.contains("output") {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let payload = v.get("payload")?;
        if payload.get("call_id").and_then(Value::as_str) != Some(id) {
            continue;
        }
        let out =
            toolbrake_import::codex::output_outcome(payload.get("output").unwrap_or(&Value::Null));
        return out.get("exit_code").and_then(Value::as_i64);
    }
    None
}
