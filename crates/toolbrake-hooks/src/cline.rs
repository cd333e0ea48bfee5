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

use crate::{args_of, clip, judge, record, str_field, HookError, HostCall, Judged, PayloadError};
use serde_json::{json, Value};
use toolbrake_core::Outcome;
use toolbrake_session::Sessions;
use toolbrake_store::Store;

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

pub(crate) fn pre_output(decision: &str, reason: &str) -> String {
    let reason = if decision == "ask" {
        format!("{CLINE_CANNOT_ASK}{reason}")
    } else {
        reason.to_string()
    };
    json!({"cancel": true, "errorMessage": clip(&reason)}).to_string()
}

pub(crate) fn context_output(text: &str) -> String {
    json!({"contextModification": clip(text)}).to_string()
}

fn key(p: &Value) -> Result<String, PayloadError> {
    let task = str_field(p, "taskId").ok_or(PayloadError::NoSessionId)?;
    let sub_agent = p
        .get("parent_agent_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .and_then(|_| str_field(p, "agent_id"));
    Ok(toolbrake_session::key(task, sub_agent))
}

fn call<'p>(p: &'p Value, field: &str) -> Result<HostCall<'p>, PayloadError> {
    let c = p.get(field).unwrap_or(&Value::Null);
    Ok(HostCall {
        key: key(p)?,
        id: str_field(c, "id"),
        tool: str_field(c, "name").unwrap_or(""),
        args: args_of(c.get("input")),
        alt_ids: Vec::new(),
    })
}

pub(crate) fn dispatch<S: Store + ?Sized>(
    event: &str,
    p: &Value,
    sessions: &Sessions<'_, S>,
) -> Result<Option<String>, HookError<'static>> {
    match event {
        "tool_call" => {
            let c = call(p, "tool_call")?;
            if c.tool.is_empty() {
                return Err(PayloadError::NoToolName.into());
            }
            Ok(match judge(sessions, &c)? {
                Judged::Allow => None,
                Judged::Advise(text) => Some(context_output(&text)),
                Judged::Ask(reason) => Some(pre_output("ask", &reason)),
                Judged::Deny(reason) => Some(pre_output("deny", &reason)),
            })
        }
        "tool_result" => {
            let c = call(p, "tool_result")?;
            Ok(record(sessions, &c, &outcome(p))?.map(|t| context_output(&t)))
        }
        "prompt_submit" => {
            sessions.user_message(&key(p)?)?;
            Ok(None)
        }
        "agent_end" | "agent_abort" | "agent_error" => {
            sessions.close_open_calls(&key(p)?, true)?;
            Ok(None)
        }
        "session_shutdown" => {
            sessions.end(&key(p)?)?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

pub(crate) fn outcome(p: &Value) -> Outcome {
    let mut o = Outcome::default();
    let r = p.get("tool_result").unwrap_or(&Value::Null);
    let error = r.get("error").filter(|e| !e.is_null());
    if let Some(e) = error {
        o.is_error = Some(true);
        o.text = Some(crate::response_text(e));
        return o;
    }
    o.text = Some(match r.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => String::new(),
    });
    o
}
