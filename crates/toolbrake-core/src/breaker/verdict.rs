//! What the breaker answers: its codes, the tracks and stages of a hit, the verdicts
//! before and after a call, and the read-only views operators get (signals, summary).

use super::failure::Failure;
use crate::redact::RedactedCut;
use serde::{Deserialize, Serialize};

/// The denial code of the breaker.
pub const CODE: &str = "REPEAT_TOOL_BLOCKED";
/// The refusal code of the shell-HTTP block.
pub const SHELL_HTTP_CODE: &str = "SHELL_HTTP_BLOCKED";
/// The code of a call stopped because it would lift or edit toolbrake itself.
pub const SELF_PROTECTION_CODE: &str = "TOOLBRAKE_SELF_PROTECTED";
/// The engine name of the breaker.
pub const ENGINE: &str = "breaker";

/// Which track a hit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Track {
    /// Occurrences in the window.
    Repeat,
    /// Consecutive failures.
    Failure,
    /// A no-progress cycle of period 2–4 (progress signal).
    Cycle,
    /// Failures of one fingerprint with changes in between (progress signal).
    Struggle,
    /// A call whose failure (or an edit whose result) came back the same several times in
    /// a row, whatever ran in between (progress signal).
    Unchanged,
    /// A call whose action, however spelled, keeps returning the same output (progress
    /// signal, `same_output`).
    #[serde(rename = "same_output")]
    SameOutput,
}

impl Track {
    /// The protocol name.
    pub fn as_str(self) -> &'static str {
        match self {
            Track::Repeat => "repeat",
            Track::Failure => "failure",
            Track::Cycle => "cycle",
            Track::Struggle => "struggle",
            Track::Unchanged => "unchanged",
            Track::SameOutput => "same_output",
        }
    }
}

/// A fingerprint that reached a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    /// The fingerprint, cut to `preview_chars`.
    pub fingerprint: String,
    /// The count including this call (repeat), or the failure streak (failure).
    pub count: u32,
    /// The gate it reached.
    pub limit: u32,
    /// The track.
    pub track: Track,
    /// The last failure, for failure and struggle hits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// The cycle's period (calls per repetition), for cycle hits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u32>,
    /// For unchanged hits: how many of the unchanged results followed a change to the
    /// workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_edits: Option<u32>,
}

/// Which advisory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Occurrence stage 1 (`warn_at`).
    Warn,
    /// Occurrence stage 2 (`summarize_at`).
    Summarize,
    /// Failure stage (`fail_warn_at`).
    Failure,
    /// Struggle stage (`struggle_warn_at`): failing again after changes.
    Struggle,
}

impl Stage {
    /// The track whose count gave this advisory.
    pub fn track(self) -> Track {
        match self {
            Stage::Warn | Stage::Summarize => Track::Repeat,
            Stage::Failure => Track::Failure,
            Stage::Struggle => Track::Struggle,
        }
    }
}

/// An advisory for the model: the call runs, and the model is told it is repeating itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Advisory {
    /// The text to show the model.
    pub text: String,
    /// The fingerprint it names (cut to `preview_chars`).
    pub fingerprint: String,
    /// Its count (occurrences including this call, or the failure streak).
    pub count: u32,
    /// Which stage fired.
    pub stage: Stage,
}

/// The breaker's verdict before a call runs.
#[must_use = "a denied call must not run"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakerVerdict {
    /// Run it, showing the model the advisory if there is one.
    Proceed {
        /// Stage 1 or stage 2 advisory.
        advisory: Option<Advisory>,
    },
    /// Ask the operator; the call waits for [`Breaker::answer`](super::Breaker::answer).
    Ask {
        /// What to show the operator.
        reason: String,
        /// The hits that gate it.
        hits: Vec<Hit>,
    },
    /// Do not run it; show the model `text`.
    Deny {
        /// What the model reads.
        text: String,
        /// The hits that gate it.
        hits: Vec<Hit>,
    },
}

/// What the breaker says after a call ran.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PostReport {
    /// The call was denied by us (or its ask declined): its outcome was not counted.
    pub ignored: bool,
    /// The classified failure, if the outcome was one.
    pub failure: Option<Failure>,
    /// A failure-track advisory, when a streak just reached `fail_warn_at`.
    pub advisory: Option<Advisory>,
}

/// Why the unchanged track let a call run again although its result kept coming back the
/// same: a change that can make its next run differ (docs/decisions.md, "Unchanged").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kept {
    /// A file the call runs or names (its script, a test file on its command line) was
    /// edited, re-created or deleted: its output changes by construction, its count restarts.
    ScriptEdited,
    /// A file never edited before in the session was edited (the agent found another place
    /// to change): its next run is let through.
    NewFile,
}

impl Kept {
    /// What an operator reads (`toolbrake explain`).
    pub fn describe(self) -> &'static str {
        match self {
            Kept::ScriptEdited => "the script it runs (or a file on its command line) was edited",
            Kept::NewFile => "a file never edited before in this session was edited",
        }
    }
}

/// What the unchanged track knows of a call, for operators (`toolbrake explain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnchangedView {
    /// Outcomes in a row equal to the one before them.
    pub same: u32,
    /// Of those, the ones that followed a change to the workspace.
    pub after_edits: u32,
    /// The gate (`unchanged_limit`), when on.
    pub limit: Option<u32>,
    /// The next run would be stopped.
    pub stops: bool,
    /// The last change that restarted the count or let the next run through.
    pub kept: Option<Kept>,
    /// That change lets the next run through whatever the count ([`Kept::NewFile`]).
    pub fresh: bool,
}

/// A fingerprint against its gate, as operators see it: `(fingerprint, count, limit)`.
pub type Gauge = (String, u32, u32);

/// A [`Gauge`] as the timeline keeps it: the fingerprint redacted when shown or stored.
pub type KeptGauge = (RedactedCut, u32, u32);

/// What the breaker knows of one fingerprint of a call, for operators (`toolbrake explain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FingerprintSignal {
    /// The fingerprint (redacted, cut to `preview_chars`).
    pub fingerprint: String,
    /// Its kind.
    pub kind: &'static str,
    /// Occurrences in the window, and the gate (`None`: not counted).
    pub count: u32,
    /// The gate.
    pub limit: Option<u32>,
    /// Consecutive failures with nothing changed in between (the failure track).
    pub failures: u32,
    /// Failures since it last succeeded, changes or not (the struggle track).
    pub failures_since_success: u32,
}

/// What the breaker's signals say of a call in a session, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BreakerSignals {
    /// Per fingerprint of the call.
    pub fingerprints: Vec<FingerprintSignal>,
    /// The unchanged track for the call's `exact:` identity.
    pub unchanged: UnchangedView,
    /// The cycle the call would continue, as its period, if any.
    pub cycle: Option<u32>,
    /// Exempted for this turn by an operator's approval (any of its fingerprints).
    pub exempt: bool,
}

/// A read-only summary of a session, for operators (`toolbrake sessions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BreakerSummary {
    /// Records in the window.
    pub records: usize,
    /// The highest occurrence count of any fingerprint in the window.
    pub max_count: u32,
    /// Active failure streaks as `(kind, streak)`.
    pub failure_streaks: Vec<(String, u32)>,
    /// Active exemptions.
    pub exemptions: usize,
    /// Active refusals.
    pub refusals: usize,
    /// Asks waiting for an answer.
    pub pending_asks: Vec<String>,
}
