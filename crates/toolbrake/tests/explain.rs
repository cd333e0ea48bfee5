//! `toolbrake explain --session`, as a user reads it: a session the store does not hold is
//! said not to exist (as `sessions reset` says it), and the streak's line counts only the
//! results of calls that ran.

mod support;
use support::*;

use serde_json::{json, Value};
use std::path::Path;

fn hook(state: &Path, payload: Value) -> String {
    let mut c = isolated_bin();
    c.args(["hook", "claude"]).env("TOOLBRAKE_STATE", state);
    let out = run_with_stdin(&mut c, payload.to_string().as_bytes());
    String::from_utf8(out.stdout).unwrap()
}

fn explain(state: &Path, session: &str) -> std::process::Output {
    isolated_bin()
        .args([
            "explain",
            "--session",
            session,
            "Bash",
            r#"{"command":"ls /w"}"#,
        ])
        .env("TOOLBRAKE_STATE", state)
        .output()
        .unwrap()
}

/// Two identical calls ran and returned the same listing; the third was refused before it
/// ran. `explain` counts three in a row, of which the two that ran returned the same result.
#[test]
fn explain_counts_the_same_results_of_calls_that_ran() {
    let dir = tmpdir("explain", "refused-third");
    let state = dir.join("state.db");
    let pre = |id: &str| {
        json!({"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "ls /w"}, "tool_use_id": id})
    };
    for id in ["c1", "c2"] {
        assert_eq!(hook(&state, pre(id)), "", "{id} runs");
        let mut post = pre(id);
        post["hook_event_name"] = "PostToolUse".into();
        post["tool_response"] =
            json!({"stdout": "a.py  b.py  README.md", "stderr": "", "interrupted": false});
        hook(&state, post);
    }
    let refused = hook(&state, pre("c3"));
    assert!(
        refused.contains(r#""permissionDecision":"deny""#)
            && refused.contains("The last 2 identical calls returned the same result."),
        "{refused}"
    );

    let out = explain(&state, "s1");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "streak:     3 identical calls in a row before this one (refused ones included), \
             the last 2 that ran returned the same result\n"
        ),
        "{text}"
    );
}

/// A key the store does not hold is an error naming it, with a non-zero exit, and nothing
/// is explained as if it were an empty session.
#[test]
fn explain_of_a_session_that_does_not_exist_says_so() {
    let dir = tmpdir("explain", "nosuch");
    let state = dir.join("state.db");
    // The store exists and holds another session.
    hook(
        &state,
        json!({"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "ls /w"}, "tool_use_id": "c1"}),
    );
    let out = explain(&state, "nosuch");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no stored session \"nosuch\" in sqlite ")
            && err.contains("`toolbrake sessions` lists them"),
        "{err}"
    );
    // `sessions reset` says the same of the same key.
    let reset = isolated_bin()
        .args(["sessions", "reset", "nosuch"])
        .env("TOOLBRAKE_STATE", &state)
        .output()
        .unwrap();
    assert_eq!(reset.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&reset.stderr).contains("no stored session \"nosuch\" in sqlite ")
    );
}
