//! Cursor's agent hooks (`.cursor/hooks.json`, `~/.cursor/hooks.json`: `{"version": 1,
//! "hooks": {"preToolUse": [{"command": …}]}}`), from the payloads Cursor documents. Every
//! payload names its event (`hook_event_name`) and conversation (`conversation_id`).
//!
//! - `preToolUse` `{tool_name, tool_input, tool_use_id}` judges every tool call.
//!   `beforeShellExecution` `{command, cwd}` (the tool `Shell`, arguments `{command}`) and
//!   `beforeMCPExecution` `{tool_name, tool_input}` are the older, narrower seams: served the
//!   same way, for a configuration that uses them instead (both at once would count a shell
//!   call twice: `toolbrake init cursor` installs `preToolUse`).
//!   Deny → `{"permission": "deny", "agent_message", "user_message"}`; ask → `"permission":
//!   "ask"` where Cursor documents it (`beforeShellExecution`, `beforeMCPExecution`); on
//!   `preToolUse`, which documents only allow and deny, an ask is refused (fail-closed),
//!   saying so. An advisory before the call has no field in Cursor's answer to an allowed
//!   call: nothing is printed (advisories after the call are delivered).
//! - `postToolUse` `{tool_output}`, `postToolUseFailure` `{error_message, failure_type,
//!   is_interrupt}`, `afterShellExecution` `{output}` and `afterMCPExecution`
//!   `{result_json}` record the outcome; advisories → `{"additional_context"}`.
//! - `beforeSubmitPrompt`: a new turn. `stop`: the turn is over. `sessionEnd`: the
//!   conversation is forgotten.

use crate::event::{
    args_of, clip, response_text, str_field, Event, HostCall, Judged, Reading, Service,
};
use crate::host::{judged, refusal, Host};
use crate::init::{Install, Layout, Place};
use crate::PayloadError;
use serde_json::{json, Value};
use toolbrake_core::Outcome;

/// The events that judge a call before it runs.
const PRE_EVENTS: &[&str] = &["preToolUse", "beforeShellExecution", "beforeMCPExecution"];

/// The events `toolbrake init cursor` installs.
pub const EVENTS: &[&str] = &[
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "beforeSubmitPrompt",
    "stop",
    "sessionEnd",
];

/// What the model reads when a `preToolUse` call needed the operator's approval.
pub const CURSOR_CANNOT_ASK: &str = "This call needs the operator's approval, and Cursor's preToolUse hook cannot ask for it, so it was refused. The operator can raise the limit in toolbrake.toml, or answer in a new message.\n\n";

/// Cursor's shell tool, as `preToolUse` names it.
const SHELL: &str = "Shell";

/// Cursor.
pub(crate) struct Cursor;

impl Host for Cursor {
    fn is_pre_event(&self, event: &str) -> bool {
        PRE_EVENTS.contains(&event)
    }

    fn session_key(&self, p: &Value) -> Result<String, PayloadError> {
        str_field(p, "conversation_id")
            .or_else(|| str_field(p, "session_id"))
            .map(str::to_string)
            .ok_or(PayloadError::NoSessionId)
    }

    fn read<'p>(&self, event: &str, p: &'p Value, _: &Service<'_>) -> Reading<'p> {
        Ok(match event {
            "preToolUse" | "beforeShellExecution" | "beforeMCPExecution" => {
                return judged(self.call(event, p)?)
            }
            "postToolUse" | "postToolUseFailure" | "afterShellExecution" | "afterMCPExecution" => {
                Event::Post(self.call(event, p)?, outcome(event, p))
            }
            "beforeSubmitPrompt" => Event::UserMessage,
            "stop" => Event::Close { turn_over: true },
            "sessionEnd" => Event::End,
            _ => Event::Other,
        })
    }

    fn outcome(&self, event: &str, p: &Value) -> Outcome {
        outcome(event, p)
    }

    fn decision(&self, event: &str, decision: &str, reason: &str) -> String {
        if decision == "ask" && event != "preToolUse" {
            return json!({"permission": "ask", "user_message": clip(reason), "agent_message": clip(reason)})
                .to_string();
        }
        let reason = refusal(decision, CURSOR_CANNOT_ASK, reason);
        json!({"permission": "deny", "agent_message": clip(&reason), "user_message": clip(&reason)})
            .to_string()
    }

    fn context(&self, _: &str, text: &str) -> String {
        json!({"additional_context": clip(text)}).to_string()
    }

    /// An advisory before the call has no field in Cursor's answer to an allowed call.
    fn verdict(&self, event: &str, judged: Judged) -> Option<String> {
        match judged {
            Judged::Allow | Judged::Advise(_) => None,
            Judged::Ask(reason) => Some(self.decision(event, "ask", &reason)),
            Judged::Deny(reason) => Some(self.decision(event, "deny", &reason)),
        }
    }

    fn install(&self) -> Install {
        Install {
            // No timeout field is written (Cursor's default applies).
            events: &[
                ("preToolUse", None, None),
                ("postToolUse", None, None),
                ("postToolUseFailure", None, None),
                ("beforeSubmitPrompt", None, None),
                ("stop", None, None),
                ("sessionEnd", None, None),
            ],
            layout: Layout::Cursor,
            ..Install::GROUPS
        }
    }

    fn place(&self) -> Place {
        Place::at("Cursor", ".cursor/hooks.json")
    }
}

impl Cursor {
    fn call<'p>(&self, event: &str, p: &'p Value) -> Result<HostCall<'p>, PayloadError> {
        let key = self.session_key(p)?;
        if matches!(event, "beforeShellExecution" | "afterShellExecution") {
            let command = p.get("command").cloned().unwrap_or(Value::Null);
            return Ok(HostCall {
                key,
                id: None,
                tool: SHELL,
                args: std::borrow::Cow::Owned(json!({ "command": command })),
                alt_ids: Vec::new(),
            });
        }
        Ok(HostCall {
            key,
            id: str_field(p, "tool_use_id"),
            tool: str_field(p, "tool_name").unwrap_or(""),
            args: args_of(p.get("tool_input")),
            alt_ids: Vec::new(),
        })
    }
}

fn outcome(event: &str, p: &Value) -> Outcome {
    let mut o = Outcome::default();
    let text_of = |k: &str| p.get(k).map(response_text).unwrap_or_default();
    match event {
        "postToolUseFailure" => {
            if p.get("is_interrupt") == Some(&Value::Bool(true)) {
                o.aborted = Some(true);
            } else {
                match p.get("failure_type").and_then(Value::as_str) {
                    Some("timeout") => o.timed_out = Some(true),
                    Some("permission_denied") => o.sandbox_denied = Some(true),
                    _ => o.is_error = Some(true),
                }
            }
            o.text = Some(text_of("error_message"));
        }
        "afterShellExecution" => o.text = Some(text_of("output")),
        "afterMCPExecution" => o.text = Some(text_of("result_json")),
        _ => o.text = Some(text_of("tool_output")),
    }
    o
}
