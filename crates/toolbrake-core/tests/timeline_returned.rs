//! The operator's timeline tells, for each call whose output is known, whether it returned
//! the same as the last time the same call ran (waste) or something new; and a session
//! counts its asks by their answer. Through the engine's public API.

mod support;

use serde_json::json;
use support::Session;
use toolbrake_core::{Call, Outcome, SessionState, Verdict};

fn returned(s: &Session) -> Vec<(String, Option<String>)> {
    s.st.log()
        .map(|e| (e.tool.clone(), e.returned.clone()))
        .collect()
}

#[test]
fn a_repeated_output_is_same_and_a_different_one_new() {
    let mut s = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    let failing = || Outcome {
        exit_code: Some(1),
        text: Some("1 failed".into()),
        ..Outcome::default()
    };
    // The same test run twice, the same failure; an edit between is another call.
    s.step(
        "Bash",
        json!({"command": "pytest", "description": "run"}),
        failing(),
    );
    s.step(
        "Edit",
        json!({"file_path": "/w/a.py", "old_string": "1", "new_string": "2"}),
        Outcome::success("updated"),
    );
    // A new description (a decoy key) is still the same call.
    s.step(
        "Bash",
        json!({"command": "pytest", "description": "again"}),
        failing(),
    );
    s.step(
        "Bash",
        json!({"command": "pytest"}),
        Outcome::success("1 passed"),
    );
    s.step(
        "Bash",
        json!({"command": "pytest"}),
        Outcome::success("1 passed"),
    );
    // Cut short: nothing to compare.
    s.step(
        "Bash",
        json!({"command": "pytest"}),
        Outcome {
            aborted: Some(true),
            ..Outcome::default()
        },
    );
    let got = returned(&s);
    let want: Vec<(String, Option<String>)> = [
        ("Bash", Some("new")),
        ("Edit", Some("new")),
        ("Bash", Some("same")),
        ("Bash", Some("new")),
        ("Bash", Some("same")),
        ("Bash", None),
    ]
    .into_iter()
    .map(|(t, r)| (t.to_string(), r.map(str::to_string)))
    .collect();
    assert_eq!(got, want);
    // Shown in the state's JSON as the dashboard reads it.
    let v = serde_json::to_value(s.st.log().nth(2).unwrap()).unwrap();
    assert_eq!(v["returned"], "same");
}

#[test]
fn without_the_output_memory_nothing_is_said() {
    let mut s =
        Session::new(json!({"breaker": {"progress": false}, "streak": {"progress": false}}));
    s.step("Bash", json!({"command": "ls"}), Outcome::success("a"));
    s.step("Bash", json!({"command": "ls"}), Outcome::success("a"));
    assert!(s.st.log().all(|e| e.returned.is_none()));
    let v = serde_json::to_value(s.st.log().next().unwrap()).unwrap();
    assert!(v.get("returned").is_none(), "skipped when none: {v}");
}

#[test]
fn a_state_written_before_the_field_still_decodes() {
    let mut s = Session::new(json!({}));
    s.step("Bash", json!({"command": "ls"}), Outcome::success("a"));
    let mut v = serde_json::to_value(&s.st).unwrap();
    for e in v["log"].as_array_mut().unwrap() {
        e.as_object_mut().unwrap().remove("returned").unwrap();
    }
    let old: SessionState = serde_json::from_value(v).unwrap();
    assert_eq!(old.log().next().unwrap().returned, None);
    assert_eq!(old.asks(), [0, 0, 0]);
}

#[test]
fn asks_are_counted_by_their_answer() {
    let mut s = Session::new(json!({"breaker": {"on_limit": "ask"}, "streak": {"enabled": false}}));
    let args = json!({"command": "curl -s https://api.example.com/items"});
    let mut asked = Vec::new();
    for _ in 0..60 {
        let d = s.call("Bash", args.clone());
        if d.verdict == Verdict::Ask {
            asked.push(d.id.clone());
            if asked.len() == 3 {
                break;
            }
            // The first approved, the second declined, the third left unanswered.
            let approved = asked.len() == 1;
            let a = s.engine.answer(&mut s.st, &d.id, approved).unwrap();
            if a.runs() {
                s.engine
                    .post(&mut s.st, &d.id, &Outcome::success("[]"))
                    .unwrap();
            } else {
                // The person writes again: the next ask comes afresh.
                let _ = s.engine.user_message(&mut s.st);
            }
            continue;
        }
        s.engine
            .post(&mut s.st, &d.id, &Outcome::success("[]"))
            .unwrap();
    }
    assert_eq!(asked.len(), 3, "three asks came");
    assert_eq!(s.st.asks(), [1, 1, 0]);
    // A later event settles the pending ask as declined: unanswered.
    let args = json!({"file_path": "/w/x"});
    let call = Call {
        session: "s1",
        id: "other",
        tool: "Read",
        args: &args,
    };
    let d = s.engine.pre(&mut s.st, &call).unwrap();
    assert!(d.runs());
    assert_eq!(s.st.asks(), [1, 1, 1]);
    let v = serde_json::to_value(&s.st).unwrap();
    assert_eq!(v["asks"], json!([1, 1, 1]));
}
