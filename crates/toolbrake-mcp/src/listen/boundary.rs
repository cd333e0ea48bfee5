//! The listener's boundary: what a request must carry to be answered (the token, `Host`
//! and `Origin`, a JSON body), and the error answers.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use toolbrake_http::{rebinding_refusal, token_matches};

pub(super) fn error(status: StatusCode, code: i64, message: &str) -> Response {
    (
        status,
        Json(json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})),
    )
        .into_response()
}

/// A fresh, unguessable session id (128 bits from the OS).
pub(super) fn new_session_id() -> String {
    let mut buf = [0u8; 16];
    // The OS's random source on every platform (getrandom(2), getentropy on macOS, ...).
    if getrandom::fill(&mut buf).is_err() {
        // No random source: the clock and a per-process random hasher, still unique.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        buf[..8].copy_from_slice(&h.finish().to_le_bytes());
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `origin` is this listener's own, as the request names it in `Host`.
fn own_origin(headers: &HeaderMap, origin: &str) -> bool {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    ["http://", "https://"]
        .iter()
        .any(|scheme| origin.strip_prefix(scheme) == Some(host))
}

/// Token and Origin checks; `None` when the request may proceed.
pub(super) fn refuse(token: Option<&str>, headers: &HeaderMap) -> Option<Response> {
    let Some(expected) = token else {
        // No token: a loopback name (no DNS rebinding), and no page but the listener's own
        // origin, as the dashboard does: a page of another loopback origin (another local
        // server's) is refused too, whatever it sends.
        if let Some(why) = rebinding_refusal(headers) {
            return Some(error(StatusCode::FORBIDDEN, -32001, why));
        }
        let origin = headers
            .get(header::ORIGIN)
            .map(|v| v.to_str().unwrap_or(""));
        return origin.filter(|o| !own_origin(headers, o)).map(|_| {
            error(
                StatusCode::FORBIDDEN,
                -32001,
                "without a token this listener answers no web page but its own origin (the request's Origin is another one); start it with --token to serve other pages",
            )
        });
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if !given.is_some_and(|g| token_matches(g, expected)) {
        return Some(error(
            StatusCode::UNAUTHORIZED,
            -32001,
            "a token is required: Authorization: Bearer TOKEN",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let own = [format!("http://{host}"), format!("https://{host}")];
        if !toolbrake_http::loopback_origin(origin) && !own.iter().any(|o| o == origin) {
            return Some(error(
                StatusCode::FORBIDDEN,
                -32001,
                "the request's Origin is not allowed",
            ));
        }
    }
    None
}

/// Whether the request's body is declared `application/json` (parameters allowed), as
/// Streamable HTTP requires. A web page can send another type (`text/plain`, a form)
/// without asking the browser's CORS preflight first; `application/json` it cannot.
pub(super) fn json_body(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|c| c.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}
