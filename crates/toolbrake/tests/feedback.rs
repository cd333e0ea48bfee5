//! `toolbrake feedback SESSION --mistaken|--stuck` as a real process on a real SQLite
//! store, after real hook calls: the mark is kept with the session and shown by
//! `toolbrake sessions --json`.

mod support;
use support::hooks::{bin, spawn_hook};
use support::*;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;

fn hook(dir: &Path, payload: &Value) -> Output {
    spawn_hook(dir, payload, None).wait_with_output().unwrap()
}

fn feedback(dir: &Path, args: &[&str]) -> Output {
    bin(dir).arg("feedback").args(args).output().unwrap()
}

fn session_row(dir: &Path, key: &str) -> Value {
    let out = bin(dir).args(["sessions", "--json"]).output().unwrap();
    assert_success(&out);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    rows.into_iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no session {key}"))
}

#[test]
fn a_stopped_run_marked_mistaken_then_stuck_shows_its_mark() {
    let dir = tmpdir("feedback", "mark");
    let pre = |id: &str| {
        json!({"session_id": "run-7", "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "cat notes.txt"}, "tool_use_id": id})
    };
    let mut denied = false;
    for id in ["a", "b", "c"] {
        let out = hook(&dir, &pre(id));
        assert_success(&out);
        denied |= String::from_utf8_lossy(&out.stdout).contains("\"deny\"");
    }
    assert!(denied, "the third identical call is stopped");
    assert_eq!(session_row(&dir, "run-7")["feedback"], Value::Null);

    let out = feedback(&dir, &["run-7", "--mistaken"]);
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Session run-7 marked mistaken"));
    let row = session_row(&dir, "run-7");
    assert_eq!(row["feedback"], "mistaken");
    assert_eq!(row["stopped"], 1, "the run's state is untouched");

    assert_success(&feedback(&dir, &["run-7", "--stuck"]));
    assert_eq!(session_row(&dir, "run-7")["feedback"], "stuck");
}

#[test]
fn an_unknown_session_or_a_missing_verdict_is_refused() {
    let dir = tmpdir("feedback", "refused");
    let out = feedback(&dir, &["nobody", "--stuck"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no stored session \"nobody\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for args in [&["run"][..], &["run", "--stuck", "--mistaken"][..]] {
        let out = feedback(&dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--mistaken"));
    }
}
