//! `toolbrake tune --calibrate`, driven as a user drives it: the real binary on the
//! bundled recorded runs with their labels, and on small histories written here, with
//! marks left by `toolbrake feedback` in a real SQLite store.

mod support;
use support::*;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The binary with its store in `dir` (a SQLite file there).
fn bin(dir: &Path) -> Command {
    let mut c = isolated_bin();
    c.env("TOOLBRAKE_STATE", dir.join("state.db"));
    c
}

/// `plain` runs of three different calls (nothing to stop), and one run that calls the
/// same search three times, getting the same answer twice and then a new one: the streak
/// brake stops its third call under the defaults, and that stop is harmful.
fn history_text(plain: usize) -> String {
    let mut h = String::new();
    for r in 0..plain {
        for c in 0..3 {
            h.push_str(&format!(
                "{{\"event\":\"call\",\"session\":\"run{r}\",\"id\":\"{c}\",\"tool\":\"search\",\"args\":{{\"q\":\"topic {c}\"}}}}\n{{\"event\":\"result\",\"session\":\"run{r}\",\"id\":\"{c}\",\"outcome\":{{\"text\":\"answer {c}\"}}}}\n"
            ));
        }
        h.push_str(&format!("{{\"event\":\"end\",\"session\":\"run{r}\"}}\n"));
    }
    for c in 0..3 {
        h.push_str(&format!(
            "{{\"event\":\"call\",\"session\":\"loop\",\"id\":\"{c}\",\"tool\":\"search\",\"args\":{{\"q\":\"prices\"}}}}\n{{\"event\":\"result\",\"session\":\"loop\",\"id\":\"{c}\",\"outcome\":{{\"text\":\"{}\"}}}}\n",
            if c < 2 { "price" } else { "price changed" }
        ));
    }
    h.push_str("{\"event\":\"end\",\"session\":\"loop\"}\n");
    h
}

fn calibrate(dir: &Path, plain: usize, extra: &[&str]) -> Output {
    let path = dir.join("history.jsonl");
    std::fs::write(&path, history_text(plain)).unwrap();
    bin(dir)
        .args(["tune", "--calibrate"])
        .args(extra)
        .arg(&path)
        .output()
        .unwrap()
}

#[test]
fn nineteen_good_runs_give_a_promise_in_plain_words() {
    let dir = tmpdir("calibrate", "promise");
    let out = calibrate(&dir, 19, &[]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("Promise: no more than 1 in 20 runs like your 19 past good ones would get a call stopped that would have brought something new."),
        "{text}"
    );
    assert!(
        text.contains("Holds when: new runs are like these"),
        "{text}"
    );
    assert!(text.contains("Recalibrate when"), "{text}");
    let v: Value = serde_json::from_str(&stdout(&calibrate(&dir, 19, &["--json"]))).unwrap();
    // The stopped run is not good (no label, a stop): 19 good runs, k = ⌈20 × 0.95⌉ = 19.
    assert_eq!(
        (v["good_runs"].as_u64(), v["k"].as_u64()),
        (Some(19), Some(19))
    );
    assert_eq!(v["harmed_good_runs"], 0);
    // No good run is harmed anywhere on the ladder: its strictest setting.
    assert_eq!(v["rung"], 0);
}

#[test]
fn too_few_good_runs_are_refused_with_how_many_more() {
    let dir = tmpdir("calibrate", "too-few");
    let out = calibrate(&dir, 18, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("18 good runs to calibrate on; the promise needs at least 19 (1 more)"),
        "{err}"
    );
    // A looser α needs fewer.
    assert_success(&calibrate(&dir, 18, &["--alpha", "10%"]));
}

#[test]
fn a_run_marked_mistaken_counts_as_good_and_moves_the_line_up() {
    let dir = tmpdir("calibrate", "mistaken");
    let before: Value = serde_json::from_str(&stdout(&calibrate(&dir, 19, &["--json"]))).unwrap();
    // The run is stored (a hook saw it), and a person marks its stop mistaken.
    let mut hook = bin(&dir);
    let payload = r#"{"session_id":"loop","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"x"}"#;
    let out = run_with_stdin(hook.args(["hook", "claude"]), payload.as_bytes());
    assert_success(&out);
    assert_success(
        &bin(&dir)
            .args(["feedback", "loop", "--mistaken"])
            .output()
            .unwrap(),
    );
    let out = calibrate(&dir, 19, &["--json"]);
    assert_success(&out);
    let after: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(after["marked_mistaken"], 1);
    assert_eq!(after["good_runs"], 20);
    // k = ⌈21 × 0.95⌉ = 20 of 20: the line is the marked run's own score, above the base,
    // where its third call is not stopped.
    assert_eq!(after["k"], 20);
    assert!(
        after["rung"].as_u64() > before["rung"].as_u64(),
        "{before} {after}"
    );
    assert_eq!(after["harmed_good_runs"], 0);
    let text = stdout(&calibrate(&dir, 19, &[]));
    assert!(text.contains("1 marked mistaken (good)"), "{text}");
}

#[test]
fn the_bundled_runs_calibrate_on_their_resolved_labels() {
    let dir = tmpdir("calibrate", "bundled");
    let corpus = repo().join("examples/trajectories");
    let out = bin(&dir)
        .args([
            "tune",
            "--calibrate",
            "--json",
            "--from",
            "trajectory",
            "--labels",
        ])
        .arg(corpus.join("labels.jsonl"))
        .arg(corpus.join("calls.jsonl.gz"))
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let n = v["good_runs"].as_u64().unwrap();
    assert_eq!(v["good_by_label"].as_u64(), Some(n));
    assert!(n >= 19, "{v}");
    // The k-th score is the line: at most n − k calibration runs are above it.
    let k = v["k"].as_u64().unwrap();
    assert_eq!(k, ((n + 1) * 19).div_ceil(20));
    assert!(v["harmed_good_runs"].as_u64().unwrap() <= n - k, "{v}");
}

#[test]
fn bad_calibration_flags_get_clear_errors() {
    let dir = tmpdir("calibrate", "flags");
    let out = calibrate(&dir, 19, &["--alpha", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--alpha: \"1.5\" is not a share"),
        "{}",
        stderr(&out)
    );
    let out = bin(&dir)
        .args(["tune", "--alpha", "0.1", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--calibrate"), "{}", stderr(&out));
    let labels = dir.join("labels.jsonl");
    std::fs::write(&labels, "{\"session\":\"run0\",\"resolved\":\"yes\"}\n").unwrap();
    let out = calibrate(&dir, 19, &["--labels", labels.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("labels.jsonl, line 1: `resolved` must be true, false or null"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_run_level_line_is_calibrated_written_and_enforced_by_the_hook() {
    let dir = tmpdir("calibrate", "budget");
    let target = dir.join("toolbrake.toml");
    std::fs::write(&target, "# mine\n[streak]\nmax_repeats = 3\n").unwrap();
    // 40 plain runs: α = 5% split in halves needs 39 good runs at 2.5%.
    let out = calibrate(&dir, 40, &["--budget", "--write", target.to_str().unwrap()]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("or cross the run-level line"), "{text}");
    // Every good run has 3 calls and no stop: the line is 3.
    assert!(text.contains("Run-level line: 3 "), "{text}");
    let written = std::fs::read_to_string(&target).unwrap();
    assert!(written.contains("# mine"), "{written}");
    assert!(
        written.contains("[budget]\nenabled = true\nline = 3"),
        "{written}"
    );
    let check = bin(&dir)
        .args(["config", "check"])
        .arg(&target)
        .output()
        .unwrap();
    assert_success(&check);
    // A Claude Code session under that file: its 4th call is past the line (asked).
    let mut last = String::new();
    for i in 0..4 {
        let payload = format!(
            r#"{{"session_id":"long","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{{"file_path":"f{i}.txt"}},"tool_use_id":"t{i}"}}"#
        );
        let out = run_with_stdin(
            bin(&dir)
                .arg("--config")
                .arg(&target)
                .args(["hook", "claude"]),
            payload.as_bytes(),
        );
        assert_success(&out);
        last = stdout(&out);
        if i < 3 {
            assert!(!last.contains("\"ask\""), "{i}: {last}");
        }
    }
    assert!(last.contains("\"ask\""), "{last}");
    assert!(last.contains("past the run-level line of 3"), "{last}");
    // A bad line is refused with its key, value and rule.
    std::fs::write(&target, "[budget]\nline = 0\n").unwrap();
    let check = bin(&dir)
        .args(["config", "check"])
        .arg(&target)
        .output()
        .unwrap();
    assert!(!check.status.success());
    assert!(
        stderr(&check).contains("budget.line = 0"),
        "{}",
        stderr(&check)
    );
}

/// A Claude Code transcript with no tool call: a question and a text answer.
fn chat_only(session: &str) -> String {
    format!(
        "{{\"type\":\"user\",\"sessionId\":\"{session}\",\"message\":{{\"role\":\"user\",\"content\":\"what does this error mean?\"}}}}\n\
         {{\"type\":\"assistant\",\"sessionId\":\"{session}\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"It means the file is missing.\"}}]}}}}\n"
    )
}

/// A Claude Code transcript that reads three different files.
fn reading_run(session: &str) -> String {
    let mut t = String::new();
    for c in 0..3 {
        t.push_str(&format!(
            "{{\"type\":\"assistant\",\"sessionId\":\"{session}\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"{session}-{c}\",\"name\":\"Read\",\"input\":{{\"file_path\":\"src/f{c}.rs\"}}}}]}}}}\n\
             {{\"type\":\"user\",\"sessionId\":\"{session}\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"{session}-{c}\",\"content\":\"fn f{c}() {{}}\"}}]}}}}\n"
        ));
    }
    t
}

#[test]
fn runs_without_a_tool_call_are_left_out_and_said_so() {
    let dir = tmpdir("calibrate", "chat-only");
    // 39 chat-only transcripts and one run that called tools, as ~/.claude/projects holds.
    let path = dir.join("transcripts.jsonl");
    let mut text: String = (0..39).map(|i| chat_only(&format!("chat{i}"))).collect();
    text.push_str(&reading_run("real"));
    std::fs::write(&path, text).unwrap();
    let out = bin(&dir)
        .args(["tune", "--calibrate", "--from", "claude-code"])
        .arg(&path)
        .output()
        .unwrap();
    // One run with calls is not 19: no promise, and the 39 are named as left out.
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot promise anything yet: 1 good run to calibrate on; the promise needs at least 19 (18 more); 39 runs without a tool call were left out (a run that called no tool is no evidence either way)."),
        "{err}"
    );

    // Beside 19 good runs with calls, they change nothing but are counted as left out.
    let history = dir.join("history.jsonl");
    let mut h = history_text(19);
    for i in 0..5 {
        h.push_str(&format!(
            "{{\"event\":\"user\",\"session\":\"chat{i}\"}}\n{{\"event\":\"end\",\"session\":\"chat{i}\"}}\n"
        ));
    }
    std::fs::write(&history, h).unwrap();
    let out = bin(&dir)
        .args(["tune", "--calibrate", "--json"])
        .arg(&history)
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["left_out_without_calls"], 5, "{v}");
    assert_eq!(v["good_runs"], 19, "{v}");
    assert_eq!(v["k"], 19, "{v}");
    let out = bin(&dir)
        .args(["tune", "--calibrate"])
        .arg(&history)
        .output()
        .unwrap();
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("25 runs (60 calls); 5 without a tool call left out (no evidence either way); of the other 20, 19 good:"),
        "{text}"
    );
    assert!(text.contains("runs like your 19 past good ones"), "{text}");
}

#[test]
fn calibration_replays_at_most_the_stated_calls_of_a_run() {
    // The cap is the library's (its cut is tested there on a small cap); here, that the
    // command sets it and says so, and that runs under it are not cut.
    let dir = tmpdir("calibrate", "cap");
    let out = calibrate(&dir, 19, &["--json"]);
    assert_success(&out);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["cut_at"], 100_000, "{v}");
    assert_eq!(v["cut_runs"], 0, "{v}");
    assert_eq!(v["calls_replayed"], 19 * 3 + 3, "{v}");
    assert_eq!(v["calls_not_replayed"], 0, "{v}");
    let text = stdout(&calibrate(&dir, 19, &[]));
    assert!(!text.contains("cut there"), "{text}");
}
