//! Every credential shape (`toolbrake_testkit::CREDENTIAL_CASES`) in a call's arguments
//! and in its output, through every surface that shows or stores them: the hook's answers
//! and its SQLite state (database and write-ahead log), `explain` of each call with its
//! session, the protocol's output (`replay` and `serve`), the replay report as text and
//! HTML, and the dashboard's JSON and pages (the spans of `record_arguments`: `otel.rs`).
//! None of the secrets may appear on any of them, while the calls are still judged (each
//! loop is denied) and what is shown still marks where a secret was.

mod support;
use support::*;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use toolbrake_testkit::{CredentialCase, CREDENTIAL_CASES};

const MARKER: &str = "[REDACTED]";

/// Breaker messages quote the call and its previous result, so the breaker judges here
/// (the streak brake's refusal quotes neither): two identical calls, and the third is
/// denied. `store` is the `[store]` table: the hooks' SQLite file, or memory for the
/// protocol (each run replays from the start).
fn config(dir: &Path, name: &str, store: &str) -> PathBuf {
    let cfg = dir.join(name);
    std::fs::write(
        &cfg,
        format!(
            "[streak]\nenabled = false\n\n[breaker]\non_limit = \"deny\"\nblock_shell_http = false\nprogress = false\n\n[breaker.limits]\nexact = 2\n\n[store]\n{store}\n"
        ),
    )
    .unwrap();
    cfg
}

fn bin(cfg: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    c.env_remove("TOOLBRAKE_CONFIG")
        .env_remove("TOOLBRAKE_STATE")
        .env_remove("TOOLBRAKE_MAX_REPEATS")
        .env_remove("TOOLBRAKE_UI_TOKEN")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .env("HOME", "/nonexistent")
        .arg("--config")
        .arg(cfg);
    c
}

/// The session of the `n`th case.
fn session(n: usize) -> String {
    format!("case-{n}")
}

/// Fails with the surface's name and the case when a secret shows on it.
#[track_caller]
fn assert_clean(surface: &str, text: &str) {
    for c in CREDENTIAL_CASES {
        assert!(
            !text.contains(c.secret),
            "{surface} shows the secret {:?} of the {:?} case {:?}:\n{text}",
            c.secret,
            c.row,
            c.text
        );
    }
    assert!(
        text.contains(MARKER),
        "{surface} shows no redaction at all:\n{text}"
    );
}

fn hook(cfg: &Path, payload: &Value) -> String {
    let out = run_with_stdin(
        bin(cfg).args(["hook", "claude"]),
        payload.to_string().as_bytes(),
    );
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

/// Claude Code's hooks for one case: its call three times (two run and return the
/// case's text, the third is denied), and one more call left waiting for its result
/// (its previews are stored until then). Returns everything the hook printed.
fn hook_session(cfg: &Path, n: usize, case: &CredentialCase) -> String {
    let key = session(n);
    let input = json!({"command": case.text});
    let mut printed = String::new();
    let mut denied = false;
    for i in 0..3 {
        let id = format!("{key}-{i}");
        let out = hook(
            cfg,
            &json!({"session_id": key, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                    "tool_input": input, "tool_use_id": id}),
        );
        denied |= out.contains("\"deny\"");
        printed.push_str(&out);
        if !out.contains("\"deny\"") {
            printed.push_str(&hook(
                cfg,
                &json!({"session_id": key, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                        "tool_input": input, "tool_use_id": id,
                        "tool_response": {"stdout": case.text, "stderr": ""}}),
            ));
        }
    }
    assert!(
        denied,
        "the loop of {:?} is still judged: {printed}",
        case.row
    );
    printed.push_str(&hook(
        cfg,
        &json!({"session_id": key, "hook_event_name": "PreToolUse", "tool_name": "Read",
                "tool_input": {"file_path": case.text}, "tool_use_id": format!("{key}-open")}),
    ));
    printed
}

/// The same calls as protocol events.
fn protocol_events() -> String {
    let mut events = String::new();
    for (n, case) in CREDENTIAL_CASES.iter().enumerate() {
        for i in 0..3 {
            let id = format!("{n}-{i}");
            for e in [
                json!({"event": "call", "session": session(n), "id": id, "tool": "Bash",
                       "args": {"command": case.text}}),
                json!({"event": "result", "id": id,
                       "outcome": {"exit_code": 0, "text": case.text}}),
            ] {
                events.push_str(&e.to_string());
                events.push('\n');
            }
        }
    }
    events
}

struct Ui(Child);

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_ui(cfg: &Path) -> (Ui, String) {
    let mut child = bin(cfg)
        .args(["ui", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (base, _, _) = support::ui::address(&mut child);
    (Ui(child), base)
}

async fn get(c: &reqwest::Client, url: &str) -> String {
    let r = c.get(url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{url}");
    r.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_credential_shape_reaches_any_surface() {
    let dir = tmpdir("redaction", "surfaces");
    let cfg = config(
        &dir,
        "hooks.toml",
        &format!(
            "kind = \"sqlite\"\npath = \"{}\"",
            dir.join("state.db").display()
        ),
    );

    // The hook: its answers (denials quote the call and its previous result), then the
    // state files it wrote.
    let mut answers = String::new();
    for (n, case) in CREDENTIAL_CASES.iter().enumerate() {
        answers.push_str(&hook_session(&cfg, n, case));
    }
    assert_clean("the hook's answers", &answers);
    let mut state = Vec::new();
    for f in ["state.db", "state.db-wal"] {
        if let Ok(b) = std::fs::read(dir.join(f)) {
            state.extend(b);
        }
    }
    assert_clean("the SQLite state", &String::from_utf8_lossy(&state));

    // `explain` of each case's call, with the session the hooks stored.
    let mut explained = String::new();
    for (n, case) in CREDENTIAL_CASES.iter().enumerate() {
        let out = bin(&cfg)
            .args(["explain", "--session", &session(n), "Bash"])
            .arg(json!({"command": case.text}).to_string())
            .output()
            .unwrap();
        assert_success(&out);
        explained.push_str(&String::from_utf8_lossy(&out.stdout));
        explained.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    assert_clean("explain", &explained);

    // The dashboard, over HTTP, on the state the hooks wrote.
    let (_ui, base) = start_ui(&cfg);
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut shown = get(&c, &format!("{base}/api/sessions")).await;
    shown.push_str(&get(&c, &format!("{base}/")).await);
    for n in 0..CREDENTIAL_CASES.len() {
        let key = session(n);
        shown.push_str(&get(&c, &format!("{base}/api/sessions/{key}")).await);
        shown.push_str(&get(&c, &format!("{base}/sessions/{key}")).await);
    }
    assert_clean("the dashboard", &shown);

    // The protocol: replay's lines, its report as text and HTML, and serve's lines.
    let events = protocol_events();
    let cfg = config(&dir, "protocol.toml", "kind = \"memory\"");
    let out = run_with_stdin(bin(&cfg).args(["replay", "-"]), events.as_bytes());
    let lines = String::from_utf8(out.stdout).unwrap();
    for n in 0..CREDENTIAL_CASES.len() {
        assert!(
            lines.contains(&format!("{{\"id\":\"{n}-2\",\"verdict\":\"deny\"")),
            "the loop of case {n} is still judged: {lines}"
        );
    }
    assert_clean("replay's output", &lines);
    let html = dir.join("report.html");
    let out = run_with_stdin(
        bin(&cfg)
            .args(["replay", "--report", "--html"])
            .arg(&html)
            .arg("-"),
        events.as_bytes(),
    );
    assert_clean("the replay report", &String::from_utf8(out.stdout).unwrap());
    assert_clean("the HTML report", &std::fs::read_to_string(&html).unwrap());
    let out = run_with_stdin(bin(&cfg).args(["serve", "--stdio"]), events.as_bytes());
    let served = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        served.lines().count(),
        events.lines().count(),
        "one line per event"
    );
    assert_clean("serve's output", &served);
}
