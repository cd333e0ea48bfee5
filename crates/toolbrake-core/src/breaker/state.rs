//! What a session's breaker remembers: the window, the calls in flight, failure streaks,
//! remembered outputs, the cycle history and the unchanged track, each bounded.

use super::config;
use super::failure::Failure;
use super::fingerprint::{self, FpId, Kind, PageStep};
use super::mutation::{self, FileId};
use super::same_output;
use super::verdict::{BreakerSummary, Hit, Kept, KeptGauge, UnchangedView};
use crate::progress::OutputDigest;
use crate::redact::RedactedCut;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Bound on exemptions, refusals, failure streaks and remembered outputs per session.
pub const MAX_TRACKED: usize = 256;
/// Calls whose last outcome is remembered for the unchanged track.
pub const MAX_UNCHANGED: usize = 64;
/// Files remembered as edited in a session (the unchanged track's "never edited before").
pub const MAX_EDITED_FILES: usize = 64;
/// Calls remembered for cycle detection: four calls a period, `MAX_CYCLE_LIMIT` periods.
pub const MAX_RECENT: usize = 4 * config::MAX_CYCLE_LIMIT as usize;

/// What the breaker's judging of a call needs of the call alone: its fingerprints (their
/// gates are read again by the breaker that judges), whether it changes the workspace, and
/// the files it changes and reads (the unchanged track).
#[derive(Debug)]
pub(crate) struct PreparedCall {
    pub(super) set: fingerprint::FingerprintSet,
    pub(super) fx: mutation::Effects,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct FpMeta {
    pub(super) id: FpId,
    pub(super) kind: Kind,
    pub(super) limit: Option<u32>,
    /// Preview text, kept until the call is settled (it words the verdicts and the
    /// failure advisory); redacted when it is shown or stored. Denied calls keep no
    /// fingerprints at all.
    #[serde(default, skip_serializing_if = "RedactedCut::is_empty")]
    pub(super) preview: RedactedCut,
}

impl FpMeta {
    /// Whether its failures are tracked (the failure and struggle tracks): a measure with a
    /// gate, or a plain tool's own failure target (`tool:`), which has none (and is on the
    /// failure track only).
    pub(super) fn fails(&self) -> bool {
        self.limit.is_some() || self.kind == Kind::Tool
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Status {
    Ran,
    Denied,
    /// `ids[i]` is the fingerprint id of `hits[i]`.
    Pending {
        ids: Vec<FpId>,
        hits: Vec<Hit>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Inflight {
    pub(super) id: String,
    pub(super) tool: String,
    pub(super) shell: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) fps: Vec<FpMeta>,
    pub(super) status: Status,
    /// The call changes the workspace (progress signal).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) mutating: bool,
    /// The files it changes, when it names them (progress signal, the unchanged track).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) writes: Vec<FileId>,
    /// The files its output depends on (progress signal, the unchanged track).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) reads: Vec<FileId>,
    /// The page of a listing it fetches (progress signal, paging through a URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) page: Option<PageStep>,
}

/// A listing paged through a URL (progress signal): the last page's outcome and the pages
/// fetched, so that a page that repeats the previous body, or a cursor that goes back, is
/// still counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct PageSeries {
    pub(super) series: FpId,
    pub(super) out: OutputDigest,
    pub(super) seen: Vec<FpId>,
}

/// Listings remembered per session, and pages remembered per listing.
pub(super) const MAX_PAGE_SERIES: usize = 8;
pub(super) const MAX_PAGES_SEEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct FailStreak {
    pub(super) fp: FpId,
    pub(super) kind: Kind,
    /// Consecutive failures with no progress in between.
    pub(super) streak: u32,
    pub(super) detail: Failure,
    /// Failures since this fingerprint last succeeded, progress or not (progress signal).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) total: u32,
    /// Of those, the failures whose outcome repeated the failure before them (progress
    /// signal): the same failure again, edits or not.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) stale: u32,
    /// A successful mutating call ran since the last failure (progress signal).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) edited: bool,
    /// The digest of the last failure's outcome (progress signal); for a plain tool's
    /// target (`tool:`), the last failure's shape ([`failure::shape`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) out: Option<OutputDigest>,
    /// For a plain tool's target: the latest distinct calls (their `exact:` ids) that
    /// failed that way in a row. Its streak counts distinct calls only, so the same call
    /// retried is left to the call's own identity, and only a tool refusing ever-different
    /// calls alike is stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) calls: Vec<FpId>,
}

/// The most distinct calls a plain tool's failure streak remembers.
pub(super) const MAX_STREAK_CALLS: usize = 32;

/// The last outcome of one call (its `exact:` id) and how many times in a row it came back
/// the same (progress signal, the unchanged track).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Unchanged {
    pub(super) fp: FpId,
    pub(super) out: OutputDigest,
    /// Outcomes in a row equal to the one before them, counted when the call failed or
    /// changed the workspace.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) same: u32,
    /// Of those, the ones that came back the same although the workspace changed between.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) after_edits: u32,
    /// A successful mutating call ran since this call last ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) edited: bool,
    /// The last failure, when the latest outcome was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) detail: Option<Failure>,
    /// The gate stopped this call (and it has not run since).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) stopped: bool,
    /// The one rerun after a stop and a change has been used.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) retried: bool,
    /// The files the call's output depends on ([`mutation::Files::reads`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) reads: Vec<FileId>,
    /// A file never edited before in the session was edited since the call last ran: its
    /// next run is let through whatever its count.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) fresh: bool,
    /// The last change that restarted the count or let the next run through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) kept: Option<Kept>,
}

pub(super) fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Unchanged {
    /// Whether the call's next run is stopped at `limit`: its result came back the same
    /// `limit` times in a row, no new file was edited since it last ran, and it is not the
    /// one rerun after a stop and a further change.
    pub(super) fn stops(&self, limit: u32) -> bool {
        self.same >= limit && !self.fresh && !(self.stopped && self.edited && !self.retried)
    }
}

/// One call that ran, for cycle detection: its `exact:` id and, once reported, the digest
/// of its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Recent {
    /// [`call_key`] of the call id.
    pub(super) call: u64,
    pub(super) exact: FpId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) out: Option<OutputDigest>,
}

/// One session's breaker state: a plain value, bounded by the window and the constants
/// above whatever the session's length, holding fingerprint ids and never their text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerState {
    pub(super) window: VecDeque<Vec<FpId>>,
    /// The last tool result (only a denial quotes it: redacted when it is shown or stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) last_result: Option<RedactedCut>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) exempt: Vec<FpId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) refused: Vec<FpId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) fail: Vec<FailStreak>,
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub(super) inflight: VecDeque<Inflight>,
    /// The last outcome digest per identity fingerprint (`exact:`, `cmd:`, `net:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) outputs: Vec<(FpId, OutputDigest)>,
    /// Listings paged through a URL.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) pages: Vec<PageSeries>,
    /// The last calls that ran, for cycle detection.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub(super) recent: VecDeque<Recent>,
    /// The same-output track: the run of calls returning the same output.
    #[serde(
        default,
        skip_serializing_if = "same_output::SameOutputState::is_empty"
    )]
    pub(super) same_output: same_output::SameOutputState,
    /// The last outcome per call, for the unchanged track (most recent last).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) unchanged: Vec<Unchanged>,
    /// The files edited in the session (the unchanged track), least recently edited first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) edited_files: Vec<FileId>,
}

impl BreakerState {
    pub(super) fn tally(&self, id: FpId) -> u32 {
        self.window.iter().filter(|r| r.contains(&id)).count() as u32
    }

    pub(super) fn streak(&self, id: FpId) -> Option<&FailStreak> {
        self.fail.iter().find(|f| f.fp == id)
    }

    /// What the call with this `exact:` id returned the last time it ran, when the output
    /// memory still holds it (the unchanged track's last 64 identities, else the window's);
    /// for a call the same-output track just stopped, what its run kept returning.
    pub fn last_output(&self, exact: FpId) -> Option<OutputDigest> {
        if let Some(d) = self.same_output.before(exact) {
            return Some(d);
        }
        self.unchanged
            .iter()
            .find(|u| u.fp == exact)
            .map(|u| u.out)
            .or_else(|| {
                self.outputs
                    .iter()
                    .find(|(id, _)| *id == exact)
                    .map(|(_, d)| *d)
            })
    }

    /// The unchanged track's count for a call's `exact:` id (`toolbrake explain`).
    pub fn unchanged_view(&self, exact: FpId, limit: Option<u32>) -> UnchangedView {
        let u = self.unchanged.iter().find(|u| u.fp == exact);
        UnchangedView {
            same: u.map_or(0, |u| u.same),
            after_edits: u.map_or(0, |u| u.after_edits),
            limit,
            stops: limit.is_some_and(|l| u.is_some_and(|u| u.stops(l))),
            kept: u.and_then(|u| u.kept),
            fresh: u.is_some_and(|u| u.fresh),
        }
    }

    /// Ids of calls whose ask is still waiting for an answer.
    pub fn pending_asks(&self) -> Vec<String> {
        self.inflight
            .iter()
            .filter(|c| matches!(c.status, Status::Pending { .. }))
            .map(|c| c.id.clone())
            .collect()
    }

    /// Whether the breaker denied this call (or its ask was declined).
    pub fn was_denied(&self, call_id: &str) -> bool {
        self.inflight
            .iter()
            .any(|c| c.id == call_id && c.status == Status::Denied)
    }

    /// How an operator sees a call the breaker judged and remembers: its `exact:` preview
    /// (redacted) and, among its gated fingerprints, the one nearest its gate as
    /// `(fingerprint, count, limit)`.
    pub fn call_view(&self, call_id: &str) -> Option<(RedactedCut, Option<KeptGauge>)> {
        let c = self.inflight.iter().find(|c| c.id == call_id)?;
        let preview = c
            .fps
            .iter()
            .find(|f| f.kind == Kind::Exact)
            .or(c.fps.first())
            .map(|f| f.preview.clone())?;
        let near = c
            .fps
            .iter()
            .filter_map(|f| Some((f, f.limit?)))
            .map(|(f, limit)| (f, self.tally(f.id), limit))
            .max_by(|a, b| {
                (u64::from(a.1) * u64::from(b.2)).cmp(&(u64::from(b.1) * u64::from(a.2)))
            })
            .map(|(f, count, limit)| (f.preview.clone(), count, limit));
        Some((preview, near))
    }

    /// Forgets every call waiting for a result (a host that never reports outcomes of
    /// denied or abandoned calls closes them at the end of a batch or turn).
    pub fn forget_open_calls(&mut self) {
        self.inflight.clear();
    }

    /// A summary for operators.
    pub fn summary(&self) -> BreakerSummary {
        let mut max_count = 0;
        for r in &self.window {
            for id in r {
                max_count = max_count.max(self.tally(*id));
            }
        }
        BreakerSummary {
            records: self.window.len(),
            max_count,
            failure_streaks: self
                .fail
                .iter()
                .map(|f| (f.kind.as_str().to_string(), f.streak))
                .collect(),
            exemptions: self.exempt.len(),
            refusals: self.refused.len(),
            pending_asks: self.pending_asks(),
        }
    }

    pub(super) fn push_inflight(&mut self, c: Inflight) {
        self.inflight.retain(|x| x.id != c.id);
        if self.inflight.len() >= crate::outcome::MAX_OPEN_CALLS {
            self.inflight.pop_front();
        }
        self.inflight.push_back(c);
    }
}

/// A compact key for a call id in the cycle history (8 bytes of its SHA-256).
pub(super) fn call_key(call_id: &str) -> u64 {
    FpId::of(call_id).0
}

/// The advisory candidate to speak: the longest streak, then the most actionable kind.
pub(super) fn pick(v: Vec<(&FpMeta, u32)>) -> Option<(&FpMeta, u32)> {
    v.into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.kind.rank().cmp(&a.0.kind.rank())))
}

pub(super) fn bounded_insert(set: &mut Vec<FpId>, id: FpId) {
    if !set.contains(&id) {
        if set.len() >= MAX_TRACKED {
            set.remove(0);
        }
        set.push(id);
    }
}

/// A hit with the id of its fingerprint.
pub(super) struct IdHit {
    pub(super) id: FpId,
    pub(super) hit: Hit,
}
