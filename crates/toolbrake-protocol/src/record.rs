//! What one handled event did, as the processor hands it on and the reports read it:
//! [`Record`], the [`Handled`] event around it, and the recorded output of a result.
//!
//! Both [`crate::processor`] (which makes these) and [`crate::report`] (which reads them)
//! import them from here, so neither imports the other.

use toolbrake_core::progress::{Digested, OutputDigest};
use toolbrake_core::{Advisory, Decision, Failure, Outcome, Settled};

/// What one event did, for reports.
#[derive(Debug, Clone)]
pub enum Record {
    /// A call was judged.
    Call {
        /// Session key the call was counted in.
        session: String,
        /// The call's identity digest (the streak hash), for repeat statistics; only when
        /// the processor was asked for it ([`crate::Processor::with_call_digests`]).
        digest: Option<[u8; 32]>,
        /// The tool and a redacted preview of its arguments, for reports; only with
        /// [`crate::Processor::with_call_digests`].
        detail: Option<CallDetail>,
        /// The decision.
        decision: Decision,
    },
    /// An ask was answered.
    Answer {
        /// Session key.
        session: String,
        /// The final decision.
        decision: Decision,
    },
    /// A result was recorded.
    Result {
        /// Session key.
        session: String,
        /// Call id.
        id: String,
        /// Advisories it produced.
        advisories: Vec<Advisory>,
        /// The classified failure.
        failure: Option<Failure>,
        /// The normalised digest of the reported outcome, for reports that tell waste from
        /// new information; only with [`crate::Processor::with_call_digests`].
        output: Option<OutputDigest>,
        /// Bytes of the output text the call returned (0 when none was reported): what a
        /// stopped call would have added to the run (the report's "output bytes saved").
        output_bytes: u64,
        /// Asks settled before it.
        settled: Vec<Settled>,
    },
    /// A user message.
    User {
        /// Session key.
        session: String,
        /// Asks settled before it.
        settled: Vec<Settled>,
    },
    /// A session ended.
    End {
        /// Session key.
        session: String,
        /// Asks settled before it.
        settled: Vec<Settled>,
    },
    /// The line was in error.
    Error,
}

/// A call as a report shows it: never the arguments, a redacted preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallDetail {
    /// The tool.
    pub tool: String,
    /// Its canonical arguments, redacted and cut to [`PREVIEW_CHARS`] characters.
    pub preview: String,
}

/// Characters of a call's arguments a report shows.
pub const PREVIEW_CHARS: usize = 120;

/// One handled event: the output line and what happened.
#[derive(Debug, Clone)]
pub struct Handled {
    /// The output line (JSON, no newline); empty for an event in no error when the
    /// processor writes no lines ([`crate::Processor::with_lines`]).
    pub line: String,
    /// Whether the line is an error line.
    pub is_error: bool,
    /// What happened, for reports.
    pub record: Record,
}

/// What a recorded run got from a call, for judging stopped calls: the outcome's digest,
/// or `None` when the recording holds nothing (no field and no text, or empty text only:
/// a run cut off at its step limit records its last call with an empty output).
pub fn recorded_output(outcome: &Outcome) -> Option<OutputDigest> {
    recorded_output_of(outcome, Digested::of(outcome))
}

/// [`recorded_output`], given the outcome's digest made already.
pub fn recorded_output_of(outcome: &Outcome, digested: Digested) -> Option<OutputDigest> {
    if outcome.text.as_deref() == Some("") && !outcome.has_fields() {
        return None;
    }
    digested.get()
}
