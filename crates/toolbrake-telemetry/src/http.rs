//! The `--metrics ADDR` endpoint of the long-running commands: `GET /metrics` and nothing
//! else, in the OpenMetrics text format Prometheus scrapes.
//!
//! Its boundary is the other listeners' ([`toolbrake_http`]): without a token a
//! request must name a loopback `Host` and, if it sends an `Origin`, a loopback one (no DNS
//! rebinding); with a token every request needs `Authorization: Bearer TOKEN` (Prometheus's
//! `authorization` setting). Listening beyond loopback without a token is refused by the
//! caller at start, as `ui` and `mcp --listen` refuse it. Connections get the shared header
//! timeout and cap.
//!
//! The response is every [`Renderer`] in turn (this process's registry, and the store's
//! counters where the command plugs them in), then `# EOF`.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;
use toolbrake_http::{rebinding_refusal, serve_http, token_matches, HttpLimits};

/// Appends metric families in the OpenMetrics text format, without `# EOF`.
pub type Renderer = Arc<dyn Fn(&mut String) + Send + Sync>;

/// The OpenMetrics text format's content type.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the endpoint serves and whom to.
#[derive(Clone)]
pub struct Endpoint {
    /// Rendered in order into each response.
    pub renderers: Vec<Renderer>,
    /// Every request must carry it (`Authorization: Bearer`), when set.
    pub token: Option<String>,
}

/// A whole scrape: the families `families` appends, then the `# EOF` OpenMetrics ends with.
pub fn exposition(families: impl FnOnce(&mut String)) -> String {
    let mut out = String::new();
    families(&mut out);
    out.push_str("# EOF\n");
    out
}

impl Endpoint {
    /// The whole response body: every renderer, then `# EOF`.
    pub fn body(&self) -> String {
        exposition(|out| {
            for r in &self.renderers {
                r(out);
            }
        })
    }

    /// Why a request is refused, or `None`.
    fn refusal(&self, headers: &HeaderMap) -> Option<Response> {
        let Some(expected) = &self.token else {
            return rebinding_refusal(headers)
                .map(|why| (StatusCode::FORBIDDEN, why).into_response());
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if given.is_some_and(|g| token_matches(g, expected)) {
            None
        } else {
            Some(
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "a token is required: Authorization: Bearer TOKEN",
                )
                    .into_response(),
            )
        }
    }
}

async fn metrics(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap) -> Response {
    if let Some(refused) = endpoint.refusal(&headers) {
        return refused;
    }
    // A renderer may read a store (SQLite, Redis): off the async threads.
    match tokio::task::spawn_blocking(move || endpoint.body()).await {
        Ok(body) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The routes: `GET /metrics` only (other methods get 405, other paths 404).
pub fn router(endpoint: Endpoint) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(Arc::new(endpoint))
}

/// Serves the endpoint on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    endpoint: Endpoint,
    limits: HttpLimits,
) -> std::io::Result<()> {
    serve_http(listener, router(endpoint), limits).await
}

/// Binds `addr` now (so a taken port is an error at start) and serves the endpoint on a
/// thread of its own with a small runtime, for a command that is not async itself
/// (`toolbrake serve`). Returns the address bound (port 0 becomes the one chosen).
pub fn serve_on_thread(
    addr: SocketAddr,
    endpoint: Endpoint,
    limits: HttpLimits,
) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let listener = {
        let _in_runtime = rt.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    std::thread::Builder::new()
        .name("toolbrake-metrics".into())
        .spawn(move || {
            // Serving ends only with the process (accept errors are waited out).
            let _ = rt.block_on(serve(listener, endpoint, limits));
        })?;
    Ok(bound)
}
