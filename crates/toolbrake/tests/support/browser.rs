//! The dashboard's browser tests' peers: `toolbrake ui` on a store filled by the session
//! service the hooks use, and headless Chromium driven over the DevTools protocol
//! (`--remote-debugging-pipe`: no port, no network), with axe-core (vendored from npm,
//! `tests/ui_assets/`) to check a page.

pub use super::ui::Server;
use super::{assert_success, chromium, tmpdir};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use toolbrake::settings::{self, StoreKind};
use toolbrake_core::{Call, Engine, Outcome, Verdict};
use toolbrake_session::Sessions;
use toolbrake_store::Store;

pub const AXE: &str = include_str!("../ui_assets/axe.min.js");

pub fn start(name: &str) -> Server {
    super::ui::serve(
        tmpdir("ui-browser", name),
        "# The team's settings.\n[streak]\nmax_repeats = 4\n\n[breaker]\non_limit = \"ask\"\n",
        &[],
    )
}

pub fn store_of(cfg: &Path) -> std::sync::Arc<dyn Store> {
    let s = settings::load(Some(cfg)).unwrap();
    s.store
        .open(StoreKind::Sqlite, &settings::process_env)
        .unwrap()
}

pub fn failed(text: &str) -> Outcome {
    Outcome {
        exit_code: Some(1),
        text: Some(text.into()),
        ..Outcome::default()
    }
}

/// Sessions as agents make them: a test loop with edits in between (asked about: the first
/// ask approved, the next declined), a fetch repeated until the streak brake stops it, and
/// a session working without a stop.
pub fn populate(cfg: &Path) {
    let s = settings::load(Some(cfg)).unwrap();
    let store = store_of(cfg);
    let engine = Engine::new(s.engine);
    let sessions = Sessions::new(&engine, store.as_ref());
    let mut answers = [true, false].into_iter();
    let mut run = |key: &str, id: String, tool: &str, args: Value, outcome: Outcome| {
        let call = Call {
            session: key,
            id: &id,
            tool,
            args: &args,
        };
        let d = sessions.pre(key, &call).unwrap();
        let runs = if d.verdict == Verdict::Ask {
            let yes = answers.next().unwrap_or(false);
            sessions.answer(key, &id, yes).unwrap().runs()
        } else {
            d.runs()
        };
        if runs {
            sessions.post(key, &id, &outcome).unwrap();
        }
    };
    let failure =
        "FAILED tests/test_a.py::test_parse - AssertionError: expected 3, got 2\n1 failed in 0.12s";
    for i in 0..10 {
        if i == 5 {
            // The person writes again: a new turn (the approval's exemption ends).
            sessions.user_message("fix-tests").unwrap();
        }
        run(
            "fix-tests",
            format!("e{i}"),
            "Edit",
            json!({"file_path": "/w/src/parse.py", "old_string": format!("x = {i}"), "new_string": format!("x = {}", i + 1)}),
            Outcome::success("The file /w/src/parse.py has been updated."),
        );
        run(
            "fix-tests",
            format!("t{i}"),
            "Bash",
            json!({"command": "pytest tests/test_a.py"}),
            failed(failure),
        );
    }
    for i in 0..6 {
        run(
            "docs-fetch",
            format!("f{i}"),
            "Bash",
            json!({"command": "curl -s 'https://api.example.com/v1/items?token=sk-live-abcdef1234567890abcd'"}),
            Outcome::success("{\"items\": []}"),
        );
    }
    for (i, f) in ["src/main.rs", "src/lib.rs", "Cargo.toml", "README.md"]
        .iter()
        .enumerate()
    {
        run(
            "refactor",
            format!("r{i}"),
            "Read",
            json!({"file_path": format!("/w/{f}")}),
            Outcome::success(format!("contents of {f}")),
        );
    }
}

/// A tune result where the settings page finds it: `toolbrake tune --json` over the
/// bundled trajectories, from the base configuration `base` (the dashboard's when
/// `None`), with these `--sweep` arguments.
pub fn write_tune(s: &Server, base: Option<&Path>, sweep: &[&str]) -> Value {
    let corpus =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/trajectories/calls.jsonl.gz");
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    c.arg("--config")
        .arg(base.unwrap_or(&s.cfg))
        .args(["tune", "--from", "trajectory", "--json"]);
    for sw in sweep {
        c.args(["--sweep", sw]);
    }
    let out = c.arg(corpus).output().unwrap();
    assert_success(&out);
    std::fs::write(s.dir.join("toolbrake-tune.json"), &out.stdout).unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Headless Chromium over `--remote-debugging-pipe`: commands on fd 3, replies on fd 4,
/// each a JSON text ended by a NUL byte.
pub struct Browser {
    pub child: Child,
    pub to: std::fs::File,
    pub from: mpsc::Receiver<Value>,
    pub next: u64,
    pub session: Option<String>,
}

pub fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

impl Browser {
    pub fn launch(dir: &Path) -> Browser {
        let (cmd_r, cmd_w) = pipe();
        let (out_r, out_w) = pipe();
        let mut c = Command::new(chromium());
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
            "--window-size=1280,900",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("cdp-profile").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // The child's fd 3 reads the commands, its fd 4 writes the replies: copied above 10
        // first (a pipe may itself be fd 3 or 4), then onto 3 and 4 (dup2 clears
        // close-on-exec on the copies; the originals close at exec).
        unsafe {
            c.pre_exec(move || {
                let a = libc::fcntl(cmd_r, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(out_w, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c.spawn().unwrap();
        unsafe {
            libc::close(cmd_r);
            libc::close(out_w);
        }
        let to = unsafe { std::fs::File::from_raw_fd(cmd_w) };
        let mut replies = unsafe { std::fs::File::from_raw_fd(out_r) };
        let (tx, from) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = replies.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|b| *b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg[..end]) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut b = Browser {
            child,
            to,
            from,
            next: 0,
            session: None,
        };
        let target = b.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = b.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        b.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        b.call("Page.enable", json!({}));
        b
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let v = self.send(method, params);
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    /// Sends a command and returns its whole reply (`result` or `error`).
    pub fn send(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap_or_else(|e| {
            panic!(
                "chromium is gone ({e}) at {method} {params}",
                params = msg["params"]
                    .to_string()
                    .chars()
                    .take(200)
                    .collect::<String>()
            )
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .from
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no reply to {method} within 60 s"));
            if v["id"] == id {
                return v;
            }
        }
    }

    /// The value of a JavaScript expression (a promise is awaited).
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "awaitPromise": true, "returnByValue": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Opens `url` and waits until it has loaded (the page before it marked, so its own
    /// `complete` is not taken for the new one's).
    pub fn open(&mut self, url: &str) {
        self.eval("window.__left = true");
        self.call("Page.navigate", json!({"url": url}));
        self.wait_for("!window.__left && document.readyState === 'complete'");
    }

    /// Waits until `cond` is true; while a page is replaced, its evaluation may fail
    /// (the context it ran in is gone): that counts as not yet.
    pub fn wait_for(&mut self, cond: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let r = self.send(
                "Runtime.evaluate",
                json!({"expression": format!("!!({cond})"), "returnByValue": true}),
            );
            if r["result"]["result"]["value"] == true {
                return;
            }
            assert!(Instant::now() < deadline, "never true: {cond}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Presses a key: `Tab`, `Enter`, `Escape`; `shift` held or not.
    pub fn key(&mut self, key: &str, shift: bool) {
        let (code, text) = match key {
            "Tab" => (9, ""),
            "Enter" => (13, "\r"),
            "Escape" => (27, ""),
            other => panic!("no key {other}"),
        };
        let modifiers = if shift { 8 } else { 0 };
        let mut down = json!({"type": "keyDown", "key": key, "code": key, "windowsVirtualKeyCode": code, "modifiers": modifiers});
        if !text.is_empty() {
            down["text"] = json!(text);
        }
        self.call("Input.dispatchKeyEvent", down);
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": key, "windowsVirtualKeyCode": code, "modifiers": modifiers}),
        );
    }

    /// Presses Tab until the focused element matches `selector` (at most 60 times).
    pub fn tab_to(&mut self, selector: &str) {
        for _ in 0..60 {
            self.key("Tab", false);
            let js =
                format!("document.activeElement && document.activeElement.matches({selector:?})");
            if self.eval(&js) == true {
                return;
            }
        }
        panic!("{selector} is not reachable with Tab");
    }

    /// axe-core's WCAG 2.1 A and AA violations on the page: `id: targets`.
    pub fn axe(&mut self) -> Vec<String> {
        if self.eval("typeof axe") != "object" {
            self.eval(AXE);
        }
        let v = self.eval(
            "axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})\
             .then(r => r.violations.map(v => v.id + ': ' + v.nodes.slice(0, 4).map(n => n.target.join(' ') + ' ' + (n.failureSummary || '').replace(/\\s+/g, ' ')).join(' | ')))",
        );
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    }

    /// Controls in the accessibility tree without a name (role: what).
    pub fn unnamed_controls(&mut self) -> Vec<String> {
        let tree = self.call("Accessibility.getFullAXTree", json!({}));
        let controls = [
            "button", "link", "textbox", "checkbox", "combobox", "menuitem",
        ];
        tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["ignored"] != true)
            .filter(|n| controls.contains(&n["role"]["value"].as_str().unwrap_or("")))
            .filter(|n| n["name"]["value"].as_str().unwrap_or("").trim().is_empty())
            .map(|n| format!("{}: {n}", n["role"]["value"]))
            .collect()
    }

    pub fn scheme(&mut self, dark: bool) {
        self.call(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": if dark { "dark" } else { "light" }}]}),
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn session_url(s: &Server, key: &str) -> String {
    format!("{}/sessions/{key}", s.base)
}
