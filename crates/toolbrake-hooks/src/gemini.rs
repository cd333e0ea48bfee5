//! Google Gemini CLI's hooks (`.gemini/settings.json`, timeouts in milliseconds, run only
//! with `hooksConfig.enabled`): Claude Code's payload fields under its own event names.
//!
//! - `BeforeTool`: judged. Deny: `{"decision": "deny", "reason"}`; an ask cannot be asked
//!   there, so it is refused fail-closed, saying so; advise: `additionalContext`.
//! - `AfterTool` (`tool_response` = `{llmContent, returnDisplay, error?}`): the outcome;
//!   advisories as `additionalContext`.
//! - `BeforeAgent`: a new prompt. `AfterAgent`: the turn is over. `SessionEnd`: forgotten.
//!
//! Its payloads carry no call id: one is derived per invocation, and `AfterTool` pairs with
//! the oldest open call of the same tool and arguments, so parallel and identical calls are
//! still counted one by one.

use crate::event::{clip, response_text, Event, Reading, Service};
use crate::host::{self, Host};
use crate::init::{Install, Place};
use serde_json::{json, Value};
use toolbrake_core::Outcome;

/// What Gemini CLI's model reads when a call needed the operator's approval: its hooks
/// cannot ask, so the call is refused (fail-closed), saying why.
pub const GEMINI_CANNOT_ASK: &str = "This call needs the operator's approval, and Gemini CLI hooks cannot ask for it, so it was refused. The operator can raise the limit in toolbrake.toml, or answer in a new message.\n\n";

/// Google Gemini CLI.
pub(crate) struct Gemini;

impl Host for Gemini {
    fn install(&self) -> Install {
        Install {
            // Milliseconds, and its own event names.
            events: &[
                ("BeforeTool", Some("*"), Some(10_000)),
                ("AfterTool", Some("*"), Some(10_000)),
                ("BeforeAgent", None, Some(10_000)),
                ("AfterAgent", None, Some(10_000)),
                ("SessionEnd", None, Some(5_000)),
            ],
            handler_name: Some("toolbrake"),
            // Gemini CLI runs hooks only with its hooks system switched on (on by default,
            // but a user may have switched it off).
            switch: Some(("hooksConfig", "enabled")),
            ..Install::GROUPS
        }
    }

    fn place(&self) -> Place {
        Place::at("Gemini CLI", ".gemini/settings.json")
    }

    fn is_pre_event(&self, event: &str) -> bool {
        event == "BeforeTool"
    }

    fn read<'p>(&self, event: &str, p: &'p Value, _: &Service<'_>) -> Reading<'p> {
        Ok(match event {
            "BeforeTool" => Event::Pre(host::call(self, p, true)?),
            "AfterTool" => Event::Post(host::call(self, p, false)?, outcome(p)),
            "BeforeAgent" => Event::UserMessage,
            "AfterAgent" => Event::Close { turn_over: true },
            "SessionEnd" => Event::End,
            _ => Event::Other,
        })
    }

    fn outcome(&self, _: &str, p: &Value) -> Outcome {
        outcome(p)
    }

    fn decision(&self, _: &str, decision: &str, reason: &str) -> String {
        let reason = host::refusal(decision, GEMINI_CANNOT_ASK, reason);
        json!({"decision": "deny", "reason": clip(&reason)}).to_string()
    }
}

/// Gemini CLI's `tool_response`: `{llmContent, returnDisplay, error?}` (Qwen Code reports
/// a result the same way). The shell tool reports its exit code in the text
/// (`Exit Code: 1`).
pub(crate) fn outcome(p: &Value) -> Outcome {
    let mut o = Outcome::default();
    let resp = p.get("tool_response").unwrap_or(&Value::Null);
    let error = resp.get("error").filter(|e| !e.is_null());
    let text = match resp.get("llmContent") {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|x| x.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(v) => response_text(v),
        None => response_text(resp),
    };
    if let Some(e) = error {
        o.is_error = Some(true);
        let message = e
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| response_text(e));
        o.error_code = e.get("type").and_then(Value::as_str).map(str::to_string);
        o.text = Some(if text.is_empty() { message } else { text });
        return o;
    }
    o.exit_code = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Exit Code:")
            .and_then(|n| n.trim().parse().ok())
    });
    o.text = Some(text);
    o
}
