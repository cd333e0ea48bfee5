//! One session's state for both engines ([`SessionState`]): the calls still open, the
//! decision log, the counts of asks and stops, and the sub-agent session keys.

use super::decision::{Decision, Verdict};
use crate::breaker::BreakerState;
use crate::progress::{OutputDigest, Stopped};
use crate::redact::RedactedCut;
use crate::streak::StreakState;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What joins a session key and a sub-agent id in the sub-agent's own session key.
pub const AGENT_SEPARATOR: &str = "#agent:";

/// The session key of a sub-agent of `session` (sub-agents get their own budget:
/// docs/decisions.md, "Sessions and sub-agents").
pub fn agent_session_key(session: &str, agent: &str) -> String {
    format!("{session}{AGENT_SEPARATOR}{agent}")
}

/// The prefix shared by the session keys of every sub-agent of `session`.
pub fn agent_key_prefix(session: &str) -> String {
    format!("{session}{AGENT_SEPARATOR}")
}

/// Whether a session key is a sub-agent's.
pub fn is_agent_key(key: &str) -> bool {
    key.contains(AGENT_SEPARATOR)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum CallStatus {
    Ran,
    Denied,
    Asked,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CallRecord {
    pub(super) id: String,
    pub(super) status: CallStatus,
    /// The first 4 bytes of the call's identity digest (0: unknown, an older state): enough
    /// to tell a reused id from the same call seen twice.
    #[serde(default, rename = "d", skip_serializing_if = "is_zero")]
    pub(super) digest: u32,
    /// What the same call returned the last time it ran, when the output memory held it: for
    /// a call stopped (denied or asked), to judge its own output if it runs or is replayed
    /// anyway; for a call that runs, to tell the timeline its output same or new.
    #[serde(default, rename = "b", skip_serializing_if = "Option::is_none")]
    pub(super) before: Option<OutputDigest>,
    /// The call was asked about (it stays a stopped call once approved).
    #[serde(default, rename = "a", skip_serializing_if = "std::ops::Not::not")]
    pub(super) asked: bool,
}

/// Decisions an operator can see per session (the dashboard's timeline).
pub const MAX_LOG: usize = 12;
/// Characters of a preview or fingerprint kept in the timeline.
pub const LOG_PREVIEW_CHARS: usize = 100;

/// One decision, as an operator sees it: never the arguments, only a redacted preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// The call id.
    pub call: String,
    /// The tool.
    pub tool: String,
    /// What was decided (an answered ask shows its final verdict).
    pub verdict: Verdict,
    /// The refusal code, on a denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The call's `exact:` fingerprint (redacted when shown or stored, cut), or the tool
    /// alone.
    pub preview: RedactedCut,
    /// The fingerprint nearest its gate after this call: `(fingerprint, count, limit)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near: Option<crate::breaker::KeptGauge>,
    /// `ok`, `failed` or `aborted` once the outcome is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// What its output was, when the breaker remembers outputs and the outcome said
    /// something: `same` as the last time the same call ran (waste), or `new` (new
    /// information, or nothing remembered of it), judged as [`progress::judge_stopped`]
    /// judges a stopped call.
    ///
    /// [`progress::judge_stopped`]: crate::progress::judge_stopped
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned: Option<String>,
    /// An ask's answer once given: `approved` (the call then ran: its verdict is `allow`,
    /// and the dashboard still draws it as asked) or `declined`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// One session's state for both engines: a plain serialisable value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    /// The streak brake's slot.
    pub streak: StreakState,
    /// The breaker's window, streaks, exemptions and refusals.
    pub breaker: BreakerState,
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub(super) calls: VecDeque<CallRecord>,
    /// Calls stopped since the session (re)started: denied by either engine, or asked
    /// and not approved.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) stopped: u32,
    /// The last [`MAX_LOG`] decisions, oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub(super) log: VecDeque<LogEntry>,
    /// What a person said of this run afterwards (`toolbrake feedback`), when anything:
    /// read by calibration, never by the engines' decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<crate::feedback::Feedback>,
    /// The run-level line's count of the whole run (`[budget]`).
    #[serde(default, skip_serializing_if = "crate::budget::BudgetState::is_empty")]
    pub(super) budget: crate::budget::BudgetState,
    /// Asks of this session by what became of them: `[approved, declined, unanswered]`
    /// (settled as declined by a later event), since the session began.
    #[serde(default, skip_serializing_if = "no_asks")]
    pub(super) asks: [u32; 3],
}

pub(super) fn no_asks(a: &[u32; 3]) -> bool {
    *a == [0; 3]
}

pub(super) fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl SessionState {
    pub(super) fn record(&mut self, id: &str, status: CallStatus, digest: u32) {
        if let Some(c) = self.calls.iter_mut().find(|c| c.id == id) {
            c.status = status;
            return;
        }
        if self.calls.len() >= crate::outcome::MAX_OPEN_CALLS {
            self.calls.pop_front();
        }
        self.calls.push_back(CallRecord {
            id: id.to_string(),
            status,
            digest,
            before: None,
            asked: false,
        });
    }

    /// Remembers, for a call just judged, what the same call returned last (kept from the
    /// first time it was judged, when it is judged again); `asked`: it was asked about.
    pub(super) fn note_stopped(&mut self, id: &str, before: Option<OutputDigest>, asked: bool) {
        if let Some(c) = self.calls.iter_mut().find(|c| c.id == id) {
            c.before = c.before.or(before);
            c.asked |= asked;
        }
    }

    /// Ids of the calls waiting for their result, oldest first.
    pub fn open_call_ids(&self) -> impl Iterator<Item = &str> {
        self.calls.iter().map(|c| c.id.as_str())
    }

    pub(super) fn status(&self, id: &str) -> Option<CallStatus> {
        self.calls.iter().find(|c| c.id == id).map(|c| c.status)
    }

    /// For a call stopped (denied, or asked about): what the same call returned last.
    pub(super) fn stopped_call(&self, id: &str) -> Option<Option<OutputDigest>> {
        self.calls
            .iter()
            .find(|c| c.id == id)
            .filter(|c| c.asked || c.status == CallStatus::Denied)
            .map(|c| c.before)
    }

    /// Number of calls remembered between call and result.
    pub fn open_calls(&self) -> usize {
        self.calls.len()
    }

    /// Calls stopped since the session (re)started: denied by either engine, or asked and
    /// not approved.
    pub fn stopped(&self) -> u32 {
        self.stopped
    }

    /// The last decisions, oldest first.
    pub fn log(&self) -> impl DoubleEndedIterator<Item = &LogEntry> {
        self.log.iter()
    }

    /// Records in the timeline something a command did to this session from outside a
    /// call (`toolbrake sessions reset` or `toolbrake feedback` run inside an agent's
    /// environment): `what` shows as the tool, `text` (redacted, cut) as its preview, so a
    /// person reading the dashboard sees it.
    pub fn note_operator(&mut self, what: &str, code: &str, text: &str) {
        let n = self.log.len();
        if n >= MAX_LOG {
            self.log.pop_front();
        }
        self.log.push_back(LogEntry {
            call: format!("{code}-{n}"),
            tool: what.to_string(),
            verdict: Verdict::Allow,
            code: Some(code.to_string()),
            preview: RedactedCut::new(text, LOG_PREVIEW_CHARS),
            near: None,
            outcome: None,
            returned: None,
            answer: None,
        });
    }

    /// Forgets everything both engines keep of the session, as a new session would
    /// start, keeping only its timeline and the person's feedback.
    pub fn reset_keeping_timeline(&mut self) {
        let log = std::mem::take(&mut self.log);
        let feedback = self.feedback;
        *self = SessionState::default();
        self.log = log;
        self.feedback = feedback;
    }

    /// Records a decision (a call seen again through another seam replaces its entry).
    /// `preview` names a call the breaker keeps no record of (a denied one).
    pub(super) fn note(&mut self, d: &Decision, tool: &str, preview: impl FnOnce() -> RedactedCut) {
        let (preview, near) = self
            .breaker
            .call_view(&d.id)
            .unwrap_or_else(|| (preview(), None));
        let near = near.or_else(|| {
            d.hits
                .iter()
                .max_by_key(|h| (u64::from(h.count) * 1000) / u64::from(h.limit.max(1)))
                .map(|h| {
                    (
                        RedactedCut::redacted(h.fingerprint.clone()),
                        h.count,
                        h.limit,
                    )
                })
        });
        let cut = |t: RedactedCut| t.limited(LOG_PREVIEW_CHARS);
        let entry = LogEntry {
            call: d.id.clone(),
            tool: tool.to_string(),
            verdict: d.verdict,
            code: d.code.map(str::to_string),
            preview: cut(preview),
            near: near.map(|(fp, c, l)| (cut(fp), c, l)),
            outcome: None,
            returned: None,
            answer: None,
        };
        if let Some(e) = self.log.iter_mut().find(|e| e.call == d.id) {
            *e = entry;
            return;
        }
        if self.log.len() >= MAX_LOG {
            self.log.pop_front();
        }
        self.log.push_back(entry);
    }

    pub(super) fn note_outcome(
        &mut self,
        call_id: &str,
        outcome: Option<&str>,
        returned: Option<Stopped>,
    ) {
        if let Some(e) = self.log.iter_mut().rev().find(|e| e.call == call_id) {
            e.outcome = outcome.map(str::to_string).or(e.outcome.take());
            e.returned = returned.map(|r| match r {
                Stopped::Waste => "same".to_string(),
                Stopped::NewInformation => "new".to_string(),
            });
        }
    }

    /// Asks of this session by what became of them: `[approved, declined, unanswered]`.
    pub fn asks(&self) -> [u32; 3] {
        self.asks
    }

    pub(super) fn count_ask(&mut self, answer: usize) {
        self.asks[answer] = self.asks[answer].saturating_add(1);
    }

    pub(super) fn count_stop(&mut self, verdict: Verdict) {
        if verdict == Verdict::Deny {
            self.stopped = self.stopped.saturating_add(1);
            self.budget.count_stop();
        }
    }

    /// The run-level line's count of this run: its calls and the calls stopped in it.
    pub fn budget(&self) -> &crate::budget::BudgetState {
        &self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feedback::Feedback;

    #[test]
    fn state_without_feedback_decodes_and_stays_unwritten() {
        let text = serde_json::to_string(&SessionState::default()).unwrap();
        assert!(!text.contains("feedback"), "{text}");
        let st: SessionState = serde_json::from_str(&text).unwrap();
        assert_eq!(st.feedback, None);
        let mut marked = st.clone();
        marked.feedback = Some(Feedback::Stuck);
        let text = serde_json::to_string(&marked).unwrap();
        assert!(text.contains(r#""feedback":"stuck""#), "{text}");
        let back: SessionState = serde_json::from_str(&text).unwrap();
        assert_eq!(back.feedback, Some(Feedback::Stuck));
    }
}
