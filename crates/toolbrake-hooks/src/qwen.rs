//! Qwen Code's hooks (`.qwen/settings.json`): Claude Code's dialect, with two differences.
//! It reports a tool's result as `{llmContent, returnDisplay}` (Gemini CLI's shape; a
//! failure as Claude Code does), and it sends `UserPromptSubmit` with an empty prompt when it
//! continues its own turn after a batch of tool results: not a human message, so not a new
//! turn.

use crate::claude::{BATCH, END, FAILURE, POST, PRE, PROMPT, STOP};
use crate::event::{Event, Reading, Service};
use crate::host::{self, Host};
use crate::init::{Install, Place};
use serde_json::Value;
use toolbrake_core::Outcome;

/// Qwen Code.
pub(crate) struct Qwen;

impl Host for Qwen {
    fn install(&self) -> Install {
        Install {
            // Claude Code's events, timeouts in seconds.
            events: &[PRE, POST, FAILURE, BATCH, PROMPT, END, STOP],
            ..Install::GROUPS
        }
    }

    fn place(&self) -> Place {
        Place::at("Qwen Code", ".qwen/settings.json")
    }

    fn read<'p>(&self, event: &str, p: &'p Value, _: &Service<'_>) -> Reading<'p> {
        let own_turn = event == "UserPromptSubmit"
            && p.get("prompt")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty();
        if own_turn {
            return Ok(Event::Other);
        }
        host::read(self, event, p)
    }

    fn outcome(&self, event: &str, p: &Value) -> Outcome {
        if event == "PostToolUseFailure" {
            host::outcome(event, p, |_| None)
        } else {
            crate::gemini::outcome(p)
        }
    }
}
