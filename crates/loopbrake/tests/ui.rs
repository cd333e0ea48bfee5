//! `loopbrake ui` over HTTP: the real server (the `loopbrake` binary) driven with reqwest,
//! every endpoint, the token, the Origin check, atomic edits, refused edits; and `serve`
//! picking up an edit while it runs.

mod support;
use support::*;

use loopbrake::settings::{self, StoreKind};
use loopbrake_core::{Call, Engine, Outcome};
use loopbrake_session::Sessions;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

const CONFIG: &str = "# The team's settings: keep this comment.\n[streak]\nmax_repeats = 4 # four is enough\n\n[breaker]\non_limit = \"deny\"\n";

fn start(name: &str, extra: &[&str]) -> Server {
    let dir = tmpdir("ui", name);
    let cfg = dir.join("loopbrake.toml");
    std::fs::write(
        &cfg,
        format!(
            "{CONFIG}\n[store]\nkind = \"sqlite\"\npath = \"{}\"\n",
            dir.join("state.db").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopbrake"))
        .arg("--config")
        .arg(&cfg)
        .args(["ui", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("LOOPBRAKE_UI_TOKEN")
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

/// Two sessions in the store the dashboard reads, made by the session service the hooks use.
fn populate(cfg: &Path) {
    let s = settings::load(Some(cfg)).unwrap();
    let store = s
        .store
        .open(StoreKind::Sqlite, &settings::process_env)
        .unwrap();
    let engine = Engine::new(s.engine);
    let sessions = Sessions::new(&engine, store.as_ref());
    let args = json!({"command": "curl -s 'https://api.example.com/v1?token=sk-live-abcdef1234567890abcd'"});
    for i in 0..5 {
        let id = format!("c{i}");
        let call = Call {
            session: "looping",
            id: &id,
            tool: "Bash",
            args: &args,
        };
        let d = sessions.pre("looping", &call).unwrap();
        if d.runs() {
            sessions
                .post("looping", &id, &Outcome::success("{\"rows\": 3}"))
                .unwrap();
        }
    }
    let quiet = json!({"command": "ls"});
    let call = Call {
        session: "quiet/one #2",
        id: "q1",
        tool: "Bash",
        args: &quiet,
    };
    let _ = sessions.pre("quiet/one #2", &call).unwrap();
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn get_text(c: &reqwest::Client, url: impl reqwest::IntoUrl) -> String {
    c.get(url).send().await.unwrap().text().await.unwrap()
}

async fn get_json(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = c.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (
        status,
        serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null),
    )
}

async fn put_config(
    c: &reqwest::Client,
    s: &Server,
    body: &Value,
    origin: Option<&str>,
) -> (u16, Value) {
    let mut req = c
        .put(format!("{}/api/config", s.base))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (
        status,
        serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn every_endpoint_answers_and_sessions_appear_redacted() {
    let s = start("endpoints", &[]);
    populate(&s.cfg);
    let c = client();
    let (status, v) = get_json(&c, &format!("{}/api/sessions", s.base)).await;
    assert_eq!(status, 200, "{v}");
    let rows = v["sessions"].as_array().unwrap();
    let looping = rows.iter().find(|r| r["key"] == "looping").unwrap();
    assert_eq!(
        looping["streak"]["count"], 5,
        "refusals extend the streak: {looping}"
    );
    assert!(looping["stopped"].as_u64().unwrap() >= 1, "{looping}");
    assert_eq!(looping["gated"], true);
    assert!(
        v.to_string()
            .contains("net:api.example.com/v1?token=[REDACTED]"),
        "{v}"
    );
    assert!(
        !v.to_string().contains("sk-live-abcdef1234567890abcd"),
        "never a secret: {v}"
    );

    let (status, one) = get_json(&c, &format!("{}/api/sessions/looping", s.base)).await;
    assert_eq!(status, 200);
    let log = one["log"].as_array().unwrap();
    assert_eq!(log.len(), 5);
    assert_eq!(log[0]["verdict"], "allow");
    assert_eq!(log[0]["outcome"], "ok");
    assert_eq!(log[3]["verdict"], "deny", "max_repeats = 4");
    assert_eq!(log[3]["code"], "LOOP_BRAKE");
    assert!(!one.to_string().contains("sk-live-abcdef1234567890abcd"));

    // A key with a slash, a space and a hash, percent-encoded in the path.
    let (status, q) = get_json(&c, &format!("{}/api/sessions/quiet%2Fone%20%232", s.base)).await;
    assert_eq!(
        (status, q["key"].as_str()),
        (200, Some("quiet/one #2")),
        "{q}"
    );

    // The pages render the same data as HTML, escaped.
    let page = get_text(&c, format!("{}/", s.base)).await;
    assert!(
        page.contains("looping") && page.contains("/sessions/quiet%2Fone%20%232"),
        "{page}"
    );
    let page = get_text(&c, format!("{}/sessions/looping", s.base)).await;
    assert!(page.contains("LOOP_BRAKE") && page.contains("Recent decisions"));
    let settings_page = get_text(&c, format!("{}/settings", s.base)).await;
    assert!(
        settings_page.contains("name=\"streak.max_repeats\"")
            && settings_page.contains("value=\"4\""),
        "{settings_page}"
    );
    let js = c
        .get(format!("{}/assets/app.js", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        js.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );

    let (status, cfg) = get_json(&c, &format!("{}/api/config", s.base)).await;
    assert_eq!(status, 200);
    assert_eq!(cfg["effective"]["streak"]["max_repeats"], 4);
    assert_eq!(cfg["defaults"]["streak"]["max_repeats"], 3);
    assert_eq!(cfg["effective"]["breaker"]["on_limit"], "deny");
    assert!(cfg["effective"]["store"]["path"].is_string());

    // Reset: gone, then not found.
    let r = c
        .delete(format!("{}/api/sessions/looping", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = c
        .delete(format!("{}/api/sessions/looping", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let (_, v) = get_json(&c, &format!("{}/api/sessions", s.base)).await;
    assert!(v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["key"] != "looping"));
}

#[tokio::test(flavor = "multi_thread")]
async fn edits_are_validated_whole_written_atomically_and_keep_comments() {
    let s = start("edits", &[]);
    let c = client();
    let before = std::fs::read(&s.cfg).unwrap();
    // Invalid: 400 naming the key, the value and the rule; the file is untouched.
    for (edit, key) in [
        (json!({"streak": {"max_repeats": 0}}), "streak.max_repeats"),
        (
            json!({"breaker": {"limits": {"net": 1}}}),
            "breaker.limits.\"net\"",
        ),
        (json!({"breaker": {"windw": 8}}), "breaker.windw"),
        (json!({"strek": {}}), "strek"),
    ] {
        let (status, v) = put_config(&c, &s, &edit, None).await;
        assert_eq!(status, 400, "{edit}: {v}");
        assert_eq!(v["error"]["key"], key, "{v}");
        assert!(v["error"]["rule"].is_string() && v["error"]["message"].is_string());
        assert_eq!(
            std::fs::read(&s.cfg).unwrap(),
            before,
            "the file is untouched"
        );
    }
    let r = c
        .put(format!("{}/api/config", s.base))
        .body("max_repeats=5")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);

    #[cfg(unix)]
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&s.cfg).unwrap().ino()
    };
    let (status, v) = put_config(
        &c,
        &s,
        &json!({"streak": {"max_repeats": 5}, "breaker": {"warn_at": "off", "limits": {"host": 20}}}),
        Some(&s.base),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["effective"]["streak"]["max_repeats"], 5);
    assert_eq!(v["effective"]["breaker"]["limits"]["host"], 20);
    assert_eq!(
        v["effective"]["breaker"]["limits"]["exact"], 12,
        "other limits keep their defaults"
    );
    let text = std::fs::read_to_string(&s.cfg).unwrap();
    assert!(
        text.starts_with("# The team's settings: keep this comment."),
        "{text}"
    );
    assert!(text.contains("max_repeats = 5 # four is enough"), "{text}");
    assert!(text.contains("[store]"), "{text}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        assert_ne!(
            std::fs::metadata(&s.cfg).unwrap().ino(),
            inode,
            "replaced by a rename, not rewritten in place"
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(&s.dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
    // The file is what `config check` accepts.
    let out = Command::new(env!("CARGO_BIN_EXE_loopbrake"))
        .args(["config", "check"])
        .arg(&s.cfg)
        .output()
        .unwrap();
    assert_success(&out);
    // null removes a key: its default applies again.
    let (status, v) = put_config(&c, &s, &json!({"breaker": {"warn_at": null}}), None).await;
    assert_eq!(
        (status, v["effective"]["breaker"]["warn_at"].as_u64()),
        (200, Some(7))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_is_required_when_set_and_other_origins_cannot_change_anything() {
    let s = start("token", &["--token", "s3cret-token"]);
    let c = client();
    let r = c
        .get(format!("{}/api/sessions", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = c.get(format!("{}/", s.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = c
        .get(format!("{}/api/sessions", s.base))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = c
        .get(format!("{}/api/sessions", s.base))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // ?token= once: a cookie keeps it.
    let r = c
        .get(format!("{}/?token=s3cret-token", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_string();
    let r = c
        .get(format!("{}/settings", s.base))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // Another site's page cannot change the settings or reset a session.
    let r = c
        .put(format!("{}/api/config", s.base))
        .bearer_auth("s3cret-token")
        .header("origin", "http://evil.example")
        .header("content-type", "application/json")
        .body(r#"{"streak":{"max_repeats":9}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = c
        .delete(format!("{}/api/sessions/x", s.base))
        .bearer_auth("s3cret-token")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(!std::fs::read_to_string(&s.cfg)
        .unwrap()
        .contains("max_repeats = 9"));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_only_loopback_hosts_are_answered() {
    let s = start("host", &[]);
    let c = client();
    let r = c
        .get(format!("{}/api/sessions", s.base))
        .header("host", "attacker.example:4477")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403, "no DNS rebinding");
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let out = Command::new(env!("CARGO_BIN_EXE_loopbrake"))
        .args(["ui", "--listen", "0.0.0.0:0"])
        .env_remove("LOOPBRAKE_UI_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without a token"));
}

#[test]
fn a_running_serve_uses_an_edited_configuration_at_the_next_event() {
    let dir = tmpdir("ui", "serve-reload");
    let cfg = dir.join("loopbrake.toml");
    std::fs::write(
        &cfg,
        "[streak]\nmax_repeats = 10\n[breaker]\nenabled = false\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopbrake"))
        .arg("--config")
        .arg(&cfg)
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut verdict = |id: &str| {
        writeln!(stdin, "{}", json!({"event": "call", "session": "s", "id": id, "tool": "search", "args": {"q": "weather"}})).unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        v["verdict"].as_str().unwrap().to_string()
    };
    assert_eq!(verdict("1"), "allow");
    assert_eq!(verdict("2"), "allow");
    assert_eq!(verdict("3"), "allow");
    // The dashboard's edit, written the same way (atomically).
    loopbrake::ui::apply_edit(&cfg, &json!({"streak": {"max_repeats": 2}})).unwrap();
    let started = Instant::now();
    assert_eq!(verdict("4"), "deny", "the next event uses max_repeats = 2");
    assert!(started.elapsed() < Duration::from_secs(5));
    // An invalid edit made by hand keeps the previous configuration in force.
    std::fs::write(&cfg, "[streak]\nmax_repeats = 0\n").unwrap();
    assert_eq!(verdict("5"), "deny");
    drop(child.stdin.take());
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("reloaded") && err.contains("keeping the previous configuration"),
        "{err}"
    );
}

#[test]
fn the_dashboard_renders_in_headless_chromium_and_its_script_keeps_it_live() {
    let s = start("chromium", &[]);
    populate(&s.cfg);
    // After the page's script has polled the API (virtual time runs its timers), the DOM
    // holds the sessions it wrote: the script works in a real browser.
    let out = headless(
        &s.dir,
        "p1",
        &[
            "--virtual-time-budget=5000".into(),
            "--dump-dom".into(),
            format!("{}/", s.base),
        ],
    );
    assert_success(&out);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains(">looping<"), "{dom}");
    assert!(
        dom.contains("sqlite "),
        "the script filled in the store: {dom}"
    );
    assert!(!dom.contains("Live updates paused"), "{dom}");
    assert!(!dom.contains("sk-live-abcdef1234567890abcd"));
    let out = headless(
        &s.dir,
        "p2",
        &["--dump-dom".into(), format!("{}/settings", s.base)],
    );
    assert_success(&out);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("id=\"streak.max_repeats\"") && dom.contains("value=\"4\""),
        "{dom}"
    );
    let out = headless(
        &s.dir,
        "p3",
        &[
            "--virtual-time-budget=3000".into(),
            "--dump-dom".into(),
            format!("{}/sessions/looping", s.base),
        ],
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    assert_eq!(dom.matches("class=\"verdict v-deny\"").count(), 2, "{dom}");
    // A screenshot: a drawn page, not a blank one.
    let shot = s.dir.join("dashboard.png");
    let out = headless(
        &s.dir,
        "p4",
        &[
            format!("--screenshot={}", shot.display()),
            format!("{}/", s.base),
        ],
    );
    assert_success(&out);
    assert_drawn_png(&shot);
    if let Some(keep) = std::env::var_os("LOOPBRAKE_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
