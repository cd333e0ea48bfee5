//! The one trait every host implements ([`Host`]): how its payloads read as neutral events,
//! its session key, how a decision is written in its answer shape, and what `init` installs
//! for it. Its provided methods are Claude Code's dialect, which most hosts speak: a host
//! that speaks it overrides only where it differs.
//!
//! Exit code: every host reads a hook's answer from its stdout when the hook exits 0, and
//! `toolbrake hook` always exits 0, for every host: a hook must never break its host (to
//! Claude Code an exit 2 blocks the call; a hook whose program is missing, exit 127, makes
//! GitHub Copilot CLI refuse every call). So the convention is the driver's, not a host's.

use crate::event::{args_of, clip, response_text, str_field, Event, HostCall, Judged};
use crate::event::{Reading, Service};
use crate::init::{Install, Place};
use crate::PayloadError;
use serde_json::{json, Value};
use toolbrake_core::Outcome;

/// One host: its dialect read into [`Event`]s and its answers written back. Each host is
/// one module implementing this; `Dialect::host` is the table of them.
pub(crate) trait Host: Sync {
    /// What `toolbrake init` writes into the host's settings file.
    fn install(&self) -> Install;

    /// Where that file is.
    fn place(&self) -> Place;

    /// Whether `event` judges a call before it runs (an empty event: not known).
    fn is_pre_event(&self, event: &str) -> bool {
        event == "PreToolUse"
    }

    /// The session a payload belongs to: `session_id`, plus `#agent:<agent_id>` when a
    /// sub-agent calls.
    fn session_key(&self, p: &Value) -> Result<String, PayloadError> {
        let session = str_field(p, "session_id").ok_or(PayloadError::NoSessionId)?;
        Ok(toolbrake_session::key(session, str_field(p, "agent_id")))
    }

    /// Reads one event's payload into the neutral event. `sessions` is for hosts whose own
    /// records fill what their payloads leave out (Factory Droid's transcript: the outcomes
    /// it holds are recorded first).
    fn read<'p>(&self, event: &str, p: &'p Value, _sessions: &Service<'_>) -> Reading<'p> {
        read(self, event, p)
    }

    /// The outcome a post event reports.
    fn outcome(&self, event: &str, p: &Value) -> Outcome {
        outcome(event, p, |_| None)
    }

    /// A refusal (`"deny"`) or a question to the user (`"ask"`) in the host's answer shape.
    fn decision(&self, _event: &str, decision: &str, reason: &str) -> String {
        json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": clip(reason),
        }})
        .to_string()
    }

    /// Advisories for the model in the host's answer shape.
    fn context(&self, event: &str, text: &str) -> String {
        json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": clip(text)}})
            .to_string()
    }

    /// The answer to a call judged before it ran; `None`: no output (never an explicit
    /// allow, which would skip the user's own permission prompt).
    fn verdict(&self, event: &str, judged: Judged) -> Option<String> {
        match judged {
            Judged::Allow => None,
            Judged::Advise(text) => Some(self.context(event, &text)),
            Judged::Ask(reason) => Some(self.decision(event, "ask", &reason)),
            Judged::Deny(reason) => Some(self.decision(event, "deny", &reason)),
        }
    }
}

/// An event in Claude Code's dialect read as the neutral one; a post event's outcome is
/// `host`'s.
pub(crate) fn read<'p, H: Host + ?Sized>(host: &H, event: &str, p: &'p Value) -> Reading<'p> {
    Ok(match event {
        "PreToolUse" => Event::Pre(call(host, p, true)?),
        "PostToolUse" | "PostToolUseFailure" => {
            Event::Post(call(host, p, false)?, host.outcome(event, p))
        }
        "UserPromptSubmit" => Event::UserMessage,
        "Stop" | "PostToolBatch" | "SubagentStop" => Event::Close {
            turn_over: event == "Stop",
        },
        "SessionEnd" => Event::End,
        _ => Event::Other,
    })
}

/// The call a payload in Claude Code's dialect names (`tool_name`, `tool_input`,
/// `tool_use_id`); `pre`: it must name its tool.
pub(crate) fn call<'p, H: Host + ?Sized>(
    host: &H,
    p: &'p Value,
    pre: bool,
) -> Result<HostCall<'p>, PayloadError> {
    let key = host.session_key(p)?;
    let tool = match str_field(p, "tool_name") {
        Some(t) => t,
        None if pre => return Err(PayloadError::NoToolName),
        None => "",
    };
    Ok(HostCall {
        key,
        id: str_field(p, "tool_use_id"),
        tool,
        args: args_of(p.get("tool_input")),
        alt_ids: Vec::new(),
    })
}

/// The outcome of a post event in Claude Code's dialect (`tool_response`, or a failure's
/// `error`); `exit_code` reads one from the result's text, for hosts that report none of
/// their own.
pub(crate) fn outcome(
    event: &str,
    p: &Value,
    exit_code: impl FnOnce(&str) -> Option<i64>,
) -> Outcome {
    let mut o = Outcome::default();
    if event == "PostToolUseFailure" {
        let err = p.get("error").map(response_text).unwrap_or_default();
        if p.get("is_interrupt") == Some(&Value::Bool(true)) {
            o.aborted = Some(true);
        } else if let Some(code) = err
            .lines()
            .next()
            .and_then(|l| l.trim().strip_prefix("Exit code "))
            .and_then(|n| n.trim().parse().ok())
        {
            o.exit_code = Some(code);
        } else {
            o.is_error = Some(true);
        }
        o.text = Some(err);
        return o;
    }
    let resp = p.get("tool_response").cloned().unwrap_or(Value::Null);
    if resp.get("interrupted") == Some(&Value::Bool(true)) {
        o.aborted = Some(true);
    }
    if resp.get("isError") == Some(&Value::Bool(true))
        || resp.get("is_error") == Some(&Value::Bool(true))
    {
        o.is_error = Some(true);
    }
    let text = response_text(&resp);
    o.exit_code = exit_code(&text);
    o.text = Some(text);
    o
}

/// A refusal's reason where the host cannot ask: an ask is refused (fail-closed), its
/// reason after `cannot_ask`, which says why.
pub(crate) fn refusal(decision: &str, cannot_ask: &str, reason: &str) -> String {
    if decision == "ask" {
        format!("{cannot_ask}{reason}")
    } else {
        reason.to_string()
    }
}

/// A judged call, from a host whose payload may leave its tool out.
pub(crate) fn judged(c: HostCall<'_>) -> Reading<'_> {
    if c.tool.is_empty() {
        return Err(PayloadError::NoToolName.into());
    }
    Ok(Event::Pre(c))
}
