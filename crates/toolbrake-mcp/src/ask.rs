//! Asks: the operator asked through the client's elicitation, and the answer recorded.

use crate::wire::id_key;
use crate::{messages, Shared};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::oneshot;
use toolbrake_core::{Decision, Verdict};

impl Shared {
    /// Asks the operator through the client's elicitation; `false` on decline, cancel,
    /// error or timeout.
    pub(crate) async fn elicit(self: &Arc<Self>, reason: &str) -> bool {
        let n = self.next_elicit.fetch_add(1, Ordering::Relaxed);
        let id = format!("toolbrake-elicit-{n}");
        let (tx, rx) = oneshot::channel();
        self.elicit_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id_key(&json!(id)), tx);
        self.send_client(&json!({
            "jsonrpc": "2.0", "id": id, "method": "elicitation/create",
            "params": {
                "message": reason,
                "requestedSchema": {
                    "type": "object",
                    "properties": {"approve": {"type": "boolean", "title": messages::ELICIT_QUESTION}},
                    "required": ["approve"]
                }
            }
        }));
        match tokio::time::timeout(self.opts.ask_timeout, rx).await {
            Ok(Ok(resp)) => {
                let r = &resp["result"];
                r["action"] == "accept" && r["content"]["approve"] == true
            }
            _ => {
                self.elicit_waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id_key(&json!(id)));
                false
            }
        }
    }

    /// The operator's answer to an ask, recorded; a refusal when it cannot be recorded.
    pub(crate) fn answer(
        &self,
        session: &str,
        call_id: &str,
        approved: bool,
        asked: Decision,
    ) -> Decision {
        match self.with_sessions(|s| s.answer(session, call_id, approved)) {
            Ok(d) => d,
            Err(_) => Decision {
                verdict: Verdict::Deny,
                message: Some(messages::APPROVAL_NOT_RECORDED.into()),
                ..asked
            },
        }
    }
}
