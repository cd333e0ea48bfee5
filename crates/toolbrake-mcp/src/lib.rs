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
//!
//! Here: the options, the shared state and the relay's loops ([`run`] and its variants).
//! The client side is `client.rs`, the server side `server.rs`, asks `ask.rs`, the fetch
//! tool `fetch_tool.rs`, and what is read of a message before it is handled `wire.rs`.
#![deny(missing_docs)]

// Linux and macOS are the platforms toolbrake builds for (docs/install.md, "Platforms"):
// this crate relays stdio through Unix pipes and socket pairs, which Windows lacks. Said
// plainly instead of a cascade of errors.
#[cfg(not(unix))]
compile_error!(
    "toolbrake-mcp needs a Unix platform (Linux or macOS); see docs/install.md, \"Platforms\""
);

mod ask;
mod client;
pub mod events;
mod fetch_tool;
mod frame;
pub mod http;
pub mod listen;
pub mod messages;
pub mod outbox;
mod server;
pub mod stdio;
mod wire;

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::oneshot;
use toolbrake_core::{Decision, Engine};
use toolbrake_session::{Observer, Sessions};
use toolbrake_store::Store;

pub use fetch_tool::run_fetch_only;
use frame::Frame;
pub(crate) use wire::id_key;

/// `_meta` keys that name a conversation, in order of preference (docs/decisions.md, "Hosts").
pub const SESSION_META_KEYS: &[&str] = &[
    "vscode.conversationId",
    "sessionID",
    "sessionId",
    "conversationId",
];

/// The largest single message accepted from either side (its line end not counted). A
/// longer one is dropped as it is read, never held whole: the client's gets a JSON-RPC
/// error, the server's answer becomes an error for the request it answered.
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

impl Shared {
    pub(crate) fn inflight(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.inflight.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn send_client(&self, v: &Value) {
        self.to_client.send(v.to_string());
    }

    pub(crate) fn session_for(&self, params: &Value) -> String {
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
    pub(crate) fn reload(&self) {
        let mut r = self.reload.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(engine) = r.as_mut().and_then(|f| f()) {
            *self.engine.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(engine);
        }
    }

    /// The failure policy for a call toolbrake could not judge, told to the observer (the
    /// session service's one place for it; no store is touched).
    pub(crate) fn unjudged(&self, problem: &str) -> toolbrake_session::Unjudged {
        self.with_sessions(|s| s.unjudged(problem))
    }

    /// Runs a step of the session service, off the async threads.
    pub(crate) fn with_sessions<R>(&self, f: impl FnOnce(&Sessions<'_, dyn Store>) -> R) -> R {
        self.with_traced_sessions(None, f)
    }

    /// [`Shared::with_sessions`] with the W3C `traceparent` the client sent with the call
    /// (`params._meta.traceparent`), for the observer's span.
    pub(crate) fn with_traced_sessions<R>(
        &self,
        traceparent: Option<&str>,
        f: impl FnOnce(&Sessions<'_, dyn Store>) -> R,
    ) -> R {
        let steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        self.with_sessions_in_order(&steps, traceparent, f)
    }

    /// [`Shared::with_traced_sessions`] for a caller that holds `steps` already.
    pub(crate) fn with_sessions_in_order<R>(
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

    pub(crate) fn deny_result(id: &Value, text: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}], "isError": true}})
    }
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

    // Client → server. A message is read only while both directions have room (what the
    // client sends goes to the server, refusals and errors back to it): a server that
    // reads nothing, or a client that reads nothing, stops the reading here.
    let from_client = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut lines = frame::Lines::new(BufReader::new(client_in));
            loop {
                shared.to_server.room().await;
                shared.to_client.room().await;
                let line = match lines.next().await {
                    Ok(Some(Frame::Line(l))) => l,
                    Ok(Some(Frame::Overflowing)) => continue,
                    Ok(Some(Frame::TooLarge { len, id })) => {
                        shared.client_too_large(len, id);
                        continue;
                    }
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

    // Server → client. A message is read only while the client's direction has room: a
    // client that reads nothing stops the reading here, and the server's writes block.
    let from_server = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut lines = frame::Lines::new(BufReader::new(server_in));
            loop {
                shared.to_client.room().await;
                let line = match lines.next().await {
                    Ok(Some(Frame::Line(l))) => l,
                    Ok(Some(Frame::Overflowing)) => {
                        shared.server_overflowing();
                        continue;
                    }
                    Ok(Some(Frame::TooLarge { len, id })) => {
                        match shared.server_too_large(len, id) {
                            Ok(()) => continue,
                            Err(failure) => return failure,
                        }
                    }
                    Ok(None) => return ServerFailure::Closed,
                    Err(e) => return ServerFailure::Unreadable(e),
                };
                if line.trim().is_empty() {
                    continue;
                }
                if let Err(failure) = shared.from_server(line) {
                    return failure;
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
