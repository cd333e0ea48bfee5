//! The proxy serving MCP's Streamable HTTP transport to its clients (`toolbrake mcp
//! --listen ADDR`), for remote agents, IDE fleets and hosted agent platforms.
//!
//! One endpoint, `/mcp` (axum): `POST` carries one JSON-RPC message (a request is answered
//! with an SSE stream that carries the server's messages about it and ends with its
//! response; `initialize` with plain JSON and a new `Mcp-Session-Id`; notifications and
//! responses with `202`), `GET` opens the stream of messages no request is waiting for,
//! `DELETE` ends the session.
//!
//! Each client session gets its own downstream server (a fresh child process, or its own
//! connection to an HTTP server) and its own relay ([`crate::run`]), so server-initiated
//! messages (progress, logging, elicitation) can only reach the client they belong to.
//! Each is its own toolbrake session (`mcp-http:<session id>`) unless `_meta` names a
//! conversation; state lives in the configured store, so proxies behind a load balancer
//! share counts through Redis.
//!
//! At the boundary: with a token every request needs `Authorization: Bearer`, and an
//! `Origin` header must name this host or a loopback one; listening beyond loopback without
//! one is refused by the caller at start, and without one a request must name a loopback
//! `Host` ([`toolbrake_http::rebinding_refusal`], the MCP specification's DNS-rebinding
//! defence) and, if it sends an `Origin`, the listener's own, as the dashboard requires (a
//! page of another local server is refused). Every `POST` must be `application/json`: the
//! types a page may send without a CORS preflight (`text/plain`, forms) are refused (415),
//! and no preflight is approved.
//! Connections get [`toolbrake_http::serve_http`]'s header timeout and cap.
//!
//! Session lifetime: a session ends when its client deletes it, when its relay stops (its
//! server exited or failed: later requests get 404, and the client starts a new session as
//! the transport specifies), or when it has been idle for [`SessionLimits::idle`] (no
//! request, no request in flight, no `GET` stream open). At most
//! [`SessionLimits::max_sessions`] live at once, and at most
//! [`SessionLimits::max_per_client`] per client address.

use crate::events::ProxyEvents;
use crate::{id_key, run_child, run_fetch_only, run_http, Options, ProxyError};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use boundary::{error, json_body, new_session_id, refuse};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use toolbrake_http::{serve_http, HttpLimits};

mod boundary;

/// The header that names a client session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// How many client sessions a listener keeps, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Client sessions kept at once (503 past it).
    pub max_sessions: usize,
    /// Client sessions kept at once for one client address (429 past it).
    pub max_per_client: usize,
    /// A session with no request, none in flight and no `GET` stream open for this long
    /// ends.
    pub idle: Duration,
}

impl SessionLimits {
    /// The default cap on sessions.
    pub const MAX_SESSIONS: usize = 256;
    /// The default cap on one client's sessions.
    pub const MAX_PER_CLIENT: usize = 64;
    /// The default idle time after which a session ends.
    pub const IDLE: Duration = Duration::from_secs(30 * 60);
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_sessions: Self::MAX_SESSIONS,
            max_per_client: Self::MAX_PER_CLIENT,
            idle: Self::IDLE,
        }
    }
}

/// The downstream each client session gets.
#[derive(Debug, Clone)]
pub enum Downstream {
    /// A child process per session, speaking stdio.
    Command(Vec<String>),
    /// A Streamable HTTP server.
    Url(String),
    /// No server: only the proxy's own tools (`web_fetch_file`).
    None,
}

/// What the listener needs.
pub struct Listen {
    /// Builds the options of one client session's relay; its argument is the toolbrake
    /// session key of calls whose `_meta` names no conversation.
    pub options: Box<dyn Fn(String) -> Options + Send + Sync>,
    /// The downstream server.
    pub downstream: Downstream,
    /// Every request must carry it, when set.
    pub token: Option<String>,
    /// How many client sessions, and for how long.
    pub sessions: SessionLimits,
    /// The connections' header timeout and cap.
    pub http: HttpLimits,
}

type Waiters = HashMap<String, mpsc::Sender<String>>;

/// Messages each of a session's channels holds for a reader that is slow (the relay, an
/// SSE stream whose client reads nothing): past it the sender waits, and so, in turn, the
/// relay, which stops reading the server (backpressure; every message is at most
/// [`crate::MAX_MESSAGE`]).
const QUEUED: usize = 16;

/// What the `GET` stream's backlog holds at most: messages, and bytes.
const BACKLOG: (usize, usize) = (1024, 4 << 20);

/// One client session: the relay's input, and where its output goes.
struct Session {
    /// The relay's input; `None` once the session ended (the relay then stops).
    to_relay: Mutex<Option<mpsc::Sender<String>>>,
    /// Request id → the stream waiting for its response.
    waiters: Mutex<Waiters>,
    /// Progress token → the request id it belongs to.
    progress: Mutex<HashMap<String, String>>,
    /// The `GET` stream, for messages no request waits for.
    general: Mutex<Option<mpsc::Sender<String>>>,
    /// Messages for the `GET` stream that arrived before it was opened (bounded).
    backlog: Mutex<Vec<String>>,
    /// The client's address (for the per-client cap).
    peer: IpAddr,
    /// When the client last sent a request on this session.
    last_request: Mutex<Instant>,
}

struct Shared {
    listen: Listen,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/mcp", post(on_post).get(on_get).delete(on_delete))
        .with_state(shared)
}

/// Serves until the process ends (with [`serve_http`]'s limits), ending idle sessions.
pub async fn serve(listen: Listen, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let http = listen.http;
    let idle = listen.sessions.idle;
    let shared = Arc::new(Shared {
        listen,
        sessions: Mutex::new(HashMap::new()),
    });
    let sweeper = Arc::downgrade(&shared);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(
            (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60)),
        );
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(shared) = sweeper.upgrade() else {
                return;
            };
            end_idle_sessions(&shared);
        }
    });
    serve_http(listener, routes(shared), http).await
}

/// Why a request names no live session: its status, JSON-RPC code and message.
type NoSession = (StatusCode, i64, &'static str);

fn session_of(shared: &Shared, headers: &HeaderMap) -> Result<Arc<Session>, NoSession> {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err((
            StatusCode::BAD_REQUEST,
            -32000,
            "missing Mcp-Session-Id (initialize first)",
        ));
    };
    let session = shared
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(id)
        .cloned()
        .ok_or(ENDED)?;
    *session
        .last_request
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Instant::now();
    Ok(session)
}

/// The answer to a request on a session that ended (deleted, its server gone, or idle).
const ENDED: NoSession = (
    StatusCode::NOT_FOUND,
    -32001,
    "unknown or ended session: initialize again",
);

impl Session {
    /// Hands a message to the relay (waiting while it is busy); `false` when the session
    /// has ended.
    async fn send(&self, line: String) -> bool {
        let tx = self
            .to_relay
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match tx {
            Some(tx) => tx.send(line).await.is_ok(),
            None => false,
        }
    }

    /// Whether a client is still connected to one of the session's streams.
    fn busy(&self) -> bool {
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|tx| !tx.is_closed())
            || self
                .general
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|tx| !tx.is_closed())
    }

    /// Ends the session: the relay sees its client close, stops, and its downstream
    /// process is killed; open streams end.
    fn close(&self) {
        self.to_relay
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.general
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// Routes one message the relay wrote: a response to its waiting request; progress to
    /// the request it belongs to; anything else to the `GET` stream, else to the newest
    /// request still waiting.
    async fn route(&self, line: String) {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            return;
        };
        let is_response = msg.get("method").is_none();
        if is_response {
            if let Some(id) = msg.get("id") {
                let key = id_key(id);
                let waiter = self
                    .waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
                if let Some(tx) = waiter {
                    let _ = tx.send(line).await;
                    self.progress
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .retain(|_, v| *v != key);
                }
                return;
            }
        }
        if let Some(token) = msg.pointer("/params/progressToken") {
            let owner = self
                .progress
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&id_key(token))
                .cloned();
            if let Some(tx) = owner.and_then(|k| {
                self.waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&k)
                    .cloned()
            }) {
                let _ = tx.send(line).await;
                return;
            }
        }
        let general = self
            .general
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(tx) = general {
            if tx.send(line.clone()).await.is_ok() {
                return;
            }
        }
        let any = self
            .waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .next()
            .cloned();
        match any {
            Some(tx) => {
                let _ = tx.send(line).await;
            }
            None => {
                let mut b = self.backlog.lock().unwrap_or_else(|e| e.into_inner());
                let bytes: usize = b.iter().map(String::len).sum();
                if b.len() < BACKLOG.0 && bytes + line.len() <= BACKLOG.1 {
                    b.push(line);
                }
            }
        }
    }
}

/// Why a new session cannot be had: its status, JSON-RPC code and message.
fn full(
    sessions: &HashMap<String, Arc<Session>>,
    limits: SessionLimits,
    peer: IpAddr,
) -> Option<(StatusCode, String)> {
    if sessions.len() >= limits.max_sessions {
        return Some((
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many client sessions on this proxy ({}): try again later",
                limits.max_sessions
            ),
        ));
    }
    let mine = sessions.values().filter(|s| s.peer == peer).count();
    if mine >= limits.max_per_client {
        return Some((
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "too many client sessions from this address ({}): end one (DELETE) or let one go idle",
                limits.max_per_client
            ),
        ));
    }
    None
}

/// Ends every session idle for longer than the limit.
fn end_idle_sessions(shared: &Shared) {
    let idle = shared.listen.sessions.idle;
    let expired: Vec<String> = shared
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(_, s)| {
            s.last_request
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .elapsed()
                >= idle
                && !s.busy()
        })
        .map(|(id, _)| id.clone())
        .collect();
    for id in expired {
        end_session(shared, &id);
    }
}

/// Starts a client session, unless the caps are reached: registers it, starts its
/// downstream and relay, and the task routing its output (which ends the session when the
/// relay stops).
fn start_session(
    shared: &Arc<Shared>,
    id: &str,
    peer: IpAddr,
) -> Result<Arc<Session>, (StatusCode, String)> {
    let (to_relay, mut relay_rx) = mpsc::channel::<String>(QUEUED);
    let (client_side, relay_side) = tokio::io::duplex(1 << 20);
    let (relay_in, relay_out) = tokio::io::split(relay_side);
    let (client_read, mut client_write) = tokio::io::split(client_side);
    let session = Arc::new(Session {
        to_relay: Mutex::new(Some(to_relay)),
        waiters: Mutex::new(HashMap::new()),
        progress: Mutex::new(HashMap::new()),
        general: Mutex::new(None),
        backlog: Mutex::new(Vec::new()),
        peer,
        last_request: Mutex::new(Instant::now()),
    });
    end_idle_sessions(shared);
    {
        let mut sessions = shared.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(refusal) = full(&sessions, shared.listen.sessions, peer) {
            return Err(refusal);
        }
        // Registered before the relay starts, so that a relay that stops at once ends it.
        sessions.insert(id.to_string(), session.clone());
    }
    // HTTP → relay.
    tokio::spawn(async move {
        while let Some(line) = relay_rx.recv().await {
            if client_write.write_all(line.as_bytes()).await.is_err()
                || client_write.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
        // The session ended: the relay sees its client close.
        let _ = client_write.shutdown().await;
    });
    // Relay → the streams.
    {
        let session = session.clone();
        let shared = Arc::downgrade(shared);
        let id = id.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(client_read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                session.route(line).await;
            }
            // The relay stopped (its server exited or failed): the session is over; its
            // later requests get 404 and the client starts a new one.
            session.close();
            if let Some(shared) = shared.upgrade() {
                end_session(&shared, &id);
            }
        });
    }
    // The relay itself, with its downstream.
    let opts = (shared.listen.options)(format!("mcp-http:{id}"));
    let events = opts.events.clone();
    let downstream = shared.listen.downstream.clone();
    tokio::spawn(async move {
        let tell = |f: fn(&dyn ProxyEvents)| {
            if let Some(e) = &events {
                f(e.as_ref());
            }
        };
        tell(|e| e.client_session_started());
        if !matches!(downstream, Downstream::None) {
            tell(|e| e.downstream_started());
        }
        let result: Result<(), ProxyError> = match downstream {
            Downstream::Command(cmd) => match run_child(opts, relay_in, relay_out, &cmd).await {
                Ok(run) => run.result,
                Err(e) => {
                    tell(|e| e.downstream_failed());
                    let line = format!(
                        "toolbrake mcp: cannot start the MCP server {:?}: {e}",
                        cmd[0]
                    );
                    crate::events::warn(events.as_ref(), &line);
                    Ok(())
                }
            },
            Downstream::Url(url) => run_http(opts, relay_in, relay_out, url).await,
            Downstream::None => run_fetch_only(opts, relay_in, relay_out).await,
        };
        if let Err(e) = result {
            if matches!(e, ProxyError::Downstream(_)) {
                tell(|e| e.downstream_failed());
            }
            let line = format!("toolbrake mcp: a client session ended: {e}");
            crate::events::warn(events.as_ref(), &line);
        }
        tell(|e| e.client_session_ended());
    });
    Ok(session)
}

/// The SSE stream of a request (`request`: its id; the stream ends with its response) or
/// of the `GET` stream (`None`), starting with `first`. A request whose session ends
/// before its response gets a JSON-RPC error instead. The stream's task ends when its
/// client goes away; while its client reads nothing, it holds at most [`QUEUED`] events.
fn sse_of(mut rx: mpsc::Receiver<String>, request: Option<Value>, first: Vec<String>) -> Response {
    let stream = async_stream(
        move |tx: mpsc::Sender<Result<Event, Infallible>>| async move {
            let event = |line: String| Ok(Event::default().event("message").data(line));
            for line in first {
                if tx.send(event(line)).await.is_err() {
                    return;
                }
            }
            loop {
                let line = tokio::select! {
                    line = rx.recv() => line,
                    // The client went away: drop the receiver, so the session sees it.
                    () = tx.closed() => return,
                };
                let Some(line) = line else {
                    if let Some(id) = &request {
                        let ended = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "the session ended before the MCP server answered: initialize again"}});
                        let _ = tx.send(event(ended.to_string())).await;
                    }
                    return;
                };
                let done = request.is_some()
                    && serde_json::from_str::<Value>(&line)
                        .map(|v| v.get("method").is_none() && v.get("id").is_some())
                        .unwrap_or(false);
                if tx.send(event(line)).await.is_err() || done {
                    return;
                }
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// A stream fed by a task (no extra dependency for generators), through a bounded channel.
fn async_stream<F, Fut>(
    f: F,
) -> impl futures_util::Stream<Item = Result<Event, Infallible>> + Send + 'static
where
    F: FnOnce(mpsc::Sender<Result<Event, Infallible>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(QUEUED);
    tokio::spawn(f(tx));
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
}

/// The client's address, as [`serve_http`] records it.
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

fn peer_ip(peer: &Peer) -> IpAddr {
    peer.as_ref().map_or(
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        |Extension(ConnectInfo(a))| a.ip(),
    )
}

fn ended() -> Response {
    error(ENDED.0, ENDED.1, ENDED.2)
}

async fn on_post(
    State(shared): State<Arc<Shared>>,
    peer: Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = refuse(shared.listen.token.as_deref(), &headers) {
        return r;
    }
    if !json_body(&headers) {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            -32600,
            "send each message as Content-Type: application/json",
        );
    }
    let msg: Value =
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return error(
                StatusCode::BAD_REQUEST,
                -32600,
                "one JSON-RPC message per request (batches are not part of MCP since 2025-06-18)",
            ),
            Err(e) => return error(StatusCode::BAD_REQUEST, -32700, &format!("not JSON: {e}")),
        };
    let method = msg.get("method").and_then(Value::as_str);
    let id = msg.get("id").cloned();
    if method == Some("initialize") && headers.get(SESSION_HEADER).is_none() {
        let Some(id) = id else {
            return error(StatusCode::BAD_REQUEST, -32600, "initialize needs an id");
        };
        let sid = new_session_id();
        let session = match start_session(&shared, &sid, peer_ip(&peer)) {
            Ok(s) => s,
            Err((status, why)) => return error(status, -32000, &why),
        };
        let (tx, mut rx) = mpsc::channel(1);
        session
            .waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id_key(&id), tx);
        let answer = if session.send(msg.to_string()).await {
            tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .ok()
                .flatten()
        } else {
            None
        };
        return match answer {
            Some(line) => {
                let mut resp = ([(header::CONTENT_TYPE, "application/json")], line).into_response();
                if let Ok(v) = HeaderValue::from_str(&sid) {
                    resp.headers_mut().insert(SESSION_HEADER, v);
                }
                resp
            }
            _ => {
                end_session(&shared, &sid);
                error(
                    StatusCode::BAD_GATEWAY,
                    -32603,
                    "the MCP server did not answer initialize",
                )
            }
        };
    }
    let session = match session_of(&shared, &headers) {
        Ok(s) => s,
        Err((status, code, why)) => return error(status, code, why),
    };
    match (method, id) {
        (Some(_), Some(id)) => {
            let key = id_key(&id);
            let (tx, rx) = mpsc::channel(QUEUED);
            session
                .waiters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone(), tx);
            if let Some(token) = msg.pointer("/params/_meta/progressToken") {
                session
                    .progress
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id_key(token), key.clone());
            }
            if !session.send(msg.to_string()).await {
                // The session ended while this request came in.
                session
                    .waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
                return ended();
            }
            sse_of(rx, Some(id), Vec::new())
        }
        _ => {
            // A notification, or the client's answer to a server request.
            if !session.send(msg.to_string()).await {
                return ended();
            }
            StatusCode::ACCEPTED.into_response()
        }
    }
}

async fn on_get(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(r) = refuse(shared.listen.token.as_deref(), &headers) {
        return r;
    }
    let session = match session_of(&shared, &headers) {
        Ok(s) => s,
        Err((status, code, why)) => return error(status, code, why),
    };
    let (tx, rx) = mpsc::channel(QUEUED);
    let backlog = std::mem::take(&mut *session.backlog.lock().unwrap_or_else(|e| e.into_inner()));
    *session.general.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    if session
        .to_relay
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_none()
    {
        // The session ended while this request came in.
        session
            .general
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        return ended();
    }
    sse_of(rx, None, backlog)
}

fn end_session(shared: &Shared, id: &str) -> bool {
    let session = shared
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(id);
    session.map(|s| s.close()).is_some()
}

async fn on_delete(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(r) = refuse(shared.listen.token.as_deref(), &headers) {
        return r;
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return error(StatusCode::BAD_REQUEST, -32000, "missing Mcp-Session-Id");
    };
    if end_session(&shared, id) {
        StatusCode::OK.into_response()
    } else {
        error(StatusCode::NOT_FOUND, -32001, "unknown or ended session")
    }
}
