//! The `toolbrake` command, driven as a user drives it (real processes, real pipes): `serve`,
//! `config`, `explain`, usage and completions, a closed stdout.

mod support;
use support::*;

use serde_json::Value;
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
fn nesting_past_the_limit_is_named_as_such() {
    let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
    let line = format!("{{\"event\":\"call\",\"session\":\"s\",\"id\":\"1\",\"tool\":\"t\",\"args\":{{\"a\":{deep}}}}}\n");
    let out = run_with_stdin(isolated_bin().args(["replay", "-"]), line.as_bytes());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("nests deeper than 128 levels"), "{text}");
    assert!(!text.contains("syntax error"), "{text}");
}
