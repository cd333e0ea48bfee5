//! The operators' counters the session service keeps in the store: each event's decision
//! tallied in the same update as the session's state, read back through `Store::counters`.

use serde_json::json;
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::{Call, Engine, Outcome, Verdict};
use toolbrake_session::{metrics, unjudged, Sessions};
use toolbrake_store::{MemoryStore, Store};

fn judged(store: &MemoryStore, labels: &[(&str, &str)]) -> u64 {
    store.counters().unwrap().get(metrics::CALLS_JUDGED, labels)
}

fn asks(store: &MemoryStore, answer: &str) -> u64 {
    store
        .counters()
        .unwrap()
        .get(metrics::ASKS, &[("answer", answer)])
}

#[test]
fn the_third_identical_call_counts_as_denied_by_the_streak_brake() {
    let engine = Engine::new(Config::default());
    let store = MemoryStore::new();
    let s = Sessions::new(&engine, &store);
    let args = json!({"command": "ls"});
    for i in 0..3 {
        let id = i.to_string();
        let call = Call {
            session: "s",
            id: &id,
            tool: "Bash",
            args: &args,
        };
        if s.pre("s", &call).unwrap().runs() {
            s.post("s", &id, &Outcome::success("same")).unwrap();
        }
    }
    let allow = [
        ("verdict", "allow"),
        ("engine", "none"),
        ("track", "none"),
        ("tool", "Bash"),
    ];
    let deny = [
        ("verdict", "deny"),
        ("engine", "streak"),
        ("track", "streak"),
        ("tool", "Bash"),
    ];
    assert_eq!(judged(&store, &allow), 2);
    assert_eq!(judged(&store, &deny), 1);
}

fn curl(s: &Sessions<'_, MemoryStore>, session: &str, id: u32) -> Verdict {
    let description = ["1st", "2nd", "3rd"][id as usize % 3];
    let args =
        json!({"command": "curl -s https://api.example.com/v1/x", "description": description});
    let id = id.to_string();
    let call = Call {
        session,
        id: &id,
        tool: "bash",
        args: &args,
    };
    s.pre(session, &call).unwrap().verdict
}

#[test]
fn advisories_asks_and_their_answers_are_counted_by_track_and_answer() {
    let engine =
        Engine::new(Config::from_toml_str("[streak]\nenabled = false\n", &no_env).unwrap());
    let store = MemoryStore::new();
    let s = Sessions::new(&engine, &store);
    // Session a: eleven calls run, the twelfth is asked and approved.
    for i in 1..=11 {
        assert!(matches!(curl(&s, "a", i), Verdict::Allow | Verdict::Advise));
        s.post("a", &i.to_string(), &Outcome::success("ok"))
            .unwrap();
    }
    assert_eq!(curl(&s, "a", 12), Verdict::Ask);
    let _ = s.answer("a", "12", true).unwrap();
    // Session b: asked and declined. Session c: asked, and the next event settles it.
    for session in ["b", "c"] {
        for i in 1..=11 {
            curl(&s, session, i);
            s.post(session, &i.to_string(), &Outcome::success("ok"))
                .unwrap();
        }
        assert_eq!(curl(&s, session, 12), Verdict::Ask);
    }
    let _ = s.answer("b", "12", false).unwrap();
    s.user_message("c").unwrap();

    let advised = store.counters().unwrap().sum(
        metrics::CALLS_JUDGED,
        &[
            ("verdict", "advise"),
            ("engine", "breaker"),
            ("track", "repeat"),
        ],
    );
    assert!(advised >= 3, "{advised}");
    assert_eq!(
        judged(
            &store,
            &[
                ("verdict", "ask"),
                ("engine", "breaker"),
                ("track", "repeat"),
                ("tool", "bash")
            ]
        ),
        3
    );
    assert_eq!(asks(&store, "approved"), 1);
    assert_eq!(asks(&store, "declined"), 1);
    assert_eq!(asks(&store, "unanswered"), 1);
}

#[test]
fn failure_policy_applications_are_counted_by_policy() {
    let engine = Engine::new(Config::default());
    let store = MemoryStore::new();
    let s = Sessions::new(&engine, &store);
    s.count_unjudged(&unjudged("payload: not JSON", false))
        .unwrap();
    s.count_unjudged(&unjudged("payload: not JSON", true))
        .unwrap();
    s.count_unjudged(&unjudged("payload: not JSON", true))
        .unwrap();
    let c = store.counters().unwrap();
    assert_eq!(c.get(metrics::UNJUDGED, &[("policy", "fail_open")]), 1);
    assert_eq!(c.get(metrics::UNJUDGED, &[("policy", "fail_closed")]), 2);
}

#[test]
fn a_tool_name_holding_a_secret_is_redacted_in_its_label() {
    let engine = Engine::new(Config::default());
    let store = MemoryStore::new();
    let s = Sessions::new(&engine, &store);
    let args = json!({});
    for case in toolbrake_testkit::CREDENTIAL_CASES {
        let call = Call {
            session: "secret-session",
            id: "1",
            tool: case.text,
            args: &args,
        };
        let _ = s.pre("secret-session", &call);
        s.close_open_calls("secret-session", false).unwrap();
    }
    for series in store.counters().unwrap().values.keys() {
        let text = format!("{series:?}");
        assert!(!text.contains("secret-session"), "{text}");
        for case in toolbrake_testkit::CREDENTIAL_CASES {
            assert!(
                !text.contains(case.secret),
                "{} leaks into {text}",
                case.row
            );
        }
    }
}

/// A stopped call whose output comes all the same (a replay's recorded outcome) counts as
/// waste when it repeats the call's last output and as new information when it does not.
#[test]
fn stopped_calls_with_known_outputs_count_as_waste_or_new_information() {
    let engine = Engine::new(Config::default());
    let store = MemoryStore::new();
    let s = Sessions::new(&engine, &store);
    let args = json!({"command": "make test"});
    let outputs = ["FAIL x", "FAIL x", "FAIL x", "PASS"];
    for (i, out) in outputs.iter().enumerate() {
        let id = i.to_string();
        let call = Call {
            session: "s",
            id: &id,
            tool: "Bash",
            args: &args,
        };
        let _ = s.pre("s", &call).unwrap();
        // A replayed run: every call ran, denied or not, and its outcome is recorded.
        s.post("s", &id, &Outcome::success(*out)).unwrap();
    }
    let c = store.counters().unwrap();
    // Calls 3 and 4 are refused by the streak brake: the 3rd returned what the 2nd did,
    // the 4th something new.
    assert_eq!(c.get(metrics::STOPPED, &[("judged", "waste")]), 1);
    assert_eq!(c.get(metrics::STOPPED, &[("judged", "new_information")]), 1);
}

/// An asked call the operator approves runs: its output says whether stopping it would have
/// been waste.
#[test]
fn an_approved_ask_counts_as_waste_when_it_returns_the_same_again() {
    let engine = Engine::new(
        Config::from_toml_str(
            "[streak]\nenabled = false\n[breaker]\non_limit = \"ask\"\n",
            &no_env,
        )
        .unwrap(),
    );
    let store = MemoryStore::new();
    let s = Sessions::new(&engine, &store);
    let args = json!({"command": "cat notes.txt"});
    let mut asked = 0;
    for i in 0..20 {
        let id = i.to_string();
        let call = Call {
            session: "s",
            id: &id,
            tool: "Bash",
            args: &args,
        };
        let d = s.pre("s", &call).unwrap();
        if d.verdict == Verdict::Ask {
            asked += 1;
            assert!(s.answer("s", &id, true).unwrap().runs());
        }
        s.post("s", &id, &Outcome::success("the same notes"))
            .unwrap();
    }
    let c = store.counters().unwrap();
    assert!(asked > 0);
    assert_eq!(c.get(metrics::STOPPED, &[("judged", "waste")]), asked);
    assert_eq!(c.get(metrics::STOPPED, &[("judged", "new_information")]), 0);
}

/// A replay or a tuning sweep (`with_counters(false)`) judges as ever and counts nothing.
#[test]
fn a_service_without_counters_judges_the_same_and_counts_nothing() {
    let engine = Engine::new(Config::default());
    let counted = MemoryStore::new();
    let quiet = MemoryStore::new();
    let args = json!({"command": "ls"});
    for i in 0..3 {
        let id = i.to_string();
        let call = Call {
            session: "s",
            id: &id,
            tool: "Bash",
            args: &args,
        };
        let a = Sessions::new(&engine, &counted).pre("s", &call).unwrap();
        let b = Sessions::new(&engine, &quiet)
            .with_counters(false)
            .pre("s", &call)
            .unwrap();
        assert_eq!(a, b);
    }
    let deny = [
        ("verdict", "deny"),
        ("engine", "streak"),
        ("track", "streak"),
        ("tool", "Bash"),
    ];
    assert_eq!(judged(&counted, &deny), 1);
    assert!(quiet.counters().unwrap().values.is_empty());
}
