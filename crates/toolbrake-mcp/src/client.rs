//! The client side of the relay: each message from the client read and forwarded, and a
//! `tools/call` judged, then forwarded, refused or continued (an ask, the fetch tool).

use crate::wire::{id_key, unjudgeable_tool_call, ClientHead};
use crate::{events, messages, Forwarded, Judged, Pending, Shared, ToolCtx, Waiting};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use toolbrake_core::{Call, Decision, Verdict};
use toolbrake_session::SessionError;

impl Shared {
    /// A `tools/call` whose arguments nest deeper than toolbrake can parse. Refused when
    /// fail-closed; otherwise it runs, counted by the hash of its arguments' text (so
    /// identical ones still reach the streak brake and the window), with a warning.
    pub(crate) async fn unjudgeable_call(self: Arc<Self>, id: Value, params: Value, raw: String) {
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

    /// A message from the client over [`crate::MAX_MESSAGE`], dropped as it was read: the
    /// client gets a JSON-RPC error for it (its id read from the message's head or tail,
    /// else `null`, as JSON-RPC says when the id cannot be read), nothing reaches the
    /// server, and the relay goes on.
    pub(crate) fn client_too_large(&self, len: usize, id: Option<Value>) {
        let limit = crate::server::limit();
        events::warn(
            self.opts.events.as_ref(),
            &format!(
                "toolbrake mcp: a client message of {len} bytes is over the {limit} limit: not forwarded, answered with an error"
            ),
        );
        self.send_client(&json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": {
            "code": -32600,
            "message": format!(
                "toolbrake: this message is {len} bytes, over the MCP proxy's {limit} limit; it was not forwarded"
            ),
        }}));
    }

    /// A message from the client: the method and id read first, without parsing the rest;
    /// a message that is neither a `tools/call` nor one of the few the proxy must look into
    /// is forwarded as read, never parsed further or written anew.
    pub(crate) fn from_client(self: &Arc<Self>, line: String) {
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
    pub(crate) fn from_client_parsed(self: &Arc<Self>, line: String) {
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
    pub(crate) fn judge_call(
        self: &Arc<Self>,
        id: Value,
        mut params: Value,
        raw: String,
    ) -> Option<Waiting> {
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

    /// Acts on a final verdict: refuse, or forward (or run the proxy's own fetch tool,
    /// which is returned to be awaited).
    pub(crate) fn settle(&self, call: Judged, decision: Decision, prefix: &str) -> Option<Waiting> {
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
    pub(crate) async fn continue_call(self: Arc<Self>, waiting: Waiting) {
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
    pub(crate) async fn tool_call(self: Arc<Self>, id: Value, params: Value, raw: String) {
        if let Some(waiting) = self.judge_call(id, params, raw) {
            self.continue_call(waiting).await;
        }
    }
}
