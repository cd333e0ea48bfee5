//! `toolbrake replay` and its `--report`, driven as a user drives them (real processes,
//! real pipes): exit codes, the bundled runs, jobs, input formats, the HTML report, and
//! secrets redacted from every output.

mod support;
use support::*;

use serde_json::{json, Value};

#[test]
fn replay_exits_1_when_a_line_is_in_error_and_0_otherwise() {
    let run = |input: &str| {
        let out = run_with_stdin(isolated_bin().arg("replay"), input.as_bytes());
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let good = r#"{"event":"call","session":"s","id":"1","tool":"t"}
{"event":"result","id":"1","outcome":{}}
{"event":"end","session":"s"}
"#;
    let (code, out) = run(good);
    assert_eq!(code, Some(0));
    assert_eq!(out.lines().count(), 3);
    let (code, out) = run(&format!("{good}{{oops\n"));
    assert_eq!(code, Some(1));
    assert_eq!(out.lines().count(), 4);
}

#[test]
fn the_quick_start_catches_the_bundled_loop_and_spares_the_struggle() {
    let out = isolated_bin()
        .args(["replay", "--from", "trajectory", "--report"])
        .arg(repo().join("examples/tau-airline-task009.jsonl"))
        .arg(repo().join("examples/django-11265.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("2 sessions, 73 calls: 1 advisory, 2 asks, 3 calls stopped; 1 session gated (3 calls from the first gate to the end)"),
        "{text}"
    );
    assert!(
        text.contains("Of the calls stopped, 2 were waste (the recorded run got the same output as the last identical call), 0 would have brought new information, 1 has no recorded output."),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row for {name}: {text}"))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
    };
    // calls advised asks stopped waste new-info first-gate saved longest
    assert_eq!(
        row("tau_bench/gpt-4o-airline/task009/trial2"),
        ["23", "0", "2", "3", "2", "0", "21", "3", "4"]
    );
    // The django run re-runs a failing script 20 times, but its output changes between
    // the edits: work, not a loop. It draws one advisory and is never stopped.
    assert_eq!(
        row("openhands_c35_oh50/claude-3.5-sonnet/django__django-11265"),
        ["50", "1", "0", "0", "0", "0", "-", "0", "20"]
    );
}

#[test]
fn seed_mode_stops_the_struggle_the_progress_signal_spares() {
    let dir = tmpdir("cli", "seed-mode");
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        "[streak]\nprogress = false\n[breaker]\nprogress = false\n",
    )
    .unwrap();
    let out = isolated_bin()
        .args(["replay", "--from", "trajectory", "--report", "--config"])
        .arg(&cfg)
        .arg(repo().join("examples/django-11265.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("1 session gated (37 calls from the first gate to the end)"),
        "{text}"
    );
    // Most of what the seeds' rules stop here was new information.
    assert!(
        text.contains("Of the calls stopped, 1 was waste (the recorded run got the same output as the last identical call), 14 would have brought new information"),
        "{text}"
    );
}

#[test]
fn replaying_the_bundled_corpus_stops_only_waste_and_no_healthy_run() {
    let out = isolated_bin()
        .args(["replay", "--from", "trajectory"])
        .arg(repo().join("examples/trajectories/calls.jsonl.gz"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut gated = std::collections::BTreeSet::new();
    let mut session_of = std::collections::HashMap::new();
    // Map call ids to sessions from the importer's order: re-read the corpus.
    let data = std::fs::read(repo().join("examples/trajectories/calls.jsonl.gz")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&data[..]), &mut text).unwrap();
    for (n, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap();
        session_of.insert(
            format!("t{}", n + 1),
            v["session"].as_str().unwrap().to_string(),
        );
    }
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if matches!(v["verdict"].as_str(), Some("ask" | "deny")) {
            gated.insert(session_of[v["id"].as_str().unwrap()].clone());
        }
    }
    let labels =
        std::fs::read_to_string(repo().join("examples/trajectories/labels.jsonl")).unwrap();
    let mut resolved_gated = Vec::new();
    for line in labels.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let s = v["session"].as_str().unwrap();
        if gated.contains(s) && v["resolved"] == true {
            resolved_gated.push(s.to_string());
        }
    }
    // The loop in the corpus (a tau-bench agent re-booking with the same failing
    // arguments, a `think` between each try) and seven OpenHands runs whose reproduction
    // script came back unchanged after edits, again and again (the unchanged gate at its
    // default, 2).
    assert_eq!(
        gated.iter().collect::<Vec<_>>(),
        [
            "openhands_c35_oh50/claude-3.5-sonnet/astropy__astropy-14182",
            "openhands_c35_oh50/claude-3.5-sonnet/django__django-10880",
            "openhands_c35_oh50/claude-3.5-sonnet/django__django-11087",
            "openhands_c35_oh50/claude-3.5-sonnet/django__django-11095",
            "openhands_c35_oh50/claude-3.5-sonnet/django__django-11179",
            "openhands_c35_oh50/claude-3.5-sonnet/django__django-11292",
            "openhands_c35_oh50/claude-3.5-sonnet/django__django-11400",
            "tau_bench/gpt-4o-airline/task009/trial2"
        ],
        "{gated:?}"
    );
    // Four of them went on to resolve; what was stopped there would have come back as it
    // had before. The one stop that would have brought something new (the report below) is
    // in astropy-14182, a run that was not resolved: its rerun would have passed.
    assert_eq!(resolved_gated.len(), 4, "{resolved_gated:?}");
    let out = isolated_bin()
        .args(["replay", "--from", "trajectory", "--report"])
        .arg(repo().join("examples/trajectories/calls.jsonl.gz"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Of the calls stopped, 10 were waste (the recorded run got the same output as the last identical call), 1 would have brought new information, 2 have no recorded output."),
        "{text}"
    );
}

/// `--jobs` spreads sessions over threads and changes nothing a user sees: the bundled
/// corpus (as protocol events, its ids open in one session each, and as recorded runs with
/// the report) gives byte-identical output with one thread and with three; 0 is refused.
#[test]
fn replay_output_is_the_same_whatever_the_number_of_jobs() {
    let corpus = repo().join("examples/trajectories/calls.jsonl.gz");
    let run = |args: &[&str]| {
        let out = isolated_bin()
            .arg("replay")
            .args(args)
            .arg(&corpus)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    for extra in [
        &["--from", "trajectory"][..],
        &["--from", "trajectory", "--report"][..],
    ] {
        let one = run(&[extra, &["--jobs", "1"][..]].concat());
        let three = run(&[extra, &["--jobs", "3"][..]].concat());
        assert!(one.lines().count() > 10);
        assert_eq!(one, three, "{extra:?}");
    }
    let zero = isolated_bin()
        .args(["replay", "--jobs", "0"])
        .arg(&corpus)
        .output()
        .unwrap();
    assert_eq!(zero.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&zero.stderr).contains("--jobs"),
        "{}",
        String::from_utf8_lossy(&zero.stderr)
    );
}

#[test]
fn the_html_report_is_self_contained() {
    let dir = tmpdir("cli", "html");
    let page = dir.join("report.html");
    let html = bundled_html_report(&page);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("django__django-11265"));
    assert!(
        html.contains("<p id=\"waste\">Of the calls stopped, 10 were waste"),
        "{html}"
    );
    assert!(
        !html.contains("<script") && !html.contains("src=\"http") && !html.contains("href=\"http")
    );
}

/// The page renders in a real browser: headless Chromium takes a screenshot of it.
#[test]
fn the_html_report_renders_in_headless_chromium() {
    let dir = tmpdir("cli", "chromium");
    let page = dir.join("report.html");
    let status = isolated_bin()
        .args(["replay", "--from", "trajectory", "--html"])
        .arg(&page)
        .arg(repo().join("examples/tau-airline-task009.jsonl"))
        .status()
        .unwrap();
    assert!(status.success());
    let shot = dir.join("shot.png");
    let url = format!("file://{}", page.display());
    let out = headless(
        &dir,
        "profile",
        &[format!("--screenshot={}", shot.display()), url.clone()],
    );
    assert_success(&out);
    assert_drawn_png(&shot);
    // The DOM as the browser built it holds the drawn marks.
    let dom = headless(&dir, "profile2", &["--dump-dom".into(), url]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(
        dom.matches("class=\"mark ").count(),
        23,
        "one mark per call"
    );
    assert!(dom.contains("class=\"mark ask\""));
}

/// `--from` naming the wrong format is an error naming the right one, and input of which
/// nothing could be read exits non-zero instead of reporting 0 sessions.
#[test]
fn replay_from_the_wrong_format_says_so_and_fails() {
    let run = repo().join("examples/django-11265.jsonl");
    for from in ["claude-code", "codex"] {
        let out = isolated_bin()
            .args(["replay", "--report", "--from", from])
            .arg(&run)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{from}");
        assert!(out.stdout.is_empty(), "{from}: no report");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains(&format!("django-11265.jsonl looks like a recorded run in the trajectory format, not {from}: run `toolbrake replay --from trajectory` on it")),
            "{from}: {err}"
        );
    }
    let out = isolated_bin()
        .args(["replay", "--report", "--from", "trajectory"])
        .arg(repo().join("README.md"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("nothing in ")
            && err.contains(
                "README.md could be read as a recorded run in the trajectory format (skipped "
            ),
        "{err}"
    );
    let out = run_with_stdin(
        isolated_bin().args(["replay", "--from", "codex", "-"]),
        b"{\"event\":\"call\",\"session\":\"s\",\"id\":\"1\",\"tool\":\"t\"}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("looks like protocol events, not a recorded run in the codex format: run `toolbrake replay` on it without --from"),
        "{err}"
    );
}

#[test]
fn replay_of_a_recorded_run_without_from_names_the_format() {
    let out = isolated_bin()
        .arg("replay")
        .arg(repo().join("examples/django-11265.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("django-11265.jsonl looks like a recorded run in the trajectory format, not protocol events: run `toolbrake replay --from trajectory` on it"),
        "{err}"
    );
    // Protocol events are still replayed as they are.
    let out = run_with_stdin(
        isolated_bin().arg("replay"),
        b"{\"event\":\"call\",\"session\":\"s\",\"id\":\"1\",\"tool\":\"t\"}\n",
    );
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("\"verdict\":\"allow\""));
}

#[test]
fn replay_exits_1_when_a_call_was_judged_without_its_store() {
    let dir = tmpdir("cli", "degraded");
    let cfg = dir.join("redis-down.toml");
    std::fs::write(
        &cfg,
        "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:1\"\nconnect_timeout = \"200ms\"\n",
    )
    .unwrap();
    let out = run_with_stdin(
        isolated_bin()
            .args(["replay", "--config"])
            .arg(&cfg)
            .arg("-"),
        b"{\"event\":\"call\",\"session\":\"s\",\"id\":\"1\",\"tool\":\"t\"}\n",
    );
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.contains("\"degraded\":\"toolbrake could not judge this call: redis 127.0.0.1:1"),
        "{line}"
    );
    assert_eq!(out.status.code(), Some(1), "docs/protocol.md promises 1");
}

const SECRETS: [&str; 4] = [
    "sk-live-4f3e2d1c0b9a8f7e6d5c",
    "SUPERSECRETKEY42",
    "hunter2pw",
    "ghp_0123456789abcdefghijklmnopqrstuv",
];

/// Protocol events of a loop whose calls and outputs carry credentials.
fn secret_loop() -> String {
    let mut events = String::new();
    for i in 0..14 {
        let cmd = format!(
            "curl -s -H 'Authorization: Bearer {}' 'https://bob:{}@api.example.com/v1/items?api_key={}&page=1' --max-time {}",
            SECRETS[0], SECRETS[2], SECRETS[1], 10 + i
        );
        events.push_str(&serde_json::to_string(&json!({"event": "call", "session": "s", "id": format!("{i}"), "tool": "bash", "args": {"command": cmd}})).unwrap());
        events.push('\n');
        events.push_str(&serde_json::to_string(&json!({"event": "result", "id": format!("{i}"), "outcome": {"exit_code": 0, "text": format!("{{\"token\": \"{}\"}}", SECRETS[3])}})).unwrap());
        events.push('\n');
    }
    events
}

fn replay_with(args: &[&str], input: &str) -> (String, String) {
    let out = run_with_stdin(isolated_bin().arg("replay").args(args), input.as_bytes());
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Credentials in arguments and outputs never reach what toolbrake shows: denials, hits,
/// advisories, the report and its HTML page (written owner-only). Identity is unchanged:
/// the loop is still gated where it was.
#[test]
fn secrets_are_redacted_from_every_output() {
    let input = secret_loop();
    let (lines, _) = replay_with(&["-"], &input);
    let denial = lines
        .lines()
        .find(|l| l.contains("\"verdict\":\"ask\"") || l.contains("\"verdict\":\"deny\""))
        .unwrap_or_else(|| panic!("the loop is gated: {lines}"));
    assert!(denial.contains("[REDACTED]"), "{denial}");
    let dir = tmpdir("cli", "secrets");
    let html = dir.join("report.html");
    let (report, _) = replay_with(&["--report", "--html", html.to_str().unwrap(), "-"], &input);
    let page = std::fs::read_to_string(&html).unwrap();
    for text in [&lines, &report, &page] {
        for s in SECRETS {
            assert!(!text.contains(s), "{s} leaked: {text}");
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&html).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let out = isolated_bin()
        .args(["explain", "bash"])
        .arg(format!(
            "{{\"command\":\"curl -H 'Authorization: Bearer {}' https://a.com\"}}",
            SECRETS[0]
        ))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains(SECRETS[0]) && text.contains("[REDACTED]"),
        "{text}"
    );
}
