//! Cline's hook files: executables named by event (`PreToolUse`, `PostToolUse`,
//! `UserPromptSubmit`, `TaskStart`, `TaskComplete`, `TaskCancel`, `TaskError`,
//! `SessionShutdown`) in `~/.cline/hooks` or a workspace's `.clinerules/hooks`, each given
//! one JSON payload naming its event (`hookName`: `tool_call`, `tool_result`,
//! `prompt_submit`, `agent_end`, …) and task (`taskId`).
//!
//! A hook file's answer is `{cancel, contextModification, errorMessage}`: it cannot refuse
//! one call and let the task go on. A denial therefore cancels the whole task (`"cancel":
//! true` with toolbrake's text as `errorMessage`, which the user reads; the call does not
//! run), and so does an ask, which a hook file cannot put to the user (refused,
//! fail-closed, saying so). Advisories, before or after a call, are
//! `contextModification`, which Cline adds to the model's context.
//!
//! - `tool_call` `{tool_call: {id, name, input}}`: judged.
//! - `tool_result` `{tool_result: {id, name, input, output, error}}`: the outcome.
//! - `prompt_submit`: a new turn. `agent_end`, `agent_abort`, `agent_error`: the run is
//!   over. `session_shutdown`: the task is forgotten.
//!
//! A sub-agent (`parent_agent_id` set) is counted in its own session, keyed by its
//! `agent_id`.

use crate::event::{args_of, clip, response_text, str_field, Event, HostCall, Reading, Service};
use crate::host::{judged, refusal, Host};
use crate::init::{Install, Place};
use crate::PayloadError;
use serde_json::{json, Value};
use toolbrake_core::Outcome;

/// The hook files `toolbrake init cline` writes (Cline's names for its events).
pub const EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "TaskComplete",
    "TaskCancel",
    "SessionShutdown",
];

/// What the user reads when a call needed the operator's approval: Cline's hook files
/// cannot ask, so the task is stopped.
pub const CLINE_CANNOT_ASK: &str = "This call needs the operator's approval, and Cline's hook files cannot ask for it, so toolbrake stopped the task before the call ran. Raise the limit in toolbrake.toml, or resume the task with a new message.\n\n";

/// Cline.
pub(crate) struct Cline;

impl Host for Cline {
    fn is_pre_event(&self, event: &str) -> bool {
        event == "tool_call" || event == "PreToolUse"
    }

    fn session_key(&self, p: &Value) -> Result<String, PayloadError> {
        let task = str_field(p, "taskId").ok_or(PayloadError::NoSessionId)?;
        let sub_agent = p
            .get("parent_agent_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .and_then(|_| str_field(p, "agent_id"));
        Ok(toolbrake_session::key(task, sub_agent))
    }

    fn read<'p>(&self, event: &str, p: &'p Value, _: &Service<'_>) -> Reading<'p> {
        Ok(match event {
            "tool_call" => return judged(self.call(p, "tool_call")?),
            "tool_result" => Event::Post(self.call(p, "tool_result")?, outcome(p)),
            "prompt_submit" => Event::UserMessage,
            "agent_end" | "agent_abort" | "agent_error" => Event::Close { turn_over: true },
            "session_shutdown" => Event::End,
            _ => Event::Other,
        })
    }

    fn outcome(&self, _: &str, p: &Value) -> Outcome {
        outcome(p)
    }

    fn decision(&self, _: &str, decision: &str, reason: &str) -> String {
        let reason = refusal(decision, CLINE_CANNOT_ASK, reason);
        json!({"cancel": true, "errorMessage": clip(&reason)}).to_string()
    }

    fn context(&self, _: &str, text: &str) -> String {
        json!({"contextModification": clip(text)}).to_string()
    }

    /// Its hooks are executable files, not settings (`toolbrake init cline` writes them).
    fn install(&self) -> Install {
        Install {
            hook_files: true,
            ..Install::GROUPS
        }
    }

    fn place(&self) -> Place {
        Place::with_env(
            "Cline",
            ".clinerules/hooks",
            ".cline/hooks",
            ("CLINE_DIR", "hooks"),
        )
    }
}

impl Cline {
    fn call<'p>(&self, p: &'p Value, field: &str) -> Result<HostCall<'p>, PayloadError> {
        let c = p.get(field).unwrap_or(&Value::Null);
        Ok(HostCall {
            key: self.session_key(p)?,
            id: str_field(c, "id"),
            tool: str_field(c, "name").unwrap_or(""),
            args: args_of(c.get("input")),
            alt_ids: Vec::new(),
        })
    }
}

fn outcome(p: &Value) -> Outcome {
    let mut o = Outcome::default();
    let r = p.get("tool_result").unwrap_or(&Value::Null);
    let error = r.get("error").filter(|e| !e.is_null());
    if let Some(e) = error {
        o.is_error = Some(true);
        o.text = Some(response_text(e));
        return o;
    }
    o.text = Some(match r.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => String::new(),
    });
    o
}
