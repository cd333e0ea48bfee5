//! The dashboard in a real browser: headless Chromium driven over the DevTools protocol
//! (`--remote-debugging-pipe`: no port, no network), on a store filled by the session
//! service the hooks use. The feedback and reset buttons are driven with the keyboard and
//! the mouse, through the page's confirmation, and their effect is read back from the
//! store; every page is checked with axe-core (vendored from npm, `tests/ui_assets/`) in
//! the light and the dark theme, for the controls' names and the colours' contrast, and
//! at 200 % zoom for reflow. With `TOOLBRAKE_KEEP_SCREENSHOTS=DIR` the pages' screenshots
//! are kept there (how docs/dashboard*.png are made).

mod support;
use support::*;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use toolbrake::settings::{self, StoreKind};
use toolbrake_core::{Call, Engine, Feedback, Outcome, Verdict};
use toolbrake_session::Sessions;
use toolbrake_store::Store;

const AXE: &str = include_str!("ui_assets/axe.min.js");

struct Server {
    child: Child,
    base: String,
    dir: PathBuf,
    cfg: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(name: &str) -> Server {
    let dir = tmpdir("ui-browser", name);
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        format!(
            "# The team's settings.\n[streak]\nmax_repeats = 4\n\n[breaker]\non_limit = \"ask\"\n\n[store]\nkind = \"sqlite\"\npath = \"{}\"\n",
            dir.join("state.db").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .arg("--config")
        .arg(&cfg)
        .args(["ui", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLBRAKE_UI_TOKEN")
        .env_remove("TOOLBRAKE_MAX_REPEATS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_end_matches('/')
        .to_string();
    Server {
        child,
        base,
        dir,
        cfg,
    }
}

fn store_of(cfg: &Path) -> std::sync::Arc<dyn Store> {
    let s = settings::load(Some(cfg)).unwrap();
    s.store
        .open(StoreKind::Sqlite, &settings::process_env)
        .unwrap()
}

fn failed(text: &str) -> Outcome {
    Outcome {
        exit_code: Some(1),
        text: Some(text.into()),
        ..Outcome::default()
    }
}

/// Sessions as agents make them: a test loop with edits in between (asked about: the first
/// ask approved, the next declined), a fetch repeated until the streak brake stops it, and
/// a session working without a stop.
fn populate(cfg: &Path) {
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
fn write_tune(s: &Server, base: Option<&Path>, sweep: &[&str]) -> Value {
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
struct Browser {
    child: Child,
    to: std::fs::File,
    from: mpsc::Receiver<Value>,
    next: u64,
    session: Option<String>,
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

impl Browser {
    fn launch(dir: &Path) -> Browser {
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

    fn call(&mut self, method: &str, params: Value) -> Value {
        let v = self.send(method, params);
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    /// Sends a command and returns its whole reply (`result` or `error`).
    fn send(&mut self, method: &str, params: Value) -> Value {
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
    fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "awaitPromise": true, "returnByValue": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Opens `url` and waits until it has loaded (the page before it marked, so its own
    /// `complete` is not taken for the new one's).
    fn open(&mut self, url: &str) {
        self.eval("window.__left = true");
        self.call("Page.navigate", json!({"url": url}));
        self.wait_for("!window.__left && document.readyState === 'complete'");
    }

    /// Waits until `cond` is true; while a page is replaced, its evaluation may fail
    /// (the context it ran in is gone): that counts as not yet.
    fn wait_for(&mut self, cond: &str) {
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
    fn key(&mut self, key: &str, shift: bool) {
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
    fn tab_to(&mut self, selector: &str) {
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
    fn axe(&mut self) -> Vec<String> {
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
    fn unnamed_controls(&mut self) -> Vec<String> {
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

    fn scheme(&mut self, dark: bool) {
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

fn session_url(s: &Server, key: &str) -> String {
    format!("{}/sessions/{key}", s.base)
}

#[test]
fn the_pages_show_the_stops_in_words_and_pictures_and_pass_axe_in_both_themes() {
    let s = start("pages");
    populate(&s.cfg);
    let mut b = Browser::launch(&s.dir);
    b.open(&format!("{}/settings", s.base));
    let none = b.eval("document.getElementById('tune').innerText");
    assert!(
        none.as_str().unwrap().contains("No tune result at hand"),
        "{none}"
    );
    let tune = write_tune(&s, None, &[]);

    b.open(&format!("{}/", s.base));
    let summary = b.eval("document.getElementById('summary').textContent");
    assert_eq!(
        summary,
        "3 agents working; 2 sessions stopped in the last hour, 4 calls saved in the last 24 hours.",
        "the sentence counts what the store holds"
    );
    let stops = b.eval("document.getElementById('recent-stops').innerText");
    let stops = stops.as_str().unwrap();
    assert!(
        stops.contains("It ran `curl -s 'https://api.example.com/v1/items?token=[REDACTED]'`")
            && stops.contains("the streak brake stopped it"),
        "{stops}"
    );
    assert!(
        stops.contains("fix-tests")
            && stops.contains("It ran `pytest tests/test_a.py` 3 times while its result kept coming back the same or failing: toolbrake stopped it."),
        "the declined ask is a stop: {stops}"
    );
    assert!(!stops.contains("sk-live"), "never a secret: {stops}");
    // The charts: today's column holds the stopped sessions and the calls they stopped.
    let titles =
        b.eval("[...document.querySelectorAll('#chart-days title')].map(t => t.textContent)");
    let titles: Vec<&str> = titles
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(
        titles[0].ends_with(": 2 sessions stopped") && titles[1].ends_with(": 4 calls saved"),
        "{titles:?}"
    );
    let asks = b.eval("document.getElementById('chart-asks').getAttribute('aria-label')");
    assert_eq!(asks, "Asks: approved 1, declined 1, unanswered 0.");
    // The asks per day: today's column holds the approved and the declined ask, from the
    // sessions' own counts (the page and its JSON agree).
    let per_day = b.eval("document.getElementById('chart-asks-days').getAttribute('aria-label')");
    let per_day = per_day.as_str().unwrap();
    assert!(
        per_day.starts_with("Asks per day, last 7 days: ")
            && per_day.ends_with(": 1 approved, 1 declined, 0 unanswered."),
        "{per_day}"
    );
    let titles =
        b.eval("[...document.querySelectorAll('#chart-asks-days title')].map(t => t.textContent)");
    assert_eq!(titles.as_array().unwrap().len(), 2, "{titles}");
    let o = b.eval("fetch('/api/overview').then(r => r.json())");
    let today = o["per_day"].as_array().unwrap().last().unwrap();
    assert_eq!(
        today["asks"],
        json!({"approved": 1, "declined": 1, "unanswered": 0}),
        "{today}"
    );
    let tools = b.eval("[...document.querySelectorAll('#tools tbody tr')].map(r => r.innerText.replace(/\\s+/g, ' ').trim())");
    assert_eq!(tools[0], "Bash 3 2 0", "{tools}");
    // The page's script keeps it live: a new session appears without a reload.
    let before = b.eval("document.querySelectorAll('#working tbody tr').length");
    assert_eq!(before, 3);
    {
        let settings = settings::load(Some(&s.cfg)).unwrap();
        let store = store_of(&s.cfg);
        let engine = Engine::new(settings.engine);
        let args = json!({"command": "cargo build"});
        let call = Call {
            session: "newcomer",
            id: "n1",
            tool: "Bash",
            args: &args,
        };
        let d = Sessions::new(&engine, store.as_ref())
            .pre("newcomer", &call)
            .unwrap();
        assert!(d.runs());
    }
    b.wait_for("document.querySelectorAll('#working tbody tr').length === 4");
    b.wait_for("document.getElementById('summary').textContent.startsWith('4 agents working')");

    b.open(&session_url(&s, "fix-tests"));
    let doing = b.eval("document.getElementById('kept-doing').innerText");
    assert!(
        doing
            .as_str()
            .unwrap()
            .contains("Ran `pytest tests/test_a.py`")
            && doing
                .as_str()
                .unwrap()
                .contains("the same failure each time"),
        "{doing}"
    );
    let marks =
        b.eval("[...document.querySelectorAll('#chart-calls g')].map(g => g.dataset.verdict)");
    let marks: Vec<&str> = marks
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        marks.len(),
        12,
        "the store keeps the last 12 decisions: {marks:?}"
    );
    assert!(
        marks.contains(&"ask") || marks.contains(&"deny"),
        "{marks:?}"
    );
    let edits = b.eval("document.querySelectorAll('#chart-calls .f-edit').length");
    assert_eq!(edits, 6, "the edits are marked");
    // What each call returned: the test's failure over and over is waste, each edit (a
    // new change) new information; the picture, its words and the API say the same.
    let returned = b.eval(
        "[...document.querySelectorAll('#chart-calls g')].map(g => [g.querySelector('title').textContent, g.dataset.returned ?? null])",
    );
    let returned = returned.as_array().unwrap();
    let of = |tool: &str, r: &str| {
        returned
            .iter()
            .filter(|m| m[0].as_str().unwrap().starts_with(tool) && m[1] == r)
            .count()
    };
    assert!(
        of("Bash", "same") >= 3,
        "repeated failures are waste: {returned:?}"
    );
    assert_eq!(of("Edit", "new"), 6, "edits are new: {returned:?}");
    // The test's one new output: its first run after the person wrote again (a new turn
    // starts the breaker's memory afresh, so nothing was remembered of it).
    assert_eq!(of("Bash", "new"), 1, "{returned:?}");
    assert_eq!(of("Edit", "same"), 0, "{returned:?}");
    assert_eq!(
        b.eval("document.querySelectorAll('#chart-calls .r-same').length"),
        json!(of("Bash", "same"))
    );
    assert_eq!(
        b.eval("document.querySelectorAll('#chart-calls .r-new').length"),
        json!(7)
    );
    let words = b.eval("document.getElementById('chart-calls').getAttribute('aria-label')");
    assert!(
        words.as_str().unwrap().ends_with(&format!(
            "{} returned the same as last time (waste), 7 something new.",
            of("Bash", "same")
        )),
        "{words}"
    );
    let legend = b.eval("document.querySelector('#chart-calls ~ ul.legend').textContent");
    assert!(
        legend
            .as_str()
            .unwrap()
            .contains("waste: returned the same as last time")
            && legend.as_str().unwrap().contains("new information"),
        "{legend}"
    );
    let api = b.eval("fetch('/api/sessions/fix-tests').then(r => r.json())");
    let api: Vec<Option<&str>> = api["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["returned"].as_str())
        .collect();
    let page: Vec<Option<&str>> = returned.iter().map(|m| m[1].as_str()).collect();
    assert_eq!(api, page, "the API holds what the picture draws");

    b.open(&format!("{}/settings", s.base));
    let origin =
        b.eval("document.querySelector('[data-origin=\"streak.max_repeats\"]').textContent");
    assert_eq!(origin, "named file, line 3");
    let origin = b.eval("document.querySelector('[data-origin=\"breaker.window\"]').textContent");
    assert_eq!(origin, "the defaults");
    // The tune frontier: one point per setting swept, the recommendation ringed and said.
    let points = b.eval("document.querySelectorAll('#chart-frontier g').length");
    assert_eq!(points, json!(tune["settings"].as_array().unwrap().len()));
    let front = tune["settings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["frontier"] == true)
        .count();
    assert_eq!(
        b.eval("document.querySelectorAll('#chart-frontier circle.f-saved').length"),
        json!(front)
    );
    let rec = b.eval("document.getElementById('recommendation').textContent");
    assert!(rec.as_str().unwrap().starts_with("Recommended: #"), "{rec}");

    // Accessibility: every page, both themes.
    for dark in [false, true] {
        b.scheme(dark);
        for url in [
            format!("{}/", s.base),
            session_url(&s, "fix-tests"),
            format!("{}/settings", s.base),
        ] {
            b.open(&url);
            let bg = b.eval("getComputedStyle(document.body).backgroundColor");
            assert_eq!(
                bg == "rgb(20, 24, 30)",
                dark,
                "the theme follows the system: {bg}"
            );
            let violations = b.axe();
            assert!(
                violations.is_empty(),
                "{url} (dark: {dark}): {violations:#?}"
            );
            let unnamed = b.unnamed_controls();
            assert!(unnamed.is_empty(), "{url}: {unnamed:#?}");
        }
    }
    // 200 % zoom of a 1280-pixel window: 640 CSS pixels; nothing scrolls sideways.
    b.scheme(false);
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 640, "height": 800, "deviceScaleFactor": 2, "mobile": false}),
    );
    for url in [
        format!("{}/", s.base),
        session_url(&s, "fix-tests"),
        format!("{}/settings", s.base),
    ] {
        b.open(&url);
        let (sw, w) = (
            b.eval("document.documentElement.scrollWidth"),
            b.eval("window.innerWidth"),
        );
        assert!(
            sw.as_u64().unwrap() <= w.as_u64().unwrap(),
            "{url} scrolls sideways at 200 %: {sw} > {w}"
        );
    }
    drop(b);
    if let Some(dir) = std::env::var_os("TOOLBRAKE_KEEP_SCREENSHOTS") {
        let dir = PathBuf::from(dir);
        for (name, url, height, dark) in [
            ("dashboard.png", format!("{}/", s.base), 1500, false),
            ("dashboard-dark.png", format!("{}/", s.base), 1500, true),
            (
                "dashboard-session.png",
                session_url(&s, "fix-tests"),
                1500,
                false,
            ),
            (
                "dashboard-settings.png",
                format!("{}/settings", s.base),
                2700,
                false,
            ),
        ] {
            let shot = s.dir.join(name);
            let mut args = vec![
                format!("--window-size=1200,{height}"),
                "--hide-scrollbars".into(),
                format!("--screenshot={}", shot.display()),
            ];
            if dark {
                // The system's dark preference, as the page sees it.
                args.push("--blink-settings=preferredColorScheme=0".into());
            }
            args.push(url);
            let out = headless(&s.dir, &format!("profile-{name}"), &args);
            assert_success(&out);
            assert_drawn_png(&shot);
            std::fs::copy(&shot, dir.join(name)).unwrap();
        }
    }
}

#[test]
fn the_feedback_and_reset_buttons_ask_first_and_change_the_store() {
    let s = start("buttons");
    populate(&s.cfg);
    let store = store_of(&s.cfg);
    let mut b = Browser::launch(&s.dir);
    b.open(&session_url(&s, "fix-tests"));

    // With the keyboard: Tab to "It was stuck", Enter opens the confirmation; Escape
    // cancels it and nothing is stored.
    b.tab_to("button[data-feedback=stuck]");
    b.key("Enter", false);
    b.wait_for("document.getElementById('confirm').open");
    assert_eq!(
        b.eval("document.activeElement.id"),
        "confirm-no",
        "the dialog takes the focus, on its safe answer"
    );
    b.key("Escape", false);
    b.wait_for("!document.getElementById('confirm').open");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        toolbrake_session::feedback(store.as_ref(), "fix-tests").unwrap(),
        None
    );

    // Again, confirmed: Shift+Tab to "Yes, it was stuck", Enter.
    b.tab_to("button[data-feedback=stuck]");
    b.key("Enter", false);
    b.wait_for("document.getElementById('confirm').open");
    b.key("Tab", true);
    assert_eq!(
        b.eval("document.activeElement.textContent"),
        "Yes, it was stuck"
    );
    b.key("Enter", false);
    b.wait_for("document.getElementById('feedback').dataset.feedback === 'stuck'");
    assert_eq!(
        toolbrake_session::feedback(store.as_ref(), "fix-tests").unwrap(),
        Some(Feedback::Stuck)
    );

    // With the mouse: "It wasn't stuck", confirmed, replaces it; a reload shows it.
    b.eval("document.querySelector('button[data-feedback=mistaken]').click()");
    b.wait_for("document.getElementById('confirm').open");
    b.eval("document.getElementById('confirm-yes').click()");
    b.wait_for("document.getElementById('feedback').dataset.feedback === 'mistaken'");
    assert_eq!(
        toolbrake_session::feedback(store.as_ref(), "fix-tests").unwrap(),
        Some(Feedback::Mistaken)
    );
    b.open(&session_url(&s, "fix-tests"));
    let shown = b.eval("document.getElementById('feedback').textContent");
    assert!(
        shown
            .as_str()
            .unwrap()
            .starts_with("You said it wasn't stuck"),
        "{shown}"
    );

    // The tune recommendation, applied from the settings page through the confirmation:
    // written into the file, its comment kept. The sweep starts from a base with the
    // unchanged track off, which stops less waste than the track at 3 does.
    let base = s.dir.join("tune-base.toml");
    std::fs::write(&base, "[breaker]\nunchanged_limit = \"off\"\n").unwrap();
    let tune = write_tune(&s, Some(&base), &["breaker.unchanged_limit=3,4,5"]);
    assert_eq!(
        tune["recommended"]["changes"],
        json!({"breaker": {"unchanged_limit": 3}}),
        "{tune}"
    );
    let before = std::fs::read_to_string(&s.cfg).unwrap();
    assert!(!before.contains("unchanged_limit"), "{before}");
    b.open(&format!("{}/settings", s.base));
    b.tab_to("#apply-tune");
    b.key("Enter", false);
    b.wait_for("document.getElementById('confirm').open");
    b.key("Tab", true);
    b.key("Enter", false);
    b.wait_for("(document.querySelector('[data-origin=\"breaker.unchanged_limit\"]')?.textContent ?? '').startsWith('named file, line')");
    let text = std::fs::read_to_string(&s.cfg).unwrap();
    assert!(text.starts_with("# The team's settings."), "{text}");
    let written: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(
        written["breaker"]["unchanged_limit"].as_integer(),
        Some(3),
        "{text}"
    );

    // Reset, cancelled then confirmed.
    b.open(&session_url(&s, "fix-tests"));
    b.eval("document.querySelector('button[data-reset]').click()");
    b.wait_for("document.getElementById('confirm').open");
    b.eval("document.getElementById('confirm-no').click()");
    std::thread::sleep(Duration::from_millis(300));
    assert!(store.get("fix-tests").unwrap().is_some(), "cancelled: kept");
    b.eval("document.querySelector('button[data-reset]').click()");
    b.wait_for("document.getElementById('confirm').open");
    b.eval("document.getElementById('confirm-yes').click()");
    b.wait_for("document.getElementById('status').textContent.includes('was reset')");
    assert!(
        store.get("fix-tests").unwrap().is_none(),
        "reset: forgotten"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn feedback_is_refused_without_the_origin_for_an_unknown_session_or_an_unknown_word() {
    let s = start("feedback-api");
    populate(&s.cfg);
    let store = store_of(&s.cfg);
    let c = reqwest::Client::new();
    let post = |key: &str, body: &str, origin: Option<&str>| {
        let mut r = c
            .post(format!("{}/api/sessions/{key}/feedback", s.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r.send()
    };
    let own = s.base.clone();
    let r = post("refactor", r#"{"feedback":"stuck"}"#, None)
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a state change needs the page's Origin");
    let r = post(
        "refactor",
        r#"{"feedback":"stuck"}"#,
        Some("http://evil.example"),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    let r = post("refactor", r#"{"feedback":"bored"}"#, Some(&own))
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let msg = r.text().await.unwrap();
    assert!(
        msg.contains("\\\"mistaken\\\"") && msg.contains("bored"),
        "{msg}"
    );
    let r = post("nobody", r#"{"feedback":"stuck"}"#, Some(&own))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(store.get("nobody").unwrap().is_none(), "nothing is created");
    assert_eq!(
        toolbrake_session::feedback(store.as_ref(), "refactor").unwrap(),
        None
    );
    let r = post("refactor", r#"{"feedback":"stuck"}"#, Some(&own))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap(),
        json!({"session": "refactor", "feedback": "stuck"})
    );
    assert_eq!(
        toolbrake_session::feedback(store.as_ref(), "refactor").unwrap(),
        Some(Feedback::Stuck)
    );
    // The overview, as scripts read it.
    let o: Value = serde_json::from_str(
        &c.get(format!("{}/api/overview", s.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(o["per_hour"].as_array().unwrap().len(), 168);
    assert_eq!(o["per_day"].as_array().unwrap().len(), 7);
    assert_eq!(o["per_day"][6]["calls_saved"], 4, "{o}");
    assert_eq!(
        o["asks"],
        json!({"approved": 1, "declined": 1, "unanswered": 0})
    );
    assert!(!o.to_string().contains("sk-live"), "never a secret");
    let _ = &s.dir;
}
