//! The MCP proxy's memory bound, through the real binary in front of the stand-in servers
//! (`tests/e2e/fake_mcp_server.py` over stdio, `fake_mcp_http_server.py` over Streamable
//! HTTP): a server flooding a client that reads nothing is held back, a server message
//! that never ends is dropped as it is read, and a message over the 64 MiB limit from
//! either side becomes a JSON-RPC error while the relay goes on.

mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The proxy's peak resident memory must stay under this while a peer misbehaves.
const PEAK_LIMIT_KB: u64 = 200 << 10;

struct Proxy {
    child: Child,
    stdin: ChildStdin,
    stderr: Arc<Mutex<String>>,
    /// The HTTP server behind it, when it is one.
    server: Option<Child>,
    /// How many MiB that server said it wrote of its flood or its endless event.
    server_wrote: Arc<AtomicU64>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(s) = &mut self.server {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

fn stand_in(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e")
        .join(name)
}

/// `toolbrake mcp -- python3 fake_mcp_server.py MODE`, isolated from the developer's own
/// configuration; initialized, with its output left unread.
fn start(mode: &str) -> (Proxy, BufReader<ChildStdout>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    cmd.args(["mcp", "--", "python3"])
        .arg(stand_in("fake_mcp_server.py"))
        .arg(mode);
    start_proxy(cmd, None, "toolbrake/fake")
}

/// `toolbrake mcp --url` in front of `python3 fake_mcp_http_server.py MODE`.
fn start_url(mode: &str) -> (Proxy, BufReader<ChildStdout>) {
    let mut server = Command::new("python3")
        .arg(stand_in("fake_mcp_http_server.py"))
        .arg(mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let wrote = Arc::new(AtomicU64::new(0));
    let said = BufReader::new(server.stderr.take().unwrap());
    let sink = wrote.clone();
    std::thread::spawn(move || {
        for line in said.lines().map_while(Result::ok) {
            if let Some(n) = line
                .strip_prefix("wrote ")
                .and_then(|l| l.strip_suffix(" MiB"))
                .and_then(|n| n.parse().ok())
            {
                sink.store(n, Ordering::SeqCst);
            }
        }
    });
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    cmd.args(["mcp", "--url"])
        .arg(format!("http://127.0.0.1:{}/mcp", port.trim()));
    let (mut p, out) = start_proxy(cmd, Some(server), "toolbrake/fake-http");
    p.server_wrote = wrote;
    (p, out)
}

fn start_proxy(
    mut cmd: Command,
    server: Option<Child>,
    name: &str,
) -> (Proxy, BufReader<ChildStdout>) {
    let mut child = cmd
        .env_remove("TOOLBRAKE_CONFIG")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err = child.stderr.take().unwrap();
    let sink = stderr.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut p = Proxy {
        child,
        stdin,
        stderr,
        server,
        server_wrote: Arc::new(AtomicU64::new(0)),
    };
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let init: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], name);
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
    (p, out)
}

impl Proxy {
    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The proxy's resident memory now, in kB.
    fn rss_kb(&self) -> u64 {
        rss_kb(self.child.id())
    }

    /// The highest resident memory seen over `span` (sampled every 50 ms; stops early
    /// past the limit or when the proxy exits).
    fn peak_rss_kb(&mut self, span: Duration) -> u64 {
        let start = Instant::now();
        let mut peak = 0;
        while start.elapsed() < span && self.alive() {
            peak = peak.max(self.rss_kb());
            if peak > PEAK_LIMIT_KB {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("peak resident memory of the proxy: {} MB", peak >> 10);
        peak
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

/// A process's resident memory now, in kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Reads the proxy's output on a thread, line by line.
fn lines(out: BufReader<ChildStdout>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in out.lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

fn recv(rx: &mpsc::Receiver<String>) -> Value {
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("an answer, not a hang");
    serde_json::from_str(&line).unwrap()
}

fn call(id: Value, n: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "work", "arguments": {"n": n}}}).to_string()
}

#[test]
fn a_server_flooding_a_client_that_reads_nothing_is_held_back() {
    let _ = flood_is_held_back(start("flood"));
}

/// Over HTTP the server also says how much it wrote: held back, it could write little.
#[test]
fn an_http_server_flooding_a_client_that_reads_nothing_is_held_back() {
    let wrote = flood_is_held_back(start_url("flood"));
    assert!(
        wrote < 48,
        "the server wrote {wrote} MiB to a client that read nothing for 4 s"
    );
}

/// Returns how many MiB an HTTP server said it wrote while the client read nothing.
fn flood_is_held_back((mut p, out): (Proxy, BufReader<ChildStdout>)) -> u64 {
    // The client reads nothing: the proxy must stop reading the server, not buffer.
    let peak = p.peak_rss_kb(Duration::from_secs(4));
    assert!(
        peak <= PEAK_LIMIT_KB,
        "the proxy grew to {peak} kB while its client read nothing"
    );
    assert!(p.alive(), "{}", p.stderr());
    let wrote = p.server_wrote.load(Ordering::SeqCst);
    // When the client reads again, the flood flows.
    let rx = lines(out);
    for _ in 0..2000 {
        let note = recv(&rx);
        assert_eq!(note["method"], "notifications/message");
    }
    wrote
}

#[test]
fn an_http_server_event_that_never_ends_is_dropped_as_it_is_read() {
    let (mut p, _out) = start_url("endless");
    p.send(&call(json!(2), 2));
    // The proxy keeps reading the event (dropping it), with its memory bounded throughout.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut peak = 0;
    while p.server_wrote.load(Ordering::SeqCst) < 256 && Instant::now() < deadline {
        peak = peak.max(p.peak_rss_kb(Duration::from_millis(500)));
        assert!(
            peak <= PEAK_LIMIT_KB,
            "the proxy grew to {peak} kB reading an event that never ends"
        );
    }
    let wrote = p.server_wrote.load(Ordering::SeqCst);
    assert!(
        wrote >= 256,
        "the proxy read only {wrote} MiB of the event in 20 s"
    );
    assert!(p.alive(), "{}", p.stderr());
}

#[test]
fn a_server_line_that_never_ends_is_dropped_as_it_is_read() {
    let (mut p, _out) = start("endless");
    p.send(&call(json!(2), 2));
    let peak = p.peak_rss_kb(Duration::from_secs(4));
    assert!(
        peak <= PEAK_LIMIT_KB,
        "the proxy grew to {peak} kB reading a line that never ends"
    );
    assert!(p.alive(), "{}", p.stderr());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !p
        .stderr()
        .contains("the MCP server is writing a message over the 64 MiB limit")
    {
        assert!(Instant::now() < deadline, "no warning: {}", p.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_server_answer_over_the_limit_becomes_an_error_and_the_relay_goes_on() {
    let (mut p, out) = start("huge");
    let rx = lines(out);
    p.send(&call(json!(2), 2));
    let r = recv(&rx);
    assert_eq!(r["id"], 2, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("over the proxy's 64 MiB limit"), "{r}");
    // The server and the relay live on.
    p.send(&call(json!(3), 3));
    let r = recv(&rx);
    assert_eq!(r["id"], 3, "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "done", "{r}");
    assert!(p.alive());
    assert!(
        p.stderr().contains("bytes, over the 64 MiB limit: dropped"),
        "{}",
        p.stderr()
    );
}

#[test]
fn a_client_line_over_the_limit_gets_an_error_and_the_relay_goes_on() {
    let (mut p, out) = start("ok");
    let rx = lines(out);
    let filler = "x".repeat(65 << 20);
    // The id first (as most SDKs write it), and last (as the TypeScript SDK does).
    let id_first = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"work","arguments":{{"s":"{filler}"}}}}}}"#
    );
    let id_last = format!(
        r#"{{"method":"tools/call","params":{{"name":"work","arguments":{{"s":"{filler}"}}}},"jsonrpc":"2.0","id":"t-4"}}"#
    );
    drop(filler);
    p.send(&id_first);
    p.send(&call(json!(3), 3));
    p.send(&id_last);
    p.send(&call(json!(5), 5));
    let mut answers: Vec<Value> = (0..4).map(|_| recv(&rx)).collect();
    answers.sort_by_key(|a| a["id"].to_string());
    let by_id = |id: Value| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer for {id}: {answers:?}"))
            .clone()
    };
    for id in [json!(2), json!("t-4")] {
        let r = by_id(id);
        assert_eq!(r["error"]["code"], -32600, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("over the MCP proxy's 64 MiB limit"),
            "{r}"
        );
    }
    for id in [3, 5] {
        let r = by_id(json!(id));
        assert_eq!(r["result"]["content"][0]["text"], "done", "{r}");
    }
    assert!(p.alive(), "{}", p.stderr());
}

/// `mcp --listen`: a client whose `GET` stream reads nothing while the server floods it.
#[test]
fn a_listener_whose_client_reads_nothing_is_held_back() {
    use support::listener::{mcp, mcp_headers, mcp_session, request, send};
    let mut l = mcp("flood", "flood", &[]);
    let sid = mcp_session(&l);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let a = send(
        l.addr,
        &request(
            "POST",
            "/mcp",
            Some(&l.host()),
            &mcp_headers(&[("Mcp-Session-Id", &sid)]),
            initialized,
        ),
    );
    assert_eq!(a.status, 202, "{a:?}");
    // The stream of server messages, opened and never read.
    let mut stream = std::net::TcpStream::connect(l.addr).unwrap();
    stream
        .write_all(&request(
            "GET",
            "/mcp",
            Some(&l.host()),
            &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &sid)],
            "",
        ))
        .unwrap();
    let start = Instant::now();
    let mut peak = 0;
    while start.elapsed() < Duration::from_secs(4) && peak <= PEAK_LIMIT_KB {
        peak = peak.max(rss_kb(l.pid()));
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("peak resident memory of the listener: {} MB", peak >> 10);
    assert!(
        peak <= PEAK_LIMIT_KB,
        "the listener grew to {peak} kB while its client read nothing"
    );
    assert!(l.alive());
    // Read again, the flood flows.
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = vec![0u8; 1 << 20];
    let mut total = 0;
    while total < got.len() {
        let n = stream.read(&mut got[total..]).unwrap();
        assert!(n > 0, "the stream ended");
        total += n;
    }
    assert!(String::from_utf8_lossy(&got).contains("notifications/message"));
}
