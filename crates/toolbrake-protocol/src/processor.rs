//! The protocol state machine: one input event in, exactly one output line out.
//!
//! It holds the engines, a [`Store`] for session state, and the map from call ids to
//! sessions (`answer` and `result` events name only the call). Nothing else: a stream of
//! any length replays in memory bounded by its open sessions and calls.

use crate::event::{self, Event};
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use toolbrake_core::canonical::call_digest;
use toolbrake_core::engine::Prepared;
use toolbrake_core::progress::{Digested, OutputDigest};
use toolbrake_core::{
    Advisory, Call, Decision, Engine, EngineError, Failure, Hit, Outcome, Settled, Verdict,
};
use toolbrake_session::{Observer, SessionError, Sessions};
use toolbrake_store::Store;

/// Open calls remembered per session (an engine session remembers as many).
pub use toolbrake_core::MAX_OPEN_CALLS;

#[derive(Serialize)]
struct HitOut<'a> {
    fingerprint: &'a str,
    count: u32,
    limit: u32,
    track: &'static str,
}

#[derive(Serialize)]
struct SettledOut<'a> {
    id: &'a str,
    verdict: &'static str,
}

#[derive(Serialize)]
struct DecisionOut<'a> {
    id: &'a str,
    verdict: &'static str,
    engine: Option<&'static str>,
    code: Option<&'static str>,
    message: Option<&'a str>,
    hits: Vec<HitOut<'a>>,
    advisories: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    settled: Vec<SettledOut<'a>>,
    /// Present when toolbrake could not judge the call (its store failed) and let it run.
    #[serde(skip_serializing_if = "Option::is_none")]
    degraded: Option<&'a str>,
}

#[derive(Serialize)]
struct FailureOut<'a> {
    reason: &'static str,
    detail: Option<&'a str>,
}

#[derive(Serialize)]
struct ResultOut<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ignored: Option<&'static str>,
    advisories: Vec<&'a str>,
    failure: Option<FailureOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    settled: Vec<SettledOut<'a>>,
}

#[derive(Serialize)]
struct SessionOut<'a> {
    session: &'a str,
    ok: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    settled: Vec<SettledOut<'a>>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    line: u64,
    message: &'a str,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    error: ErrorBody<'a>,
}

fn hits_out(hits: &[Hit]) -> Vec<HitOut<'_>> {
    hits.iter()
        .map(|h| HitOut {
            fingerprint: &h.fingerprint,
            count: h.count,
            limit: h.limit,
            track: h.track.as_str(),
        })
        .collect()
}

fn settled_out(s: &[Settled]) -> Vec<SettledOut<'_>> {
    s.iter()
        .map(|x| SettledOut {
            id: &x.id,
            verdict: x.verdict.as_str(),
        })
        .collect()
}

fn texts(a: &[Advisory]) -> Vec<&str> {
    a.iter().map(|x| x.text.as_str()).collect()
}

fn to_line<T: Serialize>(v: &T) -> String {
    // Most answers are 100 to 250 bytes: one allocation, not a first one of 128 grown.
    let mut out = Vec::with_capacity(256);
    serde_json::to_writer(&mut out, v).expect("output structs always serialise");
    // serde_json writes only valid UTF-8.
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// What one event did, for reports.
#[derive(Debug, Clone)]
pub enum Record {
    /// A call was judged.
    Call {
        /// Session key the call was counted in.
        session: String,
        /// The call's identity digest (the streak hash), for repeat statistics; only when
        /// the processor was asked for it ([`Processor::with_call_digests`]).
        digest: Option<[u8; 32]>,
        /// The tool and a redacted preview of its arguments, for reports; only with
        /// [`Processor::with_call_digests`].
        detail: Option<CallDetail>,
        /// The decision.
        decision: Decision,
    },
    /// An ask was answered.
    Answer {
        /// Session key.
        session: String,
        /// The final decision.
        decision: Decision,
    },
    /// A result was recorded.
    Result {
        /// Session key.
        session: String,
        /// Call id.
        id: String,
        /// Advisories it produced.
        advisories: Vec<Advisory>,
        /// The classified failure.
        failure: Option<Failure>,
        /// The normalised digest of the reported outcome, for reports that tell waste from
        /// new information; only with [`Processor::with_call_digests`].
        output: Option<OutputDigest>,
        /// Bytes of the output text the call returned (0 when none was reported): what a
        /// stopped call would have added to the run (the report's "output bytes saved").
        output_bytes: u64,
        /// Asks settled before it.
        settled: Vec<Settled>,
    },
    /// A user message.
    User {
        /// Session key.
        session: String,
        /// Asks settled before it.
        settled: Vec<Settled>,
    },
    /// A session ended.
    End {
        /// Session key.
        session: String,
        /// Asks settled before it.
        settled: Vec<Settled>,
    },
    /// The line was in error.
    Error,
}

/// A call as a report shows it: never the arguments, a redacted preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallDetail {
    /// The tool.
    pub tool: String,
    /// Its canonical arguments, redacted and cut to [`PREVIEW_CHARS`] characters.
    pub preview: String,
}

/// Characters of a call's arguments a report shows.
pub const PREVIEW_CHARS: usize = 120;

/// One handled event: the output line and what happened.
#[derive(Debug, Clone)]
pub struct Handled {
    /// The output line (JSON, no newline); empty for an event in no error when the
    /// processor writes no lines ([`Processor::with_lines`]).
    pub line: String,
    /// Whether the line is an error line.
    pub is_error: bool,
    /// What happened, for reports.
    pub record: Record,
}

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
                    Some(d) if self.call_digests => crate::report::recorded_output_of(outcome, d),
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

fn session_line(session: &str, settled: &[Settled]) -> String {
    to_line(&SessionOut {
        session,
        ok: true,
        settled: settled_out(settled),
    })
}

fn decision_line(d: &Decision) -> String {
    to_line(&DecisionOut {
        id: &d.id,
        verdict: d.verdict.as_str(),
        engine: if d.verdict == Verdict::Allow {
            None
        } else {
            d.engine
        },
        code: d.code,
        message: d.message.as_deref(),
        hits: hits_out(&d.hits),
        advisories: texts(&d.advisories),
        settled: settled_out(&d.settled),
        degraded: None,
    })
}

/// "call id … is open in N sessions (…)": the sessions listed in sorted order, so that the
/// message does not depend on how the sessions were spread over processors.
fn ambiguous(id: &str, keys: &[&String]) -> String {
    let mut sorted = keys.to_vec();
    sorted.sort();
    format!(
        "call id {:?} is open in {} sessions ({}); name the session: add \"session\" to this event",
        clip(id),
        keys.len(),
        sorted
            .iter()
            .take(4)
            .map(|k| format!("{:?}", clip(k)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

fn json_category(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "read error",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "invalid data",
        serde_json::error::Category::Eof => "unexpected end of line",
    }
}
