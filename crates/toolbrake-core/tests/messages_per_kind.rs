//! What the model reads is true for the fingerprint kind and the track that fired: an
//! identity of one action (`exact:`, `cmd:`, `net:`) counts only calls that returned the
//! same result again (progress signal), a target measure (`host:`, `site:`, `sink:`,
//! `family:`, `verb:`) counts every call, new output or not; the unchanged track speaks of
//! the same result after changes. One scenario per kind, through the engine.

mod support;

use serde_json::{json, Value};
use support::Session;
use toolbrake_core::{Outcome, Track, Verdict};

/// Only `kind` is counted (limit 3, summary demand at the 2nd call); the streak brake is off.
fn session(kind: &str, progress: bool) -> Session {
    let mut limits = serde_json::Map::new();
    for k in [
        "exact", "cmd", "net", "sink", "host", "site", "family", "verb",
    ] {
        limits.insert(k.into(), if k == kind { json!(3) } else { json!("off") });
    }
    // The default names the HTTP family itself (uncounted).
    let family = if kind == "family" {
        json!(3)
    } else {
        json!("off")
    };
    limits.insert("family:http-fetch".into(), family);
    Session::new(json!({
        "streak": {"enabled": false},
        "breaker": {"on_limit": "deny", "warn_at": 0, "summarize_at": 2, "limits": limits,
                    "progress": progress, "cycle_limit": "off"},
    }))
}

fn bash(cmd: String) -> Value {
    json!({ "command": cmd })
}

/// The `i`th call of a scenario that reaches only `kind`'s gate.
fn call_for(kind: &str, i: usize) -> (&'static str, Value) {
    match kind {
        "exact" => ("search", json!({"q": "weather"})),
        "cmd" => (
            "bash",
            bash(format!(
                "curl -s --max-time {} https://api.example.com/a",
                10 + i
            )),
        ),
        "net" => {
            let client = if i.is_multiple_of(2) {
                "curl -s"
            } else {
                "wget -qO-"
            };
            ("bash", bash(format!("{client} https://api.example.com/a")))
        }
        "host" => (
            "bash",
            bash(format!("curl -s https://api.example.com/v{i}")),
        ),
        "site" => ("bash", bash(format!("curl -s https://h{i}.example.com/"))),
        "sink" => (
            "bash",
            bash(format!("curl -s -o out.json https://h{i}.example{i}.org/")),
        ),
        "family" => ("bash", bash(format!("curl -s https://h.example{i}.org/"))),
        "verb" => ("bash", bash(format!("ls dir{i}"))),
        _ => unreachable!("{kind}"),
    }
}

/// Runs the scenario: identities get the same result each time (so they count), target
/// measures a new result each time (they count all the same). Returns the 2nd call's
/// summary demand and the 3rd call's denial.
fn scenario(kind: &str, progress: bool) -> (String, String) {
    let mut s = session(kind, progress);
    let identity = matches!(kind, "exact" | "cmd" | "net");
    let mut summary = None;
    for i in 0..2 {
        let (tool, args) = call_for(kind, i);
        let text = if identity {
            "same rows".to_string()
        } else {
            format!("result {i}")
        };
        let (d, advisories) = s.try_run(tool, args, Outcome::success(text));
        assert!(d.runs(), "{kind}: call {} ran", i + 1);
        if i == 1 {
            summary = advisories
                .into_iter()
                .find(|a| a.contains("summarise your progress"));
        }
    }
    let (tool, args) = call_for(kind, 2);
    let d = s.call(tool, args);
    assert_eq!(d.verdict, Verdict::Deny, "{kind}: {:?}", d.message);
    assert!(
        d.hits
            .iter()
            .all(|h| h.fingerprint.starts_with(&format!("{kind}:"))),
        "{kind}: {:?}",
        d.hits
    );
    (
        summary.unwrap_or_else(|| panic!("{kind}: no summary demand at the 2nd call")),
        d.message.unwrap(),
    )
}

fn assert_target(kind: &str, rule: &str) {
    let (summary, denial) = scenario(kind, true);
    for text in [&summary, &denial] {
        assert!(text.contains(rule), "{kind}: {text}");
        assert!(!text.contains("without producing"), "{kind}: {text}");
        assert!(
            !text.contains("same result as the one before"),
            "{kind}: {text}"
        );
        assert!(
            !text.contains("new output are not counted"),
            "{kind}: {text}"
        );
    }
    assert!(denial.contains("Hits:\n"), "{denial}");
}

fn assert_identity(kind: &str) {
    let (summary, denial) = scenario(kind, true);
    assert!(
        summary.contains("has now come up 2 times this turn without producing a new result."),
        "{kind}: {summary}"
    );
    assert!(
        denial.contains("Calls that returned new output are not counted: the calls counted returned the same result as the one before them."),
        "{kind}: {denial}"
    );
    assert!(!denial.contains("whatever it returned"), "{kind}: {denial}");
    // Seed mode speaks the original's words exactly (the side-by-side test with the
    // original breaker compares them), and its denial makes no claim about new output.
    let (summary, denial) = scenario(kind, false);
    assert!(
        summary.contains("has now come up 2 times this turn without producing a result.\n"),
        "{kind}: {summary}"
    );
    assert!(!denial.contains("new output"), "{kind}: {denial}");
}

#[test]
fn exact_counts_only_the_same_result_again() {
    assert_identity("exact");
}

#[test]
fn cmd_counts_only_the_same_result_again() {
    assert_identity("cmd");
}

#[test]
fn net_counts_only_the_same_result_again() {
    assert_identity("net");
}

#[test]
fn host_counts_every_call_whatever_it_returned() {
    assert_target(
        "host",
        "every call to this host counts, whatever it returned",
    );
}

#[test]
fn site_counts_every_call_whatever_it_returned() {
    assert_target(
        "site",
        "every call to this site counts, whatever it returned",
    );
}

#[test]
fn sink_counts_every_write_whatever_it_returned() {
    assert_target(
        "sink",
        "every write to this destination counts, whatever it returned",
    );
}

#[test]
fn family_counts_every_fetch_whatever_it_returned() {
    assert_target("family", "every HTTP fetch counts, whatever it returned");
}

#[test]
fn verb_counts_every_run_whatever_it_returned() {
    assert_target(
        "verb",
        "every run of this command counts, whatever it returned",
    );
}

/// The unchanged track: a failing run returning the same result after each edit speaks of
/// that, not of repeats or of new output.
#[test]
fn unchanged_says_the_same_result_came_back_after_changes() {
    let mut s = Session::new(
        json!({"streak": {"enabled": false}, "breaker": {"on_limit": "deny", "unchanged_limit": 3}}),
    );
    let run = json!({"command": "cd /repo && python reproduce_issue.py"});
    let failed = || Outcome {
        exit_code: Some(1),
        ..Outcome::success("Traceback (most recent call last):\nAssertionError")
    };
    for i in 0..4 {
        s.step("execute_bash", run.clone(), failed());
        s.step(
            "str_replace_editor",
            json!({"command": "str_replace", "path": "/repo/src/lib.py", "old_str": format!("v{i}"), "new_str": format!("v{}", i + 1)}),
            Outcome::success("The file /repo/src/lib.py has been edited."),
        );
    }
    let d = s.call("execute_bash", run);
    assert_eq!(d.verdict, Verdict::Deny);
    assert!(
        d.hits.iter().all(|h| h.track == Track::Unchanged),
        "{:?}",
        d.hits
    );
    let text = d.message.unwrap();
    assert!(text.contains("(same result again)"), "{text}");
    assert!(
        text.contains("returned the same result as the run before it 3 times in a row, each time after the workspace changed"),
        "{text}"
    );
    assert!(!text.contains("new output"), "{text}");
    assert!(!text.contains("whatever it returned"), "{text}");
}
