//! The MCP proxy adapter: `toolbrake mcp -- <server command>` sits between any MCP client
//! and any MCP server, and judges every `tools/call`.
//!
//! It is a JSON-RPC relay, not a re-implementation of MCP: every message passes through
//! unchanged, both ways (initialize and capabilities, lists and their `list_changed`
//! notifications, resources, prompts, completions, logging, progress, cancellation, pings,
//! and server-initiated sampling, elicitation and roots), whatever the protocol revision.
//! Only three things are touched:
//!
//! - a `tools/call` request is judged before it is forwarded: deny → the client gets a
//!   normal result with `isError: true` and toolbrake's text (the model must read it, so
//!   not a JSON-RPC error); ask → the operator is asked through the client's elicitation
//!   if it offers it, else the call is refused (fail-closed); advise → forwarded, and the
//!   advisory is appended to the result's `content` as a text block;
//! - the matching response is read for the outcome (`isError` and JSON-RPC errors are
//!   failures, a call the client cancelled is aborted) and may carry advisories back;
//! - the `initialize` result's `serverInfo` says it is toolbrake in front of the server.
//!
//! With a fetcher (`toolbrake mcp --fetch-tool`), the proxy also offers `web_fetch_file`
//! itself: it is appended to the server's `tools/list` (to its last page, after every
//! `list_changed`), its calls are judged like any other and run here, never reaching the
//! server, and the breaker sends shell fetches to it. Without a server command the proxy
//! is a server offering only that tool ([`run_fetch_only`]).
//!
//! Session identity: a `_meta` conversation key when the client sends one
//! (`vscode.conversationId`, `sessionID`, `sessionId`, `conversationId`), else one session
//! per proxy process (or `--session`). Calls in flight are handled concurrently.
//! When the server dies or writes garbage, every request in flight gets a JSON-RPC error
//! and the proxy stops with a message: nothing hangs.
#![deny(missing_docs)]

pub mod events;
pub mod http;
pub mod listen;
pub mod messages;
pub mod outbox;
pub mod stdio;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;
use toolbrake_core::{Call, Decision, Engine, Outcome, Verdict};
use toolbrake_session::{Observer, SessionError, Sessions};
use toolbrake_store::Store;

/// `_meta` keys that name a conversation, in order of preference (docs/decisions.md, "Hosts").
pub const SESSION_META_KEYS: &[&str] = &[
    "vscode.conversationId",
    "sessionID",
    "sessionId",
    "conversationId",
];

/// The largest single message accepted from either side.
pub const MAX_MESSAGE: usize = 64 << 20;

/// How the proxy judges calls.
pub struct Options {
    /// The engines.
    pub engine: Engine,
    /// Where session state lives.
    pub store: Arc<dyn Store>,
    /// The session of calls whose `_meta` names none (default: one per proxy process).
    pub default_session: String,
    /// How long an operator has to answer an elicitation before it counts as declined.
    pub ask_timeout: Duration,
    /// Refuse calls toolbrake cannot judge (its store failed) instead of letting them run.
    pub fail_closed: bool,
    /// Over Streamable HTTP: the server's session, whose id keys calls with no `_meta` key.
    pub http_session: Option<Arc<http::HttpSession>>,
    /// `web_fetch_file`, offered by the proxy itself when set.
    pub fetch: Option<Arc<toolbrake_fetch::Fetcher>>,
    /// Asked before each judged call: a new engine when the configuration changed.
    pub reload: Option<Reloader>,
    /// Told what each judged call, answer and outcome became (metrics, traces, logs).
    pub observer: Option<Arc<dyn Observer>>,
    /// Told of downstream servers, client sessions and the proxy's warnings.
    pub events: Option<Arc<dyn events::ProxyEvents>>,
    /// Keep the operators' counters in the store. Counting costs a judged call about a
    /// quarter of its judging time (BENCHMARKS.md, "Speed to the floor, fifth round"): off
    /// when nothing can read them (a memory store and no metrics endpoint).
    pub counters: bool,
}

/// Returns a new engine when the configuration changed, else `None`.
pub type Reloader = Box<dyn FnMut() -> Option<Engine> + Send + Sync>;

/// Why the proxy stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The downstream server failed (exited, closed its output, wrote garbage).
    #[error("the MCP server {0}")]
    Downstream(#[from] ServerFailure),
    /// Reading from the client failed.
    #[error("the MCP client connection failed: {0}")]
    Client(#[source] std::io::Error),
}

/// How the downstream server failed; each reads as the end of "the MCP server …".
#[derive(Debug, thiserror::Error)]
pub enum ServerFailure {
    /// Its stdout reached end of file.
    #[error("closed its output")]
    Closed,
    /// Its stdout could not be read.
    #[error("could not be read ({0})")]
    Unreadable(#[source] std::io::Error),
    /// A line on its stdout was not JSON.
    #[error("wrote something that is not JSON-RPC on its stdout")]
    NotJsonRpc,
    /// The task reading its stdout ended abnormally.
    #[error("reader failed ({0})")]
    ReaderFailed(#[source] tokio::task::JoinError),
}

#[derive(Debug)]
enum Pending {
    /// A client request forwarded to the server.
    Forwarded { method: Forwarded },
    /// A judged `tools/call` forwarded to the server.
    ToolCall(ToolCtx),
}

/// The forwarded requests whose answers the proxy edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forwarded {
    Initialize,
    ToolsList,
    Other,
}

#[derive(Debug, Clone)]
struct ToolCtx {
    session: String,
    call_id: String,
    advisories: Vec<String>,
    cancelled: bool,
}

/// A `tools/call` being judged.
struct Judged {
    id: Value,
    key: String,
    session: String,
    call_id: String,
    tool: String,
    args: Value,
    raw: String,
}

/// A judged `tools/call` that must wait before it is settled.
enum Waiting {
    /// The operator is asked through the client's elicitation.
    Ask {
        call: Judged,
        decision: Box<Decision>,
    },
    /// Allowed, and the proxy runs it with its own fetcher.
    Fetch {
        call: Judged,
        fetcher: Arc<toolbrake_fetch::Fetcher>,
    },
}

struct Shared {
    opts: Options,
    to_client: outbox::Sender,
    to_server: outbox::Sender,
    inflight: Mutex<HashMap<String, Pending>>,
    elicit_waiters: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    client_elicits: AtomicBool,
    next_elicit: AtomicU64,
    /// The server lists a tool named `web_fetch_file` itself: its own is used.
    server_fetches: AtomicBool,
    /// The engines in force (replaced when the configuration is reloaded).
    engine: std::sync::RwLock<Arc<Engine>>,
    /// Held by every step of the session service, and from before an answer reaches the
    /// client until its call is recorded (see [`Shared::finish`]): the client's next call
    /// is judged after the record, on any runtime.
    steps: Mutex<()>,
    reload: Mutex<Option<Reloader>>,
}

/// What the relay reads of a client's message before deciding what to do with it: the
/// method (when a string) and the id, each as written, and the params left unparsed. `None`
/// when the message does not read that way (not JSON, a key twice, a method that is not a
/// string): the message is then parsed whole, as it always was.
struct ClientHead<'a> {
    method: Option<std::borrow::Cow<'a, str>>,
    id: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
}

impl<'a> ClientHead<'a> {
    fn of(line: &'a str) -> Option<Self> {
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(default, borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            #[serde(default, borrow, deserialize_with = "present")]
            id: Option<&'a RawValue>,
            #[serde(default, borrow, deserialize_with = "present")]
            params: Option<&'a RawValue>,
        }
        let h: Head<'a> = serde_json::from_str(line).ok()?;
        Some(ClientHead {
            method: h.method,
            id: h.id,
            params: h.params,
        })
    }
}

/// What the relay reads of a server's message, in one pass: whether it has a method (a
/// request or a notification, not a response), its id as written and, for an answer in the
/// common shape, what a `tools/call`'s outcome is read from: no `error`, a `result` whose
/// `isError` is a boolean and whose content blocks are objects with string texts, borrowed
/// from the line. A message that does not read this way (another shape, a key twice) is
/// parsed whole, as it always was; the outcome of a tool's answer read here agrees with
/// [`tool_outcome`] of the whole message.
#[derive(serde::Deserialize)]
struct ServerHead<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<FastResult<'a>>,
}

/// A key that is present, even as `null` (which `Option` alone would read as absent, where
/// the proxy's whole-message reading sees `Some(Value::Null)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

/// The key of a JSON-RPC id in the tables of requests in flight: its JSON text, written
/// compactly (`7`, `"a"`). An integer, nearly every id, is written without the formatting
/// machinery (the relay keys every request and answer by it).
pub(crate) fn id_key(id: &Value) -> String {
    if let Some(i) = id.as_i64() {
        return itoa::Buffer::new().format(i).to_owned();
    }
    if let Some(u) = id.as_u64() {
        return itoa::Buffer::new().format(u).to_owned();
    }
    id.to_string()
}

/// A JSON-RPC `tools/call` request too deep for a full parse: its id and a stand-in for its
/// params (the tool name, and the arguments replaced by the hash of their text).
fn unjudgeable_tool_call(line: &str) -> Option<(Value, Value)> {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        name: Option<String>,
        #[serde(borrow)]
        arguments: Option<&'a serde_json::value::RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Shallow<'a> {
        method: Option<String>,
        id: Option<Value>,
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    let msg: Shallow<'_> = serde_json::from_str(line).ok()?;
    if msg.method.as_deref() != Some("tools/call") {
        return None;
    }
    let id = msg.id?;
    let params = msg.params?;
    let name = params.name.unwrap_or_default();
    let raw = params.arguments.map(|a| a.get()).unwrap_or("");
    let digest = toolbrake_core::canonical::call_hash(&name, &Value::String(raw.to_string()))
        .unwrap_or_default();
    Some((
        id,
        json!({"name": name, "arguments": {"unjudgeable_arguments_sha256": digest}}),
    ))
}

#[derive(serde::Deserialize)]
struct FastResult<'a> {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
    #[serde(default, borrow)]
    content: Option<Vec<FastBlock<'a>>>,
}

#[derive(serde::Deserialize)]
struct FastBlock<'a> {
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

/// The outcome of a `tools/call` answer in the common shape, without parsing it whole;
/// `None` when it has another shape. Agrees with [`tool_outcome`] wherever it answers.
#[cfg(test)]
fn fast_tool_outcome(line: &str) -> Option<Outcome> {
    serde_json::from_str::<ServerHead<'_>>(line)
        .ok()?
        .tool_outcome()
}

impl ServerHead<'_> {
    /// The outcome of the answer this message is, when it was read in the common shape (it
    /// carries no `error`); `None` sends it to the whole reading.
    fn tool_outcome(self) -> Option<Outcome> {
        if self.error.is_some() {
            return None;
        }
        let mut outcome = Outcome::default();
        if self.result.as_ref().and_then(|r| r.is_error) == Some(true) {
            outcome.is_error = Some(true);
        }
        let text = self
            .result
            .and_then(|r| r.content)
            .map(|blocks| joined(blocks.iter().filter_map(|b| b.text.as_deref())))
            .unwrap_or_default();
        outcome.text = Some(text);
        Some(outcome)
    }
}

/// The outcome of a `tools/call` answer read whole: a JSON-RPC error or `isError: true` is
/// a failure, and the text is the content's text blocks.
fn tool_outcome(msg: &Value) -> Outcome {
    let mut outcome = Outcome::default();
    if let Some(err) = msg.get("error") {
        outcome.is_error = Some(true);
        outcome.error_code = err.get("code").map(|c| c.to_string());
        outcome.text = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string);
    } else {
        let result = msg.get("result");
        if result.and_then(|r| r.get("isError")) == Some(&Value::Bool(true)) {
            outcome.is_error = Some(true);
        }
        outcome.text = Some(text_of(result.and_then(|r| r.get("content"))));
    }
    outcome
}

fn text_of(content: Option<&Value>) -> String {
    content
        .and_then(Value::as_array)
        .map(|blocks| joined(blocks.iter().filter_map(|b| b.get("text")?.as_str())))
        .unwrap_or_default()
}

/// A result's text: its text blocks' texts, the empty ones left out, one per line.
fn joined<'a>(texts: impl Iterator<Item = &'a str>) -> String {
    texts
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Shared {
    fn inflight(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.inflight.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send_client(&self, v: &Value) {
        self.to_client.send(v.to_string());
    }

    fn session_for(&self, params: &Value) -> String {
        let meta = params.get("_meta");
        for k in SESSION_META_KEYS {
            if let Some(s) = meta
                .and_then(|m| m.get(*k))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                return format!("mcp:{s}");
            }
        }
        if let Some(id) = self
            .opts
            .http_session
            .as_ref()
            .and_then(|h| h.id.read().unwrap_or_else(|e| e.into_inner()).clone())
        {
            return format!("mcp-http:{id}");
        }
        self.opts.default_session.clone()
    }

    /// Takes a reloaded configuration into use (sessions keep their state).
    fn reload(&self) {
        let mut r = self.reload.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(engine) = r.as_mut().and_then(|f| f()) {
            *self.engine.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(engine);
        }
    }

    /// The failure policy for a call toolbrake could not judge, told to the observer (the
    /// session service's one place for it; no store is touched).
    fn unjudged(&self, problem: &str) -> toolbrake_session::Unjudged {
        self.with_sessions(|s| s.unjudged(problem))
    }

    /// Runs a step of the session service, off the async threads.
    fn with_sessions<R>(&self, f: impl FnOnce(&Sessions<'_, dyn Store>) -> R) -> R {
        self.with_traced_sessions(None, f)
    }

    /// [`Shared::with_sessions`] with the W3C `traceparent` the client sent with the call
    /// (`params._meta.traceparent`), for the observer's span.
    fn with_traced_sessions<R>(
        &self,
        traceparent: Option<&str>,
        f: impl FnOnce(&Sessions<'_, dyn Store>) -> R,
    ) -> R {
        let steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        self.with_sessions_in_order(&steps, traceparent, f)
    }

    /// [`Shared::with_traced_sessions`] for a caller that holds `steps` already.
    fn with_sessions_in_order<R>(
        &self,
        _steps: &std::sync::MutexGuard<'_, ()>,
        traceparent: Option<&str>,
        f: impl FnOnce(&Sessions<'_, dyn Store>) -> R,
    ) -> R {
        // A store that may block (SQLite, Redis) runs in block_in_place, so it does not stall
        // other tasks; the memory store answers in microseconds and runs inline, as does
        // any store on a current-thread runtime (which has no worker to hand its tasks to).
        let engine = self
            .engine
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let sessions = Sessions::new(&engine, self.opts.store.as_ref())
            .with_fail_closed(self.opts.fail_closed)
            .with_observer(self.opts.observer.as_deref())
            .with_traceparent(traceparent)
            .with_counters(self.opts.counters);
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if self.opts.store.may_block() && multi_thread {
            tokio::task::block_in_place(|| f(&sessions))
        } else {
            f(&sessions)
        }
    }

    fn deny_result(id: &Value, text: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}], "isError": true}})
    }

    /// Asks the operator through the client's elicitation; `false` on decline, cancel,
    /// error or timeout.
    async fn elicit(self: &Arc<Self>, reason: &str) -> bool {
        let n = self.next_elicit.fetch_add(1, Ordering::Relaxed);
        let id = format!("toolbrake-elicit-{n}");
        let (tx, rx) = oneshot::channel();
        self.elicit_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id_key(&json!(id)), tx);
        self.send_client(&json!({
            "jsonrpc": "2.0", "id": id, "method": "elicitation/create",
            "params": {
                "message": reason,
                "requestedSchema": {
                    "type": "object",
                    "properties": {"approve": {"type": "boolean", "title": messages::ELICIT_QUESTION}},
                    "required": ["approve"]
                }
            }
        }));
        match tokio::time::timeout(self.opts.ask_timeout, rx).await {
            Ok(Ok(resp)) => {
                let r = &resp["result"];
                r["action"] == "accept" && r["content"]["approve"] == true
            }
            _ => {
                self.elicit_waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id_key(&json!(id)));
                false
            }
        }
    }

    /// A `tools/call` whose arguments nest deeper than toolbrake can parse. Refused when
    /// fail-closed; otherwise it runs, counted by the hash of its arguments' text (so
    /// identical ones still reach the streak brake and the window), with a warning.
    async fn unjudgeable_call(self: Arc<Self>, id: Value, params: Value, raw: String) {
        let tool = params.get("name").and_then(Value::as_str).unwrap_or("");
        events::warn(
            self.opts.events.as_ref(),
            &format!(
                "toolbrake mcp: the arguments of a call of {tool} nest too deep to judge; {}",
                if self.opts.fail_closed {
                    "refused ([store] fail_closed = true)"
                } else {
                    "counted by their hash"
                }
            ),
        );
        let policy = self.unjudged("its arguments nest too deep to read");
        if policy.refuse {
            self.send_client(&Self::deny_result(&id, &policy.refusal));
            return;
        }
        self.tool_call(id, params, raw).await;
    }

    /// A message from the client: the method and id read first, without parsing the rest;
    /// a message that is neither a `tools/call` nor one of the few the proxy must look into
    /// is forwarded as read, never parsed further or written anew.
    fn from_client(self: &Arc<Self>, line: String) {
        match ClientHead::of(&line) {
            Some(ClientHead {
                method: Some(method),
                id: Some(id),
                params,
            }) if method == "tools/call" => {
                let params = match params {
                    Some(p) => serde_json::from_str(p.get()),
                    None => Ok(json!({})),
                };
                match (serde_json::from_str(id.get()), params) {
                    (Ok(id), Ok(params)) => {
                        if let Some(waiting) = self.judge_call(id, params, line) {
                            tokio::spawn(self.clone().continue_call(waiting));
                        }
                    }
                    // Too deep for the parser: the whole message is looked at again.
                    _ => self.from_client_parsed(line),
                }
            }
            Some(ClientHead {
                method: Some(method),
                id: Some(id),
                ..
            }) if method != "initialize" => {
                let Ok(id) = serde_json::from_str::<Value>(id.get()) else {
                    return self.from_client_parsed(line);
                };
                let method = match &*method {
                    "tools/list" => Forwarded::ToolsList,
                    _ => Forwarded::Other,
                };
                self.inflight()
                    .insert(id_key(&id), Pending::Forwarded { method });
                self.to_server.send(line);
            }
            Some(ClientHead {
                method: Some(method),
                id: None,
                ..
            }) if method != "notifications/cancelled" => {
                self.to_server.send(line);
            }
            Some(ClientHead {
                method: None,
                id: Some(_),
                ..
            }) if self
                .elicit_waiters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty() =>
            {
                // A response to a server-initiated request (no elicitation of ours waits).
                self.to_server.send(line);
            }
            Some(ClientHead {
                method: None,
                id: None,
                ..
            }) => {
                self.to_server.send(line);
            }
            // The rest (initialize, a cancellation, a response while an elicitation waits,
            // and what the shallow read refused) is parsed whole.
            _ => self.from_client_parsed(line),
        }
    }

    /// A message from the client, parsed whole.
    fn from_client_parsed(self: &Arc<Self>, line: String) {
        let msg: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) => {
                // A tools/call too deep for the parser is still a call: it follows
                // the failure policy, never passes unjudged.
                if let Some((id, params)) = unjudgeable_tool_call(&line) {
                    tokio::spawn(self.clone().unjudgeable_call(id, params, line));
                    return;
                }
                // Not ours to judge: the server answers malformed input itself.
                self.to_server.send(line);
                return;
            }
        };
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = msg.get("id").cloned();
        match (method.as_deref(), id) {
            (Some("tools/call"), Some(id)) => {
                let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
                if let Some(waiting) = self.judge_call(id, params, line) {
                    tokio::spawn(self.clone().continue_call(waiting));
                }
            }
            (Some(m), Some(id)) => {
                if m == "initialize" {
                    let elicits = msg.pointer("/params/capabilities/elicitation").is_some();
                    self.client_elicits.store(elicits, Ordering::Relaxed);
                }
                let method = match m {
                    "initialize" => Forwarded::Initialize,
                    "tools/list" => Forwarded::ToolsList,
                    _ => Forwarded::Other,
                };
                self.inflight()
                    .insert(id_key(&id), Pending::Forwarded { method });
                self.to_server.send(line);
            }
            (Some(m), None) => {
                if m == "notifications/cancelled" {
                    if let Some(rid) = msg.pointer("/params/requestId") {
                        if let Some(Pending::ToolCall(ctx)) = self.inflight().get_mut(&id_key(rid))
                        {
                            ctx.cancelled = true;
                        }
                    }
                }
                self.to_server.send(line);
            }
            (None, Some(id)) => {
                // A response: to our own elicitation, or to a server-initiated request.
                let waiter = self
                    .elicit_waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id_key(&id));
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(msg);
                    }
                    None => {
                        self.to_server.send(line);
                    }
                }
            }
            (None, None) => {
                self.to_server.send(line);
            }
        }
    }

    /// Judges a `tools/call` and, when the call needs no waiting (the usual case), finishes
    /// it: forwarded, refused, or answered with an error. An ask (the client elicits) and
    /// the proxy's own fetch tool continue in [`Shared::continue_call`]. Runs on the
    /// reading task itself: no task hand-off on the path of an ordinary call.
    fn judge_call(self: &Arc<Self>, id: Value, mut params: Value, raw: String) -> Option<Waiting> {
        self.reload();
        let key = id_key(&id);
        let session = self.session_for(&params);
        let call_id = ["mcp-", key.as_str()].concat();
        let tool = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        // Taken, not copied: the rest of `params` is read only for `_meta`.
        let args = params
            .get_mut("arguments")
            .map(Value::take)
            .unwrap_or_else(|| json!({}));
        // Registered before judging, so a response or a cancellation can never miss it.
        self.inflight().insert(
            key.clone(),
            Pending::ToolCall(ToolCtx {
                session: session.clone(),
                call_id: call_id.clone(),
                advisories: Vec::new(),
                cancelled: false,
            }),
        );
        // The engine is borrowed, never cloned: a clone would compile its lazy patterns again.
        let call = Call {
            session: &session,
            id: &call_id,
            tool: &tool,
            args: &args,
        };
        let traceparent = params
            .get("_meta")
            .and_then(|m| m.get("traceparent"))
            .and_then(Value::as_str);
        let decided = self.with_traced_sessions(traceparent, |s| s.pre(&session, &call));
        let decision = match decided {
            Ok(d) => d,
            Err(SessionError::Engine(e)) => {
                self.inflight().remove(&key);
                self.send_client(&Self::deny_result(
                    &id,
                    &messages::not_judged(&e.to_string()),
                ));
                return None;
            }
            Err(SessionError::Store(problem)) => {
                let line = format!("toolbrake mcp: could not judge a call of {tool}: {problem}");
                events::warn(self.opts.events.as_ref(), &line);
                let policy = self.unjudged(&problem.to_string());
                if policy.refuse {
                    self.inflight().remove(&key);
                    self.send_client(&Self::deny_result(&id, &policy.refusal));
                } else {
                    self.to_server.send(raw);
                }
                return None;
            }
        };
        let call = Judged {
            id,
            key,
            session,
            call_id,
            tool,
            args,
            raw,
        };
        if decision.verdict != Verdict::Ask {
            return self.settle(call, decision, "");
        }
        if self.client_elicits.load(Ordering::Relaxed) {
            return Some(Waiting::Ask {
                call,
                decision: Box::new(decision),
            });
        }
        // No way to ask: declined, and the refusal says why.
        let decision = self.answer(&call.session, &call.call_id, false, decision);
        self.settle(call, decision, messages::NO_APPROVAL_CHANNEL)
    }

    /// The operator's answer to an ask, recorded; a refusal when it cannot be recorded.
    fn answer(&self, session: &str, call_id: &str, approved: bool, asked: Decision) -> Decision {
        match self.with_sessions(|s| s.answer(session, call_id, approved)) {
            Ok(d) => d,
            Err(_) => Decision {
                verdict: Verdict::Deny,
                message: Some(messages::APPROVAL_NOT_RECORDED.into()),
                ..asked
            },
        }
    }

    /// Acts on a final verdict: refuse, or forward (or run the proxy's own fetch tool,
    /// which is returned to be awaited).
    fn settle(&self, call: Judged, decision: Decision, prefix: &str) -> Option<Waiting> {
        match decision.verdict {
            Verdict::Deny | Verdict::Ask => {
                self.inflight().remove(&call.key);
                let text = format!("{prefix}{}", decision.message.unwrap_or_default());
                self.send_client(&Self::deny_result(&call.id, &text));
                None
            }
            Verdict::Allow | Verdict::Advise => {
                if !decision.advisories.is_empty() {
                    if let Some(Pending::ToolCall(ctx)) = self.inflight().get_mut(&call.key) {
                        ctx.advisories = decision.advisories.into_iter().map(|a| a.text).collect();
                    }
                }
                match self.local_fetcher(&call.tool) {
                    Some(fetcher) => Some(Waiting::Fetch { call, fetcher }),
                    None => {
                        self.to_server.send(call.raw);
                        None
                    }
                }
            }
        }
    }

    /// The part of a `tools/call` that waits: the operator's answer, or the local fetch.
    async fn continue_call(self: Arc<Self>, waiting: Waiting) {
        let waiting = match waiting {
            Waiting::Ask { call, decision } => {
                let approved = self.elicit(decision.message.as_deref().unwrap_or("")).await;
                let decision = self.answer(&call.session, &call.call_id, approved, *decision);
                match self.settle(call, decision, "") {
                    Some(next) => next,
                    None => return,
                }
            }
            fetch => fetch,
        };
        if let Waiting::Fetch { call, fetcher } = waiting {
            self.local_fetch(fetcher, call.id, &call.session, &call.args)
                .await;
        }
    }

    /// A whole `tools/call`: judged, then continued if it must wait.
    async fn tool_call(self: Arc<Self>, id: Value, params: Value, raw: String) {
        if let Some(waiting) = self.judge_call(id, params, raw) {
            self.continue_call(waiting).await;
        }
    }

    /// The proxy's own `web_fetch_file`, when this call is one.
    fn local_fetcher(&self, tool: &str) -> Option<Arc<toolbrake_fetch::Fetcher>> {
        (tool == toolbrake_fetch::TOOL_NAME && !self.server_fetches.load(Ordering::Relaxed))
            .then(|| self.opts.fetch.clone())
            .flatten()
    }

    /// Runs `web_fetch_file` here and answers the client as the server would have; its
    /// status code is the outcome the failure track reads.
    async fn local_fetch(
        self: &Arc<Self>,
        fetcher: Arc<toolbrake_fetch::Fetcher>,
        id: Value,
        session: &str,
        args: &Value,
    ) {
        let fetched = fetcher.call(session, args).await;
        let Some(Pending::ToolCall(ctx)) = self.inflight().remove(&id_key(&id)) else {
            return;
        };
        let mut outcome = Outcome::default();
        let result = match &fetched {
            Ok(f) => {
                outcome.status_code = Some(i64::from(f.status_code));
                // What the failure track reads: the status and where it came from (not
                // the file it went to, which may differ between identical fetches).
                outcome.text = Some(format!("HTTP {} from {}", f.status_code, f.final_url));
                f.to_mcp_result()
            }
            Err(e) => {
                outcome.is_error = Some(true);
                outcome.text = Some(e.to_string());
                e.to_mcp_result()
            }
        };
        if ctx.cancelled {
            outcome.aborted = Some(true);
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "result": result});
        self.clone().finish(ctx, Some(msg), None, outcome);
    }

    /// A `tools/call` answer from the server: its outcome recorded, then passed on. `msg` is
    /// the answer read whole, when it was (see [`ServerHead`]).
    fn tool_result(self: Arc<Self>, ctx: ToolCtx, msg: Option<Value>, raw: String, read: Outcome) {
        let outcome = if ctx.cancelled {
            Outcome {
                aborted: Some(true),
                ..Outcome::default()
            }
        } else {
            read
        };
        self.finish(ctx, msg, Some(raw), outcome);
    }

    /// Records a call's outcome and answers the client, with the advisories appended to
    /// the result's content. `raw` is the answer's text as received, sent unchanged when
    /// nothing is added; `msg` the answer read whole (read from `raw` when advice must be
    /// added and it was not). One of them is given.
    fn finish(
        self: Arc<Self>,
        ctx: ToolCtx,
        msg: Option<Value>,
        raw: Option<String>,
        outcome: Outcome,
    ) {
        let record = |s: &Sessions<'_, dyn Store>| s.post(&ctx.session, &ctx.call_id, &outcome);
        if ctx.advisories.is_empty()
            && !Engine::post_may_advise(&outcome)
            && !self.opts.store.shared()
        {
            // Nothing can ride on this answer: it goes first, and the record after it is
            // off the client's wait (in order: the next call is judged after it). A store
            // other processes share records first, as another proxy on the same session
            // may judge the client's next call.
            let steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
            self.pass_on(raw, msg);
            let _ = self.with_sessions_in_order(&steps, None, record);
            return;
        }
        let mut advisories = ctx.advisories.clone();
        if let Ok(post) = self.with_sessions(record) {
            advisories.extend(post.advisories.into_iter().map(|a| a.text));
        }
        if advisories.is_empty() {
            return self.pass_on(raw, msg);
        }
        // Advice rides in the result's content: the answer read whole (here, if it was not).
        let mut msg = msg.or_else(|| raw.as_deref().and_then(|r| serde_json::from_str(r).ok()));
        let content = msg
            .as_mut()
            .and_then(|m| m.get_mut("result"))
            .and_then(|r| r.get_mut("content"))
            .and_then(Value::as_array_mut);
        match content {
            Some(content) => {
                for a in advisories {
                    content.push(json!({"type": "text", "text": a}));
                }
                self.pass_on(None, msg);
            }
            // A JSON-RPC error has no content to carry advice: pass it on unchanged.
            None => self.pass_on(raw, msg),
        }
    }

    /// Answers the client with `raw` as received when there is one, else with `msg`.
    fn pass_on(&self, raw: Option<String>, msg: Option<Value>) {
        match (raw, msg) {
            (Some(raw), _) => self.to_client.send(raw),
            (None, Some(msg)) => self.send_client(&msg),
            (None, None) => {}
        }
    }

    /// Appends `web_fetch_file` to the last page of the server's tool list (unless the
    /// server has a tool of that name: then its own is used).
    fn add_fetch_tool(&self, msg: &mut Value) {
        if self.opts.fetch.is_none() {
            return;
        }
        let Some(result) = msg.get_mut("result").and_then(Value::as_object_mut) else {
            return;
        };
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        if tools
            .iter()
            .any(|t| t.get("name").and_then(Value::as_str) == Some(toolbrake_fetch::TOOL_NAME))
        {
            self.server_fetches.store(true, Ordering::Relaxed);
            return;
        }
        if result.get("nextCursor").is_some_and(|c| !c.is_null()) {
            return;
        }
        if let Some(Value::Array(tools)) = result.get_mut("tools") {
            tools.push(toolbrake_fetch::tool_definition());
        }
    }

    /// The `initialize` answer: toolbrake named in `serverInfo`; with the fetch tool on,
    /// the tools capability declared even when the server has no tools.
    fn rewrite_initialize(&self, msg: &mut Value) {
        Self::rewrite_server_info(msg);
        if self.opts.fetch.is_none() {
            return;
        }
        if let Some(caps) = msg
            .get_mut("result")
            .and_then(|r| r.get_mut("capabilities"))
            .and_then(Value::as_object_mut)
        {
            caps.entry("tools").or_insert_with(|| json!({}));
        }
    }

    fn rewrite_server_info(msg: &mut Value) {
        let Some(info) = msg
            .get_mut("result")
            .and_then(|r| r.get_mut("serverInfo"))
            .and_then(Value::as_object_mut)
        else {
            return;
        };
        let name = info
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("server")
            .to_string();
        let version = info
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let title = info
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or(&name)
            .to_string();
        info.insert("name".into(), json!(format!("toolbrake/{name}")));
        info.insert(
            "title".into(),
            json!(format!(
                "{title} (through toolbrake {})",
                env!("CARGO_PKG_VERSION")
            )),
        );
        if version.is_empty() {
            info.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
        }
    }

    /// The server is gone: every request in flight gets an error; nothing hangs.
    fn fail_inflight(&self, why: &str) {
        let pending: Vec<String> = self.inflight().drain().map(|(k, _)| k).collect();
        for key in pending {
            let id: Value = serde_json::from_str(&key).unwrap_or(Value::Null);
            self.send_client(&json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32603,
                "message": format!("toolbrake: the MCP server {why} before answering this request")
            }}));
        }
    }
}

/// Reads newline-delimited messages with a length bound.
async fn read_message<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<String>> {
    buf.clear();
    let n = r.read_until(b'\n', buf).await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > MAX_MESSAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "message too large",
        ));
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    // Room for the newline the writer adds, so sending it on costs no second allocation.
    let mut line = String::with_capacity(buf.len() + 1);
    line.push_str(&String::from_utf8_lossy(buf));
    Ok(Some(line))
}

/// Runs the proxy between a client (`client_in` / `client_out`) and a server reached by
/// `server_in` (what the server writes) and `server_out` (what it reads). Returns when
/// the client closes its side (after the server's last answers) or with an error when the
/// server fails.
pub async fn run<CI, CO, SI, SO>(
    opts: Options,
    client_in: CI,
    client_out: CO,
    server_in: SI,
    server_out: SO,
) -> Result<(), ProxyError>
where
    CI: AsyncRead + Unpin + Send + 'static,
    CO: AsyncWrite + Unpin + Send + 'static,
    SI: AsyncRead + Unpin + Send + 'static,
    SO: AsyncWrite + Unpin + Send + 'static,
{
    let (to_client, client_drain) = outbox::outbox(client_out);
    let (to_server, server_drain) = outbox::outbox(server_out);
    let mut opts = opts;
    let engine = std::sync::RwLock::new(Arc::new(std::mem::take(&mut opts.engine)));
    let reload = Mutex::new(opts.reload.take());
    let shared = Arc::new(Shared {
        engine,
        reload,
        opts,
        to_client,
        to_server,
        inflight: Mutex::new(HashMap::new()),
        elicit_waiters: Mutex::new(HashMap::new()),
        client_elicits: AtomicBool::new(false),
        next_elicit: AtomicU64::new(1),
        server_fetches: AtomicBool::new(false),
        steps: Mutex::new(()),
    });
    let client_writer = tokio::spawn(client_drain.run());
    let server_writer = tokio::spawn(server_drain.run());

    // Client → server.
    let from_client = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(client_in);
            let mut buf = Vec::new();
            loop {
                let line = match read_message(&mut r, &mut buf).await {
                    Ok(Some(l)) => l,
                    Ok(None) => return Ok::<(), ProxyError>(()),
                    Err(e) => return Err(ProxyError::Client(e)),
                };
                if line.trim().is_empty() {
                    continue;
                }
                shared.from_client(line);
            }
        })
    };

    // Server → client.
    let from_server = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(server_in);
            let mut buf = Vec::new();
            loop {
                let line = match read_message(&mut r, &mut buf).await {
                    Ok(Some(l)) => l,
                    Ok(None) => return ServerFailure::Closed,
                    Err(e) => return ServerFailure::Unreadable(e),
                };
                if line.trim().is_empty() {
                    continue;
                }
                // The id of a response, and what a tool's answer says, read in one pass (see
                // [`ServerHead`]); a message that does not read that way is parsed whole, as
                // it always was.
                let mut parsed = None;
                let mut head = None;
                let key = match serde_json::from_str::<ServerHead>(&line) {
                    Ok(h) => match (h.method, h.id) {
                        (None, Some(id)) => match serde_json::from_str::<Value>(id.get()) {
                            Ok(id) => {
                                head = Some(h);
                                Some(id_key(&id))
                            }
                            Err(_) => return ServerFailure::NotJsonRpc,
                        },
                        _ => None,
                    },
                    Err(_) => {
                        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                            return ServerFailure::NotJsonRpc;
                        };
                        let key = msg
                            .get("id")
                            .filter(|_| msg.get("method").is_none())
                            .map(id_key);
                        parsed = Some(msg);
                        key
                    }
                };
                let Some(key) = key else {
                    drop(head);
                    shared.to_client.send(line);
                    continue;
                };
                // Only the answers the proxy reads or edits are parsed whole (before the
                // request leaves the table, so a server failing here still answers it).
                let (edits, tool_call) = match shared.inflight().get(&key) {
                    Some(Pending::ToolCall(_)) => (true, true),
                    Some(Pending::Forwarded { method }) => (
                        *method == Forwarded::Initialize
                            || (*method == Forwarded::ToolsList && shared.opts.fetch.is_some()),
                        false,
                    ),
                    None => (false, false),
                };
                // A tool's answer in the common shape is read for its outcome alone.
                let fast = match head {
                    Some(h) if tool_call => h.tool_outcome(),
                    _ => None,
                };
                if edits && parsed.is_none() && fast.is_none() {
                    match serde_json::from_str::<Value>(&line) {
                        Ok(msg) => parsed = Some(msg),
                        Err(_) => return ServerFailure::NotJsonRpc,
                    }
                }
                let pending = shared.inflight().remove(&key);
                if let Some(outcome) = fast {
                    match pending {
                        Some(Pending::ToolCall(ctx)) => {
                            shared.clone().tool_result(ctx, None, line, outcome);
                        }
                        _ => shared.to_client.send(line),
                    }
                    continue;
                }
                let Some(mut msg) = parsed.filter(|_| edits) else {
                    shared.to_client.send(line);
                    continue;
                };
                match pending {
                    Some(Pending::ToolCall(ctx)) => {
                        let outcome = tool_outcome(&msg);
                        shared.clone().tool_result(ctx, Some(msg), line, outcome);
                    }
                    Some(Pending::Forwarded {
                        method: Forwarded::Initialize,
                    }) => {
                        shared.rewrite_initialize(&mut msg);
                        shared.send_client(&msg);
                    }
                    Some(Pending::Forwarded {
                        method: Forwarded::ToolsList,
                    }) if shared.opts.fetch.is_some() => {
                        shared.add_fetch_tool(&mut msg);
                        shared.send_client(&msg);
                    }
                    _ => {
                        shared.to_client.send(line);
                    }
                }
            }
        })
    };

    let (mut from_client, mut from_server) = (from_client, from_server);
    let outcome = tokio::select! {
        r = &mut from_client => {
            // The client is done: let the server answer what is in flight (for a while),
            // then stop.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while !shared.inflight().is_empty() && tokio::time::Instant::now() < deadline && !from_server.is_finished() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            from_server.abort();
            match r {
                Ok(Err(e)) => Err(e),
                _ => Ok(()),
            }
        }
        r = &mut from_server => {
            let why = match r {
                Ok(why) => why,
                Err(e) => ServerFailure::ReaderFailed(e),
            };
            shared.fail_inflight(&why.to_string());
            // Stop reading the client too: the relay lets go of both of its ends, so
            // whoever runs it (the HTTP listener's session) sees its output end.
            from_client.abort();
            Err(ProxyError::Downstream(why))
        }
    };
    // Let queued lines reach the client, then close both directions.
    let grace = Duration::from_millis(200);
    drop(shared);
    let mut client_writer = client_writer;
    if tokio::time::timeout(grace, &mut client_writer)
        .await
        .is_err()
    {
        client_writer.abort();
    }
    server_writer.abort();
    outcome
}

/// Runs the proxy in front of a Streamable HTTP server at `url` (see [`http`]).
pub async fn run_http<CI, CO>(
    mut opts: Options,
    client_in: CI,
    client_out: CO,
    url: String,
) -> Result<(), ProxyError>
where
    CI: AsyncRead + Unpin + Send + 'static,
    CO: AsyncWrite + Unpin + Send + 'static,
{
    let session = Arc::new(http::HttpSession::default());
    opts.http_session = Some(session.clone());
    let (relay_side, bridge_side) = tokio::io::duplex(1 << 20);
    let bridge = tokio::spawn(http::bridge(bridge_side, url, session));
    let (server_in, server_out) = tokio::io::split(relay_side);
    let r = run(opts, client_in, client_out, server_in, server_out).await;
    let _ = tokio::time::timeout(Duration::from_secs(3), bridge).await;
    r
}

/// How the relay in front of a server child ended, and how the child did.
#[derive(Debug)]
pub struct ChildRun {
    /// The relay's result.
    pub result: Result<(), ProxyError>,
    /// The child's exit status, when it exited in time (it is killed otherwise).
    pub status: Option<std::process::ExitStatus>,
}

/// Starts `command` (program and arguments) as the MCP server, with its stdio piped, and
/// runs the relay in front of it. Afterwards the child is given 5 s to exit after a clean
/// end (the client closed, so its stdin closed) or 0.5 s after a failure, then killed.
pub async fn run_child<CI, CO>(
    opts: Options,
    client_in: CI,
    client_out: CO,
    command: &[String],
) -> std::io::Result<ChildRun>
where
    CI: AsyncRead + Unpin + Send + 'static,
    CO: AsyncWrite + Unpin + Send + 'static,
{
    let (program, args) = command.split_first().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no server command")
    })?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let missing = || std::io::Error::other("the server's stdio was not piped");
    let server_in = child.stdout.take().ok_or_else(missing)?;
    let server_out = child.stdin.take().ok_or_else(missing)?;
    let result = run(opts, client_in, client_out, server_in, server_out).await;
    let grace = if result.is_ok() {
        Duration::from_secs(5)
    } else {
        Duration::from_millis(500)
    };
    let status = match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(st)) => Some(st),
        _ => {
            let _ = child.kill().await;
            None
        }
    };
    Ok(ChildRun { result, status })
}

/// Runs the proxy with no server behind it: an MCP server offering only the proxy's own
/// tools (`web_fetch_file`, which `opts.fetch` must provide).
pub async fn run_fetch_only<CI, CO>(
    opts: Options,
    client_in: CI,
    client_out: CO,
) -> Result<(), ProxyError>
where
    CI: AsyncRead + Unpin + Send + 'static,
    CO: AsyncWrite + Unpin + Send + 'static,
{
    let (relay_side, server_side) = tokio::io::duplex(1 << 20);
    let server = tokio::spawn(no_tools_server(server_side));
    let (server_in, server_out) = tokio::io::split(relay_side);
    let r = run(opts, client_in, client_out, server_in, server_out).await;
    server.abort();
    r
}

/// The server behind [`run_fetch_only`]: it initializes, lists no tools of its own,
/// answers pings, and refuses every other request as unknown.
async fn no_tools_server(io: tokio::io::DuplexStream) {
    let (read, mut write) = tokio::io::split(io);
    let mut r = BufReader::new(read);
    let mut buf = Vec::new();
    while let Ok(Some(line)) = read_message(&mut r, &mut buf).await {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
        else {
            continue;
        };
        let answer = match method {
            "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": msg.pointer("/params/protocolVersion").cloned().unwrap_or_else(|| json!("2025-06-18")),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "web-fetch-file", "version": env!("CARGO_PKG_VERSION")},
            }}),
            "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": []}}),
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            _ => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("method not found: {method}")}})
            }
        };
        let mut out = answer.to_string();
        out.push('\n');
        if write.write_all(out.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A `tools/call` answer as a server may write it: the common shape, other shapes,
    /// and keys written twice.
    fn arb_answer() -> impl Strategy<Value = String> {
        let text = prop_oneof![
            Just(String::new()),
            Just("\"\"".to_string()),
            "[a-z \\n]{0,12}".prop_map(|t| serde_json::to_string(&t).unwrap()),
            Just("\"a\\\\u00e9\\\\n\"".to_string()),
            Just("null".to_string()),
            Just("5".to_string()),
        ];
        let block = prop_oneof![
            6 => text.prop_map(|t| if t.is_empty() {
                "{\"type\":\"text\"}".to_string()
            } else {
                format!("{{\"type\":\"text\",\"text\":{t}}}")
            }),
            2 => Just("{\"type\":\"image\",\"data\":\"AA==\"}".to_string()),
            1 => Just("\"bare\"".to_string()),
            1 => Just("7".to_string()),
        ];
        let content = prop_oneof![
            Just(None),
            Just(Some("null".to_string())),
            Just(Some("\"text\"".to_string())),
            prop::collection::vec(block, 0..4).prop_map(|b| Some(format!("[{}]", b.join(",")))),
        ];
        let is_error = prop_oneof![
            Just(None),
            Just(Some("true")),
            Just(Some("false")),
            Just(Some("null")),
            Just(Some("\"true\"")),
        ];
        let result = (is_error, content, any::<bool>()).prop_map(|(e, c, twice)| {
            let mut members = Vec::new();
            if let Some(e) = e {
                members.push(format!("\"isError\":{e}"));
            }
            if let Some(c) = c {
                members.push(format!("\"content\":{c}"));
                if twice {
                    members.push("\"content\":[]".to_string());
                }
            }
            format!("{{{}}}", members.join(","))
        });
        let result = prop_oneof![
            4 => result.prop_map(Some),
            1 => Just(None),
            1 => Just(Some("null".to_string())),
            1 => Just(Some("3".to_string())),
        ];
        let error = prop_oneof![
            4 => Just(None),
            1 => Just(Some("null".to_string())),
            1 => Just(Some("{\"code\":-32000,\"message\":\"boom\"}".to_string())),
        ];
        (result, error).prop_map(|(r, e)| {
            let mut members = vec!["\"jsonrpc\":\"2.0\"".to_string(), "\"id\":1".to_string()];
            if let Some(r) = r {
                members.push(format!("\"result\":{r}"));
            }
            if let Some(e) = e {
                members.push(format!("\"error\":{e}"));
            }
            format!("{{{}}}", members.join(","))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Reading an answer's outcome without parsing it whole gives what reading it
        /// whole gives, wherever the quick reading answers.
        #[test]
        fn the_quick_outcome_is_the_whole_answers_outcome(line in arb_answer()) {
            if let Some(quick) = fast_tool_outcome(&line) {
                let whole: Value = serde_json::from_str(&line).unwrap();
                prop_assert_eq!(quick, tool_outcome(&whole), "{}", line);
            }
        }
    }

    proptest! {
        #[test]
        fn an_id_is_keyed_by_its_compact_json_text(
            i in any::<i64>(),
            u in any::<u64>(),
            f in any::<f64>(),
            s in "\\PC{0,8}",
        ) {
            for id in [json!(i), json!(u), json!(f), json!(s), json!(null), json!([i])] {
                prop_assert_eq!(id_key(&id), id.to_string());
            }
        }
    }

    #[test]
    fn the_common_answers_are_read_quickly() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"no"}],"isError":true}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"structuredContent":{"a":1}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":""},{"type":"text","text":"a\u00e9"},{"type":"image","data":"AA=="},{"type":"text","text":"b"}]}}"#,
        ] {
            let whole: Value = serde_json::from_str(line).unwrap();
            assert_eq!(
                fast_tool_outcome(line),
                Some(tool_outcome(&whole)),
                "{line}"
            );
        }
        // Errors and other shapes are read whole.
        assert_eq!(
            fast_tool_outcome(r#"{"jsonrpc":"2.0","id":4,"error":null}"#),
            None
        );
        assert_eq!(
            fast_tool_outcome(r#"{"jsonrpc":"2.0","id":5,"result":{"content":"x"}}"#),
            None
        );
    }
}
