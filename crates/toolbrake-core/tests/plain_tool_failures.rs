//! A tool with no URL and no shell command (a plain function such as `get_order`) has a
//! failure target of its own, the tool (docs/decisions.md, "Failure target of a plain
//! tool"): failing the same way with ever-different arguments is stopped like a failing host,
//! and anything that says the calls are getting somewhere lets them run.

mod support;

use serde_json::json;
use support::Session;
use toolbrake_core::{Outcome, Track, Verdict};

fn failed(text: &str) -> Outcome {
    Outcome {
        is_error: Some(true),
        error_code: Some("LookupError".into()),
        text: Some(text.into()),
        ..Outcome::default()
    }
}

fn deny() -> Session {
    Session::new(json!({"breaker": {"on_limit": "deny"}}))
}

#[test]
fn a_plain_tool_failing_the_same_way_with_new_arguments_is_stopped_at_the_sixth_call() {
    let mut s = deny();
    for id in 1..=5 {
        let d = s.run(
            "get_order",
            json!({"id": id}),
            failed(&format!("order {id} not found")),
        );
        assert!(d.runs(), "call {id} should run: {:?}", d.message);
    }
    let d = s.call("get_order", json!({"id": 6}));
    assert_eq!(d.verdict, Verdict::Deny, "{:?}", d.message);
    assert_eq!(d.hits.len(), 1, "{:?}", d.hits);
    assert_eq!(
        (
            d.hits[0].track,
            d.hits[0].count,
            d.hits[0].fingerprint.as_str()
        ),
        (Track::Failure, 5, "tool:get_order")
    );
    let text = d.message.unwrap();
    assert!(
        text.contains(
            "- tool:get_order — 5 consecutive failures (the call raised an error (LookupError))"
        ),
        "{text}"
    );
    // Another tool is not blocked.
    assert!(s
        .run("list_orders", json!({}), Outcome::success("[]"))
        .runs());
}

#[test]
fn the_third_failure_of_the_tool_brings_the_failure_advisory() {
    let mut s = deny();
    s.step("get_order", json!({"id": 1}), failed("order 1 not found"));
    s.step("get_order", json!({"id": 2}), failed("order 2 not found"));
    let (d, advisories) = s.try_run("get_order", json!({"id": 3}), failed("order 3 not found"));
    assert!(d.runs());
    assert!(
        advisories
            .iter()
            .any(|a| a.contains("tool:get_order has failed 3 times in a row")),
        "{advisories:?}"
    );
}

#[test]
fn failures_of_different_shapes_a_success_or_an_edit_in_between_are_not_stopped() {
    // Every failure reads differently: the agent is exploring, nothing repeats.
    let mut s = deny();
    for name in ["alice", "bob", "carol", "dave", "erin", "frank", "grace"] {
        let d = s.run(
            "get_user",
            json!({"name": name}),
            failed(&format!("no user named {name}")),
        );
        assert!(d.runs(), "{name}: {:?}", d.message);
    }

    // A success of the tool ends the streak.
    let mut s = deny();
    for id in 1..=4 {
        s.step(
            "get_order",
            json!({"id": id}),
            failed(&format!("order {id} not found")),
        );
    }
    assert!(s
        .run(
            "get_order",
            json!({"id": 5}),
            Outcome::success("{\"id\": 5}")
        )
        .runs());
    for id in 6..=10 {
        let d = s.run(
            "get_order",
            json!({"id": id}),
            failed(&format!("order {id} not found")),
        );
        assert!(d.runs(), "call {id}: {:?}", d.message);
    }
    assert_eq!(
        s.call("get_order", json!({"id": 11})).verdict,
        Verdict::Deny
    );

    // A change to the workspace in between: the next failure starts a new streak.
    let mut s = deny();
    for id in 1..=4 {
        s.step(
            "get_order",
            json!({"id": id}),
            failed(&format!("order {id} not found")),
        );
    }
    assert!(s
        .run(
            "Write",
            json!({"file_path": "orders.json", "content": "[]"}),
            Outcome::success("written")
        )
        .runs());
    for id in 5..=8 {
        let d = s.run(
            "get_order",
            json!({"id": id}),
            failed(&format!("order {id} not found")),
        );
        assert!(d.runs(), "call {id}: {:?}", d.message);
    }
}

#[test]
fn the_same_failing_call_is_named_by_its_own_identity_not_the_tools() {
    let mut s = deny();
    for _ in 0..5 {
        // The streak brake is out of the way: three identical calls are not consecutive.
        s.step(
            "get_order",
            json!({"id": 7}),
            failed("order service unavailable"),
        );
        s.step("ping", json!({}), Outcome::success("pong"));
    }
    let d = s.call("get_order", json!({"id": 7}));
    assert_eq!(d.verdict, Verdict::Deny, "{:?}", d.message);
    assert_eq!(d.hits.len(), 1, "{:?}", d.hits);
    assert!(
        d.hits[0].fingerprint.starts_with("exact:get_order:"),
        "{:?}",
        d.hits
    );
}

#[test]
fn seed_mode_keeps_the_originals_rules_no_tool_target() {
    let mut s = Session::new(json!({"breaker": {"on_limit": "deny", "progress": false}}));
    for id in 1..=8 {
        let d = s.run(
            "get_order",
            json!({"id": id}),
            failed(&format!("order {id} not found")),
        );
        assert!(d.runs(), "call {id}: {:?}", d.message);
    }
}

#[test]
fn the_same_call_retried_counts_once_for_the_tool() {
    // A retried booking that keeps failing is the call's own streak; the next, different
    // booking is a new attempt (the recorded τ-bench run: the 6th flight tried succeeded).
    let mut s = deny();
    let book = |flight: &str| json!({"reservation": "XEWRD9", "flight": flight});
    for _ in 0..2 {
        s.step(
            "book",
            book("HAT030"),
            failed("flight HAT030 not available on 2024-05-13"),
        );
    }
    s.step("search", json!({"from": "LAX"}), Outcome::success("[]"));
    for _ in 0..2 {
        s.step(
            "book",
            book("HAT030"),
            failed("flight HAT030 not available on 2024-05-13"),
        );
    }
    let d = s.run(
        "book",
        book("HAT223"),
        failed("flight HAT223 not available on 2024-05-14"),
    );
    assert!(d.runs(), "{:?}", d.message);
    let d = s.call("book", book("HAT052"));
    assert!(
        d.runs(),
        "two distinct calls failed, not five: {:?}",
        d.message
    );
}

#[test]
fn failed_edits_with_new_content_have_no_tool_wide_target() {
    // An edit's arguments are the change itself: each attempt with new content is a new
    // change, and its rejection (a linter, a line range) is feedback on that content, not a
    // target that stays down. The same edit retried is still its own exact: streak.
    let mut s = deny();
    for i in 0..8 {
        let d = s.run(
            "edit",
            json!({"command": format!("edit 1:{i}\nclass Foo {{ int x = {i}; }}")}),
            failed("Your proposed edit has introduced new syntax error(s)."),
        );
        assert!(d.runs(), "edit {i}: {:?}", d.message);
    }
    let args = json!({"command": "edit 1:9\nx"});
    let call = toolbrake_core::Call {
        session: "s1",
        id: "x",
        tool: "edit",
        args: &args,
    };
    let signals = s.engine.signals(&s.st, &call).unwrap();
    let kinds: Vec<&str> = signals
        .breaker
        .unwrap()
        .fingerprints
        .iter()
        .map(|f| f.kind)
        .collect();
    assert_eq!(kinds, ["exact"], "explain shows what judging uses");
}

/// A failure as a host without error codes reports it (a replayed run, an MCP tool's
/// `isError`): the text is all there is.
fn errored(text: &str) -> Outcome {
    Outcome {
        is_error: Some(true),
        text: Some(text.into()),
        ..Outcome::default()
    }
}

#[test]
fn failures_that_differ_do_not_stop_the_tool_however_they_are_written() {
    // Each error is a different one; only how they are written is alike: a JSON error
    // quoting its message, a Python traceback, a header line before the error.
    let errors: [&[&str]; 3] = [
        &[
            r#"{"error": "no such table: orders"}"#,
            r#"{"error": "permission denied for schema billing"}"#,
            r#"{"error": "syntax error at or near FROM"}"#,
            r#"{"error": "column customer does not exist"}"#,
            r#"{"error": "relation is locked by another session"}"#,
            r#"{"error": "division by zero"}"#,
            r#"{"error": "connection reset by peer"}"#,
        ],
        &[
            "Traceback (most recent call last):\n  File \"tool.py\", line 3, in run\nKeyError: 'customer'",
            "Traceback (most recent call last):\n  File \"tool.py\", line 9, in run\nValueError: date must be ISO 8601",
            "Traceback (most recent call last):\n  File \"tool.py\", line 4, in run\nTypeError: limit must be an int",
            "Traceback (most recent call last):\n  File \"tool.py\", line 7, in run\nPermissionError: read-only session",
            "Traceback (most recent call last):\n  File \"tool.py\", line 2, in run\nConnectionError: upstream closed",
            "Traceback (most recent call last):\n  File \"tool.py\", line 5, in run\nZeroDivisionError: division by zero",
        ],
        &[
            "Error executing tool query:\nunknown column customer",
            "Error executing tool query:\ntable orders is locked",
            "Error executing tool query:\nsyntax error near FROM",
            "Error executing tool query:\npermission denied for schema billing",
            "Error executing tool query:\nquery exceeded the row budget",
            "Error executing tool query:\nconnection reset by peer",
        ],
    ];
    let mut stopped = Vec::new();
    for texts in errors {
        let mut s = deny();
        for (i, text) in texts.iter().enumerate() {
            if !s
                .run("query", json!({"sql": format!("q{i}")}), errored(text))
                .runs()
            {
                stopped.push(format!("failure {}: {text}", i + 1));
            }
        }
        if !s.call("query", json!({"sql": "next"})).runs() {
            stopped.push(format!("the call after {}", texts[0]));
        }
    }
    assert!(stopped.is_empty(), "stopped: {stopped:#?}");
}

#[test]
fn failures_of_one_class_written_alike_still_stop_the_tool() {
    // The same error each time, for another order: a JSON error and a traceback.
    for text in [
        |id: usize| format!(r#"{{"error": "order {id} not found", "order": "W{id}"}}"#),
        |id: usize| {
            format!("Traceback (most recent call last):\n  File \"tool.py\", line 3, in run\nLookupError: order {id} not found")
        },
    ] {
        let mut s = deny();
        for id in 1..=5 {
            let d = s.run("get_order", json!({"id": id}), errored(&text(id)));
            assert!(d.runs(), "call {id}: {:?}", d.message);
        }
        let d = s.call("get_order", json!({"id": 6}));
        assert_eq!(d.verdict, Verdict::Deny, "{:?}", d.message);
    }
}
