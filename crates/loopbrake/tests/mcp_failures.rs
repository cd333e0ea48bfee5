//! The MCP proxy when its server fails: the client gets errors for what is in flight and
//! the proxy stops with a clear message; nothing hangs. Uses a misbehaving fake server
//! (`tests/e2e/fake_mcp_server.py`, Python only).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Proxy {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
}

fn start(mode: &str) -> Proxy {
    start_with(mode, None)
}

fn start_with(mode: &str, config: Option<&Path>) -> Proxy {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loopbrake"));
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let mut child = cmd
        .args(["mcp", "--", "python3"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/fake_mcp_server.py"))
        .arg(mode)
        .env_remove("LOOPBRAKE_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for l in out.lines() {
            if tx.send(l.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut p = Proxy {
        child,
        stdin,
        lines,
    };
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    let init = p.recv();
    assert_eq!(init["result"]["serverInfo"]["name"], "loopbrake/fake");
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    p
}

impl Proxy {
    fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        serde_json::from_str(
            &self
                .lines
                .recv_timeout(Duration::from_secs(15))
                .expect("an answer, not a hang"),
        )
        .unwrap()
    }

    /// Waits for the proxy to exit (bounded) and returns its status and stderr.
    fn finish(mut self) -> (Option<i32>, String) {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err)
                    .unwrap();
                return (st.code(), err);
            }
            assert!(start.elapsed() < Duration::from_secs(15), "the proxy hangs");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "work", "arguments": {"n": id}}})
}

#[test]
fn a_crashing_server_errors_the_calls_in_flight_and_stops_the_proxy() {
    let mut p = start("crash");
    p.send(&call(2));
    let r = p.recv();
    assert_eq!(r["id"], 2);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the MCP server closed its output"),
        "{r}"
    );
    let (code, err) = p.finish();
    assert_eq!(code, Some(1));
    assert!(
        err.contains("loopbrake mcp: the MCP server closed its output")
            && err.contains("exit status: 3"),
        "{err}"
    );
}

#[test]
fn garbage_on_the_servers_stdout_stops_the_proxy_with_a_clear_message() {
    let mut p = start("garbage");
    p.send(&call(2));
    let r = p.recv();
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON-RPC"),
        "{r}"
    );
    let (code, err) = p.finish();
    assert_eq!(code, Some(1));
    assert!(
        err.contains("wrote something that is not JSON-RPC on its stdout"),
        "{err}"
    );
}

#[test]
fn a_client_that_leaves_ends_the_proxy_even_with_a_call_hanging() {
    let mut p = start("hang");
    p.send(&call(2));
    std::thread::sleep(Duration::from_millis(200));
    p.stdin = None; // the client closes its side
    let (code, _) = p.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn a_healthy_server_works_and_the_proxy_exits_cleanly() {
    let mut p = start("ok");
    p.send(&call(2));
    assert_eq!(p.recv()["result"]["content"][0]["text"], "done");
    p.stdin = None;
    assert_eq!(p.finish().0, Some(0));
}

/// Arguments nested deeper than the parser's limit: the call follows the failure policy,
/// never passes unjudged. Fail-closed refuses each one; fail-open runs it and counts it by
/// the hash of its arguments, so the third identical one is refused by the streak brake.
#[test]
fn calls_too_deep_to_judge_follow_the_failure_policy() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let call = |id: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"work","arguments":{{"x":{deep}}}}}}}"#
        )
    };
    let send_raw = |p: &mut Proxy, line: &str| {
        let stdin = p.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    };

    let dir = std::env::temp_dir().join(format!("lb-mcp-deep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let closed = dir.join("closed.toml");
    std::fs::write(&closed, "[store]\nfail_closed = true\n").unwrap();
    let mut p = start_with("ok", Some(&closed));
    for id in 10..16 {
        send_raw(&mut p, &call(id));
        let r = p.recv();
        assert_eq!(r["id"], id);
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("nest too deep"));
    }
    drop(p.stdin.take());
    let (_, err) = p.finish();
    assert!(err.contains("nest too deep to judge; refused"), "{err}");

    let mut p = start("ok");
    let mut verdicts = Vec::new();
    for id in 20..26 {
        send_raw(&mut p, &call(id));
        let r = p.recv();
        verdicts.push(r["result"]["isError"] == true);
        if r["result"]["isError"] == true {
            let text = r["result"]["content"][0]["text"].as_str().unwrap();
            assert!(
                text.contains("loop brake: tool \"work\" called")
                    && text.contains("times in a row"),
                "{text}"
            );
        }
    }
    assert_eq!(
        verdicts,
        [false, false, true, true, true, true],
        "counted by hash"
    );
    drop(p.stdin.take());
    let (_, err) = p.finish();
    assert!(
        err.contains("nest too deep to judge; counted by their hash"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
