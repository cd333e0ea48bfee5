//! The one session service every adapter uses: the hooks, the protocol processor, the MCP
//! proxy and the library `Brake` translate their host's shapes into these calls and render
//! the answers; none of them touches a [`Store`] or runs an engine on its own.
//!
//! [`Sessions`] owns what is the same for every host:
//! - the session key of a host's session and of its sub-agents ([`key`]);
//! - `pre` / `answer` / `post` / user message / closing open calls / end, each one atomic
//!   read-modify-write of the session's state in the store;
//! - a user message or an end reaching the session's sub-agents too;
//! - the failure policy: what a call toolbrake cannot judge gets ([`Sessions::unjudged`]),
//!   and the text that says why (one place, every adapter);
//! - telling whoever watches (metrics, traces, logs: an [`Observer`]) what each event
//!   became, after the store kept it. Observers are told, never consulted: nothing they do
//!   changes a decision;
//! - the operators' counters ([`metrics`]): each event's decision tallied in the same
//!   atomic update of the store that keeps the session's state.
#![deny(missing_docs)]

use std::time::{Duration, Instant};
use toolbrake_core::engine::Prepared;
use toolbrake_core::progress::Digested;
use toolbrake_core::{
    Call, Decision, Engine, EngineError, Feedback, Outcome, PostDecision, SessionState, Settled,
};
use toolbrake_store::{update_counted, with_sub_agents, Store, StoreError, Tally};

pub use toolbrake_core::engine::{agent_key_prefix, is_agent_key, AGENT_SEPARATOR};

/// Why the service could not apply an event.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The store failed: the failure policy applies ([`Sessions::unjudged`]).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engines refused the event (an unknown call id, a reused id, arguments too deep).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// The counters the session service keeps in the store (`Store::counters`), by name and
/// label. Labels carry verdicts, engines, tracks and (redacted) tool names: never a session
/// key, an argument or an output.
pub mod metrics {
    /// Calls judged before they ran: labels `verdict` (`allow`, `advise`, `ask`, `deny`),
    /// `engine` (`streak`, `breaker`, `none`), `track` ([`track`]) and `tool`.
    pub const CALLS_JUDGED: &str = "toolbrake_calls_judged_total";
    /// Asks by what became of them: label `answer` (`approved`, `declined`, `unanswered`:
    /// settled as declined because another event of the session came first).
    pub const ASKS: &str = "toolbrake_asks_total";
    /// Calls toolbrake could not judge, by the failure policy applied: label `policy`
    /// (`fail_open`, `fail_closed`). Only what the store could still count.
    pub const UNJUDGED: &str = "toolbrake_unjudged_calls_total";
    /// Calls toolbrake stopped whose output is known all the same (a recorded run's
    /// outcome of a denied call, an asked call the operator approved), by what it was:
    /// label `judged` (`waste`: the same output as the call's last; `new_information`).
    pub const STOPPED: &str = "toolbrake_stopped_calls_total";

    /// The `track` label of a decision: `none` for a call allowed outright; the breaker
    /// track that gated it (`repeat`, `failure`, `cycle`, `struggle`, `unchanged`) or
    /// whose advisory fired; `streak` for the streak brake; `budget` for the run-level
    /// line; `shell_http` for a shell fetch sent to the fetch tool; `self_protection` for
    /// a call that would lift or edit toolbrake itself.
    pub fn track(d: &toolbrake_core::Decision) -> &'static str {
        use toolbrake_core::breaker::{SELF_PROTECTION_CODE, SHELL_HTTP_CODE};
        use toolbrake_core::Verdict;
        match d.verdict {
            Verdict::Allow => "none",
            Verdict::Advise => d
                .advisories
                .first()
                .map_or("none", |a| a.stage.track().as_str()),
            Verdict::Ask | Verdict::Deny => {
                if d.code == Some(SHELL_HTTP_CODE) {
                    "shell_http"
                } else if d.code == Some(SELF_PROTECTION_CODE) {
                    "self_protection"
                } else if d.engine == Some(toolbrake_core::streak::ENGINE) {
                    "streak"
                } else if d.engine == Some(toolbrake_core::budget::ENGINE) {
                    "budget"
                } else {
                    d.hits.first().map_or("none", |h| h.track.as_str())
                }
            }
        }
    }
}

/// Tallies a judged call: its verdict, engine, track and (redacted) tool, and the asks its
/// event settled.
fn tally_judged(t: &mut Tally, tool: &str, d: &Decision) {
    let tool = toolbrake_core::redact::redact_cut(tool, 100);
    t.add_for_tool(
        metrics::CALLS_JUDGED,
        &[
            ("verdict", d.verdict.as_str()),
            ("engine", d.engine.unwrap_or("none")),
            ("track", metrics::track(d)),
        ],
        &tool,
        1,
    );
    tally_settled(t, &d.settled);
}

/// Tallies asks settled unanswered.
fn tally_settled(t: &mut Tally, settled: &[Settled]) {
    t.add(
        metrics::ASKS,
        &[("answer", "unanswered")],
        settled.len() as u64,
    );
}

/// Tallies what a call's recorded outcome settled, and whether a call toolbrake stopped
/// was waste or new information.
fn tally_post(t: &mut Tally, p: &PostDecision) {
    tally_settled(t, &p.settled);
    if let Some(s) = p.stopped {
        t.add(metrics::STOPPED, &[("judged", s.as_str())], 1);
    }
}

/// Tallies an operator's answer.
fn tally_answer(t: &mut Tally, approved: bool) {
    let answer = if approved { "approved" } else { "declined" };
    t.add(metrics::ASKS, &[("answer", answer)], 1);
}

/// The session key of a host's session, or of one of its sub-agents (each sub-agent counts
/// in its own session).
///
/// ```
/// assert_eq!(toolbrake_session::key("s1", None), "s1");
/// assert_eq!(toolbrake_session::key("s1", Some("a7")), "s1#agent:a7");
/// assert_eq!(toolbrake_session::key("s1", Some("")), "s1");
/// ```
pub fn key(session: &str, agent: Option<&str>) -> String {
    match agent.filter(|a| !a.is_empty()) {
        Some(a) => toolbrake_core::engine::agent_session_key(session, a),
        None => session.to_string(),
    }
}

/// What to do with a call toolbrake could not judge (its store failed, its arguments could
/// not be read), by the configured failure policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unjudged {
    /// `true` when the call must not run (`[store] fail_closed = true`).
    pub refuse: bool,
    /// `toolbrake could not judge this call: <problem>`: for logs and `degraded` notes.
    pub note: String,
    /// The text the model reads when the call is refused.
    pub refusal: String,
}

/// Watches what the session service does (metrics, traces, logs). Told after each event
/// with what it became; never consulted. Implementations must be cheap and must not block:
/// they run on the adapter's path of every tool call.
pub trait Observer: Send + Sync {
    /// One event of the service and what it became.
    fn observe(&self, event: &Observed<'_>);
}

/// One event the session service applied (or could not), for an [`Observer`].
#[derive(Debug)]
pub struct Observed<'a> {
    /// The session key (empty for `Unjudged`: the policy is applied before a session is
    /// known). An identifier for correlation, never a metric label.
    pub session: &'a str,
    /// What happened.
    pub kind: ObservedKind<'a>,
    /// Time spent in the service on this event: the engines and the store's update.
    pub elapsed: Duration,
    /// The W3C `traceparent` the host sent with the event, when it sent one.
    pub traceparent: Option<&'a str>,
}

/// What an [`Observed`] event was.
#[derive(Debug)]
pub enum ObservedKind<'a> {
    /// A call was judged before it ran.
    Judged {
        /// The call (its arguments are raw: never show them unredacted).
        call: &'a Call<'a>,
        /// The decision.
        decision: &'a Decision,
    },
    /// The operator answered an ask.
    Answered {
        /// The asked call.
        call_id: &'a str,
        /// Approved or declined.
        approved: bool,
        /// What the answer became.
        decision: &'a Decision,
    },
    /// What a call did was recorded.
    Recorded {
        /// The call.
        call_id: &'a str,
        /// Its outcome (its output is raw: never show it unredacted).
        outcome: &'a Outcome,
        /// What the engines made of it.
        post: &'a PostDecision,
    },
    /// Asks were settled as declined by a user message, the end of a turn or of the session.
    Settled {
        /// The settled asks.
        settled: &'a [Settled],
    },
    /// The service could not apply an event (the store failed, the engines refused it).
    Failed {
        /// `pre`, `answer`, `post`, `user_message`, `close_open_calls` or `end`.
        operation: &'static str,
        /// Why.
        error: &'a SessionError,
    },
    /// The failure policy was applied to a call toolbrake could not judge.
    Unjudged {
        /// What the call got.
        unjudged: &'a Unjudged,
    },
}

/// The session service over a store: the engines, where their state lives, and the failure
/// policy. A cheap view: adapters keep their engine and store and make one when needed.
pub struct Sessions<'a, S: Store + ?Sized = dyn Store> {
    engine: &'a Engine,
    store: &'a S,
    fail_closed: bool,
    count: bool,
    observer: Option<&'a dyn Observer>,
    traceparent: Option<&'a str>,
}

impl<'a, S: Store + ?Sized> Sessions<'a, S> {
    /// The service for `engine` over `store`, failing open.
    pub fn new(engine: &'a Engine, store: &'a S) -> Self {
        Sessions {
            engine,
            store,
            fail_closed: false,
            count: true,
            observer: None,
            traceparent: None,
        }
    }

    /// The same service telling `observer` what each event became.
    pub fn with_observer(mut self, observer: Option<&'a dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// The same service with the W3C `traceparent` the host sent with this event, handed to
    /// the observer.
    pub fn with_traceparent(mut self, traceparent: Option<&'a str>) -> Self {
        self.traceparent = traceparent;
        self
    }

    /// One engine step on the session's state in the store, with what it tallies.
    fn engine_step<R>(
        &self,
        key: &str,
        f: impl FnMut(&mut SessionState, &mut Tally) -> Result<R, EngineError>,
    ) -> Result<R, SessionError> {
        Ok(update_counted(self.store, key, f)??)
    }

    /// `step` on each of `keys` in turn, the asks each settled gathered; the first failure
    /// stops.
    fn each_key(
        &self,
        keys: Result<Vec<String>, StoreError>,
        mut step: impl FnMut(&str) -> Result<Vec<Settled>, StoreError>,
    ) -> Result<Vec<Settled>, SessionError> {
        let mut settled = Vec::new();
        for k in keys? {
            settled.extend(step(&k)?);
        }
        Ok(settled)
    }

    /// The time now, when an observer watches (else no clock is read).
    fn started(&self) -> Option<Instant> {
        self.observer.map(|_| Instant::now())
    }

    /// Tells the observer what an event that began at `started` became: `seen` of its
    /// result, or `Failed`.
    fn tell<'x, R>(
        &self,
        session: &str,
        operation: &'static str,
        started: Option<Instant>,
        result: &'x Result<R, SessionError>,
        seen: impl FnOnce(&'x R) -> Option<ObservedKind<'x>>,
    ) {
        let (Some(observer), Some(started)) = (self.observer, started) else {
            return;
        };
        let elapsed = started.elapsed();
        let kind = match result {
            Ok(r) => seen(r),
            Err(error) => Some(ObservedKind::Failed { operation, error }),
        };
        if let Some(kind) = kind {
            observer.observe(&Observed {
                session,
                kind,
                elapsed,
                traceparent: self.traceparent,
            });
        }
    }

    /// The same service keeping the operators' counters in the store (the default) or not:
    /// a replay or a tuning sweep over a store it throws away counts nothing.
    pub fn with_counters(mut self, count: bool) -> Self {
        self.count = count;
        self
    }

    /// The same service with the failure policy set (`true`: refuse what cannot be judged).
    pub fn with_fail_closed(mut self, fail_closed: bool) -> Self {
        self.fail_closed = fail_closed;
        self
    }

    /// The engines.
    pub fn engine(&self) -> &'a Engine {
        self.engine
    }

    /// The store.
    pub fn store(&self) -> &'a S {
        self.store
    }

    /// Whether calls toolbrake cannot judge are refused.
    pub fn fail_closed(&self) -> bool {
        self.fail_closed
    }

    /// An engine step that settles asks, with the settled asks tallied.
    fn settle_step(
        &self,
        key: &str,
        mut f: impl FnMut(&mut SessionState) -> Vec<Settled>,
    ) -> Result<Vec<Settled>, StoreError> {
        update_counted(self.store, key, |st, t| {
            let settled = f(st);
            if self.count {
                tally_settled(t, &settled);
            }
            settled
        })
    }

    /// Judges a call before it runs.
    pub fn pre(&self, key: &str, call: &Call<'_>) -> Result<Decision, SessionError> {
        self.pre_prepared(key, call, None)
    }

    /// [`Sessions::pre`] of a call the engine prepared already
    /// ([`toolbrake_core::Engine::prepare`], by this engine or one it
    /// [`derives_like`](toolbrake_core::Engine::derives_like)); `None`: prepared here.
    pub fn pre_prepared(
        &self,
        key: &str,
        call: &Call<'_>,
        prepared: Option<&Prepared>,
    ) -> Result<Decision, SessionError> {
        let started = self.started();
        let result = self.engine_step(key, |st, t| {
            let d = match prepared {
                Some(p) => self.engine.pre_prepared(st, call, p)?,
                None => self.engine.pre(st, call)?,
            };
            if self.count {
                tally_judged(t, call.tool, &d);
            }
            Ok(d)
        });
        self.tell(key, "pre", started, &result, |decision| {
            Some(ObservedKind::Judged { call, decision })
        });
        result
    }

    /// The operator's answer to an ask.
    pub fn answer(
        &self,
        key: &str,
        call_id: &str,
        approved: bool,
    ) -> Result<Decision, SessionError> {
        let started = self.started();
        let result = self.engine_step(key, |st, t| {
            let d = self.engine.answer(st, call_id, approved)?;
            if self.count {
                tally_answer(t, approved);
                tally_settled(t, &d.settled);
            }
            Ok(d)
        });
        self.tell(key, "answer", started, &result, |decision| {
            Some(ObservedKind::Answered {
                call_id,
                approved,
                decision,
            })
        });
        result
    }

    /// Records what a call did.
    pub fn post(
        &self,
        key: &str,
        call_id: &str,
        outcome: &Outcome,
    ) -> Result<PostDecision, SessionError> {
        self.post_digested(key, call_id, outcome, None)
    }

    /// [`Sessions::post`], given the outcome's output digest when it was made already (see
    /// [`Engine::post_digested`]).
    pub fn post_digested(
        &self,
        key: &str,
        call_id: &str,
        outcome: &Outcome,
        digested: Option<Digested>,
    ) -> Result<PostDecision, SessionError> {
        let started = self.started();
        let result = self.engine_step(key, |st, t| {
            let p = self.engine.post_digested(st, call_id, outcome, digested)?;
            if self.count {
                tally_post(t, &p);
            }
            Ok(p)
        });
        self.tell(key, "post", started, &result, |post| {
            Some(ObservedKind::Recorded {
                call_id,
                outcome,
                post,
            })
        });
        result
    }

    /// Records what a call that *ran* did, finding its id in the session's state (hosts
    /// that send no call id derive it from what is open). An ask still pending for it was
    /// approved: the host ran the call.
    pub fn post_ran(
        &self,
        key: &str,
        find_id: impl Fn(&SessionState) -> String,
        outcome: &Outcome,
    ) -> Result<PostDecision, SessionError> {
        let started = self.started();
        let result = self.engine_step(key, |st, t| {
            let id = find_id(st);
            if st.breaker.pending_asks().iter().any(|x| x == &id) {
                if let Ok(d) = self.engine.answer(st, &id, true) {
                    if self.count {
                        tally_answer(t, true);
                        tally_settled(t, &d.settled);
                    }
                }
            }
            let p = self.engine.post(st, &id, outcome)?;
            if self.count {
                tally_post(t, &p);
            }
            Ok(p)
        });
        self.tell(key, "post", started, &result, |post| {
            Some(ObservedKind::Recorded {
                call_id: &post.id,
                outcome,
                post,
            })
        });
        result
    }

    /// A real human message: the session and its sub-agents start afresh.
    pub fn user_message(&self, session: &str) -> Result<Vec<Settled>, SessionError> {
        let started = self.started();
        let result = self.each_key(with_sub_agents(self.store, session), |k| {
            self.settle_step(k, |st| self.engine.user_message(st))
        });
        self.tell(session, "user_message", started, &result, settled_kind);
        result
    }

    /// A batch or turn is over: calls that never got an outcome are closed and asks nobody
    /// answered are refusals. With `sub_agents`, the session's sub-agents too. Sessions
    /// the store does not hold are left alone.
    pub fn close_open_calls(
        &self,
        key: &str,
        sub_agents: bool,
    ) -> Result<Vec<Settled>, SessionError> {
        let started = self.started();
        let keys = if sub_agents {
            with_sub_agents(self.store, key)
        } else {
            Ok(vec![key.to_string()])
        };
        let result = self.each_key(keys, |k| match self.store.get(k)? {
            Some(_) => Ok(self.settle_step(k, |st| self.engine.close_open_calls(st))?),
            None => Ok(Vec::new()),
        });
        self.tell(key, "close_open_calls", started, &result, settled_kind);
        result
    }

    /// The session ends: its asks are settled and it (and its sub-agents) are forgotten.
    pub fn end(&self, session: &str) -> Result<Vec<Settled>, SessionError> {
        let started = self.started();
        let result = self.each_key(with_sub_agents(self.store, session), |k| {
            let settled = match self.store.take(k)? {
                Some(mut st) => self.engine.end(&mut st),
                None => Vec::new(),
            };
            if self.count && !settled.is_empty() {
                // A removal carries no tally: the asks it settles are counted on their own.
                let mut t = Tally::new();
                tally_settled(&mut t, &settled);
                self.store.add_counts(&t)?;
            }
            Ok(settled)
        });
        self.tell(session, "end", started, &result, settled_kind);
        result
    }

    /// What a call gets when toolbrake cannot judge it, by this service's failure policy.
    /// The observer is told the policy was applied (to `session`, the call's session key).
    pub fn unjudged(&self, problem: &str) -> Unjudged {
        let unjudged = unjudged(problem, self.fail_closed);
        if let Some(observer) = self.observer {
            observer.observe(&Observed {
                session: "",
                kind: ObservedKind::Unjudged {
                    unjudged: &unjudged,
                },
                elapsed: Duration::ZERO,
                traceparent: self.traceparent,
            });
        }
        unjudged
    }
}

impl<S: Store + ?Sized> Sessions<'_, S> {
    /// Counts a failure-policy application in the store, for a call toolbrake could not
    /// judge although its store works (a payload that could not be read). A store that is
    /// down cannot count its own failures: do not call this when the store failed.
    pub fn count_unjudged(&self, unjudged: &Unjudged) -> Result<(), StoreError> {
        let mut t = Tally::new();
        let policy = if unjudged.refuse {
            "fail_closed"
        } else {
            "fail_open"
        };
        t.add(metrics::UNJUDGED, &[("policy", policy)], 1);
        self.store.add_counts(&t)
    }
}

/// Keeps a person's verdict on a stored run ([`Feedback`]: a stop was mistaken, the run was
/// stuck) with the session's state, replacing any earlier one, through the store's one
/// atomic update (memory, SQLite and Redis alike). `Ok(false)` when the store holds no
/// such session (never stored, reset, or ended: an ended session is forgotten with its
/// state). Calibration reads it back from [`SessionState::feedback`].
///
/// ```
/// use toolbrake_core::Feedback;
/// use toolbrake_store::{MemoryStore, Store};
/// let store = MemoryStore::new();
/// assert!(!toolbrake_session::record_feedback(&store, "s1", Feedback::Mistaken)?);
/// store.update("s1", &mut |_, _| {})?;
/// assert!(toolbrake_session::record_feedback(&store, "s1", Feedback::Mistaken)?);
/// assert_eq!(toolbrake_session::feedback(&store, "s1")?, Some(Feedback::Mistaken));
/// # Ok::<(), toolbrake_store::StoreError>(())
/// ```
pub fn record_feedback<S: Store + ?Sized>(
    store: &S,
    session: &str,
    feedback: Feedback,
) -> Result<bool, StoreError> {
    if store.get(session)?.is_none() {
        return Ok(false);
    }
    toolbrake_store::update(store, session, |st| st.feedback = Some(feedback))?;
    Ok(true)
}

/// The timeline code of a command run on a session from inside an agent's environment.
pub const FROM_AGENT_CODE: &str = "FROM_AGENT_ENVIRONMENT";

/// `toolbrake sessions reset` run from inside an agent's environment (`env` names the
/// variable that told): the session and its sub-agents start afresh, but each keeps its
/// timeline with an entry saying what was done and from where, so a person sees it on the
/// dashboard. Whether any session was there.
pub fn reset_noted<S: Store + ?Sized>(store: &S, key: &str, env: &str) -> Result<bool, StoreError> {
    let mut found = false;
    for k in with_sub_agents(store, key)? {
        if store.get(&k)?.is_none() {
            continue;
        }
        found = true;
        toolbrake_store::update(store, &k, |st| {
            st.reset_keeping_timeline();
            st.note_operator(
                "toolbrake sessions reset",
                FROM_AGENT_CODE,
                &format!("the session was reset by a command run inside an agent's environment ({env} set)"),
            );
        })?;
    }
    Ok(found)
}

/// [`record_feedback`] from inside an agent's environment: the timeline says so too.
pub fn record_feedback_noted<S: Store + ?Sized>(
    store: &S,
    session: &str,
    feedback: Feedback,
    env: &str,
) -> Result<bool, StoreError> {
    if store.get(session)?.is_none() {
        return Ok(false);
    }
    toolbrake_store::update(store, session, |st| {
        st.feedback = Some(feedback);
        st.note_operator(
            "toolbrake feedback",
            FROM_AGENT_CODE,
            &format!(
                "the run was marked {} by a command run inside an agent's environment ({env} set)",
                feedback.as_str()
            ),
        );
    })?;
    Ok(true)
}

/// The feedback kept with a stored session ([`record_feedback`]); `None` when there is none
/// or the store holds no such session.
pub fn feedback<S: Store + ?Sized>(
    store: &S,
    session: &str,
) -> Result<Option<Feedback>, StoreError> {
    Ok(store.get(session)?.and_then(|st| st.feedback))
}

/// Settled asks are worth telling only when there are some.
fn settled_kind(settled: &Vec<Settled>) -> Option<ObservedKind<'_>> {
    (!settled.is_empty()).then(|| ObservedKind::Settled { settled })
}

/// What a call gets when toolbrake cannot judge it (its store failed, its configuration or
/// payload could not be read): refused when `fail_closed`, else run with a warning.
///
/// ```
/// let u = toolbrake_session::unjudged("redis 127.0.0.1:6379: down", true);
/// assert!(u.refuse && u.refusal.contains("fail_closed = true"));
/// assert_eq!(u.note, "toolbrake could not judge this call: redis 127.0.0.1:6379: down");
/// ```
pub fn unjudged(problem: &str, fail_closed: bool) -> Unjudged {
    Unjudged {
        refuse: fail_closed,
        note: format!("toolbrake could not judge this call: {problem}"),
        refusal: format!(
            "toolbrake could not judge this call ({problem}), and its configuration refuses calls it \
             cannot judge ([store] fail_closed = true). Tell the user; do not retry the same call."
        ),
    }
}
