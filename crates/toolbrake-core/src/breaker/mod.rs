//! The breaker: semantic fingerprints counted over a sliding window per session,
//! escalating warn → summary demand → gate, a failure track, and a gate that asks the
//! operator for a turn-scoped exemption (docs/decisions.md, "Breaker" and "Progress").
//!
//! The four moments ("Four moments") are [`Breaker::pre`], [`Breaker::answer`], [`Breaker::post`]
//! and [`Breaker::user_message`]. Each takes the session's [`BreakerState`] by `&mut`:
//! the engine is pure, the caller (a store) decides where the state lives.

pub mod config;
pub mod failure;
pub mod fingerprint;
pub mod messages;
pub mod mutation;
pub mod same_output;
pub mod shell;
pub mod shell_http;
pub mod url;

pub use config::{BreakerConfig, LocalHosts, OnLimit, ToolClasses};
pub use failure::{classify, Failure, Outcome, Reason};
pub use fingerprint::{fingerprints, Fingerprint, FingerprintSet, FpId, Kind};
pub use mutation::FileId;

use crate::canonical::CanonicalError;
use crate::progress::OutputDigest;
use crate::redact::RedactedCut;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::VecDeque;

/// The denial code of the breaker.
pub const CODE: &str = "REPEAT_TOOL_BLOCKED";
/// The refusal code of the shell-HTTP block.
pub const SHELL_HTTP_CODE: &str = "SHELL_HTTP_BLOCKED";
/// The engine name of the breaker.
pub const ENGINE: &str = "breaker";
/// Bound on exemptions, refusals, failure streaks and remembered outputs per session.
pub const MAX_TRACKED: usize = 256;
/// Calls whose last outcome is remembered for the unchanged track.
pub const MAX_UNCHANGED: usize = 64;
/// Files remembered as edited in a session (the unchanged track's "never edited before").
pub const MAX_EDITED_FILES: usize = 64;
/// Calls remembered for cycle detection: four calls a period, `MAX_CYCLE_LIMIT` periods.
pub const MAX_RECENT: usize = 4 * config::MAX_CYCLE_LIMIT as usize;

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
    /// Ask the operator; the call waits for [`Breaker::answer`].
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

/// What the breaker's judging of a call needs of the call alone: its fingerprints (their
/// gates are read again by the breaker that judges), whether it changes the workspace, and
/// the files it changes and reads (the unchanged track).
#[derive(Debug)]
pub(crate) struct PreparedCall {
    set: fingerprint::FingerprintSet,
    fx: mutation::Effects,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FpMeta {
    id: FpId,
    kind: Kind,
    limit: Option<u32>,
    /// Preview text, kept until the call is settled (it words the verdicts and the
    /// failure advisory); redacted when it is shown or stored. Denied calls keep no
    /// fingerprints at all.
    #[serde(default, skip_serializing_if = "RedactedCut::is_empty")]
    preview: RedactedCut,
}

impl FpMeta {
    /// Whether its failures are tracked (the failure and struggle tracks): a measure with a
    /// gate, or a plain tool's own failure target (`tool:`), which has none (and is on the
    /// failure track only).
    fn fails(&self) -> bool {
        self.limit.is_some() || self.kind == Kind::Tool
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Ran,
    Denied,
    /// `ids[i]` is the fingerprint id of `hits[i]`.
    Pending {
        ids: Vec<FpId>,
        hits: Vec<Hit>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Inflight {
    id: String,
    tool: String,
    shell: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fps: Vec<FpMeta>,
    status: Status,
    /// The call changes the workspace (progress signal).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    mutating: bool,
    /// The files it changes, when it names them (progress signal, the unchanged track).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    writes: Vec<FileId>,
    /// The files its output depends on (progress signal, the unchanged track).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    reads: Vec<FileId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FailStreak {
    fp: FpId,
    kind: Kind,
    /// Consecutive failures with no progress in between.
    streak: u32,
    detail: Failure,
    /// Failures since this fingerprint last succeeded, progress or not (progress signal).
    #[serde(default, skip_serializing_if = "is_zero")]
    total: u32,
    /// Of those, the failures whose outcome repeated the failure before them (progress
    /// signal): the same failure again, edits or not.
    #[serde(default, skip_serializing_if = "is_zero")]
    stale: u32,
    /// A successful mutating call ran since the last failure (progress signal).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    edited: bool,
    /// The digest of the last failure's outcome (progress signal); for a plain tool's
    /// target (`tool:`), the last failure's shape ([`failure::shape`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    out: Option<OutputDigest>,
    /// For a plain tool's target: the latest distinct calls (their `exact:` ids) that
    /// failed that way in a row. Its streak counts distinct calls only, so the same call
    /// retried is left to the call's own identity, and only a tool refusing ever-different
    /// calls alike is stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    calls: Vec<FpId>,
}

/// The most distinct calls a plain tool's failure streak remembers.
const MAX_STREAK_CALLS: usize = 32;

/// The last outcome of one call (its `exact:` id) and how many times in a row it came back
/// the same (progress signal, the unchanged track).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Unchanged {
    fp: FpId,
    out: OutputDigest,
    /// Outcomes in a row equal to the one before them, counted when the call failed or
    /// changed the workspace.
    #[serde(default, skip_serializing_if = "is_zero")]
    same: u32,
    /// Of those, the ones that came back the same although the workspace changed between.
    #[serde(default, skip_serializing_if = "is_zero")]
    after_edits: u32,
    /// A successful mutating call ran since this call last ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    edited: bool,
    /// The last failure, when the latest outcome was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    detail: Option<Failure>,
    /// The gate stopped this call (and it has not run since).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    stopped: bool,
    /// The one rerun after a stop and a change has been used.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    retried: bool,
    /// The files the call's output depends on ([`mutation::Files::reads`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    reads: Vec<FileId>,
    /// A file never edited before in the session was edited since the call last ran: its
    /// next run is let through whatever its count.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    fresh: bool,
    /// The last change that restarted the count or let the next run through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kept: Option<Kept>,
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

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Unchanged {
    /// Whether the call's next run is stopped at `limit`: its result came back the same
    /// `limit` times in a row, no new file was edited since it last ran, and it is not the
    /// one rerun after a stop and a further change.
    fn stops(&self, limit: u32) -> bool {
        self.same >= limit && !self.fresh && !(self.stopped && self.edited && !self.retried)
    }
}

/// One call that ran, for cycle detection: its `exact:` id and, once reported, the digest
/// of its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Recent {
    /// [`call_key`] of the call id.
    call: u64,
    exact: FpId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    out: Option<OutputDigest>,
}

/// One session's breaker state: a plain value, bounded by the window and the constants
/// above whatever the session's length, holding fingerprint ids and never their text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerState {
    window: VecDeque<Vec<FpId>>,
    /// The last tool result (only a denial quotes it: redacted when it is shown or stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_result: Option<RedactedCut>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    exempt: Vec<FpId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    refused: Vec<FpId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fail: Vec<FailStreak>,
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    inflight: VecDeque<Inflight>,
    /// The last outcome digest per identity fingerprint (`exact:`, `cmd:`, `net:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    outputs: Vec<(FpId, OutputDigest)>,
    /// The last calls that ran, for cycle detection.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    recent: VecDeque<Recent>,
    /// The same-output track: the run of calls returning the same output.
    #[serde(
        default,
        skip_serializing_if = "same_output::SameOutputState::is_empty"
    )]
    same_output: same_output::SameOutputState,
    /// The last outcome per call, for the unchanged track (most recent last).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unchanged: Vec<Unchanged>,
    /// The files edited in the session (the unchanged track), least recently edited first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    edited_files: Vec<FileId>,
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

impl BreakerState {
    fn tally(&self, id: FpId) -> u32 {
        self.window.iter().filter(|r| r.contains(&id)).count() as u32
    }

    fn streak(&self, id: FpId) -> Option<&FailStreak> {
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

    fn push_inflight(&mut self, c: Inflight) {
        self.inflight.retain(|x| x.id != c.id);
        if self.inflight.len() >= crate::outcome::MAX_OPEN_CALLS {
            self.inflight.pop_front();
        }
        self.inflight.push_back(c);
    }
}

/// A compact key for a call id in the cycle history (8 bytes of its SHA-256).
fn call_key(call_id: &str) -> u64 {
    FpId::of(call_id).0
}

/// The advisory candidate to speak: the longest streak, then the most actionable kind.
fn pick(v: Vec<(&FpMeta, u32)>) -> Option<(&FpMeta, u32)> {
    v.into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.kind.rank().cmp(&a.0.kind.rank())))
}

fn bounded_insert(set: &mut Vec<FpId>, id: FpId) {
    if !set.contains(&id) {
        if set.len() >= MAX_TRACKED {
            set.remove(0);
        }
        set.push(id);
    }
}

/// A hit with the id of its fingerprint.
struct IdHit {
    id: FpId,
    hit: Hit,
}

/// The breaker engine: a validated configuration and pure decisions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Breaker {
    cfg: BreakerConfig,
}

impl Breaker {
    /// A breaker with a validated configuration.
    pub fn new(cfg: BreakerConfig) -> Self {
        Breaker { cfg }
    }

    /// The configuration.
    pub fn config(&self) -> &BreakerConfig {
        &self.cfg
    }

    /// Whether a call of `tool` is judged at all (engine on, tool tracked).
    pub fn judges(&self, tool: &str) -> bool {
        self.cfg.enabled && self.cfg.tracks(tool)
    }

    /// The shell-HTTP block (docs/decisions.md, "Shell-HTTP block"): the denial text when
    /// `tool` is a shell tool whose command fetches over HTTP and a replacement tool
    /// exists. Judged on every call, first: it never asks and commits nothing, so a
    /// blocked fetch counts toward no window and no failure streak.
    pub fn shell_http(&self, tool: &str, args: &Value) -> Option<String> {
        let (clients, block_local, fetch) = self.cfg.shell_http()?;
        if !self.judges(tool) || !self.cfg.tools.is_shell(tool) {
            return None;
        }
        let command = fingerprint::shell_command(&self.cfg, args);
        let hit = shell_http::shell_fetch(&command, clients, block_local)?;
        let url = hit.url.map(|u| crate::redact::redact(&u).into_owned());
        Some(messages::shell_http_denial(
            tool,
            &hit.what,
            url.as_deref(),
            fetch,
            !block_local,
        ))
    }

    /// Before a call runs. `call_id` names it for [`Breaker::answer`] and [`Breaker::post`].
    pub fn pre(
        &self,
        st: &mut BreakerState,
        call_id: &str,
        tool: &str,
        args: &Value,
    ) -> Result<BreakerVerdict, CanonicalError> {
        let prepared = self.prepare(tool, args, None)?;
        Ok(self.pre_prepared(st, call_id, tool, prepared.as_ref()))
    }

    /// What judging a call needs of the call alone ([`PreparedCall`]): `None` when the
    /// breaker does not judge its tool. `exact` is the canonical text of object arguments
    /// holding no decoy key and its call hash, when the engine has them already (see
    /// `fingerprint::fingerprints_with`).
    pub(crate) fn prepare(
        &self,
        tool: &str,
        args: &Value,
        exact: Option<(fingerprint::ExactText, &[u8; 32])>,
    ) -> Result<Option<PreparedCall>, CanonicalError> {
        if !self.judges(tool) {
            return Ok(None);
        }
        Ok(Some(PreparedCall {
            set: fingerprint::fingerprints_with(&self.cfg, tool, args, exact)?,
            fx: if self.cfg.progress {
                mutation::effects(&self.cfg.tools, tool, args)
            } else {
                mutation::Effects::default()
            },
        }))
    }

    /// Judges a call prepared by [`Breaker::prepare`] (of this breaker, or of one whose
    /// configuration differs only in what judging reads: see
    /// [`BreakerConfig::derivation_view`]). The gates are this breaker's.
    pub(crate) fn pre_prepared(
        &self,
        st: &mut BreakerState,
        call_id: &str,
        tool: &str,
        prepared: Option<&PreparedCall>,
    ) -> BreakerVerdict {
        let Some(PreparedCall { set, fx }) = prepared else {
            return BreakerVerdict::Proceed { advisory: None };
        };
        let shell = set.class == "shell";
        let mutating = fx.mutating;
        let mut fps: Vec<FpMeta> = set
            .fps
            .iter()
            .map(|f| {
                let limit = self.cfg.limit_for(&f.text);
                FpMeta {
                    id: f.id,
                    kind: f.kind,
                    limit,
                    // Shown and stored redacted; the id was computed from the real text. A
                    // measure with no gate is never named in a message (no hit, no
                    // advisory, no failure track): it needs no preview.
                    preview: if limit.is_some() || f.kind == Kind::Tool {
                        RedactedCut::preview(&f.text, self.cfg.preview_chars)
                    } else {
                        RedactedCut::default()
                    },
                }
            })
            .collect();

        let spelled = self.spelled(st, set);
        // A call id seen before (two seams): judge it again, count nothing.
        if let Some(prev) = st.inflight.iter().find(|c| c.id == call_id) {
            let prev_status = prev.status.clone();
            let mut blocking = self.blocking(st, &fps);
            blocking.extend(spelled.and_then(|(id, _)| self.same_output_hit(st, tool, id, &fps)));
            return match prev_status {
                Status::Ran => BreakerVerdict::Proceed { advisory: None },
                Status::Pending { hits, .. } => BreakerVerdict::Ask {
                    reason: same_output::ask_reason(tool, &hits, self.cfg.progress),
                    hits,
                },
                Status::Denied => {
                    let refused = self.all_refused(st, &blocking);
                    self.deny_verdict(st, tool, blocking, refused)
                }
            };
        }

        let mut blocking = self.blocking(st, &fps);
        self.judge_same_output(st, call_id, tool, spelled, &fps, &mut blocking);
        for h in blocking.iter().filter(|h| h.hit.track == Track::Unchanged) {
            if let Some(u) = st.unchanged.iter_mut().find(|u| u.fp == h.id) {
                u.stopped = true;
            }
        }
        if blocking.is_empty() {
            let advisory = self.stage_advisory(st, &fps);
            self.commit(st, fps.iter().map(|f| f.id));
            self.remember_run(st, call_id, &fps);
            st.push_inflight(Inflight {
                id: call_id.to_string(),
                tool: tool.to_string(),
                shell,
                fps,
                status: Status::Ran,
                mutating,
                writes: fx.writes.clone(),
                reads: fx.reads.clone(),
            });
            return BreakerVerdict::Proceed { advisory };
        }
        let any_refused = blocking.iter().any(|h| st.refused.contains(&h.id));
        if self.cfg.on_limit == OnLimit::Ask && !any_refused {
            let ids: Vec<FpId> = blocking.iter().map(|h| h.id).collect();
            let hits: Vec<Hit> = blocking.into_iter().map(|h| h.hit).collect();
            let reason = same_output::ask_reason(tool, &hits, self.cfg.progress);
            st.push_inflight(Inflight {
                id: call_id.to_string(),
                tool: tool.to_string(),
                shell,
                fps,
                status: Status::Pending {
                    ids,
                    hits: hits.clone(),
                },
                mutating,
                writes: fx.writes.clone(),
                reads: fx.reads.clone(),
            });
            return BreakerVerdict::Ask { reason, hits };
        }
        let refused = self.all_refused(st, &blocking);
        self.commit(st, blocking.iter().map(|h| h.id));
        self.remember_stopped_cycle(st, call_id, &blocking);
        fps.clear();
        st.push_inflight(Inflight {
            id: call_id.to_string(),
            tool: tool.to_string(),
            shell,
            fps,
            status: Status::Denied,
            mutating,
            writes: Vec::new(),
            reads: Vec::new(),
        });
        self.deny_verdict(st, tool, blocking, refused)
    }

    /// The signals a call would meet in this session, without judging it or changing
    /// anything (`toolbrake explain --session`).
    pub fn signals(
        &self,
        st: &BreakerState,
        tool: &str,
        args: &Value,
    ) -> Result<BreakerSignals, CanonicalError> {
        let set = fingerprints(&self.cfg, tool, args)?;
        let mut exempt = false;
        let fps = set
            .fps
            .iter()
            .map(|f| {
                exempt |= st.exempt.contains(&f.id);
                let s = st.streak(f.id);
                FingerprintSignal {
                    fingerprint: messages::preview_redacted(&f.text, self.cfg.preview_chars),
                    kind: f.kind.as_str(),
                    count: st.tally(f.id),
                    limit: f.limit,
                    failures: s.map_or(0, |s| s.streak),
                    failures_since_success: s.map_or(0, |s| s.total.max(s.streak)),
                }
            })
            .collect();
        let exact = set.fps.iter().find(|f| f.kind == Kind::Exact).map(|f| f.id);
        let limit = self.cfg.unchanged_limit.filter(|_| self.cfg.progress);
        Ok(BreakerSignals {
            fingerprints: fps,
            unchanged: exact.map_or(
                UnchangedView {
                    same: 0,
                    after_edits: 0,
                    limit,
                    stops: false,
                    kept: None,
                    fresh: false,
                },
                |id| st.unchanged_view(id, limit),
            ),
            cycle: exact.and_then(|id| self.cycle_period(st, id)),
            exempt,
        })
    }

    /// The operator's answer to an ask. `None` when no ask is pending for `call_id`.
    pub fn answer(
        &self,
        st: &mut BreakerState,
        call_id: &str,
        approved: bool,
    ) -> Option<BreakerVerdict> {
        let pos = st
            .inflight
            .iter()
            .position(|c| c.id == call_id && matches!(c.status, Status::Pending { .. }))?;
        let mut call = st.inflight.remove(pos)?;
        let Status::Pending { ids: hit_ids, hits } =
            std::mem::replace(&mut call.status, Status::Ran)
        else {
            return None;
        };
        if approved {
            for id in &hit_ids {
                bounded_insert(&mut st.exempt, *id);
            }
            let blocking = self.blocking(st, &call.fps);
            if blocking.is_empty() {
                let advisory = self.stage_advisory(st, &call.fps);
                self.commit(st, call.fps.iter().map(|f| f.id));
                self.remember_run(st, &call.id, &call.fps);
                st.push_inflight(call);
                return Some(BreakerVerdict::Proceed { advisory });
            }
            // Something else reached a gate meanwhile (parallel calls): deny it.
            let refused = self.all_refused(st, &blocking);
            self.commit(st, blocking.iter().map(|h| h.id));
            let tool = call.tool.clone();
            call.status = Status::Denied;
            call.fps.clear();
            st.push_inflight(call);
            return Some(self.deny_verdict(st, &tool, blocking, refused));
        }
        for id in &hit_ids {
            bounded_insert(&mut st.refused, *id);
        }
        self.commit(st, hit_ids.iter().copied());
        let tool = call.tool.clone();
        call.status = Status::Denied;
        call.fps.clear();
        let blocking: Vec<IdHit> = hit_ids
            .iter()
            .zip(hits)
            .map(|(id, hit)| IdHit { id: *id, hit })
            .collect();
        self.remember_stopped_cycle(st, &call.id, &blocking);
        st.push_inflight(call);
        Some(self.deny_verdict(st, &tool, blocking, true))
    }

    /// After a call ran: classify the outcome, update failure streaks, remember the
    /// result. Calls we denied, declined asks, aborted calls and unknown ids count nothing.
    ///
    /// `digest` is the outcome's [`crate::progress::digest`] (the engine computes it once
    /// for both engines); it is used only with the progress signal on.
    pub fn post(
        &self,
        st: &mut BreakerState,
        call_id: &str,
        outcome: &Outcome,
        digest: Option<OutputDigest>,
    ) -> PostReport {
        let Some(pos) = st.inflight.iter().position(|c| c.id == call_id) else {
            return PostReport::default();
        };
        let call = st.inflight.remove(pos).expect("position is valid");
        match call.status {
            Status::Denied | Status::Pending { .. } => {
                return PostReport {
                    ignored: true,
                    ..PostReport::default()
                }
            }
            Status::Ran => {}
        }
        if outcome.is_aborted() {
            return PostReport::default();
        }
        let failure = classify(outcome, call.shell);
        let progress = self.cfg.progress;
        let digest = digest.filter(|_| progress);
        let mut candidates: Vec<(&FpMeta, u32)> = Vec::new();
        let mut struggles: Vec<(&FpMeta, u32)> = Vec::new();
        // A plain tool's failure target compares failures by their shape, not their text:
        // `order 17 not found` then `order 18 not found` is the same failure again.
        let shape = failure
            .as_ref()
            .filter(|_| progress)
            .map(|fail| failure::shape(outcome, fail));
        let exact = call
            .fps
            .iter()
            .find(|f| f.kind == Kind::Exact)
            .map(|f| f.id);
        for f in call
            .fps
            .iter()
            .filter(|f| f.fails() && !st.exempt.contains(&f.id))
        {
            let tool = f.kind == Kind::Tool;
            let digest = if tool { shape } else { digest };
            match &failure {
                None => st.fail.retain(|s| s.fp != f.id),
                Some(fail) => {
                    let (streak, total) = match st.fail.iter_mut().find(|s| s.fp == f.id) {
                        Some(s) => {
                            // Progress on this fingerprint since its last failure: a
                            // change to the workspace, or a failure that reads differently.
                            let changed = s.out.is_some() && digest.is_some() && s.out != digest;
                            let moved = progress && (s.edited || changed);
                            let before = s.streak;
                            if tool {
                                if moved {
                                    s.calls.clear();
                                    s.streak = 0;
                                }
                                if let Some(x) = exact.filter(|x| !s.calls.contains(x)) {
                                    if s.calls.len() >= MAX_STREAK_CALLS {
                                        s.calls.remove(0);
                                    }
                                    s.calls.push(x);
                                    s.streak = s.streak.saturating_add(1);
                                }
                            } else {
                                s.streak = if moved { 1 } else { s.streak.saturating_add(1) };
                            }
                            if progress {
                                s.total = s.total.max(1).saturating_add(1);
                                if !changed {
                                    s.stale = s.stale.max(1).saturating_add(1);
                                }
                                s.edited = false;
                                if digest.is_some() {
                                    s.out = digest;
                                }
                            }
                            s.detail = fail.clone();
                            // A plain tool's streak that did not grow (the same call
                            // again) advises nothing new.
                            let streak = if tool && s.streak == before {
                                0
                            } else {
                                s.streak
                            };
                            (streak, s.total)
                        }
                        None => {
                            if st.fail.len() >= MAX_TRACKED {
                                st.fail.remove(0);
                            }
                            st.fail.push(FailStreak {
                                fp: f.id,
                                kind: f.kind,
                                streak: 1,
                                detail: fail.clone(),
                                total: progress as u32,
                                stale: progress as u32,
                                edited: false,
                                out: digest,
                                calls: exact.filter(|_| tool).into_iter().collect(),
                            });
                            (1, 1)
                        }
                    };
                    if self.cfg.fail_warn_at == Some(streak) {
                        candidates.push((f, streak));
                    } else if progress
                        && !tool
                        && total > streak
                        && self.cfg.struggle_warn_at == Some(total)
                    {
                        struggles.push((f, total));
                    }
                }
            }
        }
        if progress {
            self.remember_output(st, &call, digest);
            self.remember_same_output(st, &call, failure.is_none(), digest, outcome);
            self.remember_unchanged(st, &call, digest, failure.as_ref());
            if call.mutating && failure.is_none() {
                // The workspace changed: every failing fingerprint may behave differently now.
                for s in st.fail.iter_mut() {
                    s.edited = true;
                }
                for u in st.unchanged.iter_mut() {
                    u.edited = true;
                }
                self.remember_edits(st, &call);
            }
        }
        if let Some(text) = outcome.text.as_deref() {
            st.last_result = Some(RedactedCut::new(text, self.cfg.result_preview_chars));
        }
        let advised = match (pick(candidates), pick(struggles), failure.as_ref()) {
            (Some((f, n)), _, Some(fail)) => Some((f, n, fail, Stage::Failure)),
            (None, Some((f, n)), Some(fail)) => Some((f, n, fail, Stage::Struggle)),
            _ => None,
        };
        let advisory = advised.map(|(f, n, fail, stage)| {
            // The preview is redacted once, for the text and for the advisory's fingerprint.
            let fp = f.preview.to_string();
            let text = match stage {
                Stage::Failure => messages::failure_advisory(&fp, n, fail),
                _ => messages::struggle_advisory(&fp, n, fail),
            };
            Advisory {
                text,
                fingerprint: fp,
                count: n,
                stage,
            }
        });
        PostReport {
            ignored: false,
            failure,
            advisory,
        }
    }

    /// Output memory after a call ran (progress signal): an identity fingerprint whose
    /// outcome differs from its previous occurrence's brought new information, so that
    /// occurrence is taken out of the window count; and the outcome joins the call history
    /// that cycle detection reads.
    fn remember_output(
        &self,
        st: &mut BreakerState,
        call: &Inflight,
        digest: Option<OutputDigest>,
    ) {
        let key = call_key(&call.id);
        if let Some(r) = st.recent.iter_mut().rev().find(|r| r.call == key) {
            r.out = digest;
        }
        let Some(d) = digest else { return };
        for f in call.fps.iter().filter(|f| f.kind.new_output_uncounted()) {
            match st.outputs.iter_mut().find(|(id, _)| *id == f.id) {
                Some((_, prev)) => {
                    if *prev != d {
                        if let Some(rec) = st.window.iter_mut().rev().find(|r| r.contains(&f.id)) {
                            rec.retain(|id| *id != f.id);
                        }
                    }
                    *prev = d;
                }
                None => {
                    if st.outputs.len() >= MAX_TRACKED {
                        st.outputs.remove(0);
                    }
                    st.outputs.push((f.id, d));
                }
            }
        }
    }

    /// The unchanged track after a call ran (progress signal): an outcome equal to the
    /// call's previous one extends its run of unchanged results when the call failed or
    /// changed the workspace, whatever ran in between (an edit that did not touch what a
    /// failing call reports is no progress for it); any other outcome starts it again.
    fn remember_unchanged(
        &self,
        st: &mut BreakerState,
        call: &Inflight,
        digest: Option<OutputDigest>,
        failure: Option<&Failure>,
    ) {
        if self.cfg.unchanged_limit.is_none() {
            return;
        }
        let (Some(d), Some(exact)) = (digest, call.fps.iter().find(|f| f.kind == Kind::Exact))
        else {
            return;
        };
        let counts = failure.is_some() || call.mutating;
        let mut u = match st.unchanged.iter().position(|u| u.fp == exact.id) {
            Some(i) => st.unchanged.remove(i),
            None => {
                if st.unchanged.len() >= MAX_UNCHANGED {
                    st.unchanged.remove(0);
                }
                Unchanged {
                    fp: exact.id,
                    out: d,
                    same: 0,
                    after_edits: 0,
                    edited: false,
                    detail: None,
                    stopped: false,
                    retried: false,
                    reads: Vec::new(),
                    fresh: false,
                    kept: None,
                }
            }
        };
        if u.reads != call.reads {
            u.reads.clone_from(&call.reads);
        }
        if u.out != d {
            u.out = d;
            u.same = 0;
            u.after_edits = 0;
            u.kept = None;
        } else if counts && (u.edited || call.mutating) {
            u.same = u.same.saturating_add(1);
            u.after_edits = u.after_edits.saturating_add(u.edited as u32);
        }
        if u.stopped {
            u.stopped = false;
            u.retried = true;
        }
        u.detail = failure.cloned();
        u.edited = false;
        u.fresh = false;
        st.unchanged.push(u);
    }

    /// A successful call changed the workspace (progress signal, the unchanged track). A
    /// call whose output depends on a file it changed (the script it runs, a test file on
    /// its command line) starts its count again: its next run differs by construction. When
    /// it changed a file never edited before in the session, every call's next run is let
    /// through once: the agent is trying something new.
    fn remember_edits(&self, st: &mut BreakerState, call: &Inflight) {
        if self.cfg.unchanged_limit.is_none() || call.writes.is_empty() {
            return;
        }
        let touches = |u: &Unchanged| {
            u.reads
                .iter()
                .any(|r| call.writes.iter().any(|w| w.same_file(r)))
        };
        let mut new = false;
        for w in &call.writes {
            match st.edited_files.iter().position(|e| e.same_file(w)) {
                Some(i) => {
                    let e = st.edited_files.remove(i);
                    st.edited_files.push(e);
                }
                None => {
                    new = true;
                    if st.edited_files.len() >= MAX_EDITED_FILES {
                        st.edited_files.remove(0);
                    }
                    st.edited_files.push(*w);
                }
            }
        }
        for u in st.unchanged.iter_mut() {
            if touches(u) {
                u.same = 0;
                u.after_edits = 0;
                u.stopped = false;
                u.retried = false;
                u.fresh = false;
                u.kept = Some(Kept::ScriptEdited);
            } else if new {
                u.fresh = true;
                u.kept = Some(Kept::NewFile);
            }
        }
    }

    /// A call is about to run: it joins the history cycle detection reads.
    fn remember_run(&self, st: &mut BreakerState, call_id: &str, fps: &[FpMeta]) {
        if self.cfg.cycle_limit.is_none() || !self.cfg.progress {
            return;
        }
        let Some(exact) = fps.iter().find(|f| f.kind == Kind::Exact) else {
            return;
        };
        self.push_recent(
            st,
            Recent {
                call: call_key(call_id),
                exact: exact.id,
                out: None,
            },
        );
    }

    fn push_recent(&self, st: &mut BreakerState, r: Recent) {
        let keep = 4 * (self.cfg.cycle_limit.unwrap_or(2) as usize - 1);
        st.recent.push_back(r);
        while st.recent.len() > keep.min(MAX_RECENT) {
            st.recent.pop_front();
        }
    }

    /// A call stopped as a cycle stays in the history as the repetition it would have
    /// been (the same outcome as one period before), so the next call of the cycle is
    /// stopped too instead of starting the count again.
    fn remember_stopped_cycle(&self, st: &mut BreakerState, call_id: &str, blocking: &[IdHit]) {
        let Some((exact, period)) = blocking.iter().find_map(|h| {
            Some((h.id, h.hit.period? as usize)).filter(|_| h.hit.track == Track::Cycle)
        }) else {
            return;
        };
        let Some(out) = st
            .recent
            .len()
            .checked_sub(period)
            .and_then(|i| st.recent.get(i))
            .and_then(|r| r.out)
        else {
            return;
        };
        self.push_recent(
            st,
            Recent {
                call: call_key(call_id),
                exact,
                out: Some(out),
            },
        );
    }

    /// The period of the no-progress cycle the next call with `exact` would continue for
    /// the `cycle_limit`-th time: the last `period × (limit − 1)` calls repeat one block of
    /// 2–4 calls, call for call and outcome for outcome, and the next call starts the block
    /// again. Calls with unknown outcomes never form a cycle.
    fn cycle_period(&self, st: &BreakerState, exact: FpId) -> Option<u32> {
        let limit = self.cfg.cycle_limit.filter(|_| self.cfg.progress)? as usize;
        let h: Vec<&Recent> = st.recent.iter().collect();
        'period: for p in 2..=4usize {
            let need = p * (limit - 1);
            if h.len() < need {
                continue;
            }
            let tail = &h[h.len() - need..];
            if tail[0].exact != exact || tail.iter().any(|r| r.out.is_none()) {
                continue;
            }
            // One block of p calls, not all identical (that is a streak).
            if tail[..p].iter().all(|r| r.exact == tail[0].exact) {
                continue;
            }
            for k in p..need {
                if tail[k].exact != tail[k - p].exact || tail[k].out != tail[k - p].out {
                    continue 'period;
                }
            }
            return Some(p as u32);
        }
        None
    }

    /// A real human message: forget the whole session.
    pub fn user_message(&self, st: &mut BreakerState) {
        *st = BreakerState::default();
    }

    /// Hits (failure first, then repeat) of fingerprints not exempted this turn.
    fn blocking(&self, st: &BreakerState, fps: &[FpMeta]) -> Vec<IdHit> {
        let mut out = Vec::new();
        if let Some(fail_limit) = self.cfg.fail_limit {
            for f in fps
                .iter()
                .filter(|f| f.fails() && !st.exempt.contains(&f.id))
            {
                // The call's own failure (its exact or command identity) says it better
                // than the tool's.
                if f.kind == Kind::Tool && !out.is_empty() {
                    continue;
                }
                if let Some(s) = st.streak(f.id).filter(|s| s.streak >= fail_limit) {
                    out.push(IdHit {
                        id: f.id,
                        hit: Hit {
                            fingerprint: f.preview.to_string(),
                            count: s.streak,
                            limit: fail_limit,
                            track: Track::Failure,
                            failure: Some(s.detail.clone()),
                            period: None,
                            after_edits: None,
                        },
                    });
                }
            }
        }
        // A struggle is never denied outright: it can only ask the operator.
        if let (true, OnLimit::Ask, Some(ask_at)) = (
            self.cfg.progress,
            self.cfg.on_limit,
            self.cfg.struggle_ask_at,
        ) {
            for f in fps
                .iter()
                .filter(|f| f.fails() && !st.exempt.contains(&f.id))
            {
                // A plain tool's target is on the failure track only: the struggle is
                // the call's own.
                if out.iter().any(|h| h.id == f.id) || f.kind == Kind::Tool {
                    continue;
                }
                if let Some(s) = st.streak(f.id).filter(|s| s.stale >= ask_at) {
                    out.push(IdHit {
                        id: f.id,
                        hit: Hit {
                            fingerprint: f.preview.to_string(),
                            count: s.stale,
                            limit: ask_at,
                            track: Track::Struggle,
                            failure: Some(s.detail.clone()),
                            period: None,
                            after_edits: None,
                        },
                    });
                }
            }
        }
        if let (true, Some(limit)) = (self.cfg.progress, self.cfg.unchanged_limit) {
            let exact = fps
                .iter()
                .find(|f| f.kind == Kind::Exact && !st.exempt.contains(&f.id));
            if let Some(f) = exact.filter(|f| !out.iter().any(|h| h.id == f.id)) {
                if let Some(u) = st.unchanged.iter().find(|u| u.fp == f.id && u.stops(limit)) {
                    out.push(IdHit {
                        id: f.id,
                        hit: Hit {
                            fingerprint: f.preview.to_string(),
                            count: u.same,
                            limit,
                            track: Track::Unchanged,
                            failure: u.detail.clone(),
                            period: None,
                            after_edits: Some(u.after_edits),
                        },
                    });
                }
            }
        }
        if let Some(exact) = fps
            .iter()
            .find(|f| f.kind == Kind::Exact && !st.exempt.contains(&f.id))
        {
            if let Some(period) = self.cycle_period(st, exact.id) {
                out.push(IdHit {
                    id: exact.id,
                    hit: Hit {
                        fingerprint: exact.preview.to_string(),
                        count: self.cfg.cycle_limit.unwrap_or(0),
                        limit: self.cfg.cycle_limit.unwrap_or(0),
                        track: Track::Cycle,
                        failure: None,
                        period: Some(period),
                        after_edits: None,
                    },
                });
            }
        }
        for f in fps.iter().filter(|f| !st.exempt.contains(&f.id)) {
            let Some(limit) = f.limit else { continue };
            let next = st.tally(f.id) + 1;
            if next >= limit {
                out.push(IdHit {
                    id: f.id,
                    hit: Hit {
                        fingerprint: f.preview.to_string(),
                        count: next,
                        limit,
                        track: Track::Repeat,
                        failure: None,
                        period: None,
                        after_edits: None,
                    },
                });
            }
        }
        out
    }

    fn all_refused(&self, st: &BreakerState, blocking: &[IdHit]) -> bool {
        !blocking.is_empty() && blocking.iter().all(|h| st.refused.contains(&h.id))
    }

    fn deny_verdict(
        &self,
        st: &BreakerState,
        tool: &str,
        blocking: Vec<IdHit>,
        refused: bool,
    ) -> BreakerVerdict {
        let hits: Vec<Hit> = blocking.into_iter().map(|h| h.hit).collect();
        let text = same_output::denial(
            tool,
            &hits,
            refused,
            st.last_result.as_ref().map(|r| r.shown()).as_deref(),
            self.cfg.result_preview_chars,
            self.cfg.progress,
        );
        BreakerVerdict::Deny { text, hits }
    }

    /// The occurrence advisory for an allowed call ("Window and stages"): strongest stage, then
    /// highest count, then the most actionable kind. Exempted fingerprints never speak.
    fn stage_advisory(&self, st: &BreakerState, fps: &[FpMeta]) -> Option<Advisory> {
        let mut best: Option<(u8, u32, &FpMeta)> = None;
        for f in fps
            .iter()
            .filter(|f| f.limit.is_some() && !st.exempt.contains(&f.id))
        {
            let next = st.tally(f.id) + 1;
            let stage = if self.cfg.summarize_at == Some(next) {
                2
            } else if self.cfg.warn_at == Some(next) {
                1
            } else {
                continue;
            };
            let better = match best {
                None => true,
                Some((bs, bn, bf)) => {
                    (stage, next, std::cmp::Reverse(f.kind.rank()))
                        > (bs, bn, std::cmp::Reverse(bf.kind.rank()))
                }
            };
            if better {
                best = Some((stage, next, f));
            }
        }
        best.map(|(stage, n, f)| {
            let fp = f.preview.to_string();
            let (text, stage) = match stage {
                2 => (
                    messages::stage2(&fp, n, self.cfg.progress),
                    Stage::Summarize,
                ),
                _ => (messages::stage1(&fp, n), Stage::Warn),
            };
            Advisory {
                text,
                fingerprint: fp,
                count: n,
                stage,
            }
        })
    }

    /// Pushes one record: the given ids minus exempted ones, de-duplicated (a fingerprint
    /// that hits on both tracks is committed once).
    fn commit(&self, st: &mut BreakerState, ids: impl Iterator<Item = FpId>) {
        let mut record: Vec<FpId> = Vec::new();
        for id in ids {
            if !st.exempt.contains(&id) && !record.contains(&id) {
                record.push(id);
            }
        }
        if record.is_empty() {
            return;
        }
        st.window.push_back(record);
        while st.window.len() > self.cfg.window {
            st.window.pop_front();
        }
        // Only open fingerprints (still in the window) keep an output in memory.
        let BreakerState {
            outputs, window, ..
        } = st;
        outputs.retain(|(id, _)| window.iter().any(|r| r.contains(id)));
    }
}
