//! The `toolbrake` command, driven as a user drives it: real processes, real pipes.

mod support;
use support::*;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

#[test]
fn serve_answers_each_line_at_once_and_exits_cleanly_on_eof() {
    let mut child = isolated_bin()
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut ask = |line: &str| -> Value {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        // The answer must arrive while stdin is still open: no buffering delays it.
        let got = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("an answer line, promptly");
        serde_json::from_str(&got).unwrap()
    };
    // Two sessions interleaved on one stream.
    for i in 0..2 {
        for s in ["a", "b"] {
            let out = ask(&format!(
                r#"{{"event":"call","session":"{s}","id":"{s}{i}","tool":"search","args":{{"q":"w"}}}}"#
            ));
            assert_eq!(out["verdict"], "allow", "{out}");
        }
    }
    assert!(ask("not json").get("error").is_some());
    let out = ask(r#"{"event":"call","session":"a","id":"a2","tool":"search","args":{"q":"w"}}"#);
    assert_eq!(out["verdict"], "deny", "state survived the bad line");
    assert_eq!(out["engine"], "streak");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success());
}

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
        text.contains("2 sessions, 73 calls: 1 advisory, 2 asks, 3 calls stopped; 1 session gated, 3 calls saved"),
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
    assert!(text.contains("1 session gated, 37 calls saved"), "{text}");
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

#[test]
fn config_errors_name_key_value_and_rule_and_exit_2() {
    let dir = tmpdir("cli", "config");
    let f = dir.join("bad.toml");
    std::fs::write(&f, "[breaker]\nwindw = 16\n").unwrap();
    let out = isolated_bin()
        .args(["config", "check"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("breaker.windw") && err.contains("did you mean `breaker.window`"),
        "{err}"
    );

    std::fs::write(&f, "[streak]\nmax_repeats = 2.5\n").unwrap();
    let err = String::from_utf8(
        isolated_bin()
            .args(["config", "check"])
            .arg(&f)
            .output()
            .unwrap()
            .stderr,
    )
    .unwrap();
    assert_eq!(
        err.trim_end(),
        format!(
            "toolbrake: {}, line 2: `streak.max_repeats = 2.5` is not valid: it must be a whole number from 1 to 4294967295.",
            f.display()
        )
    );

    let out = isolated_bin()
        .args(["config", "check"])
        .env("TOOLBRAKE_MAX_REPEATS", "many")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("TOOLBRAKE_MAX_REPEATS"));
}

#[test]
fn config_check_prints_every_section_with_credentials_hidden() {
    let dir = tmpdir("cli", "store-section");
    let f = dir.join("redis.toml");
    std::fs::write(
        &f,
        "[store]\nkind = \"redis\"\nurl = \"redis://ops:s3cret-pw@127.0.0.1:6379/2\"\nfail_closed = true\n",
    )
    .unwrap();
    let out = isolated_bin()
        .args(["config", "check"])
        .arg(&f)
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    for section in ["[streak]", "[breaker]", "[protocol]", "[store]"] {
        assert!(
            text.contains(&format!("\n{section}\n")),
            "{section}: {text}"
        );
    }
    assert!(text.contains("kind = \"redis\"\n") && text.contains("fail_closed = true\n"));
    assert!(
        text.contains("url = \"redis://hidden:hidden@127.0.0.1:6379/2\""),
        "{text}"
    );
    assert!(
        !text.contains("s3cret-pw") && !text.contains("ops"),
        "{text}"
    );
    // What it prints is itself a valid configuration.
    let printed = dir.join("printed.toml");
    std::fs::write(
        &printed,
        text.lines().skip(1).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    assert!(isolated_bin()
        .args(["config", "check"])
        .arg(&printed)
        .output()
        .unwrap()
        .status
        .success());
    // Redis URLs the client cannot use are refused at load, never echoed.
    for bad in [
        "redis://[::1/0",
        "redis://127.0.0.1:6379/notadb",
        "http://127.0.0.1:6379",
        "redis://:pw@/",
    ] {
        std::fs::write(&f, format!("[store]\nurl = \"{bad}\"\n")).unwrap();
        let out = isolated_bin()
            .args(["config", "check"])
            .arg(&f)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("`store.url = (not shown)` is not valid"),
            "{bad}: {err}"
        );
        assert!(!err.contains(bad), "{err}");
    }
}

/// Texts a new user reads: a duration's range as docs/configuration.md writes it, `mcp` without a
/// server naming every way to give one, completions for the shells.
#[test]
fn ranges_usage_and_completions_read_as_the_readme_does() {
    let dir = tmpdir("cli", "texts");
    let f = dir.join("toolbrake.toml");
    std::fs::write(&f, "[store]\nidle_ttl = \"0s\"\n").unwrap();
    let out = isolated_bin()
        .args(["config", "check"])
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("from 1 s to 3650 days"), "{err}");
    std::fs::write(&f, "[store]\nlock_timeout = \"2d\"\n").unwrap();
    let out = isolated_bin()
        .args(["config", "check"])
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("from 1 ms to 1 day."), "{err}");

    let out = isolated_bin().arg("mcp").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    for said in ["--url", "--fetch-tool", "-- <COMMAND>"] {
        assert!(err.contains(said), "{said}: {err}");
    }

    for (shell, mark) in [
        ("bash", "complete -F _toolbrake"),
        ("zsh", "#compdef toolbrake"),
        ("fish", "complete -c toolbrake"),
    ] {
        let out = isolated_bin()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert_success(&out);
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains(mark), "{shell}: {script}");
        assert!(script.contains("replay"), "{shell}: subcommands completed");
    }
    let out = isolated_bin().arg("man").output().unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains(".TH toolbrake 1"));
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
fn configuration_lookup_order() {
    let dir = tmpdir("cli", "lookup");
    let explicit = dir.join("explicit.toml");
    std::fs::write(&explicit, "[streak]\nmax_repeats = 9\n").unwrap();
    let via_env = dir.join("env.toml");
    std::fs::write(&via_env, "[streak]\nmax_repeats = 8\n").unwrap();
    std::fs::write(dir.join("toolbrake.toml"), "[streak]\nmax_repeats = 7\n").unwrap();
    let xdg = dir.join("xdg");
    std::fs::create_dir_all(xdg.join("toolbrake")).unwrap();
    std::fs::write(
        xdg.join("toolbrake/config.toml"),
        "[streak]\nmax_repeats = 6\n",
    )
    .unwrap();
    let effective = |c: &mut Command| {
        let out = c.output().unwrap();
        assert_success(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .find(|l| l.starts_with("max_repeats"))
            .unwrap()
            .to_string()
    };
    let base = || {
        let mut c = isolated_bin();
        c.args(["config", "check"])
            .env("XDG_CONFIG_HOME", &xdg)
            .current_dir(&dir);
        c
    };
    assert_eq!(
        effective(base().arg(&explicit).env("TOOLBRAKE_CONFIG", &via_env)),
        "max_repeats = 9"
    );
    assert_eq!(
        effective(base().env("TOOLBRAKE_CONFIG", &via_env)),
        "max_repeats = 8"
    );
    assert_eq!(effective(&mut base()), "max_repeats = 7");
    std::fs::remove_file(dir.join("toolbrake.toml")).unwrap();
    assert_eq!(effective(&mut base()), "max_repeats = 6");
    std::fs::remove_dir_all(&xdg).unwrap();
    assert_eq!(
        effective(base().env("TOOLBRAKE_MAX_REPEATS", "4")),
        "max_repeats = 4"
    );
    assert_eq!(effective(&mut base()), "max_repeats = 3");
}

#[test]
fn config_default_prints_a_file_that_checks() {
    let dir = tmpdir("cli", "default");
    let out = isolated_bin().args(["config", "default"]).output().unwrap();
    let f = dir.join("default.toml");
    std::fs::write(&f, &out.stdout).unwrap();
    let check = isolated_bin()
        .args(["config", "check"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(check.status.success());
}

#[test]
fn explain_prints_hash_and_fingerprints() {
    let out = isolated_bin()
        .args([
            "explain",
            "bash",
            r#"{"command":"curl -s https://open-data.canada.ca/x -o out.bin","description":"1st"}"#,
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("canonical:  {\"command\":\"curl -s https://open-data.canada.ca/x -o out.bin\",\"description\":\"1st\"}"));
    assert!(text.contains("decoys:     stripped description"));
    assert!(text.contains("net:open.canada.ca/x"));
    assert!(text.contains("host:open.canada.ca") && text.contains("gate at 16"));
    let hash_line = text.lines().find(|l| l.starts_with("hash:")).unwrap();
    assert_eq!(hash_line.split_whitespace().nth(1).unwrap().len(), 64);
    assert!(text.contains("mutating:   no\n"), "{text}");
    let mutating = |tool: &str, args: &str| {
        let out = isolated_bin()
            .args(["explain", tool, args])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .find(|l| l.starts_with("mutating:"))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    };
    assert!(mutating(
        "str_replace_editor",
        r#"{"command":"create","path":"a.py","file_text":"x"}"#
    )
    .contains("yes"));
    assert!(mutating("str_replace_editor", r#"{"command":"view","path":"a.py"}"#).ends_with("no"));
    assert!(mutating("Bash", r#"{"command":"sed -i 's/a/b/' f.py && pytest"}"#).contains("yes"));
    assert!(mutating("Bash", r#"{"command":"pytest 2>&1 | tail"}"#).ends_with("no"));
    let out = isolated_bin()
        .args(["explain", "bash", "{\"command\": \"secret-token"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !String::from_utf8(out.stderr)
            .unwrap()
            .contains("secret-token"),
        "errors never echo arguments"
    );
}

/// `explain --session` reads the session's state and says what the signals say of the call:
/// here a test run whose failure came back the same after each of two edits (the default
/// gate, 2), through the real Claude Code hook payloads, so the next run would be stopped
/// (and is, with an ask).
#[test]
fn explain_with_a_session_shows_the_unchanged_track() {
    let dir = tmpdir("cli", "explain-session");
    let state = dir.join("state.db");
    let hook = |payload: serde_json::Value| {
        let mut c = isolated_bin();
        c.args(["hook", "claude"]).env("TOOLBRAKE_STATE", &state);
        let out = support::run_with_stdin(&mut c, payload.to_string().as_bytes());
        String::from_utf8(out.stdout).unwrap()
    };
    let pre = |id: &str, tool: &str, input: serde_json::Value| {
        serde_json::json!({"session_id": "s1", "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": input, "tool_use_id": id})
    };
    for i in 0..3 {
        let run = serde_json::json!({"command": "python t.py", "description": format!("run {i}")});
        hook(pre(&format!("t{i}"), "Bash", run.clone()));
        hook(
            serde_json::json!({"session_id": "s1", "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash", "tool_input": run, "tool_use_id": format!("t{i}"),
            "error": "Exit code 1\nAssertionError: 2 != 3", "is_interrupt": false}),
        );
        let edit = serde_json::json!({"file_path": "/w/a.py", "old_string": format!("x{i}"), "new_string": "y"});
        hook(pre(&format!("e{i}"), "Edit", edit.clone()));
        let mut post = pre(&format!("e{i}"), "Edit", edit);
        post["hook_event_name"] = "PostToolUse".into();
        post["tool_response"] = serde_json::json!({"filePath": "/w/a.py"});
        hook(post);
    }
    let out = isolated_bin()
        .args([
            "explain",
            "--session",
            "s1",
            "Bash",
            r#"{"command":"python t.py","description":"once more"}"#,
        ])
        .env("TOOLBRAKE_STATE", &state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "(the call without its decoy keys: a new description or timeout is the same call)"
        ),
        "{text}"
    );
    assert!(text.contains("session:    s1 (sqlite "), "{text}");
    assert!(text.contains("unchanged:  2 results in a row the same as the run before (2 after workspace changes); stopped at 2: this call would be stopped"), "{text}");
    assert!(text.contains("failures since it last succeeded"), "{text}");
    let asked = hook(pre(
        "t9",
        "Bash",
        serde_json::json!({"command": "python t.py", "description": "last try"}),
    ));
    assert!(
        asked.contains(r#""permissionDecision":"ask""#)
            && asked.contains("keeps returning the SAME result"),
        "{asked}"
    );
    // A session the store does not hold: tests/explain.rs.
}

#[test]
fn the_streak_example_refuses_the_third_call() {
    // The quick start's runnable example (README; docs/rust.md), as a test of the same code path through the library.
    let brake = toolbrake::Brake::default();
    let args = serde_json::json!({"q": "weather"});
    let mut ran = 0;
    let mut refused = None;
    for _ in 0..3 {
        match brake.guard("s", "search", &args, || {
            ran += 1;
            Ok::<_, String>(())
        }) {
            Ok(_) => {}
            Err(e) => refused = e.refusal().cloned(),
        }
    }
    assert_eq!(ran, 2);
    let r = refused.unwrap();
    assert_eq!((r.engine, r.code), ("streak", "LOOP_BRAKE"));
    let s = r.streak.unwrap();
    assert_eq!(
        (s.count, s.max_repeats, s.tool.as_str(), s.session.as_str()),
        (3, 3, "search", "s")
    );
}

/// A reader that goes away (`toolbrake sessions | head -1`) ends the command quietly: no
/// panic, no claim of a read error, exit 0.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = tmpdir("cli", "closed-pipe");
    let corpus = repo().join("examples/trajectories/calls.jsonl.gz");
    let corpus = corpus.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["config", "default"],
        vec!["config", "check"],
        vec!["sessions"],
        vec!["sessions", "--json"],
        vec!["explain", "bash", "{\"command\":\"ls\"}"],
        vec!["replay", "--from", "trajectory", corpus],
        vec!["replay", "--from", "trajectory", "--report", corpus],
    ];
    for args in cases {
        let mut child = isolated_bin()
            .args(&args)
            .env("TOOLBRAKE_STATE", dir.join("state.db"))
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("read"),
            "{args:?}: {err}"
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
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

#[test]
fn nesting_past_the_limit_is_named_as_such() {
    let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
    let line = format!("{{\"event\":\"call\",\"session\":\"s\",\"id\":\"1\",\"tool\":\"t\",\"args\":{{\"a\":{deep}}}}}\n");
    let out = run_with_stdin(isolated_bin().args(["replay", "-"]), line.as_bytes());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("nests deeper than 128 levels"), "{text}");
    assert!(!text.contains("syntax error"), "{text}");
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
