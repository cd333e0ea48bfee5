//! The downstream side over Streamable HTTP (MCP ≤ 2025-11-25): a bridge that turns the
//! relay's message lines into HTTP POSTs to the server's endpoint, and the server's answers
//! (a JSON body or an SSE stream, and the optional GET stream for server-initiated
//! messages) back into lines. The relay itself does not know which transport it talks to.
//!
//! Bounded as the stdio side is: a message (an SSE event's data, or a JSON body) over
//! [`crate::MAX_MESSAGE`] is dropped as it is read (the request it answered gets an
//! error), and the lines go back to the relay through a bounded channel, so a relay that
//! stops reading (its client reads nothing) stops the bridge reading the HTTP streams.

use futures_util::StreamExt;
use serde_json::{json, Value};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// What the bridge learned about the HTTP session.
#[derive(Debug, Default)]
pub struct HttpSession {
    /// `Mcp-Session-Id`, once the server assigned one.
    pub id: RwLock<Option<String>>,
    /// The negotiated protocol version, for the `MCP-Protocol-Version` header.
    pub protocol: RwLock<Option<String>>,
}

fn read(lock: &RwLock<Option<String>>) -> Option<String> {
    lock.read().unwrap_or_else(|e| e.into_inner()).clone()
}

fn write(lock: &RwLock<Option<String>>, v: String) {
    *lock.write().unwrap_or_else(|e| e.into_inner()) = Some(v);
}

/// Lines back to the relay: bounded, so the bridge waits when the relay does.
type Out = mpsc::Sender<String>;

/// Messages waiting for the relay.
const QUEUED: usize = 64;

/// The error that answers `request` (when it is a request) whose answer was over the bound.
fn too_large(request: Option<&Value>, len: usize) -> Option<String> {
    error_for(
        request?,
        &format!(
            "toolbrake: the MCP server's answer was {len} bytes or more, over the proxy's {} limit; it was dropped",
            crate::server::limit()
        ),
    )
}

/// Feeds complete SSE events' `data` to `out` as lines, reading each chunk once (a line is
/// looked for in the new bytes only). An event over the bound is dropped as it is read;
/// `request` (the POST's message, `None` on the GET stream) then gets an error, since the
/// event was most likely its answer.
async fn pump_sse(resp: reqwest::Response, out: &Out, request: Option<&Value>) {
    let mut stream = resp.bytes_stream();
    // The line being read, and the event's data so far.
    let mut line = Vec::new();
    let mut data = String::new();
    // While an event is dropped: its bytes so far, and whether the line being read is
    // blank so far (a blank line ends the event).
    let mut dropping: Option<usize> = None;
    let mut blank = true;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { break };
        let mut rest = &chunk[..];
        loop {
            let newline = memchr::memchr(b'\n', rest);
            let part = &rest[..newline.unwrap_or(rest.len())];
            if let Some(len) = &mut dropping {
                *len += part.len();
                blank &= part.iter().all(|b| *b == b'\r');
            } else {
                line.extend_from_slice(part);
                if line.len() + data.len() > crate::MAX_MESSAGE {
                    dropping = Some(line.len() + data.len());
                    blank = false;
                    line = Vec::new();
                    data = String::new();
                }
            }
            let Some(at) = newline else { break };
            rest = &rest[at + 1..];
            if let Some(len) = dropping {
                if blank {
                    dropping = None;
                    if let Some(err) = too_large(request, len) {
                        let _ = out.send(err).await;
                    }
                }
                blank = true;
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches('\r');
            if text.is_empty() {
                if !data.is_empty() && out.send(std::mem::take(&mut data)).await.is_err() {
                    return;
                }
            } else if let Some(d) = text.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
            line.clear();
        }
    }
    if !data.is_empty() {
        let _ = out.send(data).await;
    }
}

/// A JSON body, read up to the bound: `Err` says why it is not there.
async fn bounded_body(resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut stream = resp.bytes_stream();
    let mut body = Vec::new();
    let mut len = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        len += chunk.len();
        if len > crate::MAX_MESSAGE {
            body = Vec::new();
            continue;
        }
        body.extend_from_slice(&chunk);
    }
    if len > crate::MAX_MESSAGE {
        return Err(format!(
            "it was {len} bytes, over the proxy's {} limit; it was dropped",
            crate::server::limit()
        ));
    }
    Ok(body)
}

fn error_for(msg: &Value, text: &str) -> Option<String> {
    let id = msg.get("id")?;
    msg.get("method")?;
    Some(
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": text}}).to_string(),
    )
}

async fn post(client: &reqwest::Client, url: &str, session: &HttpSession, line: String, out: &Out) {
    let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(line.clone());
    if let Some(id) = read(&session.id) {
        req = req.header("mcp-session-id", id);
    }
    if let Some(v) = read(&session.protocol) {
        req = req.header("mcp-protocol-version", v);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            if let Some(err) = error_for(
                &msg,
                &format!("toolbrake: the MCP server could not be reached ({e})"),
            ) {
                let _ = out.send(err).await;
            }
            return;
        }
    };
    if let Some(id) = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        write(&session.id, id.to_string());
    }
    let status = resp.status();
    if status.as_u16() == 202 || status.as_u16() == 204 {
        return;
    }
    if !status.is_success() {
        if let Some(err) = error_for(
            &msg,
            &format!("toolbrake: the MCP server answered HTTP {status}"),
        ) {
            let _ = out.send(err).await;
        }
        return;
    }
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if is_sse {
        pump_sse(resp, out, Some(&msg)).await;
        return;
    }
    let body = match bounded_body(resp).await {
        Ok(b) => b,
        Err(e) => {
            if let Some(err) = error_for(&msg, &format!("toolbrake: the MCP server's answer {e}")) {
                let _ = out.send(err).await;
            }
            return;
        }
    };
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(items)) => {
            for it in items {
                let _ = out.send(it.to_string()).await;
            }
        }
        Ok(v) => {
            let _ = out.send(v.to_string()).await;
        }
        Err(e) => {
            if let Some(err) = error_for(
                &msg,
                &format!("toolbrake: the MCP server's answer is not JSON ({e})"),
            ) {
                let _ = out.send(err).await;
            }
        }
    }
}

/// Bridges the relay's server side (`relay_end`) to the Streamable HTTP endpoint `url`.
/// Runs until the relay closes its side; then ends the HTTP session (DELETE).
pub async fn bridge(relay_end: DuplexStream, url: String, session: Arc<HttpSession>) {
    let client = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("toolbrake mcp: cannot build an HTTP client: {e}");
            return;
        }
    };
    let (reader, mut writer) = tokio::io::split(relay_end);
    let (tx, mut rx) = mpsc::channel::<String>(QUEUED);
    // Everything the server says goes back to the relay as lines.
    let seen = session.clone();
    let back = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if read(&seen.protocol).is_none() && line.contains("\"protocolVersion\"") {
                if let Some(p) = serde_json::from_str::<Value>(&line).ok().and_then(|v| {
                    v.pointer("/result/protocolVersion")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                }) {
                    write(&seen.protocol, p);
                }
            }
            if writer.write_all(line.as_bytes()).await.is_err()
                || writer.write_all(b"\n").await.is_err()
            {
                break;
            }
            let _ = writer.flush().await;
        }
    });
    let mut lines = BufReader::new(reader).lines();
    let mut get_stream: Option<tokio::task::JoinHandle<()>> = None;
    while let Ok(Some(line)) = lines.next_line().await {
        let method = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_string));
        match method.as_deref() {
            // The session id comes back on initialize: everything after waits for it.
            Some("initialize") => {
                post(&client, &url, &session, line, &tx).await;
            }
            Some("notifications/initialized") => {
                post(&client, &url, &session, line, &tx).await;
                // The optional GET stream carries server-initiated requests and notifications.
                if get_stream.is_none() {
                    let (client, url, session, tx) =
                        (client.clone(), url.clone(), session.clone(), tx.clone());
                    get_stream = Some(tokio::spawn(async move {
                        let mut req = client.get(&url).header("accept", "text/event-stream");
                        if let Some(id) = read(&session.id) {
                            req = req.header("mcp-session-id", id);
                        }
                        if let Some(v) = read(&session.protocol) {
                            req = req.header("mcp-protocol-version", v);
                        }
                        if let Ok(resp) = req.send().await {
                            if resp.status().is_success() {
                                pump_sse(resp, &tx, None).await;
                            }
                        }
                    }));
                }
            }
            _ => {
                let (client, url, session, tx) =
                    (client.clone(), url.clone(), session.clone(), tx.clone());
                tokio::spawn(async move { post(&client, &url, &session, line, &tx).await });
            }
        }
    }
    if let Some(g) = get_stream {
        g.abort();
    }
    if let Some(id) = read(&session.id) {
        let _ = client
            .delete(&url)
            .header("mcp-session-id", id)
            .timeout(Duration::from_secs(2))
            .send()
            .await;
    }
    drop(tx);
    back.abort();
}
