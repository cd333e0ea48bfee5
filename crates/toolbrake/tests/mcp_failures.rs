//! The MCP proxy when its server fails: the client gets errors for what is in flight and
//! the proxy stops with a clear message; nothing hangs. Uses a misbehaving fake server
//! (`tests/e2e/fake_mcp_server.py`, Python only).

mod support;

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
    start_with(mode, None, &[])
}

/// `toolbrake mcp FLAGS` in front of the fake server in `mode`, isolated from the
/// developer's own configuration.
fn proxy_command(mode: &str, config: Option<&Path>, flags: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    cmd.arg("mcp")
        .args(flags)
        .args(["--", "python3"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/fake_mcp_server.py"))
        .arg(mode)
        .env_remove("TOOLBRAKE_CONFIG")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .env("HOME", "/nonexistent");
    cmd
}

fn start_with(mode: &str, config: Option<&Path>, flags: &[&str]) -> Proxy {
    let mut child = proxy_command(mode, config, flags)
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
    assert_eq!(init["result"]["serverInfo"]["name"], "toolbrake/fake");
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
        err.contains("toolbrake mcp: the MCP server closed its output")
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

    let dir = support::tmpdir("mcp-failures", "deep");
    let closed = dir.join("closed.toml");
    std::fs::write(&closed, "[store]\nfail_closed = true\n").unwrap();
    let mut p = start_with("ok", Some(&closed), &[]);
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

/// A tool's name reaches the proxy's log only redacted, with its control characters
/// escaped: a name holding a line break and terminal escapes can neither forge a line of
/// the log (`toolbrake: reloaded …`) nor drive the operator's terminal, and a secret in it
/// shows in neither format. The name is logged when its call's arguments nest too deep.
#[test]
fn a_tool_name_can_neither_forge_a_log_line_nor_show_a_secret() {
    let secret = "FakeOpenAi0123456789abcdef";
    let tool = format!(
        "work\ntoolbrake: reloaded /etc/toolbrake.toml: [breaker] now in force\u{1b}[2J\u{1b}]0;owned\u{7}\r sk-proj-{secret}"
    );
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":{},"arguments":{{"x":{deep}}}}}}}"#,
        serde_json::to_string(&tool).unwrap()
    );
    for flags in [&[][..], &["--log-format", "json"]] {
        let mut p = start_with("ok", None, flags);
        let stdin = p.stdin.as_mut().unwrap();
        writeln!(stdin, "{call}").unwrap();
        stdin.flush().unwrap();
        let r = p.recv();
        assert_eq!(r["id"], 7, "{r}");
        drop(p.stdin.take());
        let (_, err) = p.finish();
        assert!(err.contains("nest too deep to judge"), "{flags:?}: {err}");
        assert!(!err.contains(secret), "{flags:?}: the secret shows: {err}");
        assert!(
            !err.contains(['\u{1b}', '\u{7}', '\r']),
            "{flags:?}: raw control characters: {err:?}"
        );
        assert!(
            !err.lines().any(|l| l.starts_with("toolbrake: reloaded")),
            "{flags:?}: a forged line: {err}"
        );
        if flags.is_empty() {
            // The warning stays one line, the break shown as an escape.
            let line = err.lines().find(|l| l.contains("nest too deep")).unwrap();
            assert!(
                line.contains(r"work\ntoolbrake: reloaded") && line.contains(r"\u{1b}[2J"),
                "{line}"
            );
        } else {
            for l in err.lines() {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}"));
                assert!(v.is_object(), "{l}");
            }
        }
    }
}

/// The relay's own stdin and stdout come in every kind clients give: a socket pair (Node
/// clients; waited on in the reactor, here one socket for both), pipes, a pipe shared by
/// stdout and stderr (left to tokio's writer, so stderr never turns non-blocking), and
/// regular files (tokio's blocking reader and writer). Each answers the same session: the
/// first two identical calls run, the third is refused.
#[test]
fn the_relay_answers_over_sockets_pipes_a_shared_pipe_and_files() {
    use std::os::unix::net::UnixStream;
    let input: String = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(7),
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "work", "arguments": {"n": 7}}}),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "work", "arguments": {"n": 7}}}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect();
    // `shared`: through `sh -c 'exec … 2>&1'`, so that stderr is the very pipe stdout is.
    let proxy_with = |shared: bool| {
        let direct = proxy_command("ok", None, &[]);
        if !shared {
            return direct;
        }
        let mut sh = Command::new("sh");
        sh.args(["-c", r#"exec "$0" "$@" 2>&1"#])
            .arg(direct.get_program())
            .args(direct.get_args())
            .env_remove("TOOLBRAKE_CONFIG")
            .envs(direct.get_envs().filter_map(|(k, v)| Some((k, v?))));
        sh
    };
    let proxy = || proxy_with(false);
    // Answers by id, whatever their order.
    let check = |kind: &str, out: &str| {
        let answers: std::collections::HashMap<u64, Value> = out
            .lines()
            // (a shared pipe may carry stderr's lines too)
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| Some((v["id"].as_u64()?, v)))
            .collect();
        assert_eq!(answers.len(), 4, "{kind}: {out}");
        assert_eq!(
            answers[&7]["result"]["content"][0]["text"], "done",
            "{kind}"
        );
        assert_eq!(
            answers[&8]["result"]["content"][0]["text"], "done",
            "{kind}"
        );
        assert_eq!(answers[&9]["result"]["isError"], true, "{kind}");
        assert!(
            answers[&9].to_string().contains("called 3 times in a row"),
            "{kind}: {}",
            answers[&9]
        );
    };
    let read_until = |r: &mut dyn std::io::Read| {
        // Reads until the fourth answer (the relay keeps a socket open until its peer closes).
        let mut out = String::new();
        let mut r = BufReader::new(r);
        while out.lines().filter(|l| l.contains("\"id\"")).count() < 4 {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap() == 0 {
                break;
            }
            out.push_str(&line);
        }
        out
    };

    // A socket pair, one socket for stdin and stdout.
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    ours.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let mut child = proxy()
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(
            theirs.try_clone().unwrap(),
        )))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ours.write_all(input.as_bytes()).unwrap();
    let out = read_until(&mut ours);
    ours.shutdown(std::net::Shutdown::Write).unwrap();
    check("socket pair", &out);
    assert!(child.wait().unwrap().success());

    // Pipes; then stdout and stderr one pipe.
    for shared in [false, true] {
        let mut child = proxy_with(shared)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let out = read_until(&mut stdout);
        check(if shared { "shared pipe" } else { "pipes" }, &out);
        assert!(child.wait().unwrap().success());
    }

    // Regular files.
    let dir = support::tmpdir("mcp-failures", "relay-files");
    std::fs::write(dir.join("in.jsonl"), &input).unwrap();
    let status = proxy()
        .stdin(std::fs::File::open(dir.join("in.jsonl")).unwrap())
        .stdout(std::fs::File::create(dir.join("out.jsonl")).unwrap())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    check(
        "files",
        &std::fs::read_to_string(dir.join("out.jsonl")).unwrap(),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
