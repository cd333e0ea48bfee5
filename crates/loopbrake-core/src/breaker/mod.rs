//! The breaker: semantic fingerprints counted over a sliding window per session,
//! escalating warn → summary demand → gate, a failure track, and a gate that asks the
//! operator for a turn-scoped exemption (breaker spec sections 3–13, decisions D1–D7).
//!
//! The four moments of D1 are [`Breaker::pre`], [`Breaker::answer`], [`Breaker::post`]
//! and [`Breaker::user_message`]. Each takes the session's [`BreakerState`] by `&mut`:
//! the engine is pure, the caller (a store) decides where the state lives.

pub mod config;
pub mod failure;
pub mod fingerprint;
pub mod messages;
pub mod shell;
pub mod url;

pub use config::{BreakerConfig, LocalHosts, OnLimit, ToolClasses};
pub use failure::{classify, Failure, Outcome, Reason};
pub use fingerprint::{fingerprints, Fingerprint, FingerprintSet, FpId, Kind};

use crate::canonical::CanonicalError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::VecDeque;

/// The denial code of the breaker.
pub const CODE: &str = "REPEAT_TOOL_BLOCKED";
/// The engine name of the breaker.
pub const ENGINE: &str = "breaker";
/// Calls remembered between `pre` and `post` per session; older ones are forgotten.
pub const MAX_INFLIGHT: usize = 64;
/// Bound on exemptions, refusals and failure streaks per session.
pub const MAX_TRACKED: usize = 256;

/// Which track a hit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Track {
    /// Occurrences in the window.
    Repeat,
    /// Consecutive failures.
    Failure,
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
    /// The last failure, for failure hits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FpMeta {
    id: FpId,
    kind: Kind,
    limit: Option<u32>,
    /// Preview text, kept until the call is settled (it words the verdicts and the
    /// failure advisory). Denied calls keep no fingerprints at all.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    preview: String,
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
    fps: Vec<FpMeta>,
    status: Status,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FailStreak {
    fp: FpId,
    kind: Kind,
    streak: u32,
    detail: Failure,
}

/// One session's breaker state: a plain value, bounded by the window and the constants
/// above whatever the session's length, holding fingerprint ids and never their text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerState {
    window: VecDeque<Vec<FpId>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_result: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    exempt: Vec<FpId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    refused: Vec<FpId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fail: Vec<FailStreak>,
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    inflight: VecDeque<Inflight>,
}

/// A read-only summary of a session, for operators (`loopbrake sessions`).
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
        if self.inflight.len() >= MAX_INFLIGHT {
            self.inflight.pop_front();
        }
        self.inflight.push_back(c);
    }
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

    /// Before a call runs. `call_id` names it for [`Breaker::answer`] and [`Breaker::post`].
    pub fn pre(
        &self,
        st: &mut BreakerState,
        call_id: &str,
        tool: &str,
        args: &Value,
    ) -> Result<BreakerVerdict, CanonicalError> {
        if !self.judges(tool) {
            return Ok(BreakerVerdict::Proceed { advisory: None });
        }
        let set = fingerprints(&self.cfg, tool, args)?;
        let shell = set.class == "shell";
        let mut fps: Vec<FpMeta> = set
            .fps
            .iter()
            .map(|f| FpMeta {
                id: f.id,
                kind: f.kind,
                limit: f.limit,
                preview: messages::preview(&f.text, self.cfg.preview_chars),
            })
            .collect();

        // A call id seen before (two seams): judge it again, count nothing.
        if let Some(prev) = st.inflight.iter().find(|c| c.id == call_id) {
            let prev_status = prev.status.clone();
            let blocking = self.blocking(st, &fps);
            return Ok(match prev_status {
                Status::Ran => BreakerVerdict::Proceed { advisory: None },
                Status::Pending { hits, .. } => BreakerVerdict::Ask {
                    reason: messages::ask_reason(&hits),
                    hits,
                },
                Status::Denied => {
                    let refused = self.all_refused(st, &blocking);
                    self.deny_verdict(st, tool, blocking, refused)
                }
            });
        }

        let blocking = self.blocking(st, &fps);
        if blocking.is_empty() {
            let advisory = self.stage_advisory(st, &fps);
            self.commit(st, fps.iter().map(|f| f.id));
            st.push_inflight(Inflight {
                id: call_id.to_string(),
                tool: tool.to_string(),
                shell,
                fps,
                status: Status::Ran,
            });
            return Ok(BreakerVerdict::Proceed { advisory });
        }
        let any_refused = blocking.iter().any(|h| st.refused.contains(&h.id));
        if self.cfg.on_limit == OnLimit::Ask && !any_refused {
            let ids: Vec<FpId> = blocking.iter().map(|h| h.id).collect();
            let hits: Vec<Hit> = blocking.into_iter().map(|h| h.hit).collect();
            let reason = messages::ask_reason(&hits);
            st.push_inflight(Inflight {
                id: call_id.to_string(),
                tool: tool.to_string(),
                shell,
                fps,
                status: Status::Pending {
                    ids,
                    hits: hits.clone(),
                },
            });
            return Ok(BreakerVerdict::Ask { reason, hits });
        }
        let refused = self.all_refused(st, &blocking);
        self.commit(st, blocking.iter().map(|h| h.id));
        fps.clear();
        st.push_inflight(Inflight {
            id: call_id.to_string(),
            tool: tool.to_string(),
            shell,
            fps,
            status: Status::Denied,
        });
        Ok(self.deny_verdict(st, tool, blocking, refused))
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
        st.push_inflight(call);
        let blocking: Vec<IdHit> = hit_ids
            .iter()
            .zip(hits)
            .map(|(id, hit)| IdHit { id: *id, hit })
            .collect();
        Some(self.deny_verdict(st, &tool, blocking, true))
    }

    /// After a call ran: classify the outcome, update failure streaks, remember the
    /// result. Calls we denied, declined asks, aborted calls and unknown ids count nothing.
    pub fn post(&self, st: &mut BreakerState, call_id: &str, outcome: &Outcome) -> PostReport {
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
        let mut candidates: Vec<(&FpMeta, u32)> = Vec::new();
        for f in call
            .fps
            .iter()
            .filter(|f| f.limit.is_some() && !st.exempt.contains(&f.id))
        {
            match &failure {
                None => st.fail.retain(|s| s.fp != f.id),
                Some(fail) => {
                    let streak = match st.fail.iter_mut().find(|s| s.fp == f.id) {
                        Some(s) => {
                            s.streak = s.streak.saturating_add(1);
                            s.detail = fail.clone();
                            s.streak
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
                            });
                            1
                        }
                    };
                    if self.cfg.fail_warn_at == Some(streak) {
                        candidates.push((f, streak));
                    }
                }
            }
        }
        if let Some(text) = outcome.text.as_deref() {
            st.last_result = Some(messages::cut(text, self.cfg.result_preview_chars));
        }
        let advisory = candidates
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.kind.rank().cmp(&a.0.kind.rank())))
            .and_then(|(f, n)| {
                Some(Advisory {
                    text: messages::failure_advisory(&f.preview, n, failure.as_ref()?),
                    fingerprint: f.preview.clone(),
                    count: n,
                    stage: Stage::Failure,
                })
            });
        PostReport {
            ignored: false,
            failure,
            advisory,
        }
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
                .filter(|f| f.limit.is_some() && !st.exempt.contains(&f.id))
            {
                if let Some(s) = st.streak(f.id).filter(|s| s.streak >= fail_limit) {
                    out.push(IdHit {
                        id: f.id,
                        hit: Hit {
                            fingerprint: f.preview.clone(),
                            count: s.streak,
                            limit: fail_limit,
                            track: Track::Failure,
                            failure: Some(s.detail.clone()),
                        },
                    });
                }
            }
        }
        for f in fps.iter().filter(|f| !st.exempt.contains(&f.id)) {
            let Some(limit) = f.limit else { continue };
            let next = st.tally(f.id) + 1;
            if next >= limit {
                out.push(IdHit {
                    id: f.id,
                    hit: Hit {
                        fingerprint: f.preview.clone(),
                        count: next,
                        limit,
                        track: Track::Repeat,
                        failure: None,
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
        let text = messages::denial(
            tool,
            &hits,
            refused,
            st.last_result.as_deref(),
            self.cfg.result_preview_chars,
        );
        BreakerVerdict::Deny { text, hits }
    }

    /// The occurrence advisory for an allowed call (section 9): strongest stage, then
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
            let (text, stage) = match stage {
                2 => (messages::stage2(&f.preview, n), Stage::Summarize),
                _ => (messages::stage1(&f.preview, n), Stage::Warn),
            };
            Advisory {
                text,
                fingerprint: f.preview.clone(),
                count: n,
                stage,
            }
        })
    }

    /// Pushes one record: the given ids minus exempted ones, de-duplicated (D4 (5)).
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
    }
}
