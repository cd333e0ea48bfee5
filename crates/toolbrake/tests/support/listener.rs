//! toolbrake's two HTTP listeners as a user runs them (`toolbrake ui`, `toolbrake mcp
//! --listen` in front of the Python stand-in server `tests/e2e/fake_mcp_server.py`), and a
//! raw HTTP/1.1 client that sends headers exactly as given (a browser after a DNS rebind
//! sends its own name as `Host`; an ordinary client library would not let a test do that).

use super::tmpdir;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running listener; killed when dropped.
pub struct Listener {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its own directory (configuration, store).
    pub dir: PathBuf,
    /// Everything it wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Listener {
    /// `host:port`, as a client names it.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// The stand-in MCP server.
pub fn fake_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/fake_mcp_server.py")
}

fn isolated(cmd: &mut Command, dir: &Path, cfg: &Path) {
    cmd.arg("--config")
        .arg(cfg)
        .current_dir(dir)
        .env_remove("TOOLBRAKE_CONFIG")
        .env_remove("TOOLBRAKE_UI_TOKEN")
        .env_remove("TOOLBRAKE_MCP_TOKEN")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .env("HOME", "/nonexistent");
}

/// `toolbrake mcp --listen 127.0.0.1:0 EXTRA… -- python3 fake_mcp_server.py MODE`.
pub fn mcp(name: &str, mode: &str, extra: &[&str]) -> Listener {
    let dir = tmpdir("listen-mcp", name);
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(&cfg, "").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    isolated(&mut cmd, &dir, &cfg);
    cmd.args(["mcp", "--listen", "127.0.0.1:0"])
        .args(extra)
        .args(["--", "python3"])
        .arg(fake_server())
        .arg(mode);
    start(cmd, dir)
}

/// `toolbrake ui --listen 127.0.0.1:0 EXTRA…` over a fresh SQLite store.
pub fn ui(name: &str, extra: &[&str]) -> Listener {
    let dir = tmpdir("listen-ui", name);
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        format!(
            "[streak]\nmax_repeats = 4\n\n[store]\nkind = \"sqlite\"\npath = \"{}\"\n",
            dir.join("state.db").display()
        ),
    )
    .unwrap();
    ui_at(&cfg, extra)
}

/// `toolbrake ui --listen 127.0.0.1:0 EXTRA…` over the configuration `cfg`, in its folder.
pub fn ui_at(cfg: &Path, extra: &[&str]) -> Listener {
    let dir = cfg.parent().unwrap().to_path_buf();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    isolated(&mut cmd, &dir, cfg);
    cmd.args(["ui", "--listen", "127.0.0.1:0"]).args(extra);
    start(cmd, dir)
}

fn start(mut cmd: Command, dir: PathBuf) -> Listener {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|w| w.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .parse()
        .unwrap();
    let stderr = Arc::new(Mutex::new(line));
    let sink = stderr.clone();
    // Keep draining stderr so the listener never blocks on it.
    std::thread::spawn(move || {
        let mut l = String::new();
        while err.read_line(&mut l).map(|n| n > 0).unwrap_or(false) {
            sink.lock().unwrap().push_str(&l);
            l.clear();
        }
    });
    Listener {
        child,
        addr,
        dir,
        stderr,
    }
}

/// An answer as read off the wire.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The status line and headers.
    pub head: String,
    /// The body (de-chunked), when the whole answer was read.
    pub body: String,
}

impl Answer {
    /// A header's value (the first, by case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// A request: `Host` as given (none when `None`), then `headers`, `Connection: close` and
/// the body's length.
pub fn request(
    method: &str,
    path: &str,
    host: Option<&str>,
    headers: &[(&str, &str)],
    body: &str,
) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\n");
    if let Some(h) = host {
        r.push_str(&format!("Host: {h}\r\n"));
    }
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    r.into_bytes()
}

/// Sends raw bytes and reads the answer within `within`: all of it (to the server's close)
/// when `whole`, else its head only. `Err` names what went wrong (no answer in time, a
/// close without an answer, a malformed status line).
pub fn exchange(
    addr: SocketAddr,
    raw: &[u8],
    whole: bool,
    within: Duration,
) -> Result<Answer, String> {
    let deadline = Instant::now() + within;
    let mut s = TcpStream::connect_timeout(&addr, within).map_err(|e| format!("connect: {e}"))?;
    s.set_write_timeout(Some(within)).unwrap();
    // A server may answer (and close) before reading everything: the answer still counts.
    let _ = s.write_all(raw);
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n");
        if !whole && head_end.is_some() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "no {} answer within {within:?}; got {:?}",
                if whole { "whole" } else { "" },
                String::from_utf8_lossy(&got)
            ));
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // A reset after the answer was written: what was read counts.
            Err(_) if !got.is_empty() => break,
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Err(format!("no complete answer head: {text:?}"));
    };
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|c| (100..600).contains(c))
        .ok_or_else(|| format!("not an HTTP/1.1 status line: {head:?}"))?;
    let mut answer = Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    };
    if answer
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        answer.body = dechunk(body);
    }
    Ok(answer)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(rest.get(..n.min(rest.len())).unwrap_or(""));
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// One whole exchange that must succeed within 10 s.
#[track_caller]
pub fn send(addr: SocketAddr, raw: &[u8]) -> Answer {
    exchange(addr, raw, true, Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"))
}

/// MCP `initialize`, as JSON text.
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// The headers of a Streamable HTTP POST, plus `extra`.
pub fn mcp_headers<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    h.extend_from_slice(extra);
    h
}

/// Starts a client session on an MCP listener (from its own loopback name): its id.
#[track_caller]
pub fn mcp_session(l: &Listener) -> String {
    let a = send(
        l.addr,
        &request(
            "POST",
            "/mcp",
            Some(&l.host()),
            &mcp_headers(&[]),
            INITIALIZE,
        ),
    );
    assert_eq!(a.status, 200, "{a:?}");
    a.header("mcp-session-id")
        .expect("a session id")
        .to_string()
}
