//! End to end with the real agent programs: Claude Code 2.1.332 and Codex CLI 0.171.0 from
//! npm, run headless against a scripted stand-in model on 127.0.0.1
//! (`tests/e2e/mock_model.py`), with `toolbrake hook` installed by `toolbrake init`.
//! The assertions are on what the next model request contains: what the model was shown.
//!
//! These need the npm packages, which `scripts/test` installs (into `target/e2e-npm`) and
//! then runs these tests with `--include-ignored`. Override the location with
//! `TOOLBRAKE_E2E_NODE_MODULES`.

mod support;
use support::agents::*;
use support::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn claude_bin() -> PathBuf {
    let p = node_modules().join("@anthropic-ai/claude-code-linux-x64/claude");
    assert!(
        p.exists(),
        "{} is missing: run ./scripts/test (it installs @anthropic-ai/claude-code@2.1.332)",
        p.display()
    );
    p
}

fn codex_bin() -> PathBuf {
    let p =
        node_modules().join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex");
    assert!(
        p.exists(),
        "{} is missing: run ./scripts/test (it installs @openai/codex@0.171.0)",
        p.display()
    );
    p
}

/// The tool results the model saw in each request: (is_error, text) of the last one.
fn claude_last_results(reqs: &[Value]) -> Vec<(bool, String)> {
    reqs.iter()
        .filter_map(|b| {
            let results: Vec<&Value> = b["messages"]
                .as_array()?
                .iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|blk| blk["type"] == "tool_result")
                .collect();
            let last = results.last()?;
            Some((last["is_error"] == true, last["content"].to_string()))
        })
        .collect()
}

fn setup_claude(dir: &Path, toml: &str) -> PathBuf {
    std::fs::write(dir.join("toolbrake.toml"), toml).unwrap();
    let cfg = dir.join("claude-config");
    std::fs::create_dir_all(&cfg).unwrap();
    let out = toolbrake(dir)
        .args(["init", "claude"])
        .env("CLAUDE_CONFIG_DIR", &cfg)
        .output()
        .unwrap();
    assert_success(&out);
    cfg
}

fn run_claude(dir: &Path, cfg: &Path, mock: &Mock) -> std::process::Output {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut c = Command::new(claude_bin());
    c.current_dir(&work)
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", mock.port),
        )
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("CLAUDE_CONFIG_DIR", cfg)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("TOOLBRAKE_STATE", dir.join("state/state.db"))
        .env("TOOLBRAKE_CONFIG", dir.join("toolbrake.toml"))
        .args([
            "-p",
            "run the command",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Bash",
        ]);
    output_with_deadline(c, 240)
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn claude_code_repeating_one_bash_call_is_stopped_at_the_third() {
    let dir = tmpdir("e2e", "claude-repeat");
    let cfg = setup_claude(&dir, "");
    let mock = start_mock(&dir, "echo same-call", 8);
    let out = run_claude(&dir, &cfg, &mock);
    assert_success(&out);
    let results = claude_last_results(&requests(&mock));
    assert_eq!(
        results.len(),
        3,
        "two calls ran, the third was refused, the model stopped: {results:?}"
    );
    assert!(!results[0].0 && results[0].1.contains("same-call"));
    assert!(!results[1].0);
    let (is_error, text) = &results[2];
    assert!(is_error, "the refused call is an error result");
    assert!(
        text.contains(r#"PreToolUse:Bash hook error: loop brake: tool \"Bash\" called 3 times in a row with identical arguments"#),
        "{text}"
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn claude_code_repeating_a_failing_command_is_advised_then_stopped() {
    let dir = tmpdir("e2e", "claude-failing");
    let cfg = setup_claude(&dir, "[breaker]\non_limit = \"deny\"\n");
    // --max-time changes every call: an exact counter never sees a repeat.
    let mock = start_mock(
        &dir,
        "curl -sSf --max-time {n} http://127.0.0.1:{port}/missing",
        10,
    );
    let out = run_claude(&dir, &cfg, &mock);
    assert_success(&out);
    let reqs = requests(&mock);
    let results = claude_last_results(&reqs);
    assert_eq!(results.len(), 6, "{results:?}");
    for (is_error, text) in &results[..5] {
        assert!(*is_error && text.contains("Exit code 22"), "{text}");
    }
    // The failure advisory reached the model after the third failure, not before.
    let advised: Vec<bool> = reqs
        .iter()
        .map(|b| b.to_string().contains("has failed 3 times in a row"))
        .collect();
    let first = advised
        .iter()
        .position(|a| *a)
        .expect("the advisory arrives");
    assert_eq!(claude_last_results(&reqs[..=first]).len(), 3);
    let (is_error, text) = &results[5];
    assert!(is_error);
    assert!(
        text.contains("REPEAT_TOOL_BLOCKED: Bash (consecutive failures)"),
        "{text}"
    );
}

fn setup_codex(dir: &Path, toml: &str, port: u16) -> PathBuf {
    std::fs::write(dir.join("toolbrake.toml"), toml).unwrap();
    let home = dir.join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\
             [model_providers.mock]\nname = \"mock\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nwire_api = \"responses\"\nenv_key = \"MOCK_API_KEY\"\n"
        ),
    )
    .unwrap();
    let out = toolbrake(dir)
        .args(["init", "codex"])
        .env("CODEX_HOME", &home)
        .output()
        .unwrap();
    assert_success(&out);
    home
}

fn run_codex(dir: &Path, home: &Path) -> std::process::Output {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    // Codex runs each command in a login shell: with the machine's own HOME, that shell
    // reads the user's profile, and a profile that prints (pyenv's rehash, racing the
    // other tests' shells, printed a random file name into a command's output) makes the
    // same command's output differ from run to run, which toolbrake rightly reads as
    // progress. An empty HOME of its own keeps the command's output the command's.
    let user_home = dir.join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    let mut c = Command::new(codex_bin());
    c.current_dir(&work)
        .env("HOME", &user_home)
        .env("CODEX_HOME", home)
        .env("MOCK_API_KEY", "x")
        .env("TOOLBRAKE_STATE", dir.join("state/state.db"))
        .env("TOOLBRAKE_CONFIG", dir.join("toolbrake.toml"))
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-hook-trust",
            "run the command",
        ]);
    output_with_deadline(c, 240)
}

fn codex_outputs(reqs: &[Value]) -> Vec<Vec<String>> {
    reqs.iter()
        .map(|b| {
            b["input"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|i| i["type"] == "function_call_output")
                .map(|i| i["output"].to_string())
                .collect()
        })
        .collect()
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn codex_repeating_one_command_is_stopped_at_the_third() {
    let dir = tmpdir("e2e", "codex-repeat");
    let mock = start_mock(&dir, "echo same-call", 8);
    let home = setup_codex(&dir, "", mock.port);
    let out = run_codex(&dir, &home);
    assert_success(&out);
    let outputs = codex_outputs(&requests(&mock));
    let last = outputs.last().unwrap();
    assert_eq!(last.len(), 3, "{outputs:?}");
    assert!(last[0].contains("same-call") && last[1].contains("same-call"));
    assert!(
        last[2].contains(r#"Command blocked by PreToolUse hook: loop brake: tool \"Bash\" called 3 times in a row"#),
        "{}",
        last[2]
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn codex_repeating_a_failing_command_is_advised_then_stopped() {
    let dir = tmpdir("e2e", "codex-failing");
    let mock = start_mock(
        &dir,
        "curl -sSf --max-time {n} http://127.0.0.1:{port}/missing",
        10,
    );
    let home = setup_codex(&dir, "[breaker]\non_limit = \"deny\"\n", mock.port);
    let out = run_codex(&dir, &home);
    assert_success(&out);
    let reqs = requests(&mock);
    let outputs = codex_outputs(&reqs);
    let last = outputs.last().unwrap();
    assert_eq!(last.len(), 6, "{outputs:?}");
    let first_advised = reqs
        .iter()
        .position(|b| b.to_string().contains("has failed 3 times in a row"))
        .expect("the failure advisory reaches the model (Codex reports no exit code in the hook payload)");
    assert_eq!(outputs[first_advised].len(), 3);
    assert!(
        last[5].contains("REPEAT_TOOL_BLOCKED: Bash (consecutive failures)"),
        "{}",
        last[5]
    );
}

fn gemini_bin() -> PathBuf {
    let p = node_modules().join("@google/gemini-cli/bundle/gemini.js");
    assert!(
        p.exists(),
        "{} is missing: run ./scripts/test (it installs @google/gemini-cli@0.61.0)",
        p.display()
    );
    p
}

/// A home for Gemini CLI with an API-key login and no folder-trust prompt (both are what
/// a user has after the first interactive run), then `toolbrake init gemini` on top.
fn setup_gemini(dir: &Path, toml: &str) -> PathBuf {
    std::fs::write(dir.join("toolbrake.toml"), toml).unwrap();
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        r#"{"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}}}"#,
    )
    .unwrap();
    let out = toolbrake(dir)
        .args(["init", "gemini"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_success(&out);
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        settings["security"]["auth"]["selectedType"], "gemini-api-key",
        "kept"
    );
    assert_eq!(settings["hooksConfig"]["enabled"], true);
    home
}

fn run_gemini(dir: &Path, home: &Path, mock: &Mock) -> std::process::Output {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut c = Command::new("node");
    c.arg(gemini_bin())
        .current_dir(&work)
        .env("HOME", home)
        .env(
            "GOOGLE_GEMINI_BASE_URL",
            format!("http://127.0.0.1:{}", mock.port),
        )
        .env("GEMINI_API_KEY", "dummy")
        .env("TOOLBRAKE_STATE", dir.join("state/state.db"))
        .env("TOOLBRAKE_CONFIG", dir.join("toolbrake.toml"))
        .args(["-p", "run the command", "--yolo", "-o", "json"]);
    output_with_deadline(c, 240)
}

/// What the model was told for each of its function calls, in its last request.
fn gemini_results(reqs: &[Value]) -> Vec<String> {
    let last = reqs
        .iter()
        .rev()
        .find(|b| b["tools"].is_array())
        .expect("a request with tools");
    last["contents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter_map(|p| p.get("functionResponse"))
        .map(|r| r["response"].to_string())
        .collect()
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn gemini_cli_repeating_one_shell_call_is_stopped_at_the_third() {
    let dir = tmpdir("agents", "gemini-repeat");
    let home = setup_gemini(&dir, "");
    let mock = start_mock(&dir, "echo toolbrake-gemini", 5);
    let out = run_gemini(&dir, &home, &mock);
    assert_success(&out);
    let results = gemini_results(&requests(&mock));
    assert_eq!(results.len(), 3, "{results:#?}");
    assert!(results[0].contains("toolbrake-gemini") && results[1].contains("toolbrake-gemini"));
    assert!(
        results[2].contains("loop brake: tool \\\"run_shell_command\\\" called 3 times in a row"),
        "the model read toolbrake's refusal: {}",
        results[2]
    );
    assert!(
        !results[2].contains("Output: toolbrake-gemini"),
        "the third call did not run"
    );
}
