//! End to end with more real agent programs from npm, run headless against the scripted
//! stand-in model on 127.0.0.1 (`tests/e2e/mock_model.py`, here over the OpenAI Chat
//! Completions API) with `toolbrake hook` installed by `toolbrake init`: GitHub Copilot CLI
//! 1.0.102, Qwen Code 0.24.4, Cline 3.0.65 and Factory Droid 0.225.2. Each test asserts on what the model was
//! shown (its next request) or, for Cline, whose hook files can only stop the whole task,
//! on what the task reported and what ran.
//!
//! Like `agents_e2e.rs`, these need the npm packages `scripts/test` installs into
//! `target/e2e-npm`, and are ignored by a plain `cargo test`.

mod support;
use support::agents::*;
use support::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What a changing call runs: the same command, its output one line longer every time.
const GROWING: &str = "echo x >> ticks.txt; wc -l < ticks.txt";

fn write_config(dir: &Path, toml: &str) {
    std::fs::write(dir.join("toolbrake.toml"), toml).unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
}

// --- GitHub Copilot CLI ---------------------------------------------------------------

fn copilot_bin() -> PathBuf {
    npm_file(
        "@github/copilot-linux-x64/copilot",
        "@github/copilot@1.0.102",
    )
}

/// `toolbrake init copilot` into a fresh `COPILOT_HOME` (the user's hooks folder).
fn setup_copilot(dir: &Path, toml: &str) -> PathBuf {
    write_config(dir, toml);
    let home = dir.join("copilot-home");
    let out = toolbrake(dir)
        .args(["init", "copilot"])
        .env("COPILOT_HOME", &home)
        .output()
        .unwrap();
    assert_success(&out);
    let hooks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("hooks/toolbrake.json")).unwrap())
            .unwrap();
    assert_eq!(hooks["version"], 1);
    assert!(hooks["hooks"]["preToolUse"][0]["bash"]
        .as_str()
        .unwrap()
        .ends_with("hook copilot preToolUse"));
    home
}

/// Copilot CLI offline against the stand-in model (a BYOK OpenAI-compatible provider, no
/// GitHub login), in prompt mode with every tool allowed. Its own files are extracted
/// once into `target/e2e-npm/.cache`.
fn run_copilot(dir: &Path, home: &Path, mock: &Mock) -> Output {
    let mut c = Command::new(copilot_bin());
    c.current_dir(dir.join("work"))
        .env("HOME", dir.join("home"))
        .env("XDG_CACHE_HOME", node_modules().join("../.cache"))
        .env("COPILOT_HOME", home)
        .env("COPILOT_OFFLINE", "true")
        .env("COPILOT_AUTO_UPDATE", "false")
        .env(
            "COPILOT_PROVIDER_BASE_URL",
            format!("http://127.0.0.1:{}/v1", mock.port),
        )
        .env("COPILOT_PROVIDER_TYPE", "openai")
        .env("COPILOT_MODEL", "gpt-4.1")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GH_TOKEN")
        .env_remove("COPILOT_GITHUB_TOKEN")
        .args(["-p", "run the command", "--allow-all-tools"]);
    with_toolbrake_env(&mut c, dir);
    output_with_deadline(c, 240)
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn copilot_cli_repeating_one_shell_call_is_stopped_at_the_third() {
    let dir = tmpdir("hosts", "copilot-repeat");
    let home = setup_copilot(&dir, "");
    let mock = start_mock(&dir, "echo toolbrake-copilot", 8);
    let out = run_copilot(&dir, &home, &mock);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(
        results.len(),
        3,
        "two ran, the third was refused: {results:#?}"
    );
    assert!(results[0].contains("toolbrake-copilot") && results[1].contains("toolbrake-copilot"));
    assert!(
        results[2].contains(
            r#"Denied by preToolUse hook: loop brake: tool "bash" called 3 times in a row"#
        ),
        "the model read toolbrake's refusal: {}",
        results[2]
    );
    assert!(
        !results[2].contains("toolbrake-copilot"),
        "the third call did not run"
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn copilot_cli_a_call_whose_output_changes_is_not_stopped() {
    let dir = tmpdir("hosts", "copilot-progress");
    let home = setup_copilot(&dir, "");
    let mock = start_mock(&dir, GROWING, 5);
    let out = run_copilot(&dir, &home, &mock);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(results.len(), 5, "every call ran: {results:#?}");
    for (i, r) in results.iter().enumerate() {
        assert!(
            r.starts_with(&format!("{}\n", i + 1)),
            "call {} ran: {r}",
            i + 1
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("work/ticks.txt")).unwrap(),
        "x\n".repeat(5)
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn copilot_cli_repeating_a_failing_command_is_advised_then_stopped() {
    let dir = tmpdir("hosts", "copilot-failing");
    let home = setup_copilot(&dir, "[breaker]\non_limit = \"deny\"\n");
    // The timeout changes every call: the streak never sees a repeat; the failure track
    // counts the command without it.
    let mock = start_mock(
        &dir,
        "curl -sSf --max-time {n} http://127.0.0.1:{port}/missing",
        10,
    );
    let out = run_copilot(&dir, &home, &mock);
    assert_success(&out);
    let reqs = requests(&mock);
    let results = chat_tool_results(&reqs);
    assert_eq!(results.len(), 6, "{results:#?}");
    for r in &results[..5] {
        assert!(r.contains("exit code 22"), "{r}");
    }
    let first_advised = reqs
        .iter()
        .position(|b| b.to_string().contains("has failed 3 times in a row"))
        .expect("the failure advisory reaches the model (postToolUse additionalContext)");
    assert_eq!(chat_tool_results(&reqs[..=first_advised]).len(), 3);
    assert!(
        results[5].contains("REPEAT_TOOL_BLOCKED: bash (consecutive failures)"),
        "{}",
        results[5]
    );
}

// --- Qwen Code --------------------------------------------------------------------------

fn qwen_cli() -> PathBuf {
    npm_file("@qwen-code/qwen-code/cli.js", "@qwen-code/qwen-code@0.24.4")
}

/// A home whose Qwen Code settings choose the OpenAI-compatible login (what a user has
/// after the first run), then `toolbrake init qwen` on top.
fn setup_qwen(dir: &Path, toml: &str) -> PathBuf {
    write_config(dir, toml);
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".qwen")).unwrap();
    std::fs::write(
        home.join(".qwen/settings.json"),
        r#"{"security": {"auth": {"selectedType": "openai"}}}"#,
    )
    .unwrap();
    let out = toolbrake(dir)
        .args(["init", "qwen"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_success(&out);
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".qwen/settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        settings["security"]["auth"]["selectedType"], "openai",
        "kept"
    );
    assert!(settings["hooks"]["PreToolUse"].is_array());
    home
}

fn run_qwen(dir: &Path, home: &Path, mock: &Mock) -> Output {
    let mut c = Command::new("node");
    c.arg(qwen_cli())
        .current_dir(dir.join("work"))
        .env("HOME", home)
        .env(
            "OPENAI_BASE_URL",
            format!("http://127.0.0.1:{}/v1", mock.port),
        )
        .env("OPENAI_API_KEY", "x")
        .env("OPENAI_MODEL", "mock-model")
        .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1")
        .args(["-p", "run the command", "--yolo"]);
    with_toolbrake_env(&mut c, dir);
    output_with_deadline(c, 240)
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn qwen_code_repeating_one_shell_call_is_stopped_at_the_third() {
    let dir = tmpdir("hosts", "qwen-repeat");
    let home = setup_qwen(&dir, "");
    // Three, then the model answers: more identical calls after the refusal race Qwen
    // Code's own always-on guard, which halts the run (a failed exit) at a repeat of its own.
    let mock = start_mock(&dir, "echo toolbrake-qwen", 3);
    let out = run_qwen(&dir, &home, &mock);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(
        results.len(),
        3,
        "two ran, the third was refused: {results:#?}"
    );
    assert!(
        results[0].contains("Output: toolbrake-qwen"),
        "the first ran: {results:#?}"
    );
    assert!(
        results[1].contains("Output: toolbrake-qwen"),
        "the second ran: {results:#?}"
    );
    assert!(
        results[2].starts_with(r#"loop brake: tool "run_shell_command" called 3 times in a row"#),
        "the model read toolbrake's refusal: {}",
        results[2]
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn qwen_code_a_call_whose_output_changes_is_not_stopped() {
    let dir = tmpdir("hosts", "qwen-progress");
    let home = setup_qwen(&dir, "");
    // Four, past toolbrake's streak limit of 3: Qwen Code's own always-on guard halts the
    // run at the 5th identical call whatever it returns.
    let mock = start_mock(&dir, GROWING, 4);
    let out = run_qwen(&dir, &home, &mock);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(results.len(), 4, "every call ran: {results:#?}");
    // What ran is counted in the file the command appends to: Qwen Code now and then
    // reports a command's output as "(empty)", which is its capture, not toolbrake's
    // judgement.
    let ticks = std::fs::read_to_string(dir.join("work/ticks.txt")).unwrap_or_default();
    assert_eq!(ticks.lines().count(), 4, "every call ran: {results:#?}");
    for r in &results {
        assert!(!r.contains("loop brake"), "not stopped: {r}");
    }
}

// --- Cline ------------------------------------------------------------------------------

fn cline_bin() -> PathBuf {
    npm_file("@cline/cli-linux-x64/bin/cline", "cline@3.0.65")
}

/// A Cline home: its OpenAI-compatible provider points at the stand-in model (`cline
/// auth`), toolbrake's hook files are installed by `toolbrake init cline`. Cline runs its
/// tasks through a hub daemon that outlives the command; each test's hub gets a port of its
/// own (`CLINE_HUB_PORT`) and is stopped (`cline hub stop`) when the test ends.
struct Cline {
    home: PathBuf,
    hub_port: u16,
}

impl Cline {
    fn command(&self) -> Command {
        let mut c = Command::new(cline_bin());
        c.env("HOME", &self.home)
            .env("CLINE_HUB_PORT", self.hub_port.to_string());
        c
    }
}

impl Drop for Cline {
    fn drop(&mut self) {
        let mut stop = self.command();
        stop.args(["hub", "stop"]);
        let _ = output_with_deadline(stop, 60);
    }
}

fn setup_cline(dir: &Path, toml: &str, mock: &Mock) -> Cline {
    write_config(dir, toml);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let hub_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cline = Cline { home, hub_port };
    let mut auth = cline.command();
    auth.args([
        "auth",
        "-p",
        "openai",
        "-k",
        "x",
        "-m",
        "mock-model",
        "-b",
        &format!("http://127.0.0.1:{}/v1", mock.port),
    ]);
    assert_success(&output_with_deadline(auth, 60));
    let out = toolbrake(dir)
        .args(["init", "cline"])
        .env("HOME", &cline.home)
        .output()
        .unwrap();
    assert_success(&out);
    let hook = std::fs::read_to_string(cline.home.join(".cline/hooks/PreToolUse")).unwrap();
    assert!(hook.trim_end().ends_with("hook cline"), "{hook}");
    cline
}

fn run_cline(dir: &Path, cline: &Cline) -> Output {
    let mut c = cline.command();
    c.current_dir(dir.join("work"))
        .args(["run the command", "--json"]);
    with_toolbrake_env(&mut c, dir);
    output_with_deadline(c, 240)
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn cline_repeating_one_command_stops_the_task_before_the_third_runs() {
    let dir = tmpdir("hosts", "cline-repeat");
    // The output stays the same; the appended line counts the runs.
    let mock = start_mock(&dir, "echo toolbrake-cline; echo ran >> runs.txt", 8);
    let cline = setup_cline(&dir, "", &mock);
    let out = run_cline(&dir, &cline);
    assert_success(&out);
    let reqs = requests(&mock);
    assert_eq!(
        reqs.len(),
        3,
        "the model asked three times, then the task stopped"
    );
    let results = chat_tool_results(&reqs);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(results.iter().all(|r| r.contains("toolbrake-cline")));
    assert_eq!(
        std::fs::read_to_string(dir.join("work/runs.txt")).unwrap(),
        "ran\nran\n",
        "the third call did not run"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(r#""finishReason":"aborted""#), "{stdout}");
    // Cline 3.0.65 prints "aborted by another client"; toolbrake's text is the stop
    // reason in its log.
    let log = std::fs::read_to_string(cline.home.join(".cline/data/logs/cline.log")).unwrap();
    assert!(
        log.contains(r#"loop brake: tool \"run_commands\" called 3 times in a row"#),
        "the task was stopped with toolbrake's text"
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn cline_a_command_whose_output_changes_is_not_stopped() {
    let dir = tmpdir("hosts", "cline-progress");
    // Four, past toolbrake's streak limit of 3: Cline's own guard stops the task at the
    // 5th identical call whatever it returns.
    let mock = start_mock(&dir, GROWING, 4);
    let cline = setup_cline(&dir, "", &mock);
    let out = run_cline(&dir, &cline);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(results.len(), 4, "every call ran: {results:#?}");
    for (i, r) in results.iter().enumerate() {
        assert!(
            r.contains(&format!(r#""result":"{}\n"#, i + 1)),
            "call {} ran: {r}",
            i + 1
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(r#""finishReason":"completed""#), "{stdout}");
}

// --- Factory Droid ------------------------------------------------------------------------

fn droid_bin() -> PathBuf {
    npm_file(
        "@factory/cli-linux-x64/bin/droid",
        "@factory/cli-linux-x64@0.225.2",
    )
}

/// A home whose Factory settings name the stand-in model as a custom (BYOK) model, so
/// `droid exec` runs without a Factory login; `toolbrake init factory` writes
/// `~/.factory/hooks.json`.
fn setup_factory(dir: &Path, toml: &str, mock: &Mock) -> PathBuf {
    write_config(dir, toml);
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".factory")).unwrap();
    std::fs::write(
        home.join(".factory/settings.json"),
        serde_json::json!({"customModels": [{
            "model": "mock-model", "displayName": "Mock",
            "baseUrl": format!("http://127.0.0.1:{}/v1", mock.port), "apiKey": "x",
            "provider": "generic-chat-completion-api", "maxOutputTokens": 1000}]})
        .to_string(),
    )
    .unwrap();
    let out = toolbrake(dir)
        .args(["init", "factory"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_success(&out);
    home
}

fn run_factory(dir: &Path, home: &Path) -> Output {
    let mut c = Command::new(droid_bin());
    c.current_dir(dir.join("work")).env("HOME", home).args([
        "exec",
        "-m",
        "custom:mock-model",
        "--auto",
        "high",
        "run the command",
    ]);
    with_toolbrake_env(&mut c, dir);
    output_with_deadline(c, 240)
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn factory_droid_repeating_one_command_is_stopped_at_the_third() {
    let dir = tmpdir("hosts", "factory-repeat");
    let mock = start_mock(&dir, "echo toolbrake-droid", 8);
    let home = setup_factory(&dir, "", &mock);
    let out = run_factory(&dir, &home);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(
        results.len(),
        3,
        "two ran, the third was refused: {results:#?}"
    );
    assert!(results[0].starts_with("toolbrake-droid") && results[1].starts_with("toolbrake-droid"));
    assert!(
        results[2].starts_with(r#"Error: loop brake: tool "Execute" called 3 times in a row"#),
        "the model read toolbrake's refusal: {}",
        results[2]
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn factory_droid_a_command_whose_output_changes_is_not_stopped() {
    let dir = tmpdir("hosts", "factory-progress");
    let mock = start_mock(&dir, GROWING, 5);
    let home = setup_factory(&dir, "", &mock);
    let out = run_factory(&dir, &home);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(results.len(), 5, "every call ran: {results:#?}");
    for (i, r) in results.iter().enumerate() {
        assert!(
            r.starts_with(&format!("{}\n", i + 1)),
            "call {} ran: {r}",
            i + 1
        );
    }
}

/// Factory Droid 0.225.2 runs no hook after a call that failed (no `PostToolUse`, and it
/// has no `PostToolUseFailure`): toolbrake reads the failures from its transcript.
#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn factory_droid_repeating_a_failing_command_is_advised_then_stopped() {
    let dir = tmpdir("hosts", "factory-failing");
    let mock = start_mock(
        &dir,
        "curl -sSf --max-time {n} http://127.0.0.1:{port}/missing",
        10,
    );
    let home = setup_factory(&dir, "[breaker]\non_limit = \"deny\"\n", &mock);
    let out = run_factory(&dir, &home);
    assert_success(&out);
    let reqs = requests(&mock);
    let results = chat_tool_results(&reqs);
    assert_eq!(results.len(), 6, "{results:#?}");
    for r in &results[..5] {
        assert!(r.contains("[Process exited with code 22]"), "{r}");
    }
    assert!(
        results[5].starts_with("Error: REPEAT_TOOL_BLOCKED: Execute (consecutive failures)"),
        "{}",
        results[5]
    );
}

/// The breaker's gate at 2 with the streak out of the way: the second identical call is
/// an ask. Headless, nobody can answer.
const ASKS_AT_SECOND: &str = "[streak]\nmax_repeats = 10\n[breaker.limits]\nexact = 2\ncmd = 2\n";

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn copilot_cli_an_ask_in_prompt_mode_is_refused_and_the_model_reads_why() {
    let dir = tmpdir("hosts", "copilot-ask");
    let home = setup_copilot(&dir, ASKS_AT_SECOND);
    let mock = start_mock(&dir, "echo toolbrake-copilot", 2);
    let out = run_copilot(&dir, &home, &mock);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results[1].starts_with("Denied by preToolUse hook (unable to ask user for confirmation): toolbrake: this call is about to be blocked as a repeat"),
        "{}",
        results[1]
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn qwen_code_an_ask_headless_is_not_run_and_the_model_reads_why() {
    let dir = tmpdir("hosts", "qwen-ask");
    let home = setup_qwen(&dir, ASKS_AT_SECOND);
    let mock = start_mock(&dir, "echo toolbrake-qwen", 2);
    let out = run_qwen(&dir, &home, &mock);
    assert_success(&out);
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results[1].starts_with("toolbrake: this call is about to be blocked as a repeat"),
        "{}",
        results[1]
    );
    assert!(
        !results[1].contains("Output: toolbrake-qwen"),
        "it did not run"
    );
}

#[test]
#[ignore = "needs the agent CLIs from npm: run ./scripts/test"]
fn copilot_cli_project_hooks_in_a_trusted_folder_stop_the_third_call() {
    let dir = tmpdir("hosts", "copilot-project");
    write_config(&dir, "");
    std::fs::create_dir_all(dir.join("work/.git")).unwrap();
    let out = toolbrake(&dir)
        .current_dir(dir.join("work"))
        .args(["init", "copilot", "--project"])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(dir.join("work/.github/hooks/toolbrake.json").exists());
    let home = dir.join("copilot-home");
    let mock = start_mock(&dir, "echo toolbrake-copilot", 8);
    let mut c = Command::new(copilot_bin());
    c.current_dir(dir.join("work"))
        .env("HOME", dir.join("home"))
        .env("XDG_CACHE_HOME", node_modules().join("../.cache"))
        .env("COPILOT_HOME", &home)
        .env("COPILOT_OFFLINE", "true")
        .env("COPILOT_AUTO_UPDATE", "false")
        .env(
            "COPILOT_PROVIDER_BASE_URL",
            format!("http://127.0.0.1:{}/v1", mock.port),
        )
        .env("COPILOT_MODEL", "gpt-4.1")
        .args([
            "-p",
            "run the command",
            "--allow-all-tools",
            "--trust-folder",
        ]);
    with_toolbrake_env(&mut c, &dir);
    assert_success(&output_with_deadline(c, 240));
    let results = chat_tool_results(&requests(&mock));
    assert_eq!(results.len(), 3, "{results:#?}");
    assert!(results[2].contains("loop brake: tool \"bash\" called 3 times in a row"));
}
