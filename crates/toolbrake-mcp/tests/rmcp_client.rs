//! The proxy driven by the official Rust SDK (`rmcp` 3.11.0) as the client, in process:
//! the proxy runs in this test's runtime over in-memory pipes, and its server is a real
//! `server-everything` child process (from `target/e2e-npm`, installed by `scripts/test`).

mod support;

use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_mcp::{run, Options};

fn server_everything() -> PathBuf {
    let nm = std::env::var_os("TOOLBRAKE_E2E_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-npm/node_modules")
        });
    let p = nm.join("@modelcontextprotocol/server-everything/dist/index.js");
    assert!(p.exists(), "{} is missing: run ./scripts/test", p.display());
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs server-everything from npm: run ./scripts/test"]
async fn the_rust_sdk_client_sees_pass_through_advice_and_refusal() {
    let mut child = tokio::process::Command::new("node")
        .arg(server_everything())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let server_in = child.stdout.take().unwrap();
    let server_out = child.stdin.take().unwrap();
    let (client_side, proxy_side) = tokio::io::duplex(1 << 20);
    let (proxy_in, proxy_out) = tokio::io::split(proxy_side);
    let opts = Options {
        ask_timeout: Duration::from_secs(5),
        ..support::options(
            Engine::new(
                Config::from_toml_str(
                    "[streak]\nenabled = false\n[breaker]\non_limit = \"deny\"",
                    &no_env,
                )
                .unwrap(),
            ),
            "rmcp-test",
        )
    };
    let proxy = tokio::spawn(run(opts, proxy_in, proxy_out, server_in, server_out));

    let client = ().serve(client_side).await.expect("initialize through the proxy");
    let info = client.peer_info().expect("server info");
    assert!(serde_json::to_string(&*info)
        .unwrap()
        .contains("toolbrake/mcp-servers/everything"));
    let tools = client.list_tools(Default::default()).await.unwrap();
    assert!(tools.tools.iter().any(|t| t.name == "echo"));

    let mut texts = Vec::new();
    for _ in 0..12 {
        let mut args = serde_json::Map::new();
        args.insert("message".into(), serde_json::json!("rust"));
        let params: CallToolRequestParams =
            serde_json::from_value(serde_json::json!({"name": "echo", "arguments": args})).unwrap();
        let r = client.call_tool(params).await.unwrap();
        let v = serde_json::to_value(&r).unwrap();
        texts.push(v);
    }
    let text = |v: &serde_json::Value| v.to_string();
    assert!(text(&texts[0]).contains("Echo: rust"));
    assert!(
        text(&texts[6]).contains("CONVERGENCE_CHECK"),
        "{}",
        texts[6]
    );
    assert!(
        text(&texts[11]).contains("REPEAT_TOOL_BLOCKED"),
        "{}",
        texts[11]
    );
    assert_eq!(texts[11]["isError"], true);
    client.cancel().await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), proxy).await;
}
