//! Claude Code's command hooks (`.claude/settings.json`, `settings.local.json`): the dialect
//! the [`Host`] trait's provided methods speak.
//!
//! - `PreToolUse` `{session_id, agent_id?, tool_name, tool_input, tool_use_id}`: judged.
//!   Deny: `permissionDecision: "deny"` with the model's text as the reason. Ask:
//!   `permissionDecision: "ask"` with the operator's reason. Advise: `additionalContext`
//!   only. Allow: no output (never `"allow"`, which would skip the user's own permission
//!   prompt).
//! - `PostToolUse` `{tool_response}` / `PostToolUseFailure` `{error, is_interrupt}`: the
//!   outcome (an asked call that ran was approved); advisories as `additionalContext`.
//! - `UserPromptSubmit`: a new turn, the session and its sub-agents start afresh.
//! - `Stop`, `PostToolBatch`, `SubagentStop`: calls that never got an outcome are closed.
//! - `SessionEnd`: the session is forgotten. `SessionStart` and others: nothing.
//!
//! Session key: `session_id`, plus `#agent:<agent_id>` when a sub-agent calls.

use crate::host::Host;
use crate::init::{Event, Install, Place};

/// Claude Code's events as `init` installs them (event, matcher, timeout in seconds); the
/// hosts that speak its dialect each take those they have.
pub(crate) const PRE: Event = ("PreToolUse", Some("*"), Some(10));
pub(crate) const POST: Event = ("PostToolUse", Some("*"), Some(10));
pub(crate) const FAILURE: Event = ("PostToolUseFailure", Some("*"), Some(10));
pub(crate) const BATCH: Event = ("PostToolBatch", None, Some(10));
pub(crate) const PROMPT: Event = ("UserPromptSubmit", None, Some(10));
pub(crate) const START: Event = ("SessionStart", None, Some(10));
pub(crate) const END: Event = ("SessionEnd", None, Some(5));
pub(crate) const STOP: Event = ("Stop", None, Some(10));
pub(crate) const SUBAGENT_STOP: Event = ("SubagentStop", None, Some(10));

/// Claude Code.
pub(crate) struct Claude;

impl Host for Claude {
    fn install(&self) -> Install {
        Install {
            events: &[PRE, POST, FAILURE, BATCH, PROMPT, START, END, STOP],
            ..Install::GROUPS
        }
    }

    fn place(&self) -> Place {
        let file = ".claude/settings.json";
        Place {
            local: Some(".claude/settings.local.json"),
            ..Place::with_env(
                "Claude Code",
                file,
                file,
                ("CLAUDE_CONFIG_DIR", "settings.json"),
            )
        }
    }
}
