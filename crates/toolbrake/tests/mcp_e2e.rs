//! The MCP proxy end to end with real peers: the official TypeScript SDK client
//! (`@modelcontextprotocol/sdk` 1.32.2) driving `toolbrake mcp -- node server-everything`
//! (`@modelcontextprotocol/server-everything` 2026.8.31), and the real Claude Code 2.1.332
//! using the proxy through `--mcp-config`.
//!
//! Ignored by a plain `cargo test` (they need the npm packages): `scripts/test` installs
//! them into `target/e2e-npm` and runs these with `--include-ignored`.

mod support;
use support::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn node_modules() -> PathBuf {
    let p = std::env::var_os("TOOLBRAKE_E2E_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/e2e-npm/node_modules"));
    assert!(
        p.join("@modelcontextprotocol/sdk").exists()
            && p.join("@modelcontextprotocol/server-everything").exists(),
        "{}: the MCP packages are missing; run ./scripts/test",
        p.display()
    );
    p
}

/// Runs the TypeScript SDK client scenario against the proxy with this configuration.
fn client(name: &str, toml: &str, scenario: &str) -> Value {
    let dir = tmpdir("mcp", name);
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(&cfg, toml).unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
    let mut c = Command::new("node");
    c.env("FETCH_CWD", dir.join("work"));
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mcp_client.js"))
        .arg(node_modules())
        .arg(env!("CARGO_BIN_EXE_toolbrake"))
        .arg(&cfg)
        .arg(scenario)
        .env_remove("TOOLBRAKE_CONFIG")
        .env_remove("TOOLBRAKE_MAX_REPEATS");
    let out = output_with_deadline(c, 120);
    assert_success(&out);
    last_json_line(&out)
}

fn calls(v: &Value) -> Vec<(bool, Vec<String>)> {
    v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["isError"] == true,
                c["text"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn everything_but_the_verdicts_passes_through() {
    let v = client("passthrough", "", "passthrough");
    assert_eq!(v["serverInfo"]["name"], "toolbrake/mcp-servers/everything");
    assert!(v["serverInfo"]["title"]
        .as_str()
        .unwrap()
        .contains("through toolbrake"));
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"get-sum"),
        "{tools:?}"
    );
    assert!(v["resources"].as_u64().unwrap() > 0);
    assert_eq!(v["read"], 1);
    assert!(v["prompts"].as_array().unwrap().len() >= 2);
    assert_eq!(v["prompt"], 1);
    assert_eq!(v["echo"]["text"][0], "Echo: hello");
    assert_eq!(v["echo"]["isError"], false);
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn a_repeated_echo_is_advised_then_refused() {
    // The streak brake alone refuses the third identical echo.
    let c = calls(&client("repeat-streak", "", "repeat"));
    assert!(!c[0].0 && !c[1].0);
    assert!(
        c[2].0 && c[2].1[0].starts_with("loop brake: tool \"echo\" called 3 times in a row"),
        "{:?}",
        c[2]
    );
    // The breaker alone: advised at 7 and 11 (a text block added to the server's
    // result), refused at 12 with isError and toolbrake's text; this client offers no
    // elicitation, so the ask fails closed.
    let c = calls(&client(
        "repeat-breaker",
        "[streak]\nenabled = false\n",
        "repeat",
    ));
    for (i, (is_error, text)) in c.iter().enumerate().take(11) {
        assert!(!is_error, "call {}", i + 1);
        assert_eq!(text[0], "Echo: same");
        let advised = text.len() > 1;
        assert_eq!(advised, i == 6 || i == 10, "call {}: {text:?}", i + 1);
    }
    assert!(c[6].1[1].starts_with("CONVERGENCE_CHECK: you are repeating yourself"));
    assert!(c[10].1[1].contains("summarise your progress"));
    assert!(c[11].0);
    assert!(
        c[11].1[0].starts_with("Approval was unavailable"),
        "{:?}",
        c[11]
    );
    assert!(c[11].1[0].contains("REPEAT_TOOL_BLOCKED: repeated echo (semantic match)"));
    assert!(c[12].0 && c[12].1[0].starts_with("REPEAT_TOOL_BLOCKED"));
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn a_call_the_server_keeps_rejecting_is_stopped_by_the_failure_track() {
    let c = calls(&client(
        "failing",
        // The failure track alone (the same-output track, like the streak brake, would
        // stop the identical failing call at its 3rd).
        "[streak]\nenabled = false\n[breaker]\non_limit = \"deny\"\nsame_output_limit = \"off\"\n",
        "failing",
    ));
    for (i, (is_error, text)) in c.iter().enumerate().take(5) {
        assert!(
            *is_error && text[0].contains("Invalid arguments"),
            "call {}: {text:?}",
            i + 1
        );
        assert_eq!(
            text.len() > 1,
            i == 2,
            "the failure advisory comes with the third failure"
        );
    }
    assert!(
        c[2].1[1].contains("has failed 3 times in a row — the call raised an error"),
        "{:?}",
        c[2]
    );
    assert!(
        c[5].0 && c[5].1[0].starts_with("REPEAT_TOOL_BLOCKED: get-sum (consecutive failures)"),
        "{:?}",
        c[5]
    );
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn asks_go_to_the_operator_through_elicitation() {
    let approved = client("ask-approve", "[streak]\nenabled = false\n", "ask-approve");
    assert_eq!(approved["asked"].as_array().unwrap().len(), 1);
    assert!(approved["asked"][0]
        .as_str()
        .unwrap()
        .contains("REST OF THIS TURN"));
    let c = calls(&approved);
    assert!(
        c.iter().all(|(e, _)| !e),
        "approved: the rest of the turn rides along"
    );
    let declined = client("ask-decline", "[streak]\nenabled = false\n", "ask-decline");
    let c = calls(&declined);
    assert!(
        c[11].0 && c[11].1[0].contains("was NOT granted"),
        "{:?}",
        c[11]
    );
    assert!(c[12].0);
    assert_eq!(
        declined["asked"].as_array().unwrap().len(),
        1,
        "a refused measure is not asked again"
    );
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn parallel_calls_are_counted_exactly() {
    let c = calls(&client(
        "parallel",
        "[streak]\nenabled = false\n[breaker]\non_limit = \"deny\"\n",
        "parallel",
    ));
    assert_eq!(c.len(), 12);
    assert_eq!(
        c.iter().filter(|(e, _)| *e).count(),
        1,
        "12 concurrent identical calls: exactly the 12th is gated"
    );
}

#[test]
#[ignore = "needs Claude Code and the MCP packages from npm: run ./scripts/test"]
fn claude_code_through_the_proxy_sees_the_refusal() {
    let nm = node_modules();
    let claude = nm.join("@anthropic-ai/claude-code-linux-x64/claude");
    assert!(claude.exists(), "run ./scripts/test");
    let dir = tmpdir("mcp", "claude");
    std::fs::write(dir.join("toolbrake.toml"), "").unwrap();
    let log = dir.join("requests.jsonl");
    let portfile = dir.join("port");
    let mut mock = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mock_model.py"))
        .args([
            log.to_str().unwrap(),
            portfile.to_str().unwrap(),
            r#"{"message":"same"}"#,
            "8",
            "mcp__everything__echo",
        ])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !portfile.exists() {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    let port = std::fs::read_to_string(&portfile).unwrap();
    let mcp = serde_json::json!({"mcpServers": {"everything": {
        "command": env!("CARGO_BIN_EXE_toolbrake"),
        "args": ["--config", dir.join("toolbrake.toml"), "mcp", "--", "node",
                 nm.join("@modelcontextprotocol/server-everything/dist/index.js")]
    }}});
    std::fs::write(dir.join("mcp.json"), mcp.to_string()).unwrap();
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut c = Command::new(&claude);
    c.current_dir(&work)
        .env("ENABLE_TOOL_SEARCH", "false")
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", port.trim()),
        )
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("CLAUDE_CONFIG_DIR", dir.join("cfg"))
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .args([
            "-p",
            "echo",
            "--output-format",
            "stream-json",
            "--verbose",
            "--mcp-config",
        ])
        .arg(dir.join("mcp.json"))
        .args(["--strict-mcp-config", "--allowedTools", "mcp__everything"]);
    let out = output_with_deadline(c, 240);
    let _ = mock.kill();
    let _ = mock.wait();
    assert_success(&out);
    let last = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string();
    let body: Value = serde_json::from_str(&last).unwrap();
    let results: Vec<&Value> = body["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[2]["is_error"], true);
    assert!(
        results[2]["content"]
            .to_string()
            .contains(r#"loop brake: tool \"echo\" called 3 times in a row"#),
        "{}",
        results[2]
    );
}

/// In front of a Streamable HTTP server (`toolbrake mcp --url`), with the embedded store:
/// the session is keyed by the server's `Mcp-Session-Id`.
#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn in_front_of_a_streamable_http_server() {
    let nm = node_modules();
    let port = toolbrake_store::testing::free_port();
    let mut server = Command::new("node")
        .arg(nm.join("@modelcontextprotocol/server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "server-everything did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let dir = tmpdir("mcp", "http");
    let state = dir.join("state.db");
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        format!(
            "[streak]\nenabled = false\n[store]\nkind = \"sqlite\"\npath = \"{}\"\n",
            state.display()
        ),
    )
    .unwrap();
    let run = |scenario: &str| {
        let mut c = Command::new("node");
        c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mcp_client.js"))
            .arg(&nm)
            .arg(env!("CARGO_BIN_EXE_toolbrake"))
            .arg(&cfg)
            .arg(scenario)
            .env("MCP_URL", format!("http://127.0.0.1:{port}/mcp"))
            .env_remove("TOOLBRAKE_STATE")
            .env_remove("TOOLBRAKE_CONFIG");
        let out = output_with_deadline(c, 120);
        assert_success(&out);
        last_json_line(&out)
    };
    let v = run("passthrough");
    assert_eq!(v["echo"]["text"][0], "Echo: hello");
    assert_eq!(v["read"], 1);
    assert_eq!(v["serverInfo"]["name"], "toolbrake/mcp-servers/everything");
    let c = calls(&run("repeat"));
    assert!(c[6].1.len() == 2 && c[6].1[1].starts_with("CONVERGENCE_CHECK"));
    assert!(c[11].0 && c[12].0);
    let listed = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .arg("--config")
        .arg(&cfg)
        .args(["sessions", "--json"])
        .env_remove("TOOLBRAKE_STATE")
        .output()
        .unwrap();
    let sessions: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    assert!(
        sessions
            .iter()
            .any(|s| s["key"].as_str().unwrap().starts_with("mcp-http:")),
        "calls are keyed by the HTTP session: {sessions:?}"
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// The proxy's working directory (its workspace root) in the scenario `name`.
fn workdir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("toolbrake-mcp-{}-{name}/work", std::process::id()))
}

fn check_fetch_scenario(v: &Value, work: &Path) {
    let fetched = &v["fetched"];
    assert_eq!(fetched["isError"], false, "{v}");
    let s = &fetched["structured"];
    assert_eq!(
        (s["statusCode"].as_u64(), s["kind"].as_str()),
        (Some(200), Some("json")),
        "{v}"
    );
    let path = s["path"].as_str().unwrap();
    assert!(path.starts_with("fetched/"), "{v}");
    assert_eq!(
        std::fs::read_to_string(work.join(path)).unwrap(),
        "{\"rows\":[1,2,3]}"
    );
    assert!(
        !fetched["text"].to_string().contains("rows"),
        "never the body: {v}"
    );
    // 404s are failures: the third in a row brings the failure advisory.
    let missing: Vec<&Value> = v["missing"].as_array().unwrap().iter().collect();
    assert!(missing.iter().all(|m| m["isError"] == true), "{v}");
    assert!(work.join("missing-0.txt").is_file());
    let third = missing[2]["text"].to_string();
    assert!(third.contains("has failed 3 times in a row"), "{third}");
    let escape = v["escape"]["text"].to_string();
    assert!(
        escape.contains("refusing to write outside the workspace root"),
        "{escape}"
    );
    assert!(!work.parent().unwrap().join("escape.json").exists());
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn the_proxy_offers_web_fetch_file_next_to_the_servers_tools() {
    let v = client("fetch-proxy", "", "fetch-proxy");
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"web_fetch_file"),
        "{tools:?}"
    );
    assert_eq!(tools.iter().filter(|t| **t == "web_fetch_file").count(), 1);
    assert_eq!(v["fetchSchema"]["required"], serde_json::json!(["url"]));
    check_fetch_scenario(&v, &workdir("fetch-proxy"));
    assert_eq!(v["echo"]["isError"], false, "{v}");
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn with_no_server_the_proxy_is_a_fetch_tool_server() {
    let v = client("fetch-only", "", "fetch-only");
    assert_eq!(v["tools"], serde_json::json!(["web_fetch_file"]), "{v}");
    assert_eq!(v["serverInfo"]["name"], "toolbrake/web-fetch-file");
    check_fetch_scenario(&v, &workdir("fetch-only"));
}

struct Listening {
    child: std::process::Child,
    url: String,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn listen(name: &str, extra: &[&str]) -> Listening {
    use std::io::BufRead;
    let dir = tmpdir("mcp", name);
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(&cfg, "").unwrap();
    let server = node_modules().join("@modelcontextprotocol/server-everything/dist/index.js");
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .arg("--config")
        .arg(&cfg)
        .args(["mcp", "--listen", "127.0.0.1:0"])
        .args(extra)
        .arg("--")
        .arg("node")
        .arg(server)
        .env_remove("TOOLBRAKE_MCP_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    // Keep draining stderr so the server's logs never block it.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while err.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
            sink.clear();
        }
    });
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Listening { child, url }
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn two_http_clients_on_one_proxy_each_get_their_own_session() {
    let l = listen("http-two", &["--token", "t0ken-for-test"]);
    let mut c = Command::new("node");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mcp_http_client.js"))
        .arg(node_modules())
        .arg(&l.url)
        .arg("t0ken-for-test");
    let out = output_with_deadline(c, 120);
    assert_success(&out);
    let v: Value = last_json_line(&out);
    assert_ne!(v["sessions"][0], v["sessions"][1], "{v}");
    assert!(v["tools"].as_array().unwrap().iter().any(|t| t == "echo"));
    for who in ["a", "b"] {
        let calls = v[who].as_array().unwrap();
        assert_eq!(calls[0]["isError"], false, "{who}: {v}");
        assert_eq!(calls[1]["isError"], false, "{who}: {v}");
        assert_eq!(calls[2]["isError"], true, "{who}: its own third call: {v}");
        assert!(
            calls[2]["text"][0]
                .as_str()
                .unwrap()
                .starts_with("loop brake: tool \"echo\" called 3 times"),
            "{v}"
        );
    }
    assert!(
        v["longRun"][0]
            .as_str()
            .unwrap()
            .contains("Long running operation completed"),
        "{v}"
    );
    assert_eq!(
        v["seen"]["b"]["progress"], 3,
        "progress reached the client that asked: {v}"
    );
    assert!(
        v["seen"]["a"]["logs"].as_u64().unwrap() >= 1,
        "logging reached its client: {v}"
    );
    assert_eq!(v["seen"]["b"]["logs"], 0, "and only that client: {v}");
    assert_ne!(v["afterEnd"], "answered", "an ended session is gone: {v}");
}

#[test]
#[ignore = "needs the MCP packages from npm: run ./scripts/test"]
fn the_http_listener_checks_the_token_and_the_origin() {
    let l = listen("http-auth", &["--token", "s3cret"]);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let post = |headers: &[(&str, &str)]| {
        let mut c = Command::new("curl");
        c.args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "-H",
            "accept: application/json, text/event-stream",
            "--data",
            init,
        ]);
        for (k, v) in headers {
            c.arg("-H").arg(format!("{k}: {v}"));
        }
        c.arg(&l.url);
        String::from_utf8(c.output().unwrap().stdout).unwrap()
    };
    assert_eq!(post(&[]), "401");
    assert_eq!(post(&[("authorization", "Bearer wrong")]), "401");
    assert_eq!(
        post(&[
            ("authorization", "Bearer s3cret"),
            ("origin", "https://evil.example")
        ]),
        "403"
    );
    assert_eq!(
        post(&[
            ("authorization", "Bearer s3cret"),
            ("origin", "http://localhost:3000")
        ]),
        "200"
    );
    assert_eq!(post(&[("authorization", "Bearer s3cret")]), "200");
    let out = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .args(["mcp", "--listen", "0.0.0.0:0", "--", "true"])
        .env_remove("TOOLBRAKE_MCP_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without a token"));
}
