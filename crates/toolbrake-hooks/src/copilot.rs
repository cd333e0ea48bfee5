//! GitHub Copilot CLI's command hooks, in the camelCase form its documentation describes
//! (`.github/hooks/*.json`, `~/.copilot/hooks/*.json`: `{"version": 1, "hooks":
//! {"preToolUse": [{"type": "command", "bash": …}]}}`).
//!
//! Its payloads do not name their event, so the hook is installed once per event with the
//! event on its command line (`toolbrake hook copilot preToolUse`). They carry no call id
//! either: ids are derived from the call, as for Gemini CLI.
//!
//! - `preToolUse` `{sessionId, toolName, toolArgs}` (`toolArgs` an object, or a JSON text
//!   in older releases): deny → `{"permissionDecision": "deny",
//!   "permissionDecisionReason"}` (the model reads the reason as the tool's result); ask →
//!   `permissionDecision: "ask"` (Copilot asks the user; in prompt mode with
//!   `--allow-all-tools`, autopilot, it refuses); advise → `{"additionalContext"}`.
//! - `postToolUse` `{toolResult: {resultType, textResultForLlm}}` and
//!   `postToolUseFailure` `{error}` record the outcome; the shell's
//!   `<shellId: N completed with exit code K>` gives the exit code. Advisories →
//!   `{"additionalContext"}`.
//! - `userPromptSubmitted`: a new turn. `agentStop`: the turn is over. `sessionEnd`: the
//!   session is forgotten.
//!
//! Copilot CLI also accepts Claude Code's PascalCase event names (then its payloads are
//! snake_case, with `tool_result: {result_type, text_result_for_llm}` instead of Claude's
//! `tool_response`); that is a compatibility mode, so toolbrake installs the camelCase one.

use crate::{args_of, clip, judge, record, str_field, HookError, HostCall, Judged, PayloadError};
use serde_json::{json, Value};
use toolbrake_core::Outcome;
use toolbrake_session::Sessions;
use toolbrake_store::Store;

/// The events `toolbrake init copilot` installs, each with its own command line.
pub const EVENTS: &[&str] = &[
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "userPromptSubmitted",
    "agentStop",
    "sessionEnd",
];

pub(crate) fn pre_output(decision: &str, reason: &str) -> String {
    json!({"permissionDecision": decision, "permissionDecisionReason": clip(reason)}).to_string()
}

pub(crate) fn context_output(text: &str) -> String {
    json!({"additionalContext": clip(text)}).to_string()
}

fn key(p: &Value) -> Result<String, PayloadError> {
    str_field(p, "sessionId")
        .map(str::to_string)
        .ok_or(PayloadError::NoSessionId)
}

fn call(p: &Value) -> Result<HostCall<'_>, PayloadError> {
    Ok(HostCall {
        key: key(p)?,
        id: None,
        tool: str_field(p, "toolName").unwrap_or(""),
        args: args_of(p.get("toolArgs")),
        alt_ids: Vec::new(),
    })
}

pub(crate) fn dispatch<S: Store + ?Sized>(
    event: &str,
    p: &Value,
    sessions: &Sessions<'_, S>,
) -> Result<Option<String>, HookError<'static>> {
    match event {
        "preToolUse" => {
            let c = call(p)?;
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
        "postToolUse" | "postToolUseFailure" => {
            let c = call(p)?;
            Ok(record(sessions, &c, &outcome(event, p))?.map(|t| context_output(&t)))
        }
        "userPromptSubmitted" => {
            sessions.user_message(&key(p)?)?;
            Ok(None)
        }
        "agentStop" => {
            sessions.close_open_calls(&key(p)?, true)?;
            Ok(None)
        }
        "subagentStop" => {
            sessions.close_open_calls(&key(p)?, false)?;
            Ok(None)
        }
        "sessionEnd" => {
            sessions.end(&key(p)?)?;
            Ok(None)
        }
        "" => Err(PayloadError::NoEvent.into()),
        _ => Ok(None),
    }
}

/// The exit code the shell tool appends to its result:
/// `<shellId: 0 completed with exit code 2>`.
fn shell_exit_code(text: &str) -> Option<i64> {
    text.lines().rev().find_map(|l| {
        let rest = l.trim().strip_prefix("<shellId:")?;
        let n = rest.split("completed with exit code").nth(1)?;
        n.trim().trim_end_matches('>').trim().parse().ok()
    })
}

pub(crate) fn outcome(event: &str, p: &Value) -> Outcome {
    let mut o = Outcome::default();
    if event == "postToolUseFailure" {
        let err = p.get("error").map(crate::response_text).unwrap_or_default();
        o.is_error = Some(true);
        o.text = Some(err);
        return o;
    }
    let result = p.get("toolResult").unwrap_or(&Value::Null);
    let text = match result.get("textResultForLlm") {
        Some(v) => crate::response_text(v),
        None => crate::response_text(result),
    };
    match result.get("resultType").and_then(Value::as_str) {
        Some("success") | None => {}
        Some("rejected") | Some("denied") => o.aborted = Some(true),
        Some(_) => o.is_error = Some(true),
    }
    o.exit_code = shell_exit_code(&text);
    // The trailer names the shell session, a counter that grows with every call: it is
    // Copilot's envelope, not the command's output, and would make every run look new.
    let output = match o.exit_code {
        Some(_) => text
            .lines()
            .filter(|l| !l.trim().starts_with("<shellId:"))
            .collect::<Vec<_>>()
            .join("\n"),
        None => text,
    };
    o.text = Some(output);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_exit_code_is_read_from_the_result() {
        assert_eq!(
            shell_exit_code("ls: cannot access 'x'\n<shellId: 0 completed with exit code 2>"),
            Some(2)
        );
        assert_eq!(shell_exit_code("plain output"), None);
        let o = outcome(
            "postToolUse",
            &json!({"toolResult": {"resultType": "success", "textResultForLlm": "ok\n<shellId: 3 completed with exit code 0>"}}),
        );
        assert_eq!(o.exit_code, Some(0));
        assert_eq!(o.is_error, None);
        assert_eq!(
            o.text.as_deref(),
            Some("ok"),
            "the shell session's trailer is not output"
        );
        let f = outcome(
            "postToolUseFailure",
            &json!({"error": "Path does not exist"}),
        );
        assert_eq!(f.is_error, Some(true));
        assert_eq!(f.text.as_deref(), Some("Path does not exist"));
    }
}
