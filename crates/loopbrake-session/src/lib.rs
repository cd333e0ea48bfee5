//! The one session service every adapter uses: the hooks, the protocol processor, the MCP
//! proxy and the library `Brake` translate their host's shapes into these calls and render
//! the answers; none of them touches a [`Store`] or runs an engine on its own.
//!
//! [`Sessions`] owns what is the same for every host:
//! - the session key of a host's session and of its sub-agents ([`key`]);
//! - `pre` / `answer` / `post` / user message / closing open calls / end, each one atomic
//!   read-modify-write of the session's state in the store;
//! - a user message or an end reaching the session's sub-agents too;
//! - the failure policy: what a call loopbrake cannot judge gets ([`Sessions::unjudged`]),
//!   and the text that says why (one place, every adapter).
#![deny(missing_docs)]

use loopbrake_core::{
    Call, Decision, Engine, EngineError, Outcome, PostDecision, SessionState, Settled,
};
use loopbrake_store::{update, with_sub_agents, Store, StoreError};

pub use loopbrake_core::engine::{agent_key_prefix, is_agent_key, AGENT_SEPARATOR};

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

/// The session key of a host's session, or of one of its sub-agents (each sub-agent counts
/// in its own session).
///
/// ```
/// assert_eq!(loopbrake_session::key("s1", None), "s1");
/// assert_eq!(loopbrake_session::key("s1", Some("a7")), "s1#agent:a7");
/// assert_eq!(loopbrake_session::key("s1", Some("")), "s1");
/// ```
pub fn key(session: &str, agent: Option<&str>) -> String {
    match agent.filter(|a| !a.is_empty()) {
        Some(a) => loopbrake_core::engine::agent_session_key(session, a),
        None => session.to_string(),
    }
}

/// What to do with a call loopbrake could not judge (its store failed, its arguments could
/// not be read), by the configured failure policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unjudged {
    /// `true` when the call must not run (`[store] fail_closed = true`).
    pub refuse: bool,
    /// `loopbrake could not judge this call: <problem>`: for logs and `degraded` notes.
    pub note: String,
    /// The text the model reads when the call is refused.
    pub refusal: String,
}

/// The session service over a store: the engines, where their state lives, and the failure
/// policy. A cheap view: adapters keep their engine and store and make one when needed.
pub struct Sessions<'a, S: Store + ?Sized = dyn Store> {
    engine: &'a Engine,
    store: &'a S,
    fail_closed: bool,
}

impl<'a, S: Store + ?Sized> Sessions<'a, S> {
    /// The service for `engine` over `store`, failing open.
    pub fn new(engine: &'a Engine, store: &'a S) -> Self {
        Sessions {
            engine,
            store,
            fail_closed: false,
        }
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

    /// Whether calls loopbrake cannot judge are refused.
    pub fn fail_closed(&self) -> bool {
        self.fail_closed
    }

    fn apply<R>(&self, key: &str, f: impl FnMut(&mut SessionState) -> R) -> Result<R, StoreError> {
        update(self.store, key, f)
    }

    /// Judges a call before it runs.
    pub fn pre(&self, key: &str, call: &Call<'_>) -> Result<Decision, SessionError> {
        Ok(self.apply(key, |st| self.engine.pre(st, call))??)
    }

    /// The operator's answer to an ask.
    pub fn answer(
        &self,
        key: &str,
        call_id: &str,
        approved: bool,
    ) -> Result<Decision, SessionError> {
        Ok(self.apply(key, |st| self.engine.answer(st, call_id, approved))??)
    }

    /// Records what a call did.
    pub fn post(
        &self,
        key: &str,
        call_id: &str,
        outcome: &Outcome,
    ) -> Result<PostDecision, SessionError> {
        Ok(self.apply(key, |st| self.engine.post(st, call_id, outcome))??)
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
        Ok(self.apply(key, |st| {
            let id = find_id(st);
            if st.breaker.pending_asks().iter().any(|x| x == &id) {
                let _ = self.engine.answer(st, &id, true);
            }
            self.engine.post(st, &id, outcome)
        })??)
    }

    /// A real human message: the session and its sub-agents start afresh.
    pub fn user_message(&self, session: &str) -> Result<Vec<Settled>, SessionError> {
        let mut settled = Vec::new();
        for k in with_sub_agents(self.store, session)? {
            settled.extend(self.apply(&k, |st| self.engine.user_message(st))?);
        }
        Ok(settled)
    }

    /// A batch or turn is over: calls that never got an outcome are closed and asks nobody
    /// answered are refusals. With `sub_agents`, the session's sub-agents too. Sessions
    /// the store does not hold are left alone.
    pub fn close_open_calls(
        &self,
        key: &str,
        sub_agents: bool,
    ) -> Result<Vec<Settled>, SessionError> {
        let keys = if sub_agents {
            with_sub_agents(self.store, key)?
        } else {
            vec![key.to_string()]
        };
        let mut settled = Vec::new();
        for k in keys {
            if self.store.get(&k)?.is_some() {
                settled.extend(self.apply(&k, |st| self.engine.close_open_calls(st))?);
            }
        }
        Ok(settled)
    }

    /// The session ends: its asks are settled and it (and its sub-agents) are forgotten.
    pub fn end(&self, session: &str) -> Result<Vec<Settled>, SessionError> {
        let mut settled = Vec::new();
        for k in with_sub_agents(self.store, session)? {
            if let Some(mut st) = self.store.get(&k)? {
                settled.extend(self.engine.end(&mut st));
            }
            self.store.remove(&k)?;
        }
        Ok(settled)
    }

    /// What a call gets when loopbrake cannot judge it, by this service's failure policy.
    pub fn unjudged(&self, problem: &str) -> Unjudged {
        unjudged(problem, self.fail_closed)
    }
}

/// What a call gets when loopbrake cannot judge it (its store failed, its configuration or
/// payload could not be read): refused when `fail_closed`, else run with a warning.
///
/// ```
/// let u = loopbrake_session::unjudged("redis 127.0.0.1:6379: down", true);
/// assert!(u.refuse && u.refusal.contains("fail_closed = true"));
/// assert_eq!(u.note, "loopbrake could not judge this call: redis 127.0.0.1:6379: down");
/// ```
pub fn unjudged(problem: &str, fail_closed: bool) -> Unjudged {
    Unjudged {
        refuse: fail_closed,
        note: format!("loopbrake could not judge this call: {problem}"),
        refusal: format!(
            "loopbrake could not judge this call ({problem}), and its configuration refuses calls it \
             cannot judge ([store] fail_closed = true). Tell the user; do not retry the same call."
        ),
    }
}
