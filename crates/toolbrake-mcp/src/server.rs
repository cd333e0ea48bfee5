//! The server side of the relay: each message from the server passed on, a `tools/call`
//! answer read for its outcome and recorded (advice appended), the `initialize` answer
//! rewritten, and every request in flight answered when the server is gone.

use crate::wire::{id_key, tool_outcome, ServerHead};
use crate::{events, Forwarded, Pending, ServerFailure, Shared, ToolCtx};
use serde_json::{json, Value};
use std::sync::Arc;
use toolbrake_core::{Engine, Outcome};
use toolbrake_session::Sessions;
use toolbrake_store::Store;

impl Shared {
    /// A message from the server: a response to a request the proxy reads or edits is
    /// read (a tool's answer for its outcome, `initialize` and `tools/list` to be
    /// rewritten); everything else is passed on as received. An error stops the relay.
    pub(crate) fn from_server(self: &Arc<Self>, line: String) -> Result<(), ServerFailure> {
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
                    Err(_) => return Err(ServerFailure::NotJsonRpc),
                },
                _ => None,
            },
            Err(_) => {
                let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                    return Err(ServerFailure::NotJsonRpc);
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
            self.to_client.send(line);
            return Ok(());
        };
        // Only the answers the proxy reads or edits are parsed whole (before the
        // request leaves the table, so a server failing here still answers it).
        let (edits, tool_call) = match self.inflight().get(&key) {
            Some(Pending::ToolCall(_)) => (true, true),
            Some(Pending::Forwarded { method }) => (
                *method == Forwarded::Initialize
                    || (*method == Forwarded::ToolsList && self.opts.fetch.is_some()),
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
                Err(_) => return Err(ServerFailure::NotJsonRpc),
            }
        }
        let pending = self.inflight().remove(&key);
        if let Some(outcome) = fast {
            match pending {
                Some(Pending::ToolCall(ctx)) => {
                    self.clone().tool_result(ctx, None, line, outcome);
                }
                _ => self.to_client.send(line),
            }
            return Ok(());
        }
        let Some(mut msg) = parsed.filter(|_| edits) else {
            self.to_client.send(line);
            return Ok(());
        };
        match pending {
            Some(Pending::ToolCall(ctx)) => {
                let outcome = tool_outcome(&msg);
                self.clone().tool_result(ctx, Some(msg), line, outcome);
            }
            Some(Pending::Forwarded {
                method: Forwarded::Initialize,
            }) => {
                self.rewrite_initialize(&mut msg);
                self.send_client(&msg);
            }
            Some(Pending::Forwarded {
                method: Forwarded::ToolsList,
            }) if self.opts.fetch.is_some() => {
                self.add_fetch_tool(&mut msg);
                self.send_client(&msg);
            }
            _ => {
                self.to_client.send(line);
            }
        }
        Ok(())
    }

    /// The server began a message over [`crate::MAX_MESSAGE`]: said at once (a line that
    /// never ends is otherwise silent), and dropped as it is read.
    pub(crate) fn server_overflowing(&self) {
        events::warn(
            self.opts.events.as_ref(),
            &format!(
                "toolbrake mcp: the MCP server is writing a message over the {} limit: it is dropped as it is read",
                limit()
            ),
        );
    }

    /// A message from the server over [`crate::MAX_MESSAGE`], dropped: when it answers a
    /// request in flight (its id read from its head or its tail), that request gets a
    /// JSON-RPC error instead (a `tools/call` is recorded as failed); anything else is
    /// only said in the log. The relay goes on.
    pub(crate) fn server_too_large(
        self: &Arc<Self>,
        len: usize,
        id: Option<Value>,
    ) -> Result<(), ServerFailure> {
        let key = id.as_ref().map(id_key);
        let answered = key.is_some_and(|k| self.inflight().contains_key(&k));
        events::warn(
            self.opts.events.as_ref(),
            &format!(
                "toolbrake mcp: the MCP server wrote a message of {len} bytes, over the {} limit: dropped{}",
                limit(),
                if answered {
                    "; the request it answered got an error"
                } else {
                    ""
                }
            ),
        );
        match id {
            Some(id) if answered => self.from_server(
                json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32603,
                    "message": format!(
                        "toolbrake: the MCP server's answer was {len} bytes, over the proxy's {} limit; it was dropped",
                        limit()
                    ),
                }})
                .to_string(),
            ),
            _ => Ok(()),
        }
    }

    /// A `tools/call` answer from the server: its outcome recorded, then passed on. `msg` is
    /// the answer read whole, when it was (see [`ServerHead`]).
    pub(crate) fn tool_result(
        self: Arc<Self>,
        ctx: ToolCtx,
        msg: Option<Value>,
        raw: String,
        read: Outcome,
    ) {
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
    pub(crate) fn finish(
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
    pub(crate) fn pass_on(&self, raw: Option<String>, msg: Option<Value>) {
        match (raw, msg) {
            (Some(raw), _) => self.to_client.send(raw),
            (None, Some(msg)) => self.send_client(&msg),
            (None, None) => {}
        }
    }

    /// The `initialize` answer: toolbrake named in `serverInfo`; with the fetch tool on,
    /// the tools capability declared even when the server has no tools.
    pub(crate) fn rewrite_initialize(&self, msg: &mut Value) {
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

    pub(crate) fn rewrite_server_info(msg: &mut Value) {
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
    pub(crate) fn fail_inflight(&self, why: &str) {
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

/// [`crate::MAX_MESSAGE`] as a person reads it.
pub(crate) fn limit() -> String {
    format!("{} MiB", crate::MAX_MESSAGE >> 20)
}
