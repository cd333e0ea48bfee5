//! `toolbrake hook` and `sessions` as real processes on a real SQLite file: concurrency,
//! crashes, the failure policy, payload limits, what the state file holds.

mod support;
use support::hooks::*;
use support::*;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Child;
use std::time::Duration;

#[test]
fn thirty_two_parallel_hook_processes_lose_no_update() {
    let dir = tmpdir("hooks", "parallel");
    let cfg = dir.join("lb.toml");
    std::fs::write(&cfg, "[streak]\nmax_repeats = 1000\n[breaker]\nenabled = false\n[store]\nlock_timeout = \"30s\"\n").unwrap();
    let children: Vec<Child> = (0..32)
        .map(|i| spawn_hook(&dir, &pre("par", &format!("t{i}"), "echo same"), Some(&cfg)))
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let s = sessions_json(&dir, Some(&cfg));
    assert_eq!(s.len(), 1);
    assert_eq!(
        s[0]["streak"]["count"], 32,
        "every one of 32 concurrent decisions was counted"
    );
}

#[test]
fn killed_hook_processes_never_corrupt_the_store() {
    let dir = tmpdir("hooks", "crash");
    let cfg = dir.join("lb.toml");
    std::fs::write(&cfg, "[streak]\nmax_repeats = 100000\n[breaker]\nenabled = false\n[store]\nlock_timeout = \"30s\"\n").unwrap();
    let mut finished = 0;
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for round in 0..12 {
        let children: Vec<Child> = (0..8)
            .map(|i| {
                spawn_hook(
                    &dir,
                    &pre("crash", &format!("r{round}c{i}"), "echo same"),
                    Some(&cfg),
                )
            })
            .collect();
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        std::thread::sleep(Duration::from_micros((seed >> 40) % 4000));
        for (i, mut c) in children.into_iter().enumerate() {
            if (seed >> i) & 1 == 1 {
                let _ = c.kill(); // SIGKILL, wherever it is
            }
            if c.wait().unwrap().success() {
                finished += 1;
            }
        }
    }
    // The file opens, passes SQLite's integrity check, and every row decodes.
    let out = bin(&dir)
        .arg("--config")
        .arg(&cfg)
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let s: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s.len(), 1);
    let store = toolbrake_store::SqliteStore::open(&dir.join("state/state.db"), Default::default())
        .unwrap();
    store.integrity_check().unwrap();
    use toolbrake_store::Store;
    assert!(store.take_warnings().is_empty());
    let st = store.get("crash").unwrap().unwrap();
    // Every process that finished was counted; a killed one either committed its whole
    // decision or nothing.
    let n = st.streak.count() as usize;
    assert!(finished <= n && n <= 96, "finished {finished}, counted {n}");
    // And the store still works.
    let c = spawn_hook(&dir, &pre("crash", "after", "ls"), Some(&cfg));
    assert!(c.wait_with_output().unwrap().status.success());
}

#[test]
fn a_broken_store_fails_open_with_a_warning_or_closed_when_configured() {
    let dir = tmpdir("hooks", "failpolicy");
    // The state path is a directory: SQLite cannot open it.
    let blocker = dir.join("blocker");
    std::fs::create_dir_all(blocker.join("state.db")).unwrap();
    let run = |fail_closed: bool| {
        let cfg = dir.join(format!("lb-{fail_closed}.toml"));
        std::fs::write(&cfg, format!("[store]\nfail_closed = {fail_closed}\n")).unwrap();
        run_with_stdin(
            bin(&dir)
                .env("TOOLBRAKE_STATE", blocker.join("state.db"))
                .arg("--config")
                .arg(&cfg)
                .args(["hook", "claude"]),
            pre("s", "t1", "ls").to_string().as_bytes(),
        )
    };
    let open = run(false);
    assert_eq!(open.status.code(), Some(0));
    assert!(open.stdout.is_empty(), "fail-open prints no decision");
    let err = String::from_utf8(open.stderr).unwrap();
    assert!(
        err.starts_with("toolbrake: could not handle PreToolUse: sqlite "),
        "{err}"
    );
    let log = std::fs::read_to_string(blocker.join("hook.log")).unwrap();
    assert!(
        log.contains("hook claude: could not handle PreToolUse"),
        "{log}"
    );
    let closed = run(true);
    assert_eq!(closed.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&closed.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");

    // An invalid configuration never blocks either: the hook lets the call run, and the
    // user is told once per session (Claude Code shows `systemMessage` to the user).
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[streak]\nmax_repeat = 3\n").unwrap();
    let hook = |session: &str, id: &str, cfg: &Path| {
        let out = spawn_hook(&dir, &pre(session, id, "ls"), Some(cfg))
            .wait_with_output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stderr).contains("streak.max_repeat"));
        String::from_utf8(out.stdout).unwrap()
    };
    let first: Value = serde_json::from_str(&hook("s", "t2", &bad)).unwrap();
    let message = first["systemMessage"].as_str().unwrap();
    assert!(
        message.starts_with("toolbrake is not checking tool calls: its configuration is invalid."),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "{}, line 2: `streak.max_repeat` is not a setting; did you mean `streak.max_repeats`?",
            bad.display()
        )),
        "{message}"
    );
    assert!(message.contains("tool calls run unchecked until it is fixed"));
    assert!(
        first.get("hookSpecificOutput").is_none(),
        "no decision: {first}"
    );
    assert_eq!(hook("s", "t3", &bad), "", "once per session");
    assert!(hook("other", "t4", &bad).contains("systemMessage"));

    // A typo elsewhere does not turn a fail-closed policy open.
    let bad_closed = dir.join("bad-closed.toml");
    std::fs::write(
        &bad_closed,
        "[store]\nfail_closed = true\n[streak]\nmax_repeat = 3\n",
    )
    .unwrap();
    let v: Value = serde_json::from_str(&hook("s", "t5", &bad_closed)).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    assert!(v["systemMessage"]
        .as_str()
        .unwrap()
        .contains("tool calls are refused until it is fixed"));
}

#[test]
fn sessions_lists_and_resets() {
    let dir = tmpdir("hooks", "sessions");
    for (i, s) in ["alpha", "alpha", "beta"].iter().enumerate() {
        let c = spawn_hook(&dir, &pre(s, &format!("t{i}"), "git status"), None);
        assert!(c.wait_with_output().unwrap().status.success());
    }
    let list = sessions_json(&dir, None);
    let keys: Vec<&str> = list.iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["alpha", "beta"]);
    assert_eq!(list[0]["streak"]["count"], 2);
    assert_eq!(list[0]["stopped"], 0);
    // The dashboard's shape (`/api/sessions`), field for field.
    for key in [
        "window",
        "top_count",
        "failure_streaks",
        "pending_asks",
        "near",
        "gated",
    ] {
        assert!(list[0].get(key).is_some(), "{key} in {}", list[0]);
    }
    assert!(list[0].get("window_records").is_none() && list[0].get("max_count").is_none());
    // The third identical call is refused by the streak brake: the listing counts it.
    let c = spawn_hook(&dir, &pre("alpha", "t9", "git status"), None);
    assert!(String::from_utf8(c.wait_with_output().unwrap().stdout)
        .unwrap()
        .contains("\"deny\""));
    assert_eq!(sessions_json(&dir, None)[0]["stopped"], 1);
    let out = bin(&dir).args(["sessions"]).output().unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("# 2 sessions in sqlite"), "{table}");
    let header = table.lines().nth(1).unwrap();
    for column in [
        "window",
        "top count",
        "in a row",
        "failing",
        "exemptions",
        "refusals",
        "stopped",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let alpha = table.lines().find(|l| l.starts_with("alpha")).unwrap();
    assert!(alpha.trim_end().ends_with(" 1"), "{alpha}");
    assert!(table.contains("stopped: calls denied by either engine, or asked and not approved"));
    let out = bin(&dir)
        .args(["sessions", "reset", "alpha"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let keys: Vec<String> = sessions_json(&dir, None)
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys, ["beta"]);
    let out = bin(&dir)
        .args(["sessions", "reset", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("state/state.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the state file is readable by its owner only"
        );
    }
}

/// Hundreds of hook processes in one session keep the write-ahead log bounded (it used to
/// grow with every decision, and every opener re-read all of it), and a state file created
/// readable by others is tightened to owner-only.
#[test]
fn the_wal_stays_bounded_and_a_loose_state_file_is_tightened() {
    let dir = tmpdir("hooks", "wal");
    let state = dir.join("state/state.db");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    std::fs::write(&state, b"").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    for i in 0..400 {
        let cmd = format!("echo {}", i % 40);
        for payload in [
            pre("long", &format!("t{i}"), &cmd),
            json!({"session_id": "long", "hook_event_name": "PostToolUse", "tool_name": "Bash",
                   "tool_input": {"command": cmd}, "tool_response": {"stdout": format!("{i}")},
                   "tool_use_id": format!("t{i}")}),
        ] {
            let out = spawn_hook(&dir, &payload, None).wait_with_output().unwrap();
            assert!(out.status.success());
        }
    }
    let wal = std::fs::metadata(dir.join("state/state.db-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    // 800 decisions write several MiB of log; the bound (256 KiB) plus the last writes
    // is all that may remain, since every hook reads the whole log when it opens the file.
    assert!(wal <= 512 << 10, "the WAL grew to {wal} bytes");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// A payload past the size limit is reported as too large (not as "not JSON"), and one
/// nested past the parser's limit as too deep (arguments nested that deep are judged by
/// their hash); the hook still exits 0.
#[test]
fn oversized_and_overnested_payloads_are_named_for_what_they_are() {
    let dir = tmpdir("hooks", "oversized");
    let out = run_with_stdin(bin(&dir).args(["hook", "claude"]), &vec![b' '; 65 << 20]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the hook payload exceeds 67108864 bytes"),
        "{err}"
    );
    assert!(!err.contains("not JSON"), "{err}");

    let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
    let payload: String = format!(
        "{{\"session_id\":\"s\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{{\"x\":{deep}}},\"tool_use_id\":\"t\"}}"
    );
    // Arguments nested past the parser are read around and judged by their hash.
    let out = run_with_stdin(bin(&dir).args(["hook", "claude"]), payload.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nesting deeper than 128 levels): judged by a hash of their bytes"),
        "{err}"
    );
    // A payload that is nothing but nesting is named for what it is.
    let out = run_with_stdin(bin(&dir).args(["hook", "claude"]), deep.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the hook payload nests deeper than 128 levels"),
        "{err}"
    );
}

/// Credentials in a call's arguments and its output never reach the SQLite files (the
/// database and its write-ahead log), though the call is counted as before.
#[test]
fn secrets_never_reach_the_state_files() {
    let dir = tmpdir("hooks", "secrets");
    let secrets = [
        "sk-ant-api03-abcdefghijklmnop",
        "Pa55w0rdValue",
        "ghp_abcdefghijklmnopqrstuvwxyz012345",
    ];
    let cmd = format!(
        "curl -H 'Authorization: Bearer {}' 'https://api.example.com/x?password={}'",
        secrets[0], secrets[1]
    );
    for i in 0..3 {
        let id = format!("s{i}");
        let out = spawn_hook(&dir, &pre("sec", &id, &cmd), None)
            .wait_with_output()
            .unwrap();
        if i == 2 {
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("\"deny\""),
                "still counted"
            );
            break;
        }
        let post = json!({"session_id": "sec", "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": cmd}, "tool_use_id": id,
            "tool_response": {"stdout": format!("{{\"token\": \"{}\"}}", secrets[2]), "stderr": ""}});
        spawn_hook(&dir, &post, None).wait_with_output().unwrap();
    }
    // One more call left open (its previews are stored until its result).
    let other = format!("curl -u bob:{} https://api.example.com/y", secrets[1]);
    spawn_hook(&dir, &pre("sec", "open", &other), None)
        .wait_with_output()
        .unwrap();
    let mut bytes = Vec::new();
    for f in ["state.db", "state.db-wal"] {
        if let Ok(b) = std::fs::read(dir.join("state").join(f)) {
            bytes.extend(b);
        }
    }
    assert!(!bytes.is_empty());
    let text = String::from_utf8_lossy(&bytes);
    for s in secrets {
        assert!(!text.contains(s), "{s} is in the state files");
    }
}

/// A state file that is a symbolic link (to a file of the user's, to another program's
/// SQLite database, or a link in place of SQLite's log beside it) is refused with an error
/// that names it: the file it points to keeps its mode and its bytes, and the failure
/// policy applies (no answer by default, a refusal with `fail_closed`).
#[cfg(unix)]
#[test]
fn a_symlinked_state_file_is_refused_and_what_it_points_to_is_untouched() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let dir = tmpdir("hooks", "symlink");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    // Another program's database, and a file of the user's.
    let app = dir.join("app.db");
    {
        let c = rusqlite::Connection::open(&app).unwrap();
        c.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    }
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "my own notes\n").unwrap();
    for f in [&app, &notes] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let closed = dir.join("closed.toml");
    std::fs::write(&closed, "[store]\nfail_closed = true\n").unwrap();

    // (link name in the state folder, what it points to)
    let cases = [
        ("state.db", &notes),
        ("state.db", &app),
        ("state.db-wal", &notes),
    ];
    for (name, target) in cases {
        for f in std::fs::read_dir(&state).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
        if name != "state.db" {
            // The state file itself exists, made by an earlier call.
            let out = spawn_hook(&dir, &pre("ok", "t0", "ls"), None)
                .wait_with_output()
                .unwrap();
            assert!(
                out.stderr.is_empty(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let _ = std::fs::remove_file(state.join(name));
        }
        symlink(target, state.join(name)).unwrap();
        let before = std::fs::read(target).unwrap();
        let what = format!("{name} -> {}", target.display());

        let out = spawn_hook(&dir, &pre("s", "t1", "ls"), None)
            .wait_with_output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{what}");
        assert!(out.stdout.is_empty(), "{what}: fails open by default");
        let err = String::from_utf8_lossy(&out.stderr);
        let said = format!("{} is a symbolic link", state.join(name).display());
        assert!(err.contains(&said), "{what}: {err}");
        assert!(err.contains("Remove the link"), "{what}: {err}");
        let log = std::fs::read_to_string(state.join("hook.log")).unwrap();
        assert!(log.contains(&said), "{what}: {log}");

        let out = spawn_hook(&dir, &pre("s", "t2", "ls"), Some(&closed))
            .wait_with_output()
            .unwrap();
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(
            answer.contains("\"deny\"") && answer.contains("is a symbolic link"),
            "{what}: {answer}"
        );

        // `sessions` says the same, and changes nothing either.
        let out = bin(&dir).args(["sessions"]).output().unwrap();
        assert!(!out.status.success(), "{what}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&said),
            "{what}"
        );

        assert_eq!(std::fs::read(target).unwrap(), before, "{what}: its bytes");
        let mode = std::fs::metadata(target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "{what}: its mode");
        for side in ["-wal", "-shm", "-journal"] {
            let mut p = target.as_os_str().to_owned();
            p.push(side);
            assert!(!Path::new(&p).exists(), "{what}: {side} beside it");
        }
    }
    // A link to the folder above is the user's own arrangement: followed.
    let real = dir.join("real-state");
    std::fs::create_dir_all(&real).unwrap();
    let linked = dir.join("linked");
    symlink(&real, &linked).unwrap();
    let out = bin(&dir)
        .env("TOOLBRAKE_STATE", linked.join("state.db"))
        .args(["sessions"])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(real.join("state.db").is_file());
}

/// A Claude Code `PreToolUse` payload from its parts, as bytes (which need not be UTF-8).
fn claude_bytes(session: &[u8], id: &str, tool: &[u8], input: &[u8]) -> Vec<u8> {
    [
        &b"{\"session_id\":\""[..],
        session,
        b"\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"",
        tool,
        b"\",\"tool_use_id\":\"",
        id.as_bytes(),
        b"\",\"tool_input\":",
        input,
        b"}",
    ]
    .concat()
}

/// Payload shapes no host sends today, but a host's bug, a proxy or a model's own bytes
/// could: each is read, lands in the session it names, and is counted like any other call
/// (the third identical one refused, one that differs only where the payload is malformed
/// another call).
#[test]
fn payloads_that_are_not_strict_json_are_counted_like_any_other() {
    let dir = tmpdir("hooks", "lenient");
    // (session, call id, whether the call differs) -> the payload
    type Make = Box<dyn Fn(&str, &str, bool) -> Vec<u8>>;
    // a session's name -> the key it is stored under
    type Key = fn(&str) -> String;
    let bad = |alt: bool| [if alt { 0xFE } else { 0xFF }];
    let cmd = |alt: bool| if alt { "ls b" } else { "ls a" };
    let command = move |alt: bool| format!("{{\"command\":\"{}\"}}", cmd(alt)).into_bytes();
    let utf16 = |text: Vec<u8>, le: bool| -> Vec<u8> {
        let text = String::from_utf8(text).unwrap();
        let mut out = if le { vec![0xFF, 0xFE] } else { vec![] };
        for u in text.encode_utf16() {
            out.extend(if le { u.to_le_bytes() } else { u.to_be_bytes() });
        }
        out
    };
    // (what, the session key it lands in given its session name, the payload)
    let shapes: Vec<(&str, Key, Make)> = vec![
        (
            "invalid UTF-8 in the session",
            |s| format!("{s}\\xFF"),
            Box::new(move |s, id, alt| {
                claude_bytes(
                    &[s.as_bytes(), b"\xFF"].concat(),
                    id,
                    b"Bash",
                    &command(alt),
                )
            }),
        ),
        (
            "invalid UTF-8 in the tool name",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                claude_bytes(
                    s.as_bytes(),
                    id,
                    &[&b"Ba"[..], &bad(alt), b"sh"].concat(),
                    b"{\"command\":\"ls\"}",
                )
            }),
        ),
        (
            "invalid UTF-8 in a key",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                let input = [&b"{\"comm"[..], &bad(alt), b"and\":\"ls\"}"].concat();
                claude_bytes(s.as_bytes(), id, b"Bash", &input)
            }),
        ),
        (
            "invalid UTF-8 in a value",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                let input = [&b"{\"command\":\"ls "[..], &bad(alt), b"\"}"].concat();
                claude_bytes(s.as_bytes(), id, b"Bash", &input)
            }),
        ),
        (
            "overlong UTF-8",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                let to = if alt {
                    &b"\xC0\xAF"[..]
                } else {
                    b"\xE0\x80\xAF"
                };
                let input = [&b"{\"command\":\"cat "[..], to, b"etc\"}"].concat();
                claude_bytes(s.as_bytes(), id, b"Bash", &input)
            }),
        ),
        (
            "NaN and Infinity",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                let n = if alt { "Infinity" } else { "NaN" };
                let input = format!("{{\"x\":{n},\"low\":-Infinity}}");
                claude_bytes(s.as_bytes(), id, b"mcp__calc__compute", input.as_bytes())
            }),
        ),
        (
            "control characters in strings",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                let input = format!("{{\"command\":\"{}\t-l\n\u{1}\"}}", cmd(alt));
                claude_bytes(s.as_bytes(), id, b"Bash", input.as_bytes())
            }),
        ),
        (
            "single quotes",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                format!("{{'session_id':'{s}','hook_event_name':'PreToolUse','tool_name':'Bash','tool_use_id':'{id}','tool_input':{{'command':'{}'}}}}", cmd(alt)).into_bytes()
            }),
        ),
        (
            "trailing commas",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                let input = format!("{{\"command\":\"{}\",\"args\":[1,2,],}}", cmd(alt));
                let p = claude_bytes(s.as_bytes(), id, b"Bash", input.as_bytes());
                [&p[..p.len() - 1], b",}"].concat()
            }),
        ),
        (
            "trailing garbage",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                [
                    claude_bytes(s.as_bytes(), id, b"Bash", &command(alt)),
                    b" garbage\x00".to_vec(),
                ]
                .concat()
            }),
        ),
        (
            "two objects",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                [
                    claude_bytes(s.as_bytes(), id, b"Bash", &command(alt)),
                    claude_bytes(b"second", id, b"Bash", &command(alt)),
                ]
                .concat()
            }),
        ),
        (
            "a byte-order mark",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                [
                    b"\xEF\xBB\xBF".to_vec(),
                    claude_bytes(s.as_bytes(), id, b"Bash", &command(alt)),
                ]
                .concat()
            }),
        ),
        (
            "UTF-16 with a byte-order mark",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                utf16(claude_bytes(s.as_bytes(), id, b"Bash", &command(alt)), true)
            }),
        ),
        (
            "UTF-16 without one",
            |s| s.to_string(),
            Box::new(move |s, id, alt| {
                utf16(
                    claude_bytes(s.as_bytes(), id, b"Bash", &command(alt)),
                    false,
                )
            }),
        ),
    ];
    let hook = |payload: &[u8]| {
        let out = run_with_stdin(bin(&dir).args(["hook", "claude"]), payload);
        assert_eq!(out.status.code(), Some(0));
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let mut failures = Vec::new();
    for (n, (what, key, make)) in shapes.iter().enumerate() {
        let session = format!("lenient{n}");
        assert!(
            serde_json::from_slice::<Value>(&make(&session, "t1", false)).is_err(),
            "{what}: strict JSON"
        );
        let answers: Vec<(String, String)> = (1..=3)
            .map(|i| hook(&make(&session, &format!("t{i}"), false)))
            .collect();
        let other = hook(&make(&session, "t4", true));
        let denied: Vec<bool> = answers
            .iter()
            .chain([&other])
            .map(|(out, _)| out.contains("\"deny\""))
            .collect();
        let said = &answers[0].1;
        if denied != [false, false, true, false]
            || !said.contains("read leniently")
            || said.contains("could not handle")
        {
            failures.push(format!("{what}: denied {denied:?}; {said}"));
            continue;
        }
        let listed = sessions_json(&dir, None);
        if !listed.iter().any(|s| s["key"] == key(&session).as_str()) {
            failures.push(format!("{what}: no session {}", key(&session)));
        }
    }
    // Only the first of two objects is read.
    assert!(!sessions_json(&dir, None)
        .iter()
        .any(|s| s["key"] == "second"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
