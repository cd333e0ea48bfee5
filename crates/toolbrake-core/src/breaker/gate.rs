//! The gate: the [`Breaker`] and its judging before a call runs (the window count, the
//! stages, the failure and same-output hits, the exemption ask), and the cycle history
//! that judging reads.

use super::config::{BreakerConfig, OnLimit};
use super::fingerprint::{self, fingerprints, FingerprintSet, FpId, Kind};
use super::same_output::{self, identity};
use super::state::*;
use super::verdict::*;
use super::{messages, mutation, self_guard, shell_http};
use crate::canonical::CanonicalError;
use crate::redact::RedactedCut;
use serde_json::Value;

/// The breaker engine: a validated configuration and pure decisions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Breaker {
    pub(super) cfg: BreakerConfig,
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

    /// Self-protection (docs/decisions.md, "Self-protection"): what the call would do to
    /// toolbrake itself, when it is a shell tool's command or a file tool's write that
    /// targets toolbrake's own command, state, configuration or Redis keys. Judged on
    /// every call whatever the breaker tracks (an engine turned off, a tool excluded), and
    /// `None` when `self_protection = "off"`.
    pub fn self_guard(&self, tool: &str, args: &Value) -> Option<String> {
        if self.cfg.self_protection == super::config::SelfProtection::Off || tool.is_empty() {
            return None;
        }
        let protected = &self.cfg.protected;
        if self.cfg.tools.is_shell(tool) {
            let command = fingerprint::shell_command(&self.cfg, args);
            return self_guard::shell_target(&command, protected).map(|t| t.what);
        }
        if protected.files.is_empty() {
            return None;
        }
        let files = mutation::files(&self.cfg.tools, tool, args);
        files
            .writes
            .iter()
            .find_map(|w| self_guard::file_target(w, protected))
            .map(|t| t.what)
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
                page: set.page,
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
                page: set.page,
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
            page: None,
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

    /// A call is about to run: it joins the history cycle detection reads.
    pub(super) fn remember_run(&self, st: &mut BreakerState, call_id: &str, fps: &[FpMeta]) {
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

    pub(super) fn push_recent(&self, st: &mut BreakerState, r: Recent) {
        let keep = 4 * (self.cfg.cycle_limit.unwrap_or(2) as usize - 1);
        st.recent.push_back(r);
        while st.recent.len() > keep.min(MAX_RECENT) {
            st.recent.pop_front();
        }
    }

    /// A call stopped as a cycle stays in the history as the repetition it would have
    /// been (the same outcome as one period before), so the next call of the cycle is
    /// stopped too instead of starting the count again.
    pub(super) fn remember_stopped_cycle(
        &self,
        st: &mut BreakerState,
        call_id: &str,
        blocking: &[IdHit],
    ) {
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
    pub(super) fn cycle_period(&self, st: &BreakerState, exact: FpId) -> Option<u32> {
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
    pub(super) fn blocking(&self, st: &BreakerState, fps: &[FpMeta]) -> Vec<IdHit> {
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

    pub(super) fn all_refused(&self, st: &BreakerState, blocking: &[IdHit]) -> bool {
        !blocking.is_empty() && blocking.iter().all(|h| st.refused.contains(&h.id))
    }

    pub(super) fn deny_verdict(
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
    pub(super) fn stage_advisory(&self, st: &BreakerState, fps: &[FpMeta]) -> Option<Advisory> {
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
    pub(super) fn commit(&self, st: &mut BreakerState, ids: impl Iterator<Item = FpId>) {
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

    /// A call's spelling identity and the directory its `cd` moves to ([`identity`]),
    /// when the track is on.
    pub(super) fn spelled(
        &self,
        st: &BreakerState,
        set: &FingerprintSet,
    ) -> Option<(FpId, Option<FpId>)> {
        if !self.cfg.same_output_on() {
            return None;
        }
        let exact = set.fps.iter().find(|f| f.kind == Kind::Exact)?.id;
        Some(identity(&st.same_output, exact, set.spelling.as_ref()))
    }

    /// Judges a call about to run on this track: its hit joins `blocking` (and the stop is
    /// noted for what the call would have returned), or, when nothing blocks the call, its
    /// spelling is kept for its outcome. Called once per new call.
    pub(super) fn judge_same_output(
        &self,
        st: &mut BreakerState,
        call_id: &str,
        tool: &str,
        spelled: Option<(FpId, Option<FpId>)>,
        fps: &[FpMeta],
        blocking: &mut Vec<IdHit>,
    ) {
        let Some((id, cd)) = spelled else { return };
        if let Some(h) = self.same_output_hit(st, tool, id, fps) {
            if let Some(exact) = fps.iter().find(|f| f.kind == Kind::Exact) {
                st.same_output.stop(tool, exact.id);
            }
            blocking.push(h);
        } else if blocking.is_empty() {
            st.same_output.ran(call_id, id, cd);
        }
    }

    /// The same-output hit of a call about to run, when it is stopped: its spelling
    /// already ran `same_output_limit` times in the current run of its tool, and no
    /// operator exempted it this turn. Named by its `cmd:` fingerprint (the command as
    /// the breaker reads it), else its `exact:` one.
    pub(super) fn same_output_hit(
        &self,
        st: &BreakerState,
        tool: &str,
        spelled: FpId,
        fps: &[FpMeta],
    ) -> Option<IdHit> {
        let limit = self.cfg.same_output_limit.filter(|_| self.cfg.progress)?;
        if st.exempt.contains(&spelled) {
            return None;
        }
        let n = st.same_output.count(tool, spelled);
        if n < limit {
            return None;
        }
        let named = |k: Kind| {
            fps.iter()
                .find(|f| f.kind == k && !f.preview.is_empty())
                .map(|f| f.preview.to_string())
        };
        let fingerprint = named(Kind::Cmd)
            .or_else(|| named(Kind::Exact))
            .unwrap_or_else(|| tool.to_string());
        Some(IdHit {
            id: spelled,
            hit: Hit {
                fingerprint,
                count: n,
                limit,
                track: Track::SameOutput,
                failure: None,
                period: None,
                after_edits: None,
            },
        })
    }
}
