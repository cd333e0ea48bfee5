//! Both engines together (docs/decisions.md, "Both engines"): the one decision surface
//! adapters call, through the session service.
//!
//! Order of judgement: the streak brake sees every call first and counts it (refusals
//! extend a streak: "Refusals extend the streak"). A call it refuses is denied by the streak brake and never
//! reaches the breaker; every other call is judged by the breaker. The strongest verdict
//! wins (deny > ask > advise > allow), and the denial names the engine that refused.
//!
//! Asks are fail-closed: an ask still pending when any other event of its session
//! arrives is settled as declined, and the settlement is reported with that event. The
//! same call judged again (its id, while its ask is pending) is asked again instead.
//!
//! `decision` holds what the engines are given and answer, `session` what a session
//! keeps; this file the [`Engine`] that judges.

mod decision;
mod session;

pub use decision::{Call, Decision, EngineError, PostDecision, Settled, Signals, Verdict};
use session::CallStatus;
pub use session::{
    agent_key_prefix, agent_session_key, is_agent_key, LogEntry, SessionState, AGENT_SEPARATOR,
    LOG_PREVIEW_CHARS, MAX_LOG,
};

use crate::breaker::fingerprint::ExactText;
use crate::breaker::{Breaker, BreakerVerdict, Outcome};
use crate::config::Config;
use crate::progress::OutputDigest;
use crate::redact::RedactedCut;
use crate::streak::{StreakBrake, StreakVerdict};
use serde_json::Value;

/// Both engines with their validated configuration. Immutable and cheap to share.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Engine {
    streak: StreakBrake,
    breaker: Breaker,
    budget: crate::budget::BudgetConfig,
}

/// A call as [`Engine::prepare`] read it: everything judging needs of the call alone.
#[derive(Debug)]
pub struct Prepared {
    /// The call hash's first 4 bytes (never 0): the open-call id check.
    digest: u32,
    /// The streak brake's identity of the call.
    streak_digest: [u8; 32],
    /// The shell-HTTP denial, when the call is one.
    shell_http: Option<String>,
    /// What the call would do to toolbrake itself, when it targets it (self-protection).
    self_guard: Option<String>,
    /// The breaker's fingerprints; `None` when it does not judge the tool.
    breaker: Option<crate::breaker::PreparedCall>,
    /// The key of the breaker's output memory for object arguments of a tool it judges
    /// with the progress signal on: the `exact:` id (its hash, the streak's in toolbrake
    /// mode), to tell a call's output the same as last time or new.
    exact: Option<crate::breaker::fingerprint::FpId>,
}

impl Engine {
    /// The engines for a validated configuration.
    pub fn new(config: Config) -> Self {
        Engine {
            streak: StreakBrake::new(config.streak),
            breaker: Breaker::new(config.breaker),
            budget: config.budget,
        }
    }

    /// The streak brake.
    pub fn streak(&self) -> &StreakBrake {
        &self.streak
    }

    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// Settles every pending ask of the session as declined (fail-closed), except `keep`.
    fn settle(&self, st: &mut SessionState, keep: Option<&str>) -> Vec<Settled> {
        let mut out = Vec::new();
        for id in st.breaker.pending_asks() {
            if Some(id.as_str()) == keep {
                continue;
            }
            let _ = self.breaker.answer(&mut st.breaker, &id, false);
            st.record(&id, CallStatus::Denied, 0);
            st.count_stop(Verdict::Deny);
            st.count_ask(2);
            if let Some(e) = st.log.iter_mut().rev().find(|e| e.call == id) {
                e.verdict = Verdict::Deny;
                e.answer = Some("declined".into());
            }
            out.push(Settled {
                id,
                verdict: Verdict::Deny,
            });
        }
        if let Some(id) = st.budget.pending().map(str::to_string) {
            if Some(id.as_str()) != keep {
                st.budget.answer(&id, false);
                st.record(&id, CallStatus::Denied, 0);
                st.count_stop(Verdict::Deny);
                st.count_ask(2);
                if let Some(e) = st.log.iter_mut().rev().find(|e| e.call == id) {
                    e.verdict = Verdict::Deny;
                    e.answer = Some("declined".into());
                }
                out.push(Settled {
                    id,
                    verdict: Verdict::Deny,
                });
            }
        }
        out
    }

    /// What both engines' signals say of a call in a session, without judging it or
    /// changing anything (`toolbrake explain --session`): the streak's identity and run,
    /// and the breaker's counts, failure streaks, unchanged track and cycle.
    pub fn signals(&self, st: &SessionState, call: &Call<'_>) -> Result<Signals, EngineError> {
        let full = crate::canonical::call_digest(call.tool, call.args)?;
        let identity = self.streak_digest(call, &full)?;
        let (in_a_row, same) = st.streak.run_of(&identity);
        let breaker = if self.breaker.judges(call.tool) {
            Some(self.breaker.signals(&st.breaker, call.tool, call.args)?)
        } else {
            None
        };
        Ok(Signals {
            streak_identity: crate::canonical::hash_prefix(&hex::encode(identity)).to_string(),
            decoys_ignored: identity != full,
            in_a_row,
            same_in_a_row: same,
            breaker,
        })
    }

    /// The digest the streak brake counts: the full call digest in seed mode, the digest
    /// without the breaker's decoy keys with the progress signal on.
    fn streak_digest(&self, call: &Call<'_>, full: &[u8; 32]) -> Result<[u8; 32], EngineError> {
        if !self.streak.config().progress() {
            return Ok(*full);
        }
        let ignored = self.breaker.config().ignored_keys(call.tool);
        match call.args {
            Value::Object(map) if map.keys().any(|k| ignored(k)) => Ok(
                crate::canonical::call_digest_without(call.tool, call.args, ignored)?,
            ),
            _ => Ok(*full),
        }
    }

    /// Before a call runs.
    ///
    /// ```
    /// use toolbrake_core::{Call, Config, Engine, SessionState, Verdict};
    /// use serde_json::json;
    /// let engine = Engine::new(Config::default());
    /// let mut st = SessionState::default();
    /// let args = json!({"q": "weather"});
    /// let mut verdicts = Vec::new();
    /// for id in ["1", "2", "3"] {
    ///     let d = engine.pre(&mut st, &Call { session: "s1", id, tool: "search", args: &args })?;
    ///     verdicts.push(d.verdict);
    /// }
    /// assert_eq!(verdicts, [Verdict::Allow, Verdict::Allow, Verdict::Deny]);
    /// # Ok::<(), toolbrake_core::EngineError>(())
    /// ```
    pub fn pre(&self, st: &mut SessionState, call: &Call<'_>) -> Result<Decision, EngineError> {
        let prepared = self.prepare(call)?;
        self.pre_prepared(st, call, &prepared)
    }

    /// What [`Engine::pre`] needs of a call alone, whatever the session: its hashes, the
    /// shell-HTTP check and the breaker's fingerprints ([`Prepared`]). A call prepared once
    /// can be judged by every engine that [`Engine::derives_like`] this one (`toolbrake
    /// tune` judges one history under many gates).
    pub fn prepare(&self, call: &Call<'_>) -> Result<Prepared, EngineError> {
        // Hashed once: the id check keeps 4 bytes, the streak brake the whole hash. Object
        // arguments with no decoy key the breaker leaves out are written canonically once,
        // for this digest and for the breaker's `exact:` fingerprint (the same text).
        let exact = self.shared_exact(call)?;
        let full = match &exact {
            Some(e) => crate::canonical::digest_of_canonical(call.tool, e.canonical()),
            None => crate::canonical::call_digest(call.tool, call.args)?,
        };
        // In toolbrake mode the streak's identity leaves out the decoys the breaker strips
        // (a shell tool's fresh `description` or `timeout` around the same command); seed
        // mode keeps the seed's hash of the full arguments. Arguments written once for the
        // breaker hold no decoy key: the streak counts their full digest (the decoys were
        // looked for once, in `shared_exact`).
        let streak_digest = match exact {
            Some(_) => full,
            None => self.streak_digest(call, &full)?,
        };
        let remembers = self.breaker.config().progress() && self.breaker.judges(call.tool);
        let exact_id = match (&exact, call.args) {
            _ if !remembers => None,
            (Some(_), _) => Some(full),
            (None, Value::Object(_)) if self.streak.config().progress() => Some(streak_digest),
            (None, Value::Object(_)) => Some(crate::canonical::call_digest_without(
                call.tool,
                call.args,
                self.breaker.config().ignored_keys(call.tool),
            )?),
            (None, _) => None,
        };
        Ok(Prepared {
            exact: exact_id.map(|h| crate::breaker::fingerprint::FpId::of_exact(&h)),
            digest: u32::from_be_bytes(full[..4].try_into().expect("4 bytes")).max(1),
            streak_digest,
            shell_http: self.breaker.shell_http(call.tool, call.args),
            self_guard: self.breaker.self_guard(call.tool, call.args),
            breaker: self
                .breaker
                .prepare(call.tool, call.args, exact.map(|e| (e, &full)))?,
        })
    }

    /// Whether every call this engine prepares ([`Engine::prepare`]) is prepared as
    /// `other` would prepare it: the two configurations differ at most in what only
    /// judging reads (gates, window, stages, previews' lengths).
    pub fn derives_like(&self, other: &Engine) -> bool {
        self.streak.config().derivation_view() == other.streak.config().derivation_view()
            && self.breaker.config().derivation_view() == other.breaker.config().derivation_view()
    }

    /// [`Engine::pre`] of a call prepared by [`Engine::prepare`] of this engine or of one it
    /// [`Engine::derives_like`]; the decision is this engine's, with its gates.
    pub fn pre_prepared(
        &self,
        st: &mut SessionState,
        call: &Call<'_>,
        prepared: &Prepared,
    ) -> Result<Decision, EngineError> {
        let digest = prepared.digest;
        // The same id while its call is open: the same call seen through another seam
        // (judged again, counted once), or a different call reusing an id (an error).
        if let Some(open) = st.calls.iter().find(|c| c.id == call.id) {
            if open.digest != 0 && open.digest != digest {
                return Err(EngineError::IdReused(call.id.to_string()));
            }
        }
        // The same call judged again while its ask is pending (another seam, or a host
        // resuming a run after a restart) keeps that ask pending and is asked again; any
        // other pending ask is settled as declined.
        let again = st.breaker.pending_asks().iter().any(|id| id == call.id)
            || st.budget.pending() == Some(call.id);
        let settled = self.settle(st, again.then_some(call.id));
        let mut d = Decision::allow(call.id);
        d.settled = settled;
        if st.status(call.id).is_none() {
            st.budget.count_call();
        }
        // Self-protection, then the shell-HTTP block, come first and touch no engine
        // state: neither is a repeat, and neither counts toward a streak, window or failure.
        let refusal = match (&prepared.self_guard, &prepared.shell_http) {
            (Some(what), _) => Some((
                crate::breaker::SELF_PROTECTION_CODE,
                crate::breaker::messages::self_protection_denial(call.tool, what, call.session),
            )),
            (None, Some(text)) => Some((crate::breaker::SHELL_HTTP_CODE, text.clone())),
            (None, None) => None,
        };
        if let Some((code, text)) = refusal {
            d.verdict = Verdict::Deny;
            d.engine = Some(crate::breaker::ENGINE);
            d.code = Some(code);
            d.message = Some(text);
            if st.status(call.id).is_none() {
                st.count_stop(Verdict::Deny);
            }
            st.record(call.id, CallStatus::Denied, digest);
            st.note(&d, call.tool, || self.exact_preview(call));
            return Ok(d);
        }
        let streak_digest = prepared.streak_digest;
        match self.streak.check_hashed(
            &mut st.streak,
            call.session,
            Some(call.id),
            call.tool,
            &streak_digest,
        ) {
            StreakVerdict::Refuse(err) => {
                d.verdict = Verdict::Deny;
                d.engine = Some(crate::streak::ENGINE);
                d.code = Some(crate::streak::CODE);
                d.message = Some(err.to_string());
                d.streak_refusal = Some(err);
                if st.status(call.id).is_none() {
                    st.count_stop(Verdict::Deny);
                }
                st.record(call.id, CallStatus::Denied, digest);
                let before = st.streak.outcome_of(&streak_digest);
                st.note_stopped(call.id, before, false);
                st.note(&d, call.tool, || self.exact_preview(call));
                return Ok(d);
            }
            StreakVerdict::Allow { .. } => {}
        }
        let seen = st.status(call.id).is_some();
        let v = self.breaker.pre_prepared(
            &mut st.breaker,
            call.id,
            call.tool,
            prepared.breaker.as_ref(),
        );
        let mut status = self.apply(&mut d, v);
        // The run-level line, last: only a call that would run is asked about at it.
        if d.runs() {
            if let Some(text) = st.budget.check(&self.budget, call.id) {
                d.verdict = Verdict::Ask;
                d.engine = Some(crate::budget::ENGINE);
                d.message = Some(text);
                d.advisories.clear();
                status = CallStatus::Asked;
            }
        }
        if !seen {
            st.count_stop(d.verdict);
        }
        st.record(call.id, status, digest);
        if matches!(d.verdict, Verdict::Ask | Verdict::Deny) {
            let before = self.last_output(st, call);
            st.note_stopped(call.id, before, d.verdict == Verdict::Ask);
        } else if self.breaker.config().progress() && self.breaker.judges(call.tool) {
            // What the same call returned last, to tell its own output same or new.
            let before = match prepared.exact {
                Some(id) => st.breaker.last_output(id),
                None => self.last_output(st, call),
            };
            st.note_stopped(call.id, before, false);
        }
        st.note(&d, call.tool, || self.exact_preview(call));
        Ok(d)
    }

    /// The breaker's `exact:` text of a call when the call digest is made of its canonical
    /// part too: object arguments of a tool the breaker judges, with none of the keys it
    /// leaves out.
    fn shared_exact(&self, call: &Call<'_>) -> Result<Option<ExactText>, EngineError> {
        let Value::Object(map) = call.args else {
            return Ok(None);
        };
        if !self.breaker.judges(call.tool) {
            return Ok(None);
        }
        let ignored = self.breaker.config().ignored_keys(call.tool);
        if map.keys().any(|k| ignored(k)) {
            return Ok(None);
        }
        Ok(Some(ExactText::of(call.tool, call.args)?))
    }

    /// What the call's `exact:` identity returned the last time it ran, when the breaker's
    /// output memory holds it (computed only for a call stopped: the rare case).
    fn last_output(&self, st: &SessionState, call: &Call<'_>) -> Option<OutputDigest> {
        let set =
            crate::breaker::fingerprint::fingerprints(self.breaker.config(), call.tool, call.args)
                .ok()?;
        let exact = set
            .fps
            .iter()
            .find(|f| f.kind == crate::breaker::fingerprint::Kind::Exact)?;
        st.breaker.last_output(exact.id)
    }

    /// A call's redacted `exact:` preview, as the timeline shows a call that ran: a denied
    /// call is named by what it would have done, not by its tool alone.
    fn exact_preview(&self, call: &Call<'_>) -> RedactedCut {
        crate::breaker::fingerprint::fingerprints(self.breaker.config(), call.tool, call.args)
            .ok()
            .and_then(|set| {
                set.fps
                    .into_iter()
                    .find(|f| f.kind == crate::breaker::fingerprint::Kind::Exact)
            })
            .map(|f| RedactedCut::preview(&f.text, LOG_PREVIEW_CHARS))
            .unwrap_or_else(|| RedactedCut::redacted(call.tool.to_string()))
    }

    fn apply(&self, d: &mut Decision, v: BreakerVerdict) -> CallStatus {
        match v {
            BreakerVerdict::Proceed { advisory: None } => CallStatus::Ran,
            BreakerVerdict::Proceed { advisory: Some(a) } => {
                d.verdict = Verdict::Advise;
                d.engine = Some(crate::breaker::ENGINE);
                d.advisories.push(a);
                CallStatus::Ran
            }
            BreakerVerdict::Ask { reason, hits } => {
                d.verdict = Verdict::Ask;
                d.engine = Some(crate::breaker::ENGINE);
                d.message = Some(reason);
                d.hits = hits;
                CallStatus::Asked
            }
            BreakerVerdict::Deny { text, hits } => {
                d.verdict = Verdict::Deny;
                d.engine = Some(crate::breaker::ENGINE);
                d.code = Some(crate::breaker::CODE);
                d.message = Some(text);
                d.hits = hits;
                CallStatus::Denied
            }
        }
    }

    /// The operator's answer to an ask: the call's final decision.
    pub fn answer(
        &self,
        st: &mut SessionState,
        call_id: &str,
        approved: bool,
    ) -> Result<Decision, EngineError> {
        let settled = self.settle(st, Some(call_id));
        let mut d = Decision::allow(call_id);
        d.settled = settled;
        let status = match st.budget.answer(call_id, approved) {
            Some(true) => CallStatus::Ran,
            Some(false) => {
                d.verdict = Verdict::Deny;
                d.engine = Some(crate::budget::ENGINE);
                d.code = Some(crate::budget::CODE);
                d.message = Some(crate::budget::STOPPED_TEXT.to_string());
                CallStatus::Denied
            }
            None => {
                let v = self
                    .breaker
                    .answer(&mut st.breaker, call_id, approved)
                    .ok_or_else(|| EngineError::NotPending(call_id.to_string()))?;
                self.apply(&mut d, v)
            }
        };
        st.count_stop(d.verdict);
        st.count_ask(if approved { 0 } else { 1 });
        st.record(call_id, status, 0);
        if let Some(e) = st.log.iter_mut().rev().find(|e| e.call == call_id) {
            e.verdict = d.verdict;
            e.code = d.code.map(str::to_string);
            e.answer = Some(if approved { "approved" } else { "declined" }.into());
        }
        Ok(d)
    }

    /// After a call ran (or was cut short).
    pub fn post(
        &self,
        st: &mut SessionState,
        call_id: &str,
        outcome: &Outcome,
    ) -> Result<PostDecision, EngineError> {
        self.post_digested(st, call_id, outcome, None)
    }

    /// [`Engine::post`], given the outcome's output digest when it was made already
    /// ([`crate::progress::Digested::of`] this outcome): the same decision, the digest not
    /// made again.
    pub fn post_digested(
        &self,
        st: &mut SessionState,
        call_id: &str,
        outcome: &Outcome,
        digested: Option<crate::progress::Digested>,
    ) -> Result<PostDecision, EngineError> {
        // Made at most once, and only when progress is judged (a stopped call that then ran
        // needs it twice).
        let mut digested = digested;
        let mut digest = || {
            digested
                .get_or_insert_with(|| crate::progress::Digested::of(outcome))
                .get()
        };
        let known = st.status(call_id).is_some();
        let settled = self.settle(st, None);
        if !known {
            return Err(EngineError::UnknownCall(call_id.to_string()));
        }
        let mut p = PostDecision {
            id: call_id.to_string(),
            settled,
            ..PostDecision::default()
        };
        let progress = self.streak.config().progress() || self.breaker.config().progress();
        if let Some(before) = st.stopped_call(call_id).filter(|_| progress) {
            p.stopped = crate::progress::judge_stopped(digest(), before);
        }
        if st.status(call_id) == Some(CallStatus::Denied) {
            st.note_outcome(call_id, None, p.stopped);
            p.ignored = Some("denied");
            // The call is closed: both engines forget its id, which may name a new call now.
            let _ = self.breaker.post(&mut st.breaker, call_id, outcome, None);
            self.close(st, call_id);
            return Ok(p);
        }
        let digest = if progress { digest() } else { None };
        let returned = st
            .calls
            .iter()
            .find(|c| c.id == call_id)
            .zip(st.log.iter().rev().find(|e| e.call == call_id))
            .filter(|(_, e)| self.breaker.config().progress() && self.breaker.judges(&e.tool))
            .and_then(|(c, _)| crate::progress::judge_stopped(digest, c.before));
        self.streak.observe(&mut st.streak, call_id, digest);
        let r = self.breaker.post(&mut st.breaker, call_id, outcome, digest);
        let shown = if outcome.aborted == Some(true) {
            "aborted"
        } else if r.failure.is_some() {
            "failed"
        } else {
            "ok"
        };
        st.note_outcome(call_id, Some(shown), returned);
        self.close(st, call_id);
        if r.ignored {
            p.ignored = Some("denied");
            return Ok(p);
        }
        p.failure = r.failure;
        p.advisories.extend(r.advisory);
        Ok(p)
    }

    /// Whether [`Engine::post`] of this outcome can bring advice, in any state: `false`
    /// means its advisories are empty whatever the session holds. Advice after a call comes
    /// only from the failure track, and only for an outcome that reads as a failure (read
    /// here as a shell call's would be, the wider reading). A host that must show advice
    /// with the result can answer first and record after when this is `false`.
    pub fn post_may_advise(outcome: &Outcome) -> bool {
        crate::breaker::classify(outcome, true).is_some()
    }

    /// A call got its result (or was closed unanswered): its id is free again.
    fn close(&self, st: &mut SessionState, call_id: &str) {
        st.calls.retain(|c| c.id != call_id);
        self.streak.forget(&mut st.streak, call_id);
    }

    /// A real human message: both engines start afresh for this session.
    pub fn user_message(&self, st: &mut SessionState) -> Vec<Settled> {
        let settled = self.settle(st, None);
        self.streak.reset(&mut st.streak);
        self.breaker.user_message(&mut st.breaker);
        st.calls.clear();
        st.stopped = 0;
        settled
    }

    /// A batch or turn is over: pending asks are settled as declined and calls that never
    /// got an outcome are closed (they are not counted as failures or successes).
    pub fn close_open_calls(&self, st: &mut SessionState) -> Vec<Settled> {
        let settled = self.settle(st, None);
        st.breaker.forget_open_calls();
        let ids: Vec<String> = st.calls.iter().map(|c| c.id.clone()).collect();
        for id in ids {
            self.close(st, &id);
        }
        settled
    }

    /// The session ends: settles its asks; the caller then forgets the state.
    pub fn end(&self, st: &mut SessionState) -> Vec<Settled> {
        self.settle(st, None)
    }
}
