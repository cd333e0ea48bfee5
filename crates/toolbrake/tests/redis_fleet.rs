//! A fleet on one Redis: several `toolbrake` processes see one session's counts as one.

mod support;
use support::*;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use toolbrake_store::testing::RedisServer;

/// A configuration on `server` with short timeouts (the tests of a server that goes down
/// wait on them).
fn config(dir: &Path, server: &RedisServer, extra: &str) -> PathBuf {
    config_timeouts(dir, server, ("300ms", "500ms"), extra)
}

fn config_timeouts(
    dir: &Path,
    server: &RedisServer,
    (connect, command): (&str, &str),
    extra: &str,
) -> PathBuf {
    let p = dir.join("toolbrake.toml");
    std::fs::write(
        &p,
        format!(
            "[store]\nkind = \"redis\"\nurl = \"{}\"\nkey_prefix = \"fleet:\"\nconnect_timeout = \"{connect}\"\ncommand_timeout = \"{command}\"\n{extra}",
            server.url()
        ),
    )
    .unwrap();
    p
}

fn bin(cfg: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    c.arg("--config")
        .arg(cfg)
        .env_remove("TOOLBRAKE_MAX_REPEATS");
    c
}

struct Serve {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
}

impl Serve {
    fn start(cfg: &Path) -> Serve {
        let mut child = bin(cfg)
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines() {
                if tx.send(l.unwrap()).is_err() {
                    break;
                }
            }
        });
        Serve {
            child,
            stdin,
            answers,
        }
    }

    fn send(&mut self, line: &str) -> Value {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        serde_json::from_str(&self.answers.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(session: &str, id: &str) -> String {
    format!(
        r#"{{"event":"call","session":"{session}","id":"{id}","tool":"search","args":{{"q":"weather"}}}}"#
    )
}

#[test]
fn two_serve_processes_on_one_redis_see_one_session() {
    let server = RedisServer::start();
    let dir = tmpdir("fleet", "two");
    let cfg = config(&dir, &server, "");
    let mut a = Serve::start(&cfg);
    let mut b = Serve::start(&cfg);
    assert_eq!(a.send(&call("s1", "1"))["verdict"], "allow");
    assert_eq!(b.send(&call("s1", "2"))["verdict"], "allow");
    let third = a.send(&call("s1", "3"));
    assert_eq!(
        third["verdict"], "deny",
        "the streak spans both processes: {third}"
    );
    assert_eq!(third["engine"], "streak");
    // And the operator sees it.
    let out = bin(&cfg).args(["sessions", "--json"]).output().unwrap();
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["key"], "s1");
    assert_eq!(list[0]["streak"]["count"], 3);
    assert!(bin(&cfg)
        .args(["sessions", "reset", "s1"])
        .status()
        .unwrap()
        .success());
    assert_eq!(
        b.send(&call("s1", "4"))["verdict"],
        "allow",
        "reset forgot the streak"
    );
}

#[test]
fn eight_processes_times_a_thousand_decisions_lose_no_update() {
    let server = RedisServer::start();
    let dir = tmpdir("fleet", "eight");
    // Lost updates are what this checks, not timeouts: on a loaded CI machine eight debug
    // processes hammering one key can wait longer than the short timeouts the down-server
    // tests use.
    let cfg = config_timeouts(
        &dir,
        &server,
        ("5s", "10s"),
        "[streak]\nmax_repeats = 1000000\n[breaker]\nenabled = false\n",
    );
    let mut files = Vec::new();
    for p in 0..8 {
        let f = dir.join(format!("events-{p}.jsonl"));
        let mut text = String::new();
        for i in 0..1000 {
            text.push_str(&call("shared", &format!("p{p}-{i}")));
            text.push('\n');
        }
        std::fs::write(&f, text).unwrap();
        files.push(f);
    }
    let children: Vec<Child> = files
        .iter()
        .map(|f| {
            bin(&cfg)
                .arg("replay")
                .arg(f)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Each child's output is read on its own thread, so none of them waits on a full pipe
    // while another is read: all eight run at once.
    let waits: Vec<_> = children
        .into_iter()
        .map(|c| std::thread::spawn(move || c.wait_with_output().unwrap()))
        .collect();
    for w in waits {
        let out = w.join().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let errors: Vec<&str> = stdout
            .lines()
            .filter(|l| l.contains("\"error\""))
            .take(3)
            .collect();
        assert!(
            out.status.success(),
            "a replay failed: {errors:?} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = bin(&cfg).args(["sessions", "--json"]).output().unwrap();
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        list[0]["streak"]["count"], 8000,
        "8 × 1000 decisions, every one counted"
    );
}

#[test]
fn while_redis_is_down_the_policy_applies_and_serve_recovers_without_restarting() {
    let server = RedisServer::start();
    let port = server.port;
    let dir = tmpdir("fleet", "down");
    let open_cfg = config(&dir, &server, "");
    let closed_dir = dir.join("closed");
    std::fs::create_dir_all(&closed_dir).unwrap();
    let closed_cfg = config(&closed_dir, &server, "fail_closed = true\n");
    let mut open = Serve::start(&open_cfg);
    let mut closed = Serve::start(&closed_cfg);
    assert_eq!(open.send(&call("s", "1"))["verdict"], "allow");
    drop(server);
    let a = open.send(&call("s", "2"));
    assert_eq!(a["verdict"], "allow", "fail-open: {a}");
    assert!(
        a["degraded"]
            .as_str()
            .unwrap()
            .contains(&format!("redis 127.0.0.1:{port}")),
        "{a}"
    );
    let d = closed.send(&call("s", "3"));
    assert_eq!(d["verdict"], "deny", "fail-closed: {d}");
    assert_eq!(d["code"], "STORE_UNAVAILABLE");
    assert!(d["message"].as_str().unwrap().contains("fail_closed"));
    // Redis comes back on the same port: the same serve process judges again.
    let _server = RedisServer::start_on(port, &[]);
    let back = open.send(&call("t", "4"));
    assert_eq!(back["verdict"], "allow");
    assert!(back.get("degraded").is_none(), "{back}");
    assert_eq!(open.send(&call("t", "5"))["verdict"], "allow");
    assert_eq!(
        open.send(&call("t", "6"))["verdict"],
        "deny",
        "state is kept again"
    );
}

#[test]
fn hooks_share_state_through_redis_too() {
    let server = RedisServer::start();
    let dir = tmpdir("fleet", "hooks");
    let cfg = config(&dir, &server, "");
    let pre = |id: &str| {
        serde_json::json!({"session_id": "h1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "echo same"}, "tool_use_id": id})
        .to_string()
    };
    let mut outs = Vec::new();
    for id in ["a", "b", "c"] {
        let mut c = bin(&cfg)
            .args(["hook", "claude"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin
            .take()
            .unwrap()
            .write_all(pre(id).as_bytes())
            .unwrap();
        outs.push(String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap());
    }
    assert!(outs[0].is_empty() && outs[1].is_empty());
    assert!(
        outs[2].contains("\"permissionDecision\":\"deny\""),
        "{}",
        outs[2]
    );
}
