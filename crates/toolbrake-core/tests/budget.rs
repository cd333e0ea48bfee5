//! The run-level stop line (`[budget]`) through the engines' public surface: off by
//! default; past the line a call that would run is asked about; a declined or unanswered
//! ask stops it (and counts toward the score); an approval lifts the line for the run; a
//! user message does not reset the run's count.

use serde_json::json;
use toolbrake_core::config::no_env;
use toolbrake_core::{Call, Config, Engine, SessionState, Verdict};

fn engine(budget: serde_json::Value) -> Engine {
    Engine::new(Config::from_value(&json!({ "budget": budget }), &no_env).unwrap())
}

fn pre(e: &Engine, st: &mut SessionState, id: &str) -> toolbrake_core::Decision {
    let args = json!({"path": format!("file{id}.txt")});
    e.pre(
        st,
        &Call {
            session: "s",
            id,
            tool: "read",
            args: &args,
        },
    )
    .unwrap()
}

#[test]
fn the_line_is_off_by_default() {
    let e = Engine::new(Config::default());
    let mut st = SessionState::default();
    for i in 0..300 {
        assert_eq!(pre(&e, &mut st, &i.to_string()).verdict, Verdict::Allow);
    }
    assert_eq!(st.budget().score(), 300);
}

#[test]
fn past_the_line_a_call_is_asked_about_declined_stops_approved_lifts() {
    let e = engine(json!({"enabled": true, "line": 3}));
    let mut st = SessionState::default();
    for id in ["1", "2", "3"] {
        assert_eq!(pre(&e, &mut st, id).verdict, Verdict::Allow);
    }
    // A user message does not reset the run's count.
    let _ = e.user_message(&mut st);
    let d = pre(&e, &mut st, "4");
    assert_eq!((d.verdict, d.engine), (Verdict::Ask, Some("budget")));
    assert!(
        d.message.as_deref().unwrap().contains("made 4 tool calls"),
        "{d:?}"
    );
    let d = e.answer(&mut st, "4", false).unwrap();
    assert_eq!((d.verdict, d.code), (Verdict::Deny, Some("RUN_BUDGET")));
    assert_eq!(st.budget().score(), 5, "4 calls and the stop");
    // An ask nobody answers is settled as declined by the next event.
    assert_eq!(pre(&e, &mut st, "5").verdict, Verdict::Ask);
    let d = pre(&e, &mut st, "6");
    assert_eq!(d.verdict, Verdict::Ask);
    assert_eq!(d.settled.len(), 1);
    assert_eq!(d.settled[0].id, "5");
    // Approved: the line is lifted for the rest of the run.
    assert_eq!(
        e.answer(&mut st, "6", true).unwrap().verdict,
        Verdict::Allow
    );
    assert_eq!(pre(&e, &mut st, "7").verdict, Verdict::Allow);
    // The state round-trips with its count.
    let text = serde_json::to_string(&st).unwrap();
    let back: SessionState = serde_json::from_str(&text).unwrap();
    assert_eq!(back.budget().score(), st.budget().score());
}

#[test]
fn a_call_the_other_engines_stop_is_not_asked_about_and_counts() {
    let e = engine(json!({"enabled": true, "line": 100}));
    let mut st = SessionState::default();
    let args = json!({"q": "same"});
    let mut last = Verdict::Allow;
    for id in ["1", "2", "3"] {
        let d = e
            .pre(
                &mut st,
                &Call {
                    session: "s",
                    id,
                    tool: "search",
                    args: &args,
                },
            )
            .unwrap();
        last = d.verdict;
        assert_ne!(d.engine, Some("budget"));
    }
    assert_eq!(last, Verdict::Deny);
    assert_eq!(st.budget().score(), 4, "3 calls and 1 stop");
}
