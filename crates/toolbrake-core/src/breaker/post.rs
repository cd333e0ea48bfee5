//! After a call ran: [`Breaker::post`] classifies the outcome, updates the failure streaks
//! and remembers what it returned (output memory, the same-output run, the unchanged
//! track, the files edited).

use super::failure::{self, classify, Failure, Outcome};
use super::fingerprint::{Kind, PageStep};
use super::gate::Breaker;
use super::messages;
use super::state::*;
use super::verdict::*;
use crate::progress::OutputDigest;
use crate::redact::RedactedCut;

impl Breaker {
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
    pub(super) fn remember_output(
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
        if let Some(page) = call.page {
            if next_page(st, page, d) {
                // The next page of a listing: work, like reading a file in chunks. Its
                // target measures leave the window count too.
                for f in call
                    .fps
                    .iter()
                    .filter(|f| matches!(f.kind, Kind::Host | Kind::Net))
                {
                    if let Some(rec) = st.window.iter_mut().rev().find(|r| r.contains(&f.id)) {
                        rec.retain(|id| *id != f.id);
                    }
                }
            }
        }
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
    pub(super) fn remember_unchanged(
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
    pub(super) fn remember_edits(&self, st: &mut BreakerState, call: &Inflight) {
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

    /// A call's outcome on this track: it extends the run of its tool, starts a new one,
    /// or ends it (a change to the workspace ends every run). `ok`: it did not fail.
    pub(super) fn remember_same_output(
        &self,
        st: &mut BreakerState,
        call: &Inflight,
        ok: bool,
        digest: Option<OutputDigest>,
        outcome: &Outcome,
    ) {
        if self.cfg.same_output_on() {
            st.same_output.outcome(
                &call.id,
                &call.tool,
                call.mutating && ok,
                digest,
                outcome.text.as_deref(),
            );
        }
    }
}

/// Remembers a page of a listing that returned `out`; whether it advanced: a page not
/// fetched before in the series whose body differs from the previous page's (the first
/// page fetched is counted as any call).
fn next_page(st: &mut BreakerState, page: PageStep, out: OutputDigest) -> bool {
    let Some(i) = st.pages.iter().position(|s| s.series == page.series) else {
        if st.pages.len() >= MAX_PAGE_SERIES {
            st.pages.remove(0);
        }
        st.pages.push(PageSeries {
            series: page.series,
            out,
            seen: vec![page.at],
        });
        return false;
    };
    let mut s = st.pages.remove(i);
    let fresh = !s.seen.contains(&page.at);
    let advanced = fresh && s.out != out;
    s.out = out;
    if fresh {
        if s.seen.len() >= MAX_PAGES_SEEN {
            s.seen.remove(0);
        }
        s.seen.push(page.at);
    }
    st.pages.push(s);
    advanced
}
