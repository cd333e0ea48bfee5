//! What the engines are given and what they answer: a [`Call`], its [`Verdict`], the
//! [`Decision`] before it runs and the [`PostDecision`] after, the asks [`Settled`] with
//! them, the [`Signals`] operators read, and [`EngineError`].

use crate::breaker::{Advisory, Failure, Hit};
use crate::canonical::CanonicalError;
use crate::progress::Stopped;
use crate::streak::StreakRefusal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call about to run.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The session key (docs/decisions.md, "Session key").
    pub session: &'a str,
    /// The call id, unique within the session.
    pub id: &'a str,
    /// The tool name.
    pub tool: &'a str,
    /// The arguments (`{}` when the host sent none).
    pub args: &'a Value,
}

/// The verdict kinds, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Run it and show the model the advisories.
    Advise,
    /// Ask the operator first.
    Ask,
    /// Do not run it.
    Deny,
}

impl Verdict {
    /// The protocol name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Advise => "advise",
            Verdict::Ask => "ask",
            Verdict::Deny => "deny",
        }
    }
}

/// An ask settled without an answer (fail-closed: declined).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// The asked call.
    pub id: String,
    /// Always [`Verdict::Deny`].
    pub verdict: Verdict,
}

/// The decision on a call (or on an answered ask).
#[must_use = "a denied call must not run"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The call id.
    pub id: String,
    /// What to do.
    pub verdict: Verdict,
    /// The engine that asked or denied (`streak` / `breaker`), or gave the advisory.
    pub engine: Option<&'static str>,
    /// `LOOP_BRAKE`, `REPEAT_TOOL_BLOCKED` or `SHELL_HTTP_BLOCKED` on a denial.
    pub code: Option<&'static str>,
    /// The model's denial text, or the operator's ask reason.
    pub message: Option<String>,
    /// Fingerprints that reached a gate.
    pub hits: Vec<Hit>,
    /// Stage 1/2 advisories for the model.
    pub advisories: Vec<Advisory>,
    /// The streak brake's refusal, with its fields, when it refused.
    pub streak_refusal: Option<StreakRefusal>,
    /// Asks of this session settled as declined before this event.
    pub settled: Vec<Settled>,
}

impl Decision {
    pub(super) fn allow(id: &str) -> Self {
        Decision {
            id: id.to_string(),
            verdict: Verdict::Allow,
            engine: None,
            code: None,
            message: None,
            hits: Vec::new(),
            advisories: Vec::new(),
            streak_refusal: None,
            settled: Vec::new(),
        }
    }

    /// Whether the tool may run.
    pub fn runs(&self) -> bool {
        matches!(self.verdict, Verdict::Allow | Verdict::Advise)
    }
}

/// What the engines say after a call ran.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PostDecision {
    /// The call id.
    pub id: String,
    /// `Some("denied")` when the call was denied (or its ask declined): not counted.
    pub ignored: Option<&'static str>,
    /// A failure-track advisory, when one fired.
    pub advisories: Vec<Advisory>,
    /// The classified failure.
    pub failure: Option<Failure>,
    /// For a call toolbrake stopped whose output is known all the same (a recorded run's
    /// outcome of a denied call, an asked call the operator approved): whether it was waste
    /// or new information. Only with the progress signal on (output memory).
    pub stopped: Option<Stopped>,
    /// Asks of this session settled as declined before this event.
    pub settled: Vec<Settled>,
}

/// Errors of [`Engine::answer`](super::Engine::answer) and [`Engine::post`](super::Engine::post).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The call id is not known in this session.
    #[error("unknown call id {0:?}")]
    UnknownCall(String),
    /// No ask is pending for this call.
    #[error("no ask is pending for call id {0:?}")]
    NotPending(String),
    /// A call id still open (waiting for its result) was sent again with another tool or
    /// other arguments: a new call needs a new id.
    #[error("call id {0:?} is still open with another tool or other arguments; a new call needs a new id")]
    IdReused(String),
    /// The arguments cannot be canonicalised.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// What the engines' signals say of one call in a session ([`Engine::signals`](super::Engine::signals)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signals {
    /// The prefix of the identity the streak brake counts.
    pub streak_identity: String,
    /// Decoy keys were left out of that identity (toolbrake mode).
    pub decoys_ignored: bool,
    /// Identical calls in a row right before this one (0 when the last call was another).
    pub in_a_row: u32,
    /// Of their reported outcomes, how many in a row were the same.
    pub same_in_a_row: u32,
    /// The breaker's view, when it judges the tool.
    pub breaker: Option<crate::breaker::BreakerSignals>,
}
