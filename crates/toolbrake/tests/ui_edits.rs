//! Editing the configuration through `toolbrake ui`: edits validated whole, written
//! atomically with the comments kept, parallel and stale edits, the file the hooks read, and
//! `serve` picking up an edit while it runs.

mod support;
use support::ui::*;
use support::*;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use toolbrake::settings;

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
        let (status, v) = put_config(&c, &s, &edit, Some(&s.base)).await;
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
        .header("origin", &s.base)
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
    let out = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .args(["config", "check"])
        .arg(&s.cfg)
        .output()
        .unwrap();
    assert_success(&out);
    // null removes a key: its default applies again.
    let (status, v) = put_config(
        &c,
        &s,
        &json!({"breaker": {"warn_at": null}}),
        Some(&s.base),
    )
    .await;
    assert_eq!(
        (status, v["effective"]["breaker"]["warn_at"].as_u64()),
        (200, Some(7))
    );
}

/// `toolbrake ui` started in `dir` with `home` as `$HOME` and no `--config`: the address.
fn start_in(dir: &Path, home: &Path) -> (Child, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .args(["ui", "--listen", "127.0.0.1:0"])
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("TOOLBRAKE_CONFIG")
        .env_remove("TOOLBRAKE_UI_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (base, first, mut err) = address(&mut child);
    let mut second = String::new();
    if dir.join("toolbrake.toml").is_file() {
        err.read_line(&mut second).unwrap();
    }
    (child, base, first + &second)
}

/// Started where there is no project file, the dashboard edits the user's configuration
/// (creating it), the file a hook run in any other folder finds; started in a project
/// with its own `toolbrake.toml`, it edits that one and warns that it shadows the user's.
#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_edits_the_file_the_hooks_read() {
    let root = tmpdir("ui", "user-file");
    let home = root.join("home");
    let project = root.join("project");
    let elsewhere = root.join("elsewhere");
    for d in [&home, &project, &elsewhere] {
        std::fs::create_dir_all(d).unwrap();
    }
    let user = home.join(".config/toolbrake/config.toml");
    let c = client();
    let (mut child, base, said) = start_in(&home, &home);
    assert!(said.contains(&user.display().to_string()), "{said}");
    let page = get_text(&c, format!("{base}/settings")).await;
    assert!(page.contains(&user.display().to_string()), "{page}");
    assert!(page.contains("Your user configuration"), "{page}");
    let r = c
        .put(format!("{base}/api/config"))
        .header("origin", &base)
        .header("content-type", "application/json")
        .body(json!({"streak": {"max_repeats": 7}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !home.join("toolbrake.toml").exists(),
        "not ./toolbrake.toml"
    );
    // What a hook run in another folder loads.
    let out = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .args(["config", "check"])
        .current_dir(&elsewhere)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("TOOLBRAKE_CONFIG")
        .output()
        .unwrap();
    assert_success(&out);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("max_repeats = 7"), "{shown}");

    std::fs::write(
        project.join("toolbrake.toml"),
        "[streak]\nmax_repeats = 5\n",
    )
    .unwrap();
    let (mut child, base, said) = start_in(&project, &home);
    assert!(said.contains("shadows your configuration"), "{said}");
    let page = get_text(&c, format!("{base}/settings")).await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(page.contains("A project file"), "{page}");
    assert!(page.contains("shadows your user configuration"), "{page}");
}

#[test]
fn a_running_serve_uses_an_edited_configuration_at_the_next_event() {
    let dir = tmpdir("ui", "serve-reload");
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        "[streak]\nmax_repeats = 10\n[breaker]\nenabled = false\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
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
    toolbrake::ui::apply_edit(&cfg, &json!({"streak": {"max_repeats": 2}})).unwrap();
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

/// Sends one edit, optionally naming the version it was based on.
async fn put_if(
    c: &reqwest::Client,
    base: &str,
    body: &Value,
    if_match: Option<&str>,
) -> (u16, Value) {
    let mut req = c
        .put(format!("{base}/api/config"))
        .header("origin", base)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(v) = if_match {
        req = req.header("if-match", v);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (
        status,
        serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null),
    )
}

/// What `toolbrake` itself loads from the file (every hook and command loads it this way).
fn loads(cfg: &Path) -> Value {
    settings::load(Some(cfg))
        .unwrap_or_else(|e| panic!("the file no longer loads: {e}"))
        .engine
        .to_value()
}

/// Sends every edit at once (each on its own task), with the same `If-Match`, if any; the
/// answers in the order of the edits.
async fn put_all(
    c: &reqwest::Client,
    base: &str,
    edits: Vec<Value>,
    if_match: Option<&str>,
) -> Vec<(u16, Value)> {
    let tasks: Vec<_> = edits
        .into_iter()
        .map(|edit| {
            let (c, base, if_match) = (c.clone(), base.to_string(), if_match.map(str::to_string));
            tokio::spawn(async move { put_if(&c, &base, &edit, if_match.as_deref()).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_edits_all_land_and_an_edit_based_on_a_stale_read_is_refused() {
    let s = start("parallel", &[]);
    let c = client();
    // Eight edits at once, each adding its own alias: every one is saved, none is lost.
    let edits = (0..8)
        .map(|i| json!({"breaker": {"host_aliases": {format!("h{i}.example"): "example.org"}}}))
        .collect();
    for (status, v) in put_all(&c, &s.base, edits, None).await {
        assert_eq!(status, 200, "{v}");
    }
    let text = std::fs::read_to_string(&s.cfg).unwrap();
    for i in 0..8 {
        assert!(
            text.contains(&format!("h{i}.example")),
            "edit {i} was lost: {text}"
        );
    }
    assert!(text.starts_with("# The team's settings: keep this comment."));
    loads(&s.cfg);

    // Eight edits all based on the same read: the first wins, the others are refused with
    // 409 and a message saying why, and none of them overwrites the winner.
    let r = c
        .get(format!("{}/api/config", s.base))
        .send()
        .await
        .unwrap();
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(v["version"], etag.as_str(), "the view names its version");
    // The settings form carries it, for the page's script to send back as If-Match.
    let page = get_text(&c, format!("{}/settings", s.base)).await;
    let attr = format!("data-version=\"{}\"", etag.replace('"', "&quot;"));
    assert!(page.contains(&attr), "{attr} not in {page}");
    let edits = (0..8)
        .map(|i| json!({"streak": {"max_repeats": 10 + i}}))
        .collect();
    let answers = put_all(&c, &s.base, edits, Some(&etag)).await;
    let won: Vec<usize> = (0..8).filter(|i| answers[*i].0 == 200).collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    for (status, v) in &answers {
        assert!(*status == 200 || *status == 409, "{status}: {v}");
        if *status == 409 {
            let m = v["error"]["message"].as_str().unwrap();
            assert!(
                m.contains("changed since it was read") && m.contains("nothing was written"),
                "{m}"
            );
        }
    }
    assert_eq!(loads(&s.cfg)["streak"]["max_repeats"], 10 + won[0]);
    // The answer to a saved edit names the new version: the next edit based on it is saved.
    let (_, v) = get_json(&c, &format!("{}/api/config", s.base)).await;
    let (status, v) = put_if(
        &c,
        &s.base,
        &json!({"streak": {"max_repeats": 6}}),
        v["version"].as_str(),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = put_if(
        &c,
        &s.base,
        &json!({"streak": {"max_repeats": 7}}),
        Some(&etag),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(loads(&s.cfg)["streak"]["max_repeats"], 6);
    assert!(leftovers(&s.dir).is_empty(), "{:?}", leftovers(&s.dir));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edit_that_toolbrake_could_not_load_is_never_written() {
    let s = start("too-large", &[]);
    let c = client();
    let before = std::fs::read(&s.cfg).unwrap();
    // About 1.2 MB of aliases: under the request limit, over the 1 MiB the file may hold.
    let aliases: serde_json::Map<String, Value> = (0..24_000)
        .map(|i| {
            (
                format!("host-{i:06}.example.com"),
                json!("mirror.example.com"),
            )
        })
        .collect();
    let edit = json!({"breaker": {"host_aliases": aliases}});
    assert!(edit.to_string().len() < 2_000_000);
    let (status, v) = put_if(&c, &s.base, &edit, None).await;
    assert_eq!(status, 413, "{v}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("1048576") && m.contains("nothing was written"),
        "{m}"
    );
    assert_eq!(
        std::fs::read(&s.cfg).unwrap(),
        before,
        "the file is untouched"
    );
    loads(&s.cfg);
    // The settings page still reads it, and a normal edit still works.
    let (status, _) = get_json(&c, &format!("{}/api/config", s.base)).await;
    assert_eq!(status, 200);
    let (status, v) = put_if(&c, &s.base, &json!({"streak": {"max_repeats": 5}}), None).await;
    assert_eq!(status, 200, "{v}");
    assert!(leftovers(&s.dir).is_empty(), "{:?}", leftovers(&s.dir));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn a_symlinked_configuration_is_edited_where_it_points() {
    use std::os::unix::fs::PermissionsExt;
    let s = start("symlink", &[]);
    let c = client();
    // A dotfiles setup: the configuration is a link into another directory.
    let dotfiles = s.dir.join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    let real = dotfiles.join("toolbrake.toml");
    std::fs::rename(&s.cfg, &real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("dotfiles/toolbrake.toml", &s.cfg).unwrap();
    let (status, v) = put_if(&c, &s.base, &json!({"streak": {"max_repeats": 5}}), None).await;
    assert_eq!(status, 200, "{v}");
    let link = std::fs::symlink_metadata(&s.cfg).unwrap();
    assert!(link.file_type().is_symlink(), "the link is still a link");
    let text = std::fs::read_to_string(&real).unwrap();
    assert!(text.contains("max_repeats = 5 # four is enough"), "{text}");
    assert_eq!(
        std::fs::metadata(&real).unwrap().permissions().mode() & 0o777,
        0o640,
        "the file keeps its mode"
    );
    assert!(leftovers(&dotfiles).is_empty() && leftovers(&s.dir).is_empty());
}
