//! The library API for hosts that own their call sites: a [`Brake`] holding both engines
//! and a session store (in memory by default; SQLite or Redis to share state between
//! processes), [`Brake::guard`] / [`Brake::guard_async`] that run a tool body only when
//! allowed, [`Brake::wrap`] for one execute function, and [`decorate`] for a whole [`Tool`]
//! definition. Every step goes through the session service (`toolbrake-session`), like
//! every other adapter.

use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use toolbrake_core::config::{no_env, Config, ConfigError};
use toolbrake_core::{
    Call, Decision, Engine, EngineError, Hit, Outcome, PostDecision, StreakRefusal, Verdict,
};
use toolbrake_session::{SessionError, Sessions};
use toolbrake_store::{MemoryStore, Store};

/// Answers an operator question (`ask` verdicts): `true` approves. The reason is the text
/// to show the operator.
pub type Approver = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// Both engines and a session store (`S`, in memory by default), safe to share between
/// threads.
pub struct Brake<S: Store = MemoryStore> {
    engine: Engine,
    store: S,
    fail_closed: bool,
    next_id: AtomicU64,
    approver: Option<Approver>,
}

impl<S: Store> fmt::Debug for Brake<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Brake")
            .field("engine", &self.engine)
            .field("store", &self.store.describe())
            .field("approver", &self.approver.is_some())
            .finish()
    }
}

impl Default for Brake {
    fn default() -> Self {
        Brake::new(Config::default())
    }
}

/// A call the brake refused: the text the model must read, and the details for logs.
/// It never carries the call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `streak` or `breaker`.
    pub engine: &'static str,
    /// `LOOP_BRAKE` or `REPEAT_TOOL_BLOCKED`.
    pub code: &'static str,
    /// The text for the model.
    pub message: String,
    /// Fingerprints that reached a gate (breaker).
    pub hits: Vec<Hit>,
    /// The streak brake's fields (code, tool, count, limit, hash prefix, session, engine).
    pub streak: Option<StreakRefusal>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// Why a guarded call did not return its value.
#[derive(Debug, thiserror::Error)]
pub enum GuardError<E> {
    /// Refused before it ran: the body never executed.
    #[error("{0}")]
    Refused(Box<Refusal>),
    /// The tool ran and failed.
    #[error("{0}")]
    Tool(E),
    /// The arguments could not be judged (nested too deeply).
    #[error("{0}")]
    Invalid(EngineError),
}

impl<E> GuardError<E> {
    /// The refusal, if the call was refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            GuardError::Refused(r) => Some(r.as_ref()),
            _ => None,
        }
    }
}

/// A tool's value and the advisories to show the model alongside it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Guarded<T> {
    /// What the tool returned.
    pub value: T,
    /// Advisories (repeat stages, failure track) for the model.
    pub advisories: Vec<String>,
}

/// What a guarded body returned, as toolbrake records it: the text the progress signal
/// digests. A call whose result moves on (`"progress 10%"`, `"progress 20%"`, …) is not a
/// loop; one returning the same result again is.
///
/// Every [`Serialize`] type has it: a string is its own text (`String`, `&str`,
/// `Cow<str>`), any other value its canonical JSON (`serde_json::Value`, numbers, your
/// `#[derive(Serialize)]` structs, with object keys sorted), `()` and `None` no text. For
/// a type that is not `Serialize`, implement it, or pass the outcome explicitly with
/// [`Brake::guard_with`] / [`Brake::guard_async_with`].
///
/// ```
/// use toolbrake::ToolOutput;
/// assert_eq!("progress 10%".outcome().text.as_deref(), Some("progress 10%"));
/// assert_eq!(serde_json::json!({"b": 1, "a": 2}).outcome().text.as_deref(), Some(r#"{"a":2,"b":1}"#));
/// assert_eq!(().outcome().text, None);
/// ```
pub trait ToolOutput {
    /// The outcome of a call that returned `self` (a success).
    fn outcome(&self) -> Outcome;
}

impl<T: Serialize + ?Sized> ToolOutput for T {
    fn outcome(&self) -> Outcome {
        let text = match serde_json::to_value(self) {
            Ok(Value::String(s)) => Some(s),
            Ok(Value::Null) | Err(_) => None,
            // Too deep to canonicalise: its plain JSON text still tells results apart.
            Ok(v) => toolbrake_core::canonical::canonical_json(&v)
                .ok()
                .or_else(|| serde_json::to_string(&v).ok()),
        };
        Outcome {
            text,
            ..Outcome::default()
        }
    }
}

impl Brake {
    /// A brake with a validated configuration, keeping sessions in memory.
    pub fn new(config: Config) -> Self {
        Brake::with_store(config, MemoryStore::new())
    }

    /// A brake from `toolbrake.toml` text (no environment fallback).
    ///
    /// ```
    /// let brake = toolbrake::Brake::from_toml("[streak]\nmax_repeats = 2\n").unwrap();
    /// assert!(toolbrake::Brake::from_toml("[streak]\nmax_repeats = 0\n").is_err());
    /// ```
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        Ok(Brake::new(crate::settings::parse(text, &no_env)?.engine))
    }
}

impl<S: Store> Brake<S> {
    /// A brake keeping its sessions in `store`: a `SqliteStore` or `RedisStore` shares
    /// them with every other process (hooks, proxies, other brakes) on that store.
    ///
    /// ```
    /// use toolbrake::{Brake, Config};
    /// use toolbrake_store::MemoryStore;
    /// let brake = Brake::with_store(Config::default(), MemoryStore::new());
    /// assert_eq!(brake.sessions(), 0);
    /// ```
    pub fn with_store(config: Config, store: S) -> Self {
        Brake {
            engine: Engine::new(config),
            store,
            fail_closed: false,
            next_id: AtomicU64::new(1),
            approver: None,
        }
    }

    /// When the store fails, refuse the call (`true`) instead of running it unjudged
    /// (`false`, the default).
    pub fn with_fail_closed(mut self, fail_closed: bool) -> Self {
        self.fail_closed = fail_closed;
        self
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    fn sessions_service(&self) -> Sessions<'_, S> {
        Sessions::new(&self.engine, &self.store).with_fail_closed(self.fail_closed)
    }

    /// Sets who answers `ask` verdicts. Without one, asks fail closed (denied).
    pub fn with_approver(
        mut self,
        approver: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.approver = Some(Box::new(approver));
        self
    }

    /// The engines.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A fresh call id, unique within this brake.
    pub fn next_call_id(&self) -> String {
        format!("lb-{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Judges a call before it runs; the caller must not run it unless
    /// [`Decision::runs`] (or until an `ask` is answered with [`Brake::answer`]).
    pub fn check(&self, call: &Call<'_>) -> Result<Decision, SessionError> {
        self.sessions_service().pre(call.session, call)
    }

    /// The operator's answer to an `ask`.
    pub fn answer(
        &self,
        session: &str,
        call_id: &str,
        approved: bool,
    ) -> Result<Decision, SessionError> {
        self.sessions_service().answer(session, call_id, approved)
    }

    /// Records what a call did.
    pub fn record(
        &self,
        session: &str,
        call_id: &str,
        outcome: &Outcome,
    ) -> Result<PostDecision, SessionError> {
        self.sessions_service().post(session, call_id, outcome)
    }

    /// A real human message arrived: the session (and its sub-agents) start afresh.
    pub fn user_message(&self, session: &str) -> Result<(), SessionError> {
        self.sessions_service().user_message(session).map(|_| ())
    }

    /// Forgets a session (and its sub-agents).
    pub fn end(&self, session: &str) -> Result<(), SessionError> {
        self.sessions_service().end(session).map(|_| ())
    }

    /// Forgets every session of the store (what disposing or reloading the original did).
    pub fn reset_all(&self) -> Result<(), SessionError> {
        for info in self.store.list()? {
            self.store.remove(&info.key)?;
        }
        Ok(())
    }

    /// Number of sessions held (0 when the store cannot be read).
    pub fn sessions(&self) -> usize {
        self.store.list().map_or(0, |l| l.len())
    }

    /// Judges a call and resolves an `ask` through the approver (fail-closed without one).
    fn admit(
        &self,
        session: &str,
        id: &str,
        tool: &str,
        args: &Value,
    ) -> Result<Vec<String>, Box<Refusal>> {
        let call = Call {
            session,
            id,
            tool,
            args,
        };
        let mut d = match self.check(&call) {
            Ok(d) => d,
            Err(SessionError::Engine(e)) => {
                return Err(Box::new(Refusal {
                    engine: "toolbrake",
                    code: "INVALID_ARGUMENTS",
                    message: e.to_string(),
                    hits: Vec::new(),
                    streak: None,
                }))
            }
            // The store failed: the failure policy decides.
            Err(SessionError::Store(e)) => {
                let policy = self.sessions_service().unjudged(&e.to_string());
                if !policy.refuse {
                    return Ok(Vec::new());
                }
                return Err(Box::new(Refusal {
                    engine: "toolbrake",
                    code: "STORE_UNAVAILABLE",
                    message: policy.refusal,
                    hits: Vec::new(),
                    streak: None,
                }));
            }
        };
        if d.verdict == Verdict::Ask {
            let approved = self
                .approver
                .as_ref()
                .is_some_and(|a| a(d.message.as_deref().unwrap_or_default()));
            d = self.answer(session, id, approved).map_err(|e| {
                Box::new(Refusal {
                    engine: "breaker",
                    code: "REPEAT_TOOL_BLOCKED",
                    message: e.to_string(),
                    hits: Vec::new(),
                    streak: None,
                })
            })?;
        }
        if d.runs() {
            return Ok(d.advisories.into_iter().map(|a| a.text).collect());
        }
        Err(Box::new(Refusal {
            engine: d.engine.unwrap_or("breaker"),
            code: d.code.unwrap_or("REPEAT_TOOL_BLOCKED"),
            message: d.message.unwrap_or_default(),
            hits: d.hits,
            streak: d.streak_refusal,
        }))
    }

    fn finish<T, E: fmt::Display>(
        &self,
        session: &str,
        id: &str,
        mut advisories: Vec<String>,
        result: Result<T, E>,
        outcome: impl FnOnce(&T) -> Outcome,
    ) -> Result<Guarded<T>, GuardError<E>> {
        let outcome = match &result {
            Ok(value) => outcome(value),
            Err(e) => Outcome {
                is_error: Some(true),
                text: Some(e.to_string()),
                ..Outcome::default()
            },
        };
        if let Ok(p) = self.record(session, id, &outcome) {
            advisories.extend(p.advisories.into_iter().map(|a| a.text));
        }
        match result {
            Ok(value) => Ok(Guarded { value, advisories }),
            Err(e) => Err(GuardError::Tool(e)),
        }
    }

    /// Runs `body` only if the call is allowed, then records its outcome: an `Err` is a
    /// failure, an `Ok` value is digested through [`ToolOutput`], so a body whose result
    /// moves on is not stopped as a loop. A refused call returns [`GuardError::Refused`]
    /// and `body` never runs.
    ///
    /// ```
    /// use toolbrake::{Brake, GuardError};
    /// use serde_json::json;
    /// let brake = Brake::default();
    /// let args = json!({"q": "weather"});
    /// let mut runs = 0;
    /// for _ in 0..3 {
    ///     let r = brake.guard("s1", "search", &args, || { runs += 1; Ok::<_, std::io::Error>("sunny") });
    ///     if let Err(GuardError::Refused(refusal)) = r {
    ///         assert_eq!(refusal.code, "LOOP_BRAKE");
    ///     }
    /// }
    /// assert_eq!(runs, 2, "the third identical call, after the same result twice, never ran");
    ///
    /// // A poll whose output advances keeps running.
    /// let job = json!({"job": 7});
    /// for pct in [10, 20, 30, 40, 50] {
    ///     let out = brake.guard("s1", "job_status", &job, || Ok::<_, String>(format!("progress {pct}%")));
    ///     assert!(out.is_ok());
    /// }
    /// ```
    pub fn guard<T: ToolOutput, E: fmt::Display>(
        &self,
        session: &str,
        tool: &str,
        args: &Value,
        body: impl FnOnce() -> Result<T, E>,
    ) -> Result<Guarded<T>, GuardError<E>> {
        self.guard_with(session, tool, args, body, T::outcome)
    }

    /// [`Brake::guard`] with the outcome of a success given explicitly: `outcome` turns
    /// the body's value into what toolbrake records (its text, and an HTTP status or exit
    /// code when the value carries a failure). For values that are not [`ToolOutput`].
    ///
    /// ```
    /// use toolbrake::{Brake, Outcome};
    /// struct Response { status: u16, body: String }
    /// let brake = Brake::default();
    /// let args = serde_json::json!({"url": "https://example.com/"});
    /// let out = brake.guard_with(
    ///     "s1", "fetch", &args,
    ///     || Ok::<_, String>(Response { status: 200, body: "hello".into() }),
    ///     |r| Outcome { status_code: Some(r.status.into()), ..Outcome::success(r.body.clone()) },
    /// );
    /// assert_eq!(out.unwrap().value.body, "hello");
    /// ```
    pub fn guard_with<T, E: fmt::Display>(
        &self,
        session: &str,
        tool: &str,
        args: &Value,
        body: impl FnOnce() -> Result<T, E>,
        outcome: impl FnOnce(&T) -> Outcome,
    ) -> Result<Guarded<T>, GuardError<E>> {
        let id = self.next_call_id();
        let advisories = self
            .admit(session, &id, tool, args)
            .map_err(GuardError::Refused)?;
        self.finish(session, &id, advisories, body(), outcome)
    }

    /// [`Brake::guard`] for async bodies: `body` is only called (and its future only
    /// created and awaited) when the call is allowed. Runtime-agnostic.
    ///
    /// ```
    /// # futures_executor::block_on(async {
    /// let brake = toolbrake::Brake::default();
    /// let args = serde_json::json!({"url": "https://example.com/"});
    /// let out = brake.guard_async("s1", "web_fetch", &args, || async { Ok::<_, String>(200) }).await;
    /// assert_eq!(out.unwrap().value, 200);
    /// # });
    /// ```
    pub async fn guard_async<T, E, F, Fut>(
        &self,
        session: &str,
        tool: &str,
        args: &Value,
        body: F,
    ) -> Result<Guarded<T>, GuardError<E>>
    where
        T: ToolOutput,
        E: fmt::Display,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.guard_async_with(session, tool, args, body, T::outcome)
            .await
    }

    /// [`Brake::guard_async`] with the outcome of a success given explicitly (see
    /// [`Brake::guard_with`]).
    pub async fn guard_async_with<T, E, F, Fut>(
        &self,
        session: &str,
        tool: &str,
        args: &Value,
        body: F,
        outcome: impl FnOnce(&T) -> Outcome,
    ) -> Result<Guarded<T>, GuardError<E>>
    where
        E: fmt::Display,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let id = self.next_call_id();
        let advisories = self
            .admit(session, &id, tool, args)
            .map_err(GuardError::Refused)?;
        let result = body().await;
        self.finish(session, &id, advisories, result, outcome)
    }

    /// Wraps one execute function (the original's `wrapExecute`): the returned closure
    /// guards every call it makes for `tool` in `session`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let brake = Arc::new(toolbrake::Brake::default());
    /// let search = toolbrake::Brake::wrap(brake, "search", "s1", |args: &serde_json::Value| {
    ///     Ok::<_, String>(format!("results for {}", args["q"]))
    /// });
    /// let args = serde_json::json!({"q": "weather"});
    /// assert!(search(&args).is_ok());
    /// assert!(search(&args).is_ok());
    /// assert!(search(&args).is_err());
    /// ```
    pub fn wrap<T: ToolOutput, E: fmt::Display>(
        brake: Arc<Brake<S>>,
        tool: impl Into<String>,
        session: impl Into<String>,
        execute: impl Fn(&Value) -> Result<T, E>,
    ) -> impl Fn(&Value) -> Result<Guarded<T>, GuardError<E>> {
        let tool = tool.into();
        let session = session.into();
        move |args: &Value| brake.guard(&session, &tool, args, || execute(args))
    }
}

/// A tool definition: a name and an execute function.
pub trait Tool {
    /// What it returns.
    type Output;
    /// How it fails.
    type Error: fmt::Display;
    /// The tool's name, as the model calls it.
    fn name(&self) -> &str;
    /// Runs the tool.
    fn execute(&self, session: &str, args: &Value) -> Result<Self::Output, Self::Error>;
}

/// A guarded copy of a tool (see [`decorate`]).
#[derive(Debug, Clone)]
pub struct Braked<T, S: Store = MemoryStore> {
    tool: T,
    brake: Arc<Brake<S>>,
}

impl<T, S: Store> Braked<T, S> {
    /// The undecorated tool.
    pub fn inner(&self) -> &T {
        &self.tool
    }
}

impl<T: Tool, S: Store> Tool for Braked<T, S>
where
    T::Output: ToolOutput,
{
    type Output = Guarded<T::Output>;
    type Error = GuardError<T::Error>;

    fn name(&self) -> &str {
        self.tool.name()
    }

    fn execute(&self, session: &str, args: &Value) -> Result<Self::Output, Self::Error> {
        self.brake.guard(session, self.tool.name(), args, || {
            self.tool.execute(session, args)
        })
    }
}

/// Returns a guarded copy of a tool definition; the original is left unchanged.
///
/// ```
/// use toolbrake::{decorate, Brake, Tool};
/// use std::sync::Arc;
/// #[derive(Clone)]
/// struct Search;
/// impl Tool for Search {
///     type Output = String;
///     type Error = String;
///     fn name(&self) -> &str { "search" }
///     fn execute(&self, _session: &str, args: &serde_json::Value) -> Result<String, String> {
///         Ok(format!("results for {}", args["q"]))
///     }
/// }
/// let braked = decorate(&Search, Arc::new(Brake::default()));
/// let args = serde_json::json!({"q": "weather"});
/// assert!(braked.execute("s1", &args).is_ok());
/// assert!(braked.execute("s1", &args).is_ok());
/// assert!(braked.execute("s1", &args).is_err());
/// assert!(Search.execute("s1", &args).is_ok(), "the original is unchanged");
/// ```
pub fn decorate<T: Tool + Clone, S: Store>(tool: &T, brake: Arc<Brake<S>>) -> Braked<T, S> {
    Braked {
        tool: tool.clone(),
        brake,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolbrake_store::{SqliteOptions, SqliteStore};

    /// Two brakes on one SQLite file count one session together: the third identical call
    /// is refused whichever brake makes it.
    #[test]
    fn brakes_sharing_a_store_count_together() {
        let dir = std::env::temp_dir().join(format!("lb-brake-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("state.db");
        let a = Brake::with_store(
            Config::default(),
            SqliteStore::open(&path, SqliteOptions::default()).unwrap(),
        );
        let b = Brake::with_store(
            Config::default(),
            SqliteStore::open(&path, SqliteOptions::default()).unwrap(),
        );
        let args = serde_json::json!({"q": "weather"});
        let body = || Ok::<_, String>("sunny");
        assert!(a.guard("shared", "search", &args, body).is_ok());
        assert!(b.guard("shared", "search", &args, body).is_ok());
        let third = a.guard("shared", "search", &args, body);
        assert_eq!(
            third.unwrap_err().refusal().map(|r| r.code),
            Some("LOOP_BRAKE")
        );
        assert_eq!(b.sessions(), 1);
        b.end("shared").unwrap();
        assert_eq!(a.sessions(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
