//! The process view of a long-running adapter (`toolbrake serve`, `toolbrake mcp`, `mcp
//! --listen`), in Prometheus's terms: what this process did, as opposed to what the store
//! holds (the store's counters, which every process sharing the store sees alike).
//!
//! [`ProcessMetrics`] is an [`Observer`] of the session service (decision latency, calls
//! judged by verdict and engine, calls in flight, events that failed, the failure policy
//! applied) with plain methods for what the service cannot see (configuration reloads,
//! downstream servers, client sessions), and [`Timed`] wraps a [`Store`] to time each of
//! its calls. Labels never carry a session key, a tool's arguments or anything the
//! redaction would hide: only operation names, verdicts, engines and outcomes.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use toolbrake_core::{SessionState, Verdict};
use toolbrake_session::{Observed, ObservedKind, Observer, SessionError};
use toolbrake_store::{Counters, SessionInfo, Store, StoreError, Tally};

/// Calls in flight remembered at most: a call judged to run whose outcome never comes (its
/// host died, its session ended first) is forgotten, oldest first, past this many.
pub const MAX_OPEN_CALLS: usize = 4096;

/// Buckets of the latency histograms, in seconds: 10 µs to about 1.8 s, ×3 each.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.000_01, 3.0, 12))
}

type LatencyFamily = Family<Operation, Histogram, fn() -> Histogram>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Operation {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Judged {
    verdict: &'static str,
    engine: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Failed {
    operation: &'static str,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Refused {
    refused: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    result: &'static str,
}

/// Calls judged to run (or approved) whose outcome has not been recorded, by session key
/// and call id, with the order they came in (to forget the oldest past the bound).
#[derive(Default)]
struct OpenCalls {
    by_key: HashMap<(String, String), u64>,
    by_age: BTreeMap<u64, (String, String)>,
    next: u64,
}

impl OpenCalls {
    fn open(&mut self, session: &str, id: &str) {
        let key = (session.to_string(), id.to_string());
        if let Some(old) = self.by_key.remove(&key) {
            self.by_age.remove(&old);
        }
        self.next += 1;
        self.by_key.insert(key.clone(), self.next);
        self.by_age.insert(self.next, key);
        while self.by_key.len() > MAX_OPEN_CALLS {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.by_key.remove(&oldest);
        }
    }

    fn close(&mut self, session: &str, id: &str) {
        if let Some(n) = self.by_key.remove(&(session.to_string(), id.to_string())) {
            self.by_age.remove(&n);
        }
    }
}

struct Inner {
    registry: Registry,
    decision_seconds: LatencyFamily,
    judged: Family<Judged, Counter>,
    failed: Family<Failed, Counter>,
    unjudged: Family<Refused, Counter>,
    in_flight: Gauge,
    open: Mutex<OpenCalls>,
    reloads: Family<Outcome, Counter>,
    downstream_starts: Counter,
    downstream_errors: Counter,
    client_sessions: Gauge,
    store_seconds: LatencyFamily,
    store_errors: Family<Operation, Counter>,
    store_uncounted: Counter,
}

/// The metrics of this process (cheap to clone: every clone counts into the same
/// registry). Every series is named `toolbrake_process_…`.
#[derive(Clone)]
pub struct ProcessMetrics {
    inner: Arc<Inner>,
}

impl Default for ProcessMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessMetrics {
    /// A fresh registry with every series at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("toolbrake_process");
        let decision_seconds = LatencyFamily::new_with_constructor(latency);
        let store_seconds = LatencyFamily::new_with_constructor(latency);
        let inner = Inner {
            decision_seconds,
            judged: Family::default(),
            failed: Family::default(),
            unjudged: Family::default(),
            in_flight: Gauge::default(),
            open: Mutex::new(OpenCalls::default()),
            reloads: Family::default(),
            downstream_starts: Counter::default(),
            downstream_errors: Counter::default(),
            client_sessions: Gauge::default(),
            store_seconds,
            store_errors: Family::default(),
            store_uncounted: Counter::default(),
            registry: Registry::default(),
        };
        registry.register_with_unit(
            "decision",
            "Time the session service spent on an event (engines and store), by operation: pre, answer, post, user_message, close_open_calls, end",
            Unit::Seconds,
            inner.decision_seconds.clone(),
        );
        registry.register(
            "calls_judged",
            "Calls judged before they ran, by verdict and by the engine that asked, denied or advised (none: allowed)",
            inner.judged.clone(),
        );
        registry.register(
            "calls_in_flight",
            "Calls judged to run (or approved) whose outcome has not been recorded yet",
            inner.in_flight.clone(),
        );
        registry.register(
            "failed_events",
            "Events the session service could not apply, by operation and cause (store: the store failed; engine: the engines refused the event)",
            inner.failed.clone(),
        );
        registry.register(
            "unjudged_calls",
            "Calls toolbrake could not judge, by whether the failure policy refused them",
            inner.unjudged.clone(),
        );
        registry.register(
            "config_reloads",
            "Edits of toolbrake.toml seen while running: ok (taken into use) or rejected (invalid; the previous configuration stays)",
            inner.reloads.clone(),
        );
        registry.register(
            "downstream_starts",
            "MCP servers started behind the proxy (with --listen, one per client session: each after the first is a restart)",
            inner.downstream_starts.clone(),
        );
        registry.register(
            "downstream_errors",
            "MCP servers behind the proxy that failed: could not start, exited, closed their output or wrote something that is not JSON-RPC",
            inner.downstream_errors.clone(),
        );
        registry.register(
            "client_sessions",
            "Client sessions of the MCP listener whose relay is running",
            inner.client_sessions.clone(),
        );
        registry.register_with_unit(
            "store",
            "Time of each call to the store, by operation (an update includes the engines' run inside it)",
            Unit::Seconds,
            inner.store_seconds.clone(),
        );
        registry.register(
            "store_errors",
            "Calls to the store that failed, by operation",
            inner.store_errors.clone(),
        );
        registry.register(
            "store_uncounted",
            "Updates the store kept whose counters it could not keep (a shared store's counters key of the wrong type, a counter that cannot grow): their decisions stand; the store's counters miss them",
            inner.store_uncounted.clone(),
        );
        ProcessMetrics {
            inner: Arc::new(Inner { registry, ..inner }),
        }
    }

    /// Appends this registry in the OpenMetrics text format, without the final `# EOF`
    /// (the endpoint adds it after every renderer).
    pub fn render(&self, out: &mut String) {
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(out, &self.inner.registry);
    }

    /// A configuration reload: `true` when a valid edit was taken into use, `false` when
    /// an invalid one was rejected.
    pub fn config_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "rejected" };
        self.inner.reloads.get_or_create(&Outcome { result }).inc();
    }

    /// An MCP server was started behind the proxy.
    pub fn downstream_started(&self) {
        self.inner.downstream_starts.inc();
    }

    /// An MCP server behind the proxy failed.
    pub fn downstream_failed(&self) {
        self.inner.downstream_errors.inc();
    }

    /// A client session of the listener started.
    pub fn client_session_started(&self) {
        self.inner.client_sessions.inc();
    }

    /// A client session of the listener ended.
    pub fn client_session_ended(&self) {
        self.inner.client_sessions.dec();
    }

    fn open(&self) -> std::sync::MutexGuard<'_, OpenCalls> {
        self.inner.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn opened(&self, session: &str, id: &str) {
        let mut open = self.open();
        open.open(session, id);
        self.inner.in_flight.set(open.by_key.len() as i64);
    }

    fn closed(&self, session: &str, ids: impl IntoIterator<Item = impl AsRef<str>>) {
        let mut open = self.open();
        for id in ids {
            open.close(session, id.as_ref());
        }
        self.inner.in_flight.set(open.by_key.len() as i64);
    }

    fn store_call<R>(
        &self,
        operation: &'static str,
        f: impl FnOnce() -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let started = Instant::now();
        let result = f();
        let label = Operation { operation };
        self.inner
            .store_seconds
            .get_or_create(&label)
            .observe(started.elapsed().as_secs_f64());
        if result.is_err() {
            self.inner.store_errors.get_or_create(&label).inc();
        }
        result
    }
}

/// The operation name of an event, as the session service names its steps.
fn operation_of(kind: &ObservedKind<'_>) -> &'static str {
    match kind {
        ObservedKind::Judged { .. } => "pre",
        ObservedKind::Answered { .. } => "answer",
        ObservedKind::Recorded { .. } => "post",
        ObservedKind::Settled { .. } => "settle",
        ObservedKind::Failed { operation, .. } => operation,
        ObservedKind::Unjudged { .. } => "unjudged",
    }
}

fn verdict_runs(v: Verdict) -> bool {
    matches!(v, Verdict::Allow | Verdict::Advise)
}

impl Observer for ProcessMetrics {
    fn observe(&self, event: &Observed<'_>) {
        let inner = &self.inner;
        if !matches!(
            event.kind,
            ObservedKind::Unjudged { .. } | ObservedKind::Settled { .. }
        ) {
            inner
                .decision_seconds
                .get_or_create(&Operation {
                    operation: operation_of(&event.kind),
                })
                .observe(event.elapsed.as_secs_f64());
        }
        match &event.kind {
            ObservedKind::Judged { call, decision } => {
                inner
                    .judged
                    .get_or_create(&Judged {
                        verdict: decision.verdict.as_str(),
                        engine: decision.engine.unwrap_or("none"),
                    })
                    .inc();
                if verdict_runs(decision.verdict) {
                    self.opened(event.session, call.id);
                } else {
                    // Asked (it waits for an answer) or denied (it never runs).
                    self.closed(event.session, [call.id]);
                }
            }
            ObservedKind::Answered {
                call_id, decision, ..
            } => {
                if verdict_runs(decision.verdict) {
                    self.opened(event.session, call_id);
                } else {
                    self.closed(event.session, [call_id]);
                }
            }
            ObservedKind::Recorded { call_id, .. } => self.closed(event.session, [call_id]),
            ObservedKind::Settled { settled } => {
                self.closed(event.session, settled.iter().map(|s| s.id.as_str()))
            }
            ObservedKind::Failed { operation, error } => {
                let cause = match error {
                    SessionError::Store(_) => "store",
                    SessionError::Engine(_) => "engine",
                };
                inner
                    .failed
                    .get_or_create(&Failed { operation, cause })
                    .inc();
            }
            ObservedKind::Unjudged { unjudged } => {
                let refused = if unjudged.refuse { "true" } else { "false" };
                inner.unjudged.get_or_create(&Refused { refused }).inc();
            }
        }
    }
}

/// A [`Store`] whose every call is timed (and its failures counted) into a
/// [`ProcessMetrics`]: a layer around the configured store, deciding nothing.
pub struct Timed<S: Store + ?Sized> {
    inner: Arc<S>,
    metrics: ProcessMetrics,
    /// The store's [`Store::uncounted`] when last looked at.
    uncounted: std::sync::atomic::AtomicU64,
}

impl<S: Store + ?Sized> Timed<S> {
    /// `inner`, timed into `metrics`.
    pub fn new(inner: Arc<S>, metrics: ProcessMetrics) -> Self {
        let uncounted = inner.uncounted().into();
        Timed {
            inner,
            metrics,
            uncounted,
        }
    }

    /// Counts the updates the store could not count since last looked at.
    fn count_uncounted(&self) {
        let now = self.inner.uncounted();
        let before = self
            .uncounted
            .fetch_max(now, std::sync::atomic::Ordering::Relaxed);
        if now > before {
            self.metrics.inner.store_uncounted.inc_by(now - before);
        }
    }
}

impl<S: Store + ?Sized> Store for Timed<S> {
    fn update(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError> {
        let r = self
            .metrics
            .store_call("update", || self.inner.update(session, f));
        self.count_uncounted();
        r
    }

    fn add_counts(&self, tally: &Tally) -> Result<(), StoreError> {
        let r = self
            .metrics
            .store_call("add_counts", || self.inner.add_counts(tally));
        self.count_uncounted();
        r
    }

    fn uncounted(&self) -> u64 {
        self.inner.uncounted()
    }

    fn counters(&self) -> Result<Counters, StoreError> {
        self.metrics
            .store_call("counters", || self.inner.counters())
    }

    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        self.metrics.store_call("get", || self.inner.get(session))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        self.metrics
            .store_call("remove", || self.inner.remove(session))
    }

    fn take(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        self.metrics.store_call("take", || self.inner.take(session))
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.metrics.store_call("list", || self.inner.list())
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.metrics
            .store_call("keys_with_prefix", || self.inner.keys_with_prefix(prefix))
    }

    fn may_block(&self) -> bool {
        self.inner.may_block()
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    fn take_warnings(&self) -> Vec<String> {
        self.inner.take_warnings()
    }
}

/// A [`Store`] whose problems ([`Store::take_warnings`]: a session that started afresh, a
/// stale lock removed, counters that could not be kept) are told as they happen, to the
/// log of a long-running process that nobody else asks for them: a layer that decides
/// nothing.
pub struct Told<S: Store + ?Sized> {
    inner: Arc<S>,
    tell: Box<dyn Fn(&str) + Send + Sync>,
}

impl<S: Store + ?Sized> Told<S> {
    /// `inner`, its warnings handed to `tell`.
    pub fn new(inner: Arc<S>, tell: Box<dyn Fn(&str) + Send + Sync>) -> Self {
        Told { inner, tell }
    }

    fn told<R>(&self, r: R) -> R {
        for w in self.inner.take_warnings() {
            (self.tell)(&w);
        }
        r
    }
}

impl<S: Store + ?Sized> Store for Told<S> {
    fn update(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError> {
        self.told(self.inner.update(session, f))
    }

    fn add_counts(&self, tally: &Tally) -> Result<(), StoreError> {
        self.told(self.inner.add_counts(tally))
    }

    fn counters(&self) -> Result<Counters, StoreError> {
        self.told(self.inner.counters())
    }

    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        self.told(self.inner.get(session))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        self.told(self.inner.remove(session))
    }

    fn take(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        self.told(self.inner.take(session))
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.told(self.inner.list())
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.told(self.inner.keys_with_prefix(prefix))
    }

    fn may_block(&self) -> bool {
        self.inner.may_block()
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    fn uncounted(&self) -> u64 {
        self.inner.uncounted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolbrake_core::{Call, Engine, Outcome as CallOutcome};
    use toolbrake_session::Sessions;
    use toolbrake_store::MemoryStore;

    fn rendered(m: &ProcessMetrics) -> String {
        let mut s = String::new();
        m.render(&mut s);
        s
    }

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// A store seen through the timing layer keeps its answers about itself: whether it
    /// may block, and whether others see its sessions (the MCP proxy answers before
    /// recording only on a store nobody else reads).
    #[test]
    fn the_timed_store_says_what_its_store_is() {
        struct Shared;
        impl Store for Shared {
            fn update(
                &self,
                _: &str,
                _: &mut dyn FnMut(&mut toolbrake_core::SessionState, &mut toolbrake_store::Tally),
            ) -> Result<(), StoreError> {
                Ok(())
            }
            fn add_counts(&self, _: &toolbrake_store::Tally) -> Result<(), StoreError> {
                Ok(())
            }
            fn counters(&self) -> Result<toolbrake_store::Counters, StoreError> {
                Ok(Default::default())
            }
            fn get(&self, _: &str) -> Result<Option<toolbrake_core::SessionState>, StoreError> {
                Ok(None)
            }
            fn remove(&self, _: &str) -> Result<bool, StoreError> {
                Ok(false)
            }
            fn list(&self) -> Result<Vec<toolbrake_store::SessionInfo>, StoreError> {
                Ok(Vec::new())
            }
            fn describe(&self) -> String {
                "shared".into()
            }
        }
        let memory = Timed::new(Arc::new(MemoryStore::new()), ProcessMetrics::new());
        assert!(!memory.shared() && !memory.may_block());
        let shared = Timed::new(Arc::new(Shared), ProcessMetrics::new());
        assert!(shared.shared() && shared.may_block());
    }

    #[test]
    fn a_denied_call_leaves_nothing_in_flight_and_counts_by_engine() {
        let metrics = ProcessMetrics::new();
        let store = Timed::new(Arc::new(MemoryStore::new()), metrics.clone());
        let engine = Engine::default();
        let sessions = Sessions::new(&engine, &store).with_observer(Some(&metrics));
        let args = serde_json::json!({"command": "ls"});
        for i in 0..3 {
            let id = format!("c{i}");
            let call = Call {
                session: "s",
                id: &id,
                tool: "bash",
                args: &args,
            };
            let d = sessions.pre("s", &call).unwrap();
            if d.runs() {
                let text = rendered(&metrics);
                assert_eq!(value(&text, "toolbrake_process_calls_in_flight"), Some(1.0));
                let _ = sessions.post("s", &id, &CallOutcome::default()).unwrap();
            }
        }
        let text = rendered(&metrics);
        assert_eq!(
            value(
                &text,
                "toolbrake_process_calls_judged_total{verdict=\"deny\",engine=\"streak\"}"
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(value(&text, "toolbrake_process_calls_in_flight"), Some(0.0));
        assert_eq!(
            value(
                &text,
                "toolbrake_process_decision_seconds_count{operation=\"pre\"}"
            ),
            Some(3.0)
        );
        assert!(
            value(
                &text,
                "toolbrake_process_store_seconds_count{operation=\"update\"}"
            )
            .is_some_and(|n| n >= 5.0),
            "{text}"
        );
        assert!(
            !text.contains("\"s\""),
            "a session key became a label: {text}"
        );
    }

    /// A store that keeps every update but could not count one, and says so each time.
    struct Uncounting(MemoryStore, std::sync::atomic::AtomicU64);

    impl Store for Uncounting {
        fn update(
            &self,
            s: &str,
            f: &mut dyn FnMut(&mut SessionState, &mut Tally),
        ) -> Result<(), StoreError> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.update(s, f)
        }
        fn take_warnings(&self) -> Vec<String> {
            vec!["not counted".into()]
        }
        fn add_counts(&self, t: &Tally) -> Result<(), StoreError> {
            self.0.add_counts(t)
        }
        fn counters(&self) -> Result<Counters, StoreError> {
            self.0.counters()
        }
        fn get(&self, s: &str) -> Result<Option<SessionState>, StoreError> {
            self.0.get(s)
        }
        fn remove(&self, s: &str) -> Result<bool, StoreError> {
            self.0.remove(s)
        }
        fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
            self.0.list()
        }
        fn describe(&self) -> String {
            "uncounting".into()
        }
        fn uncounted(&self) -> u64 {
            self.1.load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    /// The store's problems reach the log of a process nobody else asks them for, as they
    /// happen.
    #[test]
    fn a_store_s_problems_are_told_as_they_happen() {
        let told = Arc::new(Mutex::new(Vec::new()));
        let t = told.clone();
        let store = Told::new(
            Arc::new(Uncounting(MemoryStore::new(), 0.into())),
            Box::new(move |w| t.lock().unwrap().push(w.to_string())),
        );
        store.update("s", &mut |_, _| {}).unwrap();
        assert_eq!(*told.lock().unwrap(), ["not counted"]);
        assert_eq!(store.uncounted(), 1);
    }

    /// The process's metrics say how many updates the store could not count.
    #[test]
    fn updates_the_store_could_not_count_are_counted_here() {
        let inner = Uncounting(MemoryStore::new(), 2.into());
        let metrics = ProcessMetrics::new();
        let store = Timed::new(Arc::new(inner), metrics.clone());
        for _ in 0..3 {
            store.update("s", &mut |_, _| {}).unwrap();
        }
        assert_eq!(
            value(
                &rendered(&metrics),
                "toolbrake_process_store_uncounted_total"
            ),
            Some(3.0),
            "the updates before this process watched are not its own"
        );
    }

    #[test]
    fn open_calls_are_bounded() {
        let metrics = ProcessMetrics::new();
        for i in 0..MAX_OPEN_CALLS + 10 {
            metrics.opened("s", &format!("c{i}"));
        }
        assert_eq!(
            value(&rendered(&metrics), "toolbrake_process_calls_in_flight"),
            Some(MAX_OPEN_CALLS as f64)
        );
        // The oldest were forgotten; the newest are still closed by their outcome.
        metrics.closed("s", ["c0", &format!("c{}", MAX_OPEN_CALLS + 9)]);
        assert_eq!(
            value(&rendered(&metrics), "toolbrake_process_calls_in_flight"),
            Some(MAX_OPEN_CALLS as f64 - 1.0)
        );
    }
}
