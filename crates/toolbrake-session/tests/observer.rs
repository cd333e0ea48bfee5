//! An observer is told what each event became, after the store kept it, and never changes
//! a decision.

use serde_json::json;
use std::sync::Mutex;
use toolbrake_core::{Call, Config, Engine, Outcome, Verdict};
use toolbrake_session::{Observed, ObservedKind, Observer, Sessions};
use toolbrake_store::MemoryStore;

#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Observer for Log {
    fn observe(&self, e: &Observed<'_>) {
        let what = match &e.kind {
            ObservedKind::Judged { call, decision } => {
                format!("judged {} {} {:?}", call.tool, call.id, decision.verdict)
            }
            ObservedKind::Answered {
                call_id, approved, ..
            } => format!("answered {call_id} {approved}"),
            ObservedKind::Recorded { call_id, post, .. } => {
                format!("recorded {call_id} ignored={:?}", post.ignored)
            }
            ObservedKind::Settled { settled } => format!("settled {}", settled.len()),
            ObservedKind::Failed { operation, error } => format!("failed {operation}: {error}"),
            ObservedKind::Unjudged { unjudged } => format!("unjudged refuse={}", unjudged.refuse),
        };
        self.0.lock().unwrap().push(format!(
            "{} {} tp={}",
            e.session,
            what,
            e.traceparent.unwrap_or("-")
        ));
    }
}

#[test]
fn the_observer_sees_each_judgement_outcome_and_failure_with_the_hosts_traceparent() {
    let engine = Engine::new(Config::default());
    let store = MemoryStore::new();
    let log = Log::default();
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let args = json!({"command": "ls"});
    for i in 0..3 {
        let id = format!("c{i}");
        let call = Call {
            session: "s",
            id: &id,
            tool: "bash",
            args: &args,
        };
        let sessions = Sessions::new(&engine, &store)
            .with_observer(Some(&log))
            .with_traceparent(Some(tp));
        let d = sessions.pre("s", &call).unwrap();
        if d.verdict == Verdict::Allow {
            let _ = sessions.post("s", &id, &Outcome::success("same")).unwrap();
        }
    }
    let unobserved = Sessions::new(&engine, &store);
    let _ = unobserved.pre(
        "s",
        &Call {
            session: "s",
            id: "quiet",
            tool: "bash",
            args: &args,
        },
    );
    let sessions = Sessions::new(&engine, &store).with_observer(Some(&log));
    assert!(sessions
        .post("s", "no-such-call", &Outcome::success("x"))
        .is_err());
    let _ = sessions.unjudged("sqlite /x: locked");
    let log = log.0.into_inner().unwrap();
    assert_eq!(
        log,
        vec![
            format!("s judged bash c0 Allow tp={tp}"),
            format!("s recorded c0 ignored=None tp={tp}"),
            format!("s judged bash c1 Allow tp={tp}"),
            format!("s recorded c1 ignored=None tp={tp}"),
            format!("s judged bash c2 Deny tp={tp}"),
            "s failed post: unknown call id \"no-such-call\" tp=-".to_string(),
            " unjudged refuse=false tp=-".to_string(),
        ]
    );
}
