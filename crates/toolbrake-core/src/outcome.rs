//! What a call returned: the [`Outcome`] an adapter reports, which both engines and
//! output memory read (its classification as a failure is `breaker::failure`'s), and
//! how many calls may wait for theirs.

use serde::{Deserialize, Serialize};

/// How many calls a session remembers between a call and its result: the one bound of
/// every per-session list of open calls (the engine's, the breaker's, the streak brake's
/// seen ids, the protocol processor's). Older ones are forgotten: enough for any host's
/// parallel calls and interception seams.
pub const MAX_OPEN_CALLS: usize = 64;

/// What an adapter reports after a call ran (or was cut short). Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// The host reported the call as an error (thrown, unknown tool, policy denial…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// The shell exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// The HTTP status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<i64>,
    /// The call timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
    /// The signal that killed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// A sandbox refused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_denied: Option<bool>,
    /// The user or host cancelled it: never a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<bool>,
    /// A background job started (its exit belongs to a later call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    /// The error's code or name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The output or error text the model saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Outcome {
    /// Whether any structured field (not the text) was reported.
    pub fn has_fields(&self) -> bool {
        self.is_error.is_some()
            || self.exit_code.is_some()
            || self.status_code.is_some()
            || self.timed_out.is_some()
            || self.signal.is_some()
            || self.sandbox_denied.is_some()
            || self.background.is_some()
            || self.error_code.is_some()
    }

    /// A plain success with this output text.
    pub fn success(text: impl Into<String>) -> Self {
        Outcome {
            text: Some(text.into()),
            ..Outcome::default()
        }
    }

    /// Whether the call was cancelled.
    pub fn is_aborted(&self) -> bool {
        self.aborted == Some(true)
    }
}
