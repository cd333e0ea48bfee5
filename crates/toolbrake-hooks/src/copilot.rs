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

use crate::event::{args_of, clip, response_text, str_field, Event, HostCall, Reading, Service};
use crate::host::{judged, Host};
use crate::init::{Install, Layout, Place};
use crate::PayloadError;
use serde_json::{json, Value};
use toolbrake_core::Outcome;

/// The events `toolbrake init copilot` installs, each with its own command line.
pub const EVENTS: &[&str] = &[
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "userPromptSubmitted",
    "agentStop",
    "sessionEnd",
];

/// GitHub Copilot CLI.
pub(crate) struct Copilot;

impl Host for Copilot {
    fn is_pre_event(&self, event: &str) -> bool {
        event == "preToolUse"
    }

    fn session_key(&self, p: &Value) -> Result<String, PayloadError> {
        str_field(p, "sessionId")
            .map(str::to_string)
            .ok_or(PayloadError::NoSessionId)
    }

    fn read<'p>(&self, event: &str, p: &'p Value, _: &Service<'_>) -> Reading<'p> {
        Ok(match event {
            "preToolUse" => return judged(self.call(p)?),
            "postToolUse" | "postToolUseFailure" => Event::Post(self.call(p)?, outcome(event, p)),
            "userPromptSubmitted" => Event::UserMessage,
            "agentStop" => Event::Close { turn_over: true },
            "subagentStop" => Event::Close { turn_over: false },
            "sessionEnd" => Event::End,
            "" => return Err(PayloadError::NoEvent.into()),
            _ => Event::Other,
        })
    }

    fn outcome(&self, event: &str, p: &Value) -> Outcome {
        outcome(event, p)
    }

    fn decision(&self, _: &str, decision: &str, reason: &str) -> String {
        json!({"permissionDecision": decision, "permissionDecisionReason": clip(reason)})
            .to_string()
    }

    fn context(&self, _: &str, text: &str) -> String {
        json!({"additionalContext": clip(text)}).to_string()
    }

    fn install(&self) -> Install {
        Install {
            // Its own camelCase events (`timeoutSec`).
            events: &[
                ("preToolUse", None, Some(10)),
                ("postToolUse", None, Some(10)),
                ("postToolUseFailure", None, Some(10)),
                ("userPromptSubmitted", None, Some(10)),
                ("agentStop", None, Some(10)),
                ("sessionEnd", None, Some(5)),
            ],
            layout: Layout::Copilot,
            ..Install::GROUPS
        }
    }

    fn place(&self) -> Place {
        Place::with_env(
            "GitHub Copilot CLI",
            ".github/hooks/toolbrake.json",
            ".copilot/hooks/toolbrake.json",
            ("COPILOT_HOME", "hooks/toolbrake.json"),
        )
    }
}

impl Copilot {
    fn call<'p>(&self, p: &'p Value) -> Result<HostCall<'p>, PayloadError> {
        Ok(HostCall {
            key: self.session_key(p)?,
            id: None,
            tool: str_field(p, "toolName").unwrap_or(""),
            args: args_of(p.get("toolArgs")),
            alt_ids: Vec::new(),
        })
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

fn outcome(event: &str, p: &Value) -> Outcome {
    let mut o = Outcome::default();
    if event == "postToolUseFailure" {
        let err = p.get("error").map(response_text).unwrap_or_default();
        o.is_error = Some(true);
        o.text = Some(err);
        return o;
    }
    let result = p.get("toolResult").unwrap_or(&Value::Null);
    let text = match result.get("textResultForLlm") {
        Some(v) => response_text(v),
        None => response_text(result),
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
