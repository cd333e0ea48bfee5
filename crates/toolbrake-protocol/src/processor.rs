//! The protocol state machine: one input event in, exactly one output line out.
//!
//! It holds the engines, a [`Store`] for session state, and the map from call ids to
//! sessions (`answer` and `result` events name only the call). Nothing else: a stream of
//! any length replays in memory bounded by its open sessions and calls.

use crate::answer::{
    ambiguous, clip, decision_line, session_line, settled_out, texts, to_line, DecisionOut,
    ErrorBody, ErrorOut, FailureOut, ResultOut,
};
use crate::event::{self, Event};
pub use crate::record::{CallDetail, Handled, Record, PREVIEW_CHARS};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use toolbrake_core::canonical::call_digest;
use toolbrake_core::engine::Prepared;
use toolbrake_core::progress::Digested;
use toolbrake_core::{Call, Engine, EngineError, Outcome};
use toolbrake_session::{Observer, SessionError, Sessions};
use toolbrake_store::Store;

/// Open calls remembered per session (an engine session remembers as many).
pub use toolbrake_core::MAX_OPEN_CALLS;

/// The protocol processor.
pub struct Processor {
    engine: Engine,
    store: Arc<dyn Store>,
    /// Call id → the session keys where a call with that id is open (ids are unique per
    /// session only). Both maps are looked up several times per event: foldhash, with a
    /// seed of its own per process, instead of SipHash (2% of a replay).
    ids: HashMap<String, Vec<String>, foldhash::fast::RandomState>,
    /// Session key → its open call ids, oldest first.
    open: HashMap<String, VecDeque<String>, foldhash::fast::RandomState>,
    errors: u64,
    degraded: u64,
    fail_closed: bool,
    call_digests: bool,
    lines: bool,
    reload: Option<Reloader>,
    observer: Option<Arc<dyn Observer>>,
    counters: bool,
}

/// Asked before each event: a new engine when the configuration changed (`serve` reloads
/// `toolbrake.toml` this way), else `None`.
pub type Reloader = Box<dyn FnMut() -> Option<Engine> + Send>;

impl Processor {
    /// A processor over `store`.
    pub fn new(engine: Engine, store: Arc<dyn Store>) -> Self {
        Processor {
            engine,
            store,
            ids: HashMap::default(),
            open: HashMap::default(),
            errors: 0,
            degraded: 0,
            fail_closed: false,
            call_digests: false,
            lines: true,
            reload: None,
            observer: None,
            counters: true,
        }
    }

    /// Whether the operators' counters are kept in the store (the default): `replay` and
    /// `tune` turn them off, their memory store is thrown away at the end.
    pub fn with_counters(mut self, yes: bool) -> Self {
        self.counters = yes;
        self
    }

    /// The processor telling `observer` (metrics, traces, logs) what each event became.
    pub fn with_observer(mut self, observer: Option<Arc<dyn Observer>>) -> Self {
        self.observer = observer;
        self
    }

    /// Checks for a new engine before each event (sessions keep their state).
    pub fn with_reloader(mut self, reload: Reloader) -> Self {
        self.reload = Some(reload);
        self
    }

    /// Records each call's digest in [`Record::Call`] and each outcome's digest in
    /// [`Record::Result`] (a report's repeat and waste statistics need them; a plain replay
    /// or serve does not pay for a second hash of every call).
    pub fn with_call_digests(mut self, yes: bool) -> Self {
        self.call_digests = yes;
        self
    }

    /// Whether the output lines of events in no error are written (the default): a report
    /// (`replay --report`, `tune`) reads only the records, and serialising a line it drops
    /// was a twentieth of a tune's time. Error lines are always written (their message is
    /// the report's too).
    pub fn with_lines(mut self, yes: bool) -> Self {
        self.lines = yes;
        self
    }

    /// The output line of an event in no error, when lines are written.
    fn line(&self, make: impl FnOnce() -> String) -> String {
        if self.lines {
            make()
        } else {
            String::new()
        }
    }

    /// When the store fails on a `call`: deny it (`true`) or let it run with a
    /// `degraded` note (`false`, the default).
    pub fn with_fail_closed(mut self, fail_closed: bool) -> Self {
        self.fail_closed = fail_closed;
        self
    }

    /// Number of calls judged without the store (fail-open or fail-closed).
    pub fn degraded(&self) -> u64 {
        self.degraded
    }

    /// Number of error lines produced so far.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Number of calls waiting for a result.
    pub fn open_calls(&self) -> usize {
        self.open.values().map(VecDeque::len).sum()
    }

    /// Handles one raw input line (without its newline).
    pub fn handle_line(&mut self, line: &[u8], line_no: u64) -> Handled {
        match parse_event(line) {
            Ok(ev) => self.handle_event(&ev, line_no),
            Err(message) => self.error(line_no, &message),
        }
    }

    /// Produces an error line for `line_no` (used for lines the reader refused too).
    pub fn error(&mut self, line_no: u64, message: &str) -> Handled {
        self.errors += 1;
        Handled {
            line: to_line(&ErrorOut {
                error: ErrorBody {
                    line: line_no,
                    message,
                },
            }),
            is_error: true,
            record: Record::Error,
        }
    }

    /// Handles one parsed event.
    pub fn handle_value(&mut self, value: &Value, line_no: u64) -> Handled {
        self.handle_owned(value.clone(), line_no)
    }

    /// Handles one parsed event, taking it (its arguments and output are not copied).
    pub fn handle_owned(&mut self, value: Value, line_no: u64) -> Handled {
        match event::parse_owned(value) {
            Ok(ev) => self.handle_event(&ev, line_no),
            Err(msg) => self.error(line_no, &msg),
        }
    }

    /// Handles one event already parsed (`toolbrake tune` parses its input once and
    /// replays the same events under every setting).
    pub fn handle_event(&mut self, ev: &Event, line_no: u64) -> Handled {
        self.handle_digested(ev, line_no, None)
    }

    /// [`Processor::handle_event`], given the output digest of a `result`'s outcome when it
    /// was made already (`toolbrake tune` makes it once, not once per setting).
    pub fn handle_digested(
        &mut self,
        ev: &Event,
        line_no: u64,
        digested: Option<Digested>,
    ) -> Handled {
        self.dispatch(ev, line_no, digested, None)
    }

    /// [`Processor::handle_event`] of a `call` the engine prepared already
    /// ([`Engine::prepare`], by this processor's engine or one it
    /// [`derives_like`](Engine::derives_like): `toolbrake tune` prepares each call once,
    /// not once per setting). Any other event is handled as it is.
    pub fn handle_prepared(&mut self, ev: &Event, line_no: u64, prepared: &Prepared) -> Handled {
        self.dispatch(ev, line_no, None, Some(prepared))
    }

    fn dispatch(
        &mut self,
        ev: &Event,
        line_no: u64,
        digested: Option<Digested>,
        prepared: Option<&Prepared>,
    ) -> Handled {
        if let Some(engine) = self.reload.as_mut().and_then(|r| r()) {
            self.engine = engine;
        }
        match ev {
            Event::Call {
                session,
                id,
                tool,
                args,
                agent,
                traceparent,
            } => self.call(
                line_no,
                session,
                id,
                tool,
                args,
                agent.as_deref(),
                traceparent.as_deref(),
                prepared,
            ),
            Event::Answer {
                id,
                approved,
                session,
            } => self.answer(line_no, id, *approved, session.as_deref()),
            Event::Result {
                id,
                outcome,
                session,
            } => self.result(line_no, id, outcome, session.as_deref(), digested),
            Event::User { session } => self.user(line_no, session),
            Event::End { session } => self.end(line_no, session),
        }
    }

    fn remember(&mut self, key: &str, id: &str) {
        if !self.open.contains_key(key) {
            self.open.insert(key.to_string(), VecDeque::new());
        }
        let q = self.open.get_mut(key).expect("present or just inserted");
        q.retain(|x| x != id);
        let evicted = if q.len() >= MAX_OPEN_CALLS {
            q.pop_front()
        } else {
            None
        };
        q.push_back(id.to_string());
        if let Some(old) = evicted {
            self.unlink(key, &old);
        }
        let keys = self.ids.entry(id.to_string()).or_default();
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_string());
        }
    }

    /// Drops `key` from the sessions where `id` is open.
    fn unlink(&mut self, key: &str, id: &str) {
        if let Some(keys) = self.ids.get_mut(id) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.ids.remove(id);
            }
        }
    }

    fn forget(&mut self, key: &str, id: &str) {
        self.unlink(key, id);
        if let Some(q) = self.open.get_mut(key) {
            q.retain(|x| x != id);
            if q.is_empty() {
                self.open.remove(key);
            }
        }
    }

    /// The session key of the open call `id`: the one named by `session` (a session key,
    /// or a session whose sub-agent made the call), else the only session with that id
    /// open. Ambiguity is an error that says how to resolve it.
    fn key_of(&self, id: &str, session: Option<&str>) -> Result<String, String> {
        let keys: Vec<&String> = self
            .ids
            .get(id)
            .map(|ks| {
                ks.iter()
                    .filter(|k| match session {
                        None => true,
                        Some(s) => {
                            k.as_str() == s
                                || k.starts_with(&toolbrake_core::engine::agent_key_prefix(s))
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        match keys.as_slice() {
            [] => Err(match session {
                Some(s) => format!("unknown call id {:?} in session {:?}", clip(id), clip(s)),
                None => format!("unknown call id {:?}", clip(id)),
            }),
            [one] => Ok((*one).clone()),
            many => Err(ambiguous(id, many)),
        }
    }

    /// The session keys where a call with this id is open.
    pub fn open_keys(&self, id: &str) -> Vec<String> {
        self.ids.get(id).cloned().unwrap_or_default()
    }

    /// The ids of every open call.
    pub fn open_ids(&self) -> Vec<String> {
        self.ids.keys().cloned().collect()
    }

    /// The error line of an `answer` or `result` naming no session, for a call id open in
    /// several sessions (`keys`; the sharded replay finds them in several processors).
    pub fn ambiguous_error(&mut self, line_no: u64, id: &str, keys: &[String]) -> Handled {
        let keys: Vec<&String> = keys.iter().collect();
        self.error(line_no, &ambiguous(id, &keys))
    }

    #[allow(clippy::too_many_arguments)] // the call event's fields, one by one
    fn call(
        &mut self,
        line_no: u64,
        session: &str,
        id: &str,
        tool: &str,
        args: &Value,
        agent: Option<&str>,
        traceparent: Option<&str>,
        prepared: Option<&Prepared>,
    ) -> Handled {
        let key = toolbrake_session::key(session, agent);
        let call = Call {
            session: &key,
            id,
            tool,
            args,
        };
        let decision = match self
            .sessions()
            .with_traceparent(traceparent)
            .pre_prepared(&key, &call, prepared)
        {
            Ok(d) => d,
            Err(SessionError::Engine(e)) => return self.error(line_no, &e.to_string()),
            Err(SessionError::Store(e)) => return self.store_failed(id, &e.to_string()),
        };
        // A settled ask keeps its id open: its `result` is accepted and ignored.
        self.remember(&key, id);
        let line = self.line(|| decision_line(&decision));
        Handled {
            line,
            is_error: false,
            record: Record::Call {
                session: key,
                digest: if self.call_digests {
                    call_digest(tool, args).ok()
                } else {
                    None
                },
                detail: self.call_digests.then(|| CallDetail {
                    tool: tool.to_string(),
                    preview: toolbrake_core::canonical::canonical_json(args)
                        .map(|j| toolbrake_core::redact::redact_cut(&j, PREVIEW_CHARS))
                        .unwrap_or_default(),
                }),
                decision,
            },
        }
    }

    /// The store failed on a call: the configured policy decides, and the line says so.
    fn store_failed(&mut self, id: &str, problem: &str) -> Handled {
        self.degraded += 1;
        let policy = self.sessions().unjudged(problem);
        let note = policy.note;
        let (verdict, code, message) = if policy.refuse {
            (
                "deny",
                Some("STORE_UNAVAILABLE"),
                Some(policy.refusal.as_str()),
            )
        } else {
            ("allow", None, None)
        };
        let line = to_line(&DecisionOut {
            id,
            verdict,
            engine: None,
            code,
            message,
            hits: Vec::new(),
            advisories: Vec::new(),
            settled: Vec::new(),
            degraded: Some(&note),
        });
        Handled {
            line,
            is_error: false,
            record: Record::Error,
        }
    }

    fn answer(&mut self, line_no: u64, id: &str, approved: bool, session: Option<&str>) -> Handled {
        let key = match self.key_of(id, session) {
            Ok(k) => k,
            Err(e) => return self.error(line_no, &e),
        };
        let decision = match self.sessions().answer(&key, id, approved) {
            Ok(d) => d,
            Err(SessionError::Engine(EngineError::NotPending(_))) => {
                return self.error(
                    line_no,
                    &format!("no ask is pending for call id {:?}", clip(id)),
                )
            }
            Err(e) => return self.error(line_no, &e.to_string()),
        };
        Handled {
            line: self.line(|| decision_line(&decision)),
            is_error: false,
            record: Record::Answer {
                session: key,
                decision,
            },
        }
    }

    fn result(
        &mut self,
        line_no: u64,
        id: &str,
        outcome: &Outcome,
        session: Option<&str>,
        digested: Option<Digested>,
    ) -> Handled {
        let key = match self.key_of(id, session) {
            Ok(k) => k,
            Err(e) => return self.error(line_no, &e),
        };
        // A report's record holds the outcome's digest too: made once, for both.
        let digested = digested.or_else(|| self.call_digests.then(|| Digested::of(outcome)));
        let post = match self.sessions().post_digested(&key, id, outcome, digested) {
            Ok(p) => p,
            Err(SessionError::Engine(e)) => {
                self.forget(&key, id);
                return self.error(line_no, &e.to_string());
            }
            Err(e) => return self.error(line_no, &e.to_string()),
        };
        self.forget(&key, id);
        let line = self.line(|| {
            to_line(&ResultOut {
                id,
                ignored: post.ignored,
                advisories: texts(&post.advisories),
                failure: post.failure.as_ref().map(|f| FailureOut {
                    reason: f.reason.as_str(),
                    detail: f.detail.as_deref(),
                }),
                settled: settled_out(&post.settled),
            })
        });
        Handled {
            line,
            is_error: false,
            record: Record::Result {
                session: key,
                id: id.to_string(),
                advisories: post.advisories,
                failure: post.failure,
                output: match digested {
                    Some(d) if self.call_digests => crate::record::recorded_output_of(outcome, d),
                    _ => None,
                },
                output_bytes: outcome.text.as_ref().map_or(0, |t| t.len() as u64),
                settled: post.settled,
            },
        }
    }

    /// The session service over this processor's engines and store.
    fn sessions(&self) -> Sessions<'_, dyn Store> {
        Sessions::new(&self.engine, self.store.as_ref())
            .with_fail_closed(self.fail_closed)
            .with_observer(self.observer.as_deref())
            .with_counters(self.counters)
    }

    fn user(&mut self, line_no: u64, session: &str) -> Handled {
        let settled = match self.sessions().user_message(session) {
            Ok(s) => s,
            Err(e) => return self.error(line_no, &e.to_string()),
        };
        let line = self.line(|| session_line(session, &settled));
        Handled {
            line,
            is_error: false,
            record: Record::User {
                session: session.to_string(),
                settled,
            },
        }
    }

    fn end(&mut self, line_no: u64, session: &str) -> Handled {
        let settled = match self.sessions().end(session) {
            Ok(s) => s,
            Err(e) => return self.error(line_no, &e.to_string()),
        };
        // Its open calls (and its sub-agents') are closed.
        let sub = toolbrake_session::agent_key_prefix(session);
        let keys: Vec<String> = self
            .open
            .keys()
            .filter(|k| k.as_str() == session || k.starts_with(&sub))
            .cloned()
            .collect();
        for key in keys {
            if let Some(q) = self.open.remove(&key) {
                for id in q {
                    self.unlink(&key, &id);
                }
            }
        }
        let line = self.line(|| session_line(session, &settled));
        Handled {
            line,
            is_error: false,
            record: Record::End {
                session: session.to_string(),
                settled,
            },
        }
    }
}

/// One protocol line as an event, or the message that says what is wrong with it: typed
/// in one pass when the line is a well-formed event ([`event::parse_fast`]), else through
/// a JSON value, which words every error.
pub fn parse_event(line: &[u8]) -> Result<Event, String> {
    match event::parse_fast(line) {
        Some(ev) => Ok(ev),
        None => parse_line(line).and_then(event::parse_owned),
    }
}

/// One input line as JSON, or the message of its error line (positions, never content).
pub fn parse_line(line: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(line)
        .map_err(|e| format!("line is not valid UTF-8 (at byte {})", e.valid_up_to()))?;
    serde_json::from_str(text).map_err(|e| {
        if e.to_string().starts_with("recursion limit exceeded") {
            format!(
                "the line nests deeper than {} levels (at column {})",
                toolbrake_core::canonical::MAX_DEPTH,
                e.column()
            )
        } else {
            format!("not JSON: {} at column {}", json_category(&e), e.column())
        }
    })
}

fn json_category(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "read error",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "invalid data",
        serde_json::error::Category::Eof => "unexpected end of line",
    }
}
