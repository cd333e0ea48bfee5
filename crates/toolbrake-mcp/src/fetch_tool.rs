//! The fetch tool: the proxy's own `web_fetch_file`, offered in the server's tool list,
//! run here when judged allowed, and served alone when there is no server.

use crate::frame::{Frame, Lines};
use crate::wire::id_key;
use crate::{run, Options, Pending, ProxyError, Shared};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use toolbrake_core::Outcome;

impl Shared {
    /// The proxy's own `web_fetch_file`, when this call is one.
    pub(crate) fn local_fetcher(&self, tool: &str) -> Option<Arc<toolbrake_fetch::Fetcher>> {
        (tool == toolbrake_fetch::TOOL_NAME && !self.server_fetches.load(Ordering::Relaxed))
            .then(|| self.opts.fetch.clone())
            .flatten()
    }

    /// Runs `web_fetch_file` here and answers the client as the server would have; its
    /// status code is the outcome the failure track reads.
    pub(crate) async fn local_fetch(
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

    /// Appends `web_fetch_file` to the last page of the server's tool list (unless the
    /// server has a tool of that name: then its own is used).
    pub(crate) fn add_fetch_tool(&self, msg: &mut Value) {
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
    let mut lines = Lines::new(BufReader::new(read));
    while let Ok(Some(frame)) = lines.next().await {
        let Frame::Line(line) = frame else {
            continue;
        };
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
