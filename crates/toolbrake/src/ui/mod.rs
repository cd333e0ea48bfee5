//! `toolbrake ui`: a small local web app over the store the hooks and proxies use.
//!
//! Pages (server-rendered with maud, charts as inline SVG, updated by a little vanilla
//! JavaScript that polls the JSON API; no build step, nothing from the network): home (how
//! things stand, the sessions working now, recent stops in words, charts of stops, calls
//! saved and asks, the tools that loop most), one session (its calls as a picture, what it
//! kept doing, its gates, reset and feedback), and the settings form. The API
//! (docs/dashboard.md): `GET /api/overview`, `GET /api/sessions`, `GET|DELETE
//! /api/sessions/{key}`, `POST /api/sessions/{key}/feedback`, `GET|PUT /api/config`, `GET
//! /api/tune`, and
//! `GET /metrics`: the store's counters for Prometheus (`toolbrake_telemetry::counters`),
//! behind the same checks as every other route. Editing the configuration validates the whole file with the
//! rules of `config check` and writes it atomically, comments and keys the form does not
//! know kept (`toml_edit`); an invalid edit is refused with its key, value and rule, and
//! the file is left untouched.
//!
//! Security, at the boundary: loopback by default; with a token every request needs it
//! (`Authorization: Bearer`, or a cookie set from `?token=` once), and listening beyond
//! loopback without one is refused at start; state-changing requests must carry the
//! page's own `Origin` (or the token in an `Authorization` header); without a token the `Host` must be a loopback name and the `Origin`,
//! when sent, a loopback origin (no DNS rebinding: `toolbrake_http`, the check
//! the MCP listener makes too). Connections get `toolbrake_http::serve_http`'s header timeout
//! and cap. Nothing shown holds an argument value: the store keeps only redacted
//! previews.

mod charts;
mod config;
mod home;
mod layout;
mod session;
mod settings_page;
mod words;

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
use toolbrake_core::SessionState;
use toolbrake_http::{rebinding_refusal, serve_http, token_matches, HttpLimits};
use toolbrake_store::{SessionInfo, Store};

pub use config::{apply_edit, EditError};

/// The cookie that keeps the token after `?token=`.
const COOKIE: &str = "toolbrake_ui_token";

/// What the dashboard serves.
pub struct Ui {
    /// Where session state lives.
    pub store: Arc<dyn Store>,
    /// The configuration file read and written (`--config`, else the one the lookup
    /// finds, else the user's file: `settings::editable`).
    pub config_path: PathBuf,
    /// Which kind of file that is, for the page to say who reads it.
    pub editable: crate::settings::Editable,
    /// Every request must carry it, when set.
    pub token: Option<String>,
    /// The address listened on.
    pub listen: SocketAddr,
}

type Shared = Arc<Ui>;

/// The dashboard's routes, with its security checks.
pub fn router(ui: Ui) -> Router {
    let ui = Arc::new(ui);
    Router::new()
        .route("/", get(home::home_page))
        .route("/sessions/{key}", get(session::session_page))
        .route("/settings", get(settings_page::settings_page))
        .route("/assets/app.js", get(script))
        .route("/api/overview", get(home::api_overview))
        .route("/api/sessions", get(api_sessions))
        .route(
            "/api/sessions/{key}",
            get(api_session).delete(api_reset_session),
        )
        .route(
            "/api/sessions/{key}/feedback",
            axum::routing::post(api_feedback),
        )
        .route("/api/config", get(api_config).put(api_put_config))
        .route("/api/tune", get(api_tune))
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state(ui.clone(), guard))
        .with_state(ui)
}

/// Serves until the process ends, with `limits` on its connections.
pub async fn serve(
    ui: Ui,
    listener: tokio::net::TcpListener,
    limits: HttpLimits,
) -> std::io::Result<()> {
    serve_http(listener, router(ui), limits).await
}

fn deny(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({"error": {"message": why}}))).into_response()
}

fn token_of(req: &Request) -> Option<String> {
    let headers = req.headers();
    if let Some(auth) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        if let Some(t) = auth.strip_prefix("Bearer ") {
            return Some(t.trim().to_string());
        }
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|c| c.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// The request's path and query with every `token` parameter taken out.
fn without_token(uri: &axum::http::Uri) -> String {
    let kept: Vec<(String, String)> = uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .filter(|(k, _)| k != "token")
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let path = uri.path();
    if kept.is_empty() {
        return path.to_string();
    }
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(kept)
        .finish();
    format!("{path}?{query}")
}

fn query_token(req: &Request) -> Option<String> {
    let q = req.uri().query()?;
    url::form_urlencoded::parse(q.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
}

/// Why a state-changing request is refused: it must carry the dashboard's own `Origin`
/// (browsers send it with every such request, so a page of another site is told apart),
/// or the token in an `Authorization` header (which no other site's page can send; a
/// cookie is sent by the browser whoever made the request, so it is not enough).
fn state_change_refusal(ui: &Ui, req: &Request, host: &str) -> Option<&'static str> {
    match req.headers().get(header::ORIGIN) {
        Some(origin) => {
            let own = [format!("http://{host}"), format!("https://{host}")];
            let origin = origin.to_str().unwrap_or("");
            (!own.iter().any(|o| o == origin)).then_some(
                "a state-changing request must come from the dashboard's own page (Origin mismatch)",
            )
        }
        None => {
            let bearer = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|a| a.strip_prefix("Bearer "))
                .map(str::trim);
            let authorised = match (&ui.token, bearer) {
                (Some(expected), Some(given)) => token_matches(given, expected),
                _ => false,
            };
            (!authorised).then_some(
                "a state-changing request needs the dashboard's Origin header (its page sends it) \
                 or, from a script, Authorization: Bearer TOKEN (start the dashboard with --token)",
            )
        }
    }
}

async fn guard(State(ui): State<Shared>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if ui.token.is_none() {
        if let Some(why) = rebinding_refusal(req.headers()) {
            return deny(StatusCode::FORBIDDEN, why);
        }
    }
    let mut set_cookie = None;
    if let Some(expected) = &ui.token {
        let given = token_of(&req);
        let from_query = query_token(&req);
        let ok = given.as_deref().is_some_and(|t| token_matches(t, expected))
            || from_query
                .as_deref()
                .is_some_and(|t| token_matches(t, expected));
        if !ok {
            return deny(
                StatusCode::UNAUTHORIZED,
                "a token is required: Authorization: Bearer TOKEN, or open the page with ?token=TOKEN once",
            );
        }
        if from_query.is_some() && given.is_none() {
            let cookie = format!("{COOKIE}={expected}; Path=/; HttpOnly; SameSite=Strict");
            // A page opened with ?token= is sent to the same address without it: the
            // token stays out of the address bar, the history and any Referer.
            if *req.method() == Method::GET {
                let mut resp = StatusCode::SEE_OTHER.into_response();
                let to = without_token(req.uri());
                for (k, v) in [(header::LOCATION, to), (header::SET_COOKIE, cookie)] {
                    if let Ok(v) = HeaderValue::from_str(&v) {
                        resp.headers_mut().insert(k, v);
                    }
                }
                resp.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                return resp;
            }
            set_cookie = Some(cookie);
        }
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        if let Some(why) = state_change_refusal(&ui, &req, &host) {
            return deny(StatusCode::FORBIDDEN, why);
        }
    }
    let mut resp = next.run(req).await;
    if let Some(c) = set_cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        resp.headers_mut().insert(header::SET_COOKIE, c);
    }
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// Runs a store call off the async threads (SQLite and Redis block).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, toolbrake_store::StoreError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(deny(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the store is unavailable: {e}"),
        )),
        Err(_) => Err(deny(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the store task failed",
        )),
    }
}

/// A session as the dashboard shows it.
pub fn session_json(info: &SessionInfo, with_log: bool) -> Value {
    let st: &SessionState = &info.state;
    let b = st.breaker.summary();
    // The fingerprints nearest their gates: the latest reading of each, highest first.
    let mut near: Vec<(String, u32, u32)> = Vec::new();
    for e in st.log().rev() {
        if let Some((fp, count, limit)) = &e.near {
            let fp = fp.shown();
            if !near.iter().any(|(f, _, _)| *f == fp) {
                near.push((fp.into_owned(), *count, *limit));
            }
        }
    }
    near.sort_by(|a, b| (u64::from(b.1) * u64::from(a.2)).cmp(&(u64::from(a.1) * u64::from(b.2))));
    near.truncate(5);
    let last = UNIX_EPOCH + Duration::from_millis(info.last_activity_ms);
    let mut v = json!({
        "key": info.key,
        "last_activity": humantime::format_rfc3339_seconds(last).to_string(),
        "last_activity_ms": info.last_activity_ms,
        "window": b.records,
        "top_count": b.max_count,
        "streak": {"count": st.streak.count(), "call": st.streak.current_prefix()},
        "near": near.iter().map(|(fp, c, l)| json!({"fingerprint": fp, "count": c, "limit": l, "doing": words::action(fp)})).collect::<Vec<_>>(),
        "failure_streaks": b.failure_streaks.iter().map(|(k, n)| json!({"kind": k, "count": n})).collect::<Vec<_>>(),
        "pending_asks": b.pending_asks,
        "exemptions": b.exemptions,
        "refusals": b.refusals,
        "stopped": st.stopped(),
        "gated": toolbrake_telemetry::counters::gated(st),
        "feedback": st.feedback.map(toolbrake_core::Feedback::as_str),
    });
    if with_log {
        v["log"] = json!(st.log().collect::<Vec<_>>());
    }
    v
}

/// The store's counters and its sessions, as a Prometheus scrape.
async fn metrics(State(ui): State<Shared>) -> Response {
    let store = ui.store.clone();
    match blocking(move || Ok((store.counters()?, store.list()?))).await {
        Ok((counters, sessions)) => (
            [(
                header::CONTENT_TYPE,
                toolbrake_telemetry::http::CONTENT_TYPE,
            )],
            toolbrake_telemetry::http::exposition(|out| {
                toolbrake_telemetry::counters::render(
                    &counters,
                    &sessions,
                    toolbrake_telemetry::counters::TOP_TOOLS,
                    out,
                )
            }),
        )
            .into_response(),
        Err(r) => r,
    }
}

/// Every stored session as the dashboard shows it, the most recently active first.
async fn sessions_newest_first(ui: &Shared) -> Result<Vec<Value>, Response> {
    let store = ui.store.clone();
    let mut list = blocking(move || store.list()).await?;
    list.sort_by_key(|i| std::cmp::Reverse(i.last_activity_ms));
    Ok(list.iter().map(|i| session_json(i, false)).collect())
}

async fn api_sessions(State(ui): State<Shared>) -> Response {
    match sessions_newest_first(&ui).await {
        Ok(rows) => Json(json!({"sessions": rows, "store": ui.store.describe()})).into_response(),
        Err(r) => r,
    }
}

async fn find_session(ui: &Shared, key: String) -> Result<Option<SessionInfo>, Response> {
    let store = ui.store.clone();
    let list = blocking(move || store.list()).await?;
    Ok(list.into_iter().find(|i| i.key == key))
}

async fn api_session(State(ui): State<Shared>, UrlPath(key): UrlPath<String>) -> Response {
    match find_session(&ui, key.clone()).await {
        Ok(Some(info)) => Json(session_json(&info, true)).into_response(),
        Ok(None) => deny(
            StatusCode::NOT_FOUND,
            &format!("no session {key:?} in the store"),
        ),
        Err(r) => r,
    }
}

async fn api_reset_session(State(ui): State<Shared>, UrlPath(key): UrlPath<String>) -> Response {
    let store = ui.store.clone();
    let k = key.clone();
    let removed = blocking(move || {
        let mut n = 0;
        for sub in store.keys_with_prefix(&toolbrake_core::engine::agent_key_prefix(&k))? {
            n += usize::from(store.remove(&sub)?);
        }
        n += usize::from(store.remove(&k)?);
        Ok(n)
    })
    .await;
    match removed {
        Ok(0) => deny(
            StatusCode::NOT_FOUND,
            &format!("no session {key:?} in the store"),
        ),
        Ok(n) => Json(json!({"reset": key, "removed": n})).into_response(),
        Err(r) => r,
    }
}

async fn api_config(State(ui): State<Shared>) -> Response {
    match config::view(&ui.config_path) {
        Ok(v) => config_response(v),
        Err(e) => e.into_response(),
    }
}

/// A view of the configuration, with its version as the `ETag` edits send back in `If-Match`.
fn config_response(view: Value) -> Response {
    let etag = view["version"]
        .as_str()
        .and_then(|v| HeaderValue::from_str(v).ok());
    let mut r = Json(view).into_response();
    if let Some(etag) = etag {
        r.headers_mut().insert(header::ETAG, etag);
    }
    r
}

async fn api_put_config(State(ui): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    if !json_body {
        return deny(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the edit as application/json, e.g. {\"streak\": {\"max_repeats\": 5}}",
        );
    }
    let edit: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => {
            return deny(
                StatusCode::BAD_REQUEST,
                &format!("the body is not JSON ({e})"),
            )
        }
    };
    let path = ui.config_path.clone();
    let if_match = headers
        .get(header::IF_MATCH)
        .map(|v| v.to_str().unwrap_or("").to_string());
    match tokio::task::spawn_blocking(move || {
        config::apply_edit_if(&path, &edit, if_match.as_deref())
    })
    .await
    {
        Ok(Ok(_)) => match config::view(&ui.config_path) {
            Ok(v) => config_response(v),
            Err(e) => e.into_response(),
        },
        Ok(Err(e)) => e.into_response(),
        Err(_) => deny(StatusCode::INTERNAL_SERVER_ERROR, "the edit task failed"),
    }
}

impl IntoResponse for EditError {
    fn into_response(self) -> Response {
        let status = match &self {
            EditError::Invalid(_) | EditError::Shape(_) => StatusCode::BAD_REQUEST,
            EditError::Stale => StatusCode::CONFLICT,
            EditError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            EditError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            EditError::Io { .. } | EditError::Unreadable { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let mut body = json!({"error": {"message": self.to_string()}});
        if let EditError::Invalid(e) = &self {
            body["error"]["key"] = json!(e.key);
            body["error"]["value"] = json!(e.value);
            body["error"]["rule"] = json!(e.rule);
        }
        (status, Json(body)).into_response()
    }
}

/// Records a person's verdict on a session (`{"feedback": "mistaken" | "stuck"}`) with
/// `toolbrake_session::record_feedback`: what calibration reads. Nothing is created for a
/// session the store does not hold.
async fn api_feedback(
    State(ui): State<Shared>,
    UrlPath(key): UrlPath<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    if !json_body {
        return deny(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the feedback as application/json, e.g. {\"feedback\": \"stuck\"}",
        );
    }
    let given = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["feedback"].as_str().map(str::to_string));
    let Some(feedback) = given.as_deref().and_then(toolbrake_core::Feedback::parse) else {
        return deny(
            StatusCode::BAD_REQUEST,
            &format!(
                "feedback must be \"mistaken\" (it wasn't stuck) or \"stuck\" (it was), not {}",
                given.map_or_else(|| "missing".to_string(), |g| format!("{g:?}"))
            ),
        );
    };
    let store = ui.store.clone();
    let k = key.clone();
    match blocking(move || toolbrake_session::record_feedback(store.as_ref(), &k, feedback)).await {
        Ok(true) => Json(json!({"session": key, "feedback": feedback.as_str()})).into_response(),
        Ok(false) => deny(
            StatusCode::NOT_FOUND,
            &format!("no session {key:?} in the store"),
        ),
        Err(r) => r,
    }
}

/// The tune result the settings page charts (`toolbrake-tune.json` beside the
/// configuration), as `toolbrake tune --json` wrote it.
async fn api_tune(State(ui): State<Shared>) -> Response {
    let path = ui.config_path.clone();
    match tokio::task::spawn_blocking(move || settings_page::tune_result(&path)).await {
        Ok(Ok(Some(v))) => Json(v).into_response(),
        Ok(Ok(None)) => deny(
            StatusCode::NOT_FOUND,
            &format!(
                "no tune result: write one with toolbrake tune --json HISTORY > {}",
                settings_page::tune_file(&ui.config_path).display()
            ),
        ),
        Ok(Err(why)) => deny(StatusCode::UNPROCESSABLE_ENTITY, &why),
        Err(_) => deny(StatusCode::INTERNAL_SERVER_ERROR, "the read task failed"),
    }
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("app.js"),
    )
        .into_response()
}

/// An HTML response.
fn html(markup: maud::Markup) -> Response {
    Html(markup.into_string()).into_response()
}
