//! What toolbrake's HTTP listeners (the MCP listener, `toolbrake_mcp::listen`, the
//! dashboard, `toolbrake ui`, and the metrics endpoint, `--metrics ADDR`) accept at their
//! boundary, in one place:
//!
//! - **DNS rebinding** ([`rebinding_refusal`]): without a token, a request is answered
//!   only when its `Host` is a loopback name (an IP literal in 127.0.0.0/8, `[::1]`, or
//!   `localhost`, with an optional port) and its `Origin`, when sent, is a loopback origin.
//!   A page whose name was rebound to 127.0.0.1 sends its own name in both, so it is
//!   refused.
//! - **Tokens** ([`token_matches`]): compared without an early exit.
//! - **Slow or many clients** ([`serve_http`]): a connection that has not sent a whole
//!   request head within [`HttpLimits::header_timeout`] is closed, and at most
//!   [`HttpLimits::max_connections`] connections are served at once (further ones wait,
//!   unaccepted, for a free slot).

use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, Request};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

/// Whether a `Host` header value names this machine by a loopback name: `localhost`, an
/// IPv4 address in 127.0.0.0/8 or `[::1]`, each optionally followed by `:PORT`. Names that
/// merely start like one (`127.evil.example`, `localhost.evil.example`) are not.
pub fn loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        // `[::1]` alone: the last colon is inside the brackets.
        Some((name, port)) if !port.ends_with(']') => {
            if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            if port.parse::<u16>().is_err() {
                return false;
            }
            name
        }
        _ => host,
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    if let Some(inner) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback());
    }
    name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether an `Origin` header value is a loopback origin: `http` or `https`, a loopback
/// host (as [`loopback_host`] reads it), nothing else. `null` and other schemes are not.
pub fn loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    loopback_host(rest)
}

/// The one `Host` of a request, if it sent exactly one that is text.
fn single(headers: &HeaderMap, name: header::HeaderName) -> Result<Option<&str>, ()> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(());
    }
    first.map(|v| v.to_str().map_err(|_| ())).transpose()
}

/// The DNS-rebinding defence of a listener that runs without a token: why the request is
/// refused (403), or `None` when its `Host` is a loopback name and its `Origin`, if any, a
/// loopback origin.
pub fn rebinding_refusal(headers: &HeaderMap) -> Option<&'static str> {
    match single(headers, header::HOST) {
        Ok(Some(host)) if loopback_host(host) => {}
        _ => {
            return Some(
                "without a token this listener answers only to a loopback Host (localhost, 127.0.0.0/8 or [::1]); start it with --token to serve other names",
            )
        }
    }
    match single(headers, header::ORIGIN) {
        Ok(None) => None,
        Ok(Some(origin)) if loopback_origin(origin) => None,
        _ => Some(
            "without a token this listener answers only to pages of a loopback origin (the request's Origin is not one)",
        ),
    }
}

/// Whether a presented token is the expected one: lengths first, then every byte, with no
/// early exit on the first difference.
pub fn token_matches(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// What a listener grants its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a connection may take to send a whole request head (the first one, or the
    /// next one on a kept-alive connection) before it is closed.
    pub header_timeout: Duration,
    /// Connections served at once; further ones wait, unaccepted, for a free slot.
    pub max_connections: usize,
}

impl HttpLimits {
    /// The default header timeout.
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default connection cap.
    pub const MAX_CONNECTIONS: usize = 512;
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Self::HEADER_TIMEOUT,
            max_connections: Self::MAX_CONNECTIONS,
        }
    }
}

/// Whether an accept error concerns only the one connection (the listener goes on at once).
fn connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Serves `router` over HTTP/1.1 on `listener` with `limits`, until the process ends.
/// Each request carries its peer's address ([`ConnectInfo<SocketAddr>`]).
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: HttpLimits,
) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            // The semaphore is never closed.
            return Ok(());
        };
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) if connection_error(&e) => continue,
            Err(e) => {
                // Out of descriptors, most likely: wait for some to be freed.
                eprintln!("toolbrake: cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let router = router.clone();
        let service =
            TowerToHyperService::new(tower::service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                router.clone().oneshot(req)
            }));
        tokio::spawn(async move {
            let _slot = slot;
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_ip_literals_or_localhost() {
        for ok in [
            "localhost",
            "LocalHost:4477",
            "127.0.0.1",
            "127.0.0.1:4477",
            "127.8.9.10:1",
            "[::1]",
            "[::1]:4478",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            "127.evil.example",
            "127.evil.example:4477",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "evil.example:4477",
            "127.0.0.1:",
            "127.0.0.1:99999",
            "127.0.0.1:44a",
            "[::1]x",
            "[::2]:80",
            "::1",
            "0.0.0.0",
            "10.0.0.1",
            "user@localhost",
            "localhost/",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn loopback_origins() {
        assert!(loopback_origin("http://localhost:3000"));
        assert!(loopback_origin("https://127.0.0.1"));
        assert!(loopback_origin("http://[::1]:9"));
        assert!(!loopback_origin("null"));
        assert!(!loopback_origin("http://127.evil.example:4477"));
        assert!(!loopback_origin("file://localhost"));
        assert!(!loopback_origin("http://localhost:3000/path"));
    }
}
