//! A running `serve` or `mcp` takes an edited `toolbrake.toml` into use: whichever way the
//! new version arrives (a rename, a rewrite in place with the old size and modification
//! time put back, a symlink pointed elsewhere), and for every table it says it reloaded
//! (`mcp --fetch-tool`: `[fetch]` too, against a real HTTP server on 127.0.0.1).

mod support;
use support::*;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

/// Two configurations of the same length: the streak brake at 10, then at 2.
const LOOSE: &str = "[breaker]\nenabled = false\n[streak]\nmax_repeats = 10\n";
const TIGHT: &str = "[breaker]\nenabled = false\n[streak]\nmax_repeats =  2\n";

/// A process speaking JSON lines on stdin/stdout, its stderr kept for the end.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Peer {
    fn start(mut cmd: Command) -> Peer {
        let mut child = cmd
            .env_remove("TOOLBRAKE_CONFIG")
            .env("XDG_CONFIG_HOME", "/nonexistent")
            .env("HOME", "/nonexistent")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines() {
                if tx.send(l.unwrap()).is_err() {
                    break;
                }
            }
        });
        Peer {
            child,
            stdin,
            lines,
        }
    }

    fn ask(&mut self, v: &Value) -> Value {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(15))
            .expect("an answer, not a hang");
        serde_json::from_str(&line).unwrap()
    }

    /// Ends the process and returns its stderr.
    fn stderr(mut self) -> String {
        drop(self.stdin);
        let _ = self.child.kill();
        let out = self.child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

fn serve(cfg: &Path) -> Peer {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    cmd.arg("--config").arg(cfg).args(["serve", "--stdio"]);
    Peer::start(cmd)
}

fn verdict(p: &mut Peer, id: &str) -> String {
    let v = p.ask(&json!({"event": "call", "session": "s", "id": id, "tool": "search", "args": {"q": "weather"}}));
    v["verdict"].as_str().unwrap().to_string()
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// Writes `text` to `path` (truncating it in place) and gives it modification time `at`.
fn write_dated(path: &Path, text: &str, at: SystemTime) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.set_modified(at).unwrap();
}

/// A way a new version of the file (in a directory) arrives at its path.
type Swap = fn(&Path, &Path);

#[test]
fn a_new_version_with_the_same_size_and_modification_time_is_reloaded() {
    assert_eq!(LOOSE.len(), TIGHT.len());
    let swaps: [(&str, Swap); 3] = [
        // `rsync -a`, or any atomic save: another file renamed over it, dated the same.
        ("renamed-over", |dir, cfg| {
            let next = dir.join("next.toml");
            write_dated(&next, TIGHT, modified(cfg));
            std::fs::rename(&next, cfg).unwrap();
        }),
        // `cp -p` onto it: the same file rewritten, its modification time put back.
        ("rewritten-in-place", |_, cfg| {
            write_dated(cfg, TIGHT, modified(cfg));
        }),
        // The configuration is a symlink, atomically pointed at another file, dated the same.
        ("symlink-swapped", |dir, cfg| {
            let b = dir.join("b.toml");
            write_dated(&b, TIGHT, modified(cfg));
            let link = dir.join("link.tmp");
            std::os::unix::fs::symlink(&b, &link).unwrap();
            std::fs::rename(&link, cfg).unwrap();
        }),
    ];
    for (name, swap) in swaps {
        let dir = tmpdir("reload", name);
        let cfg = dir.join("toolbrake.toml");
        if name == "symlink-swapped" {
            std::fs::write(dir.join("a.toml"), LOOSE).unwrap();
            std::os::unix::fs::symlink(dir.join("a.toml"), &cfg).unwrap();
        } else {
            std::fs::write(&cfg, LOOSE).unwrap();
        }
        let mut p = serve(&cfg);
        for id in ["1", "2", "3"] {
            assert_eq!(verdict(&mut p, id), "allow", "{name}");
        }
        swap(&dir, &cfg);
        assert_eq!(
            verdict(&mut p, "4"),
            "deny",
            "{name}: the next event uses max_repeats = 2"
        );
        let err = p.stderr();
        assert!(
            err.contains("reloaded") && err.contains("[streak] now in force"),
            "{name}: {err}"
        );
    }
}

/// An HTTP server on 127.0.0.1 with one JSON document at `/data.json` (19 bytes).
fn http_server() -> String {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/data.json",
                axum::routing::get(|| async {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        "{\"rows\": [1, 2, 3]}",
                    )
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

#[test]
fn mcp_reloads_the_fetch_settings_and_says_only_what_it_reloaded() {
    let base = http_server();
    let dir = tmpdir("reload", "mcp-fetch");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(&cfg, "[fetch]\nallow_private_hosts = true\n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    cmd.arg("--config")
        .arg(&cfg)
        .args(["mcp", "--fetch-tool"])
        .current_dir(&work);
    let mut p = Peer::start(cmd);
    let init = p.ask(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        "toolbrake/web-fetch-file"
    );
    let mut fetch = |id: u64, path: &str| {
        let v = p.ask(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "web_fetch_file", "arguments": {"url": format!("{base}/data.json"), "path": path}}}));
        v["result"].clone()
    };

    let r = fetch(1, "a.json");
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["bytes"], 19, "{r}");

    std::fs::write(&cfg, "[fetch]\nallow_private_hosts = false\n").unwrap();
    let r = fetch(2, "b.json");
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("refusing to fetch 127.0.0.1") && text.contains("allow_private_hosts"),
        "{text}"
    );
    assert!(!work.join("b.json").exists());

    // A [store] edit cannot reach a running proxy: it is not claimed reloaded.
    std::fs::write(&cfg, "[fetch]\nmax_bytes = 5\n[store]\nidle_ttl = \"1h\"\n").unwrap();
    let r = fetch(3, "c.json");
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        (
            &r["structuredContent"]["bytes"],
            &r["structuredContent"]["truncated"]
        ),
        (&json!(5), &json!(true)),
        "{r}"
    );
    assert_eq!(std::fs::read(work.join("c.json")).unwrap().len(), 5);

    let err = p.stderr();
    assert!(
        err.contains("reloaded") && err.contains(": [fetch] now in force"),
        "{err}"
    );
    assert!(
        err.contains(
            "[fetch] now in force; [store] changed too and take effect only when toolbrake restarts"
        ),
        "{err}"
    );
}
