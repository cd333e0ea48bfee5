//! The proxy tells its observer what each judged call became, with the `traceparent` the
//! client sent in `_meta`, and tells it when the failure policy answered a call it could
//! not judge.

mod support;

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use toolbrake_core::config::Config;
use toolbrake_core::Engine;
use toolbrake_mcp::Options;
use toolbrake_session::{Observed, ObservedKind, Observer};

#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Observer for Seen {
    fn observe(&self, e: &Observed<'_>) {
        let what = match &e.kind {
            ObservedKind::Judged { call, decision } => {
                format!("judged {} {}", call.tool, decision.verdict.as_str())
            }
            ObservedKind::Recorded { .. } => "recorded".to_string(),
            ObservedKind::Unjudged { unjudged } => format!("unjudged refuse={}", unjudged.refuse),
            _ => return,
        };
        self.0
            .lock()
            .unwrap()
            .push(format!("{what} tp={}", e.traceparent.unwrap_or("-")));
    }
}

fn nested(depth: usize) -> Value {
    let mut v = json!("x");
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observer_sees_judged_calls_with_their_traceparent_and_unjudged_ones() {
    let seen = Arc::new(Seen::default());
    let support::Wired {
        proxy,
        mut client_w,
        mut at_client,
        mut server_w,
        mut at_server,
    } = support::wire(Options {
        fail_closed: true,
        observer: Some(seen.clone()),
        ..support::options(Engine::new(Config::default()), "observed")
    });
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    // One judged call that runs: the server answers it.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "hi"}, "_meta": {"traceparent": tp}}});
    support::send(&mut client_w, &call).await;
    let forwarded = support::next_line(&mut at_server).await;
    assert!(forwarded.contains("tools/call"), "{forwarded}");
    let answer =
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}]}});
    support::send(&mut server_w, &answer).await;
    support::next_line(&mut at_client).await;
    // A call whose arguments nest too deep to judge: refused (fail_closed), never forwarded.
    let deep = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"v": nested(140)}}});
    support::send(&mut client_w, &deep).await;
    let refused = support::next_line(&mut at_client).await;
    assert!(refused.contains("\"isError\":true"), "{refused}");
    proxy.abort();
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            format!("judged echo allow tp={tp}"),
            // The server's answer carries no traceparent: an observer finds the call's
            // span by the call.
            "recorded tp=-".to_string(),
            "unjudged refuse=true tp=-".to_string(),
        ]
    );
}
