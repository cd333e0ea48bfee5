//! Seed mode against the original: the bundled recorded runs and the seed's scenarios go
//! through toolbrake's breaker with `progress = false` and through the original JavaScript
//! breaker (`dsh-repeat-tool-breaker` 0.5.2 from npm, driven through its real DSH hooks by
//! `tests/e2e/original_breaker.mjs`), and every call gets the same verdict from both.
//!
//! Ignored by a plain `cargo test` (it needs the npm package): `scripts/test` installs it
//! into `target/e2e-npm` and runs this with `--include-ignored`.

mod support;
use support::*;

use serde_json::{json, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

fn node_modules() -> PathBuf {
    let p = std::env::var_os("TOOLBRAKE_E2E_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/e2e-npm/node_modules"));
    assert!(
        p.join("dsh-repeat-tool-breaker/index.js").exists(),
        "{}: dsh-repeat-tool-breaker is missing; run ./scripts/test",
        p.display()
    );
    p
}

/// The protocol events of the bundled corpus, as the trajectory importer makes them.
fn corpus_events() -> Vec<Value> {
    let data = std::fs::read(repo().join("examples/trajectories/calls.jsonl.gz")).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&data[..])
        .read_to_string(&mut text)
        .unwrap();
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let r: Value = serde_json::from_str(line).unwrap();
        let session = r["session"].as_str().unwrap().to_string();
        if current.as_deref() != Some(&session) {
            if let Some(prev) = current.take() {
                out.push(json!({"event": "end", "session": prev}));
            }
            current = Some(session.clone());
        }
        let id = format!("t{n}");
        out.push(json!({"event": "call", "session": session, "id": id, "tool": r["tool"], "args": r["args"]}));
        let mut outcome = serde_json::Map::new();
        if let Some(e) = r["exit_code"].as_i64() {
            outcome.insert("exit_code".into(), json!(e));
        }
        if let Some(s) = r["status"].as_i64() {
            outcome.insert("status_code".into(), json!(s));
        }
        if r["ok"] == json!(false)
            && !outcome.contains_key("exit_code")
            && !outcome.contains_key("status_code")
        {
            outcome.insert("is_error".into(), json!(true));
        }
        if let Some(t) = r["output_head"].as_str() {
            outcome.insert("text".into(), json!(t));
        }
        out.push(json!({"event": "result", "id": id, "outcome": outcome}));
    }
    if let Some(prev) = current {
        out.push(json!({"event": "end", "session": prev}));
    }
    out
}

/// The seed's scenarios: a cosmetic-variation loop, pagination, a failing endpoint between
/// other calls, a crashing script.
fn scenario_events() -> Vec<Value> {
    let mut out = Vec::new();
    let mut n = 0;
    let mut call =
        |out: &mut Vec<Value>, session: &str, tool: &str, args: Value, outcome: Value| {
            n += 1;
            let id = format!("s{n}");
            out.push(
                json!({"event": "call", "session": session, "id": id, "tool": tool, "args": args}),
            );
            out.push(json!({"event": "result", "id": id, "outcome": outcome}));
        };
    let decoys = ["1st", "2nd", "3rd"];
    for i in 0..15 {
        let host = if i % 2 == 0 {
            "open-data.canada.ca"
        } else {
            "open.canada.ca"
        };
        call(
            &mut out,
            "cosmetic",
            "bash",
            json!({"command": format!("curl -s --max-time {} https://{host}/data/api/3/action/package_search?q=fires", 10 + i), "description": decoys[i % 3]}),
            json!({"text": "{\"rows\": 3}\n[exit code: 0]"}),
        );
    }
    for page in 1..=18 {
        call(
            &mut out,
            "pages",
            "bash",
            json!({"command": format!("curl -s 'https://api.example.com/v1/items?page={page}&per_page=100'")}),
            json!({"text": format!("{{\"page\": {page}}}")}),
        );
    }
    for i in 0..9 {
        call(
            &mut out,
            "missing",
            "WebFetch",
            json!({"url": "https://api.example.com/v1/missing"}),
            json!({"status_code": 404, "text": "Not Found"}),
        );
        if i % 3 == 2 {
            call(
                &mut out,
                "missing",
                "bash",
                json!({"command": format!("grep -rn 'v1/' src/ | head -{}", i + 1)}),
                json!({"text": "src/a.py:1: v1/items"}),
            );
        }
    }
    for _ in 0..9 {
        call(
            &mut out,
            "crash",
            "bash",
            json!({"command": "python3 fetch.py"}),
            json!({"text": "Traceback (most recent call last):\n  File \"fetch.py\", line 3\nurllib.error.HTTPError: HTTP Error 503: Service Unavailable\n[exit code: 1]"}),
        );
    }
    for s in ["cosmetic", "pages", "missing", "crash"] {
        out.push(json!({"event": "end", "session": s}));
    }
    out
}

/// Each call's verdict from toolbrake in seed mode: `run`, `ask` or `deny`.
fn toolbrake_verdicts(events: &str) -> Vec<(String, String)> {
    let dir = tmpdir("original", "toolbrake");
    let cfg = dir.join("toolbrake.toml");
    // The original has no streak brake, knows `bash`, `pwsh` and `shell` as shell tools,
    // and strips only the common decoys from other tools.
    std::fs::write(
        &cfg,
        "[streak]\nenabled = false\n[breaker]\nprogress = false\n[breaker.tools]\nshell = [\"bash\", \"pwsh\", \"shell\"]\n[breaker.ignore_args]\nexecute_bash = []\n",
    )
    .unwrap();
    let out = run_with_stdin(
        Command::new(env!("CARGO_BIN_EXE_toolbrake"))
            .args(["replay", "--config"])
            .arg(&cfg)
            .arg("-"),
        events.as_bytes(),
    );
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let verdict = v.get("verdict")?.as_str()?.to_string();
            let verdict = match verdict.as_str() {
                "allow" | "advise" => "run".to_string(),
                other => other.to_string(),
            };
            Some((v["id"].as_str().unwrap().to_string(), verdict))
        })
        .collect()
}

fn original_verdicts(events: &str) -> Vec<(String, String)> {
    let out = run_with_stdin(
        Command::new("node")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/original_breaker.mjs"))
            .arg(node_modules()),
        events.as_bytes(),
    );
    assert_success(&out);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_str().unwrap().to_string(),
                v["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs dsh-repeat-tool-breaker from npm (scripts/test installs it)"]
fn seed_mode_agrees_with_the_original_breaker_call_for_call() {
    let mut events = corpus_events();
    events.extend(scenario_events());
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    let ours = toolbrake_verdicts(&text);
    let theirs = original_verdicts(&text);
    assert_eq!(ours.len(), theirs.len());
    let disagreements: Vec<_> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .take(10)
        .collect();
    assert!(disagreements.is_empty(), "{disagreements:?}");
    // The comparison is not vacuous: both stopped the same calls, and there are some.
    let stopped = ours.iter().filter(|(_, v)| v != "run").count();
    assert!(stopped >= 20, "only {stopped} calls stopped");
    assert!(ours.iter().any(|(_, v)| v == "ask") && ours.iter().any(|(_, v)| v == "deny"));
}
