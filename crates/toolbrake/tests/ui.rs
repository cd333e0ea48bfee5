//! `toolbrake ui` over HTTP: the real server (the `toolbrake` binary) driven with reqwest,
//! every endpoint and page, the token, the Host and Origin checks, and the dashboard live in
//! headless Chromium.

mod support;
use support::ui::*;
use support::*;

use serde_json::json;
use std::process::Command;

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
    assert_eq!(
        log[3]["preview"], log[0]["preview"],
        "a denied call is named by what it would have done, not just its tool"
    );
    assert!(
        log[3]["preview"].as_str().unwrap().starts_with(
            "exact:Bash:{\"command\":\"curl -s 'https://api.example.com/v1?token=[REDACTED]"
        ),
        "{one}"
    );
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
    // Every limit docs/configuration.md documents for these tables is in the form.
    for key in [
        "streak.progress_limit",
        "breaker.unchanged_limit",
        "breaker.cycle_limit",
    ] {
        assert!(
            settings_page.contains(&format!("name=\"{key}\"")),
            "{key} missing from the settings form"
        );
    }
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
        .header("origin", &s.base)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = c
        .delete(format!("{}/api/sessions/looping", s.base))
        .header("origin", &s.base)
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
    // ?token= once: a cookie keeps it, and the page is reloaded without it (never left in
    // the address bar or the history).
    let r = no_redirect()
        .get(format!("{}/sessions?x=1&token=s3cret-token", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(r.headers()["location"], "/sessions?x=1");
    let r = no_redirect()
        .get(format!("{}/?token=s3cret-token", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(r.headers()["location"], "/");
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

/// `curl -X PUT` with no `Origin` changes nothing: a state-changing request carries the
/// dashboard's origin, or (with `--token`) the token in an `Authorization` header; the
/// cookie alone is not enough, since a browser sends it whichever page asks.
#[tokio::test(flavor = "multi_thread")]
async fn a_state_changing_request_needs_the_origin_or_the_bearer_token() {
    let edit = json!({"streak": {"max_repeats": 9}});
    let s = start("no-origin", &[]);
    populate(&s.cfg);
    let c = client();
    let (status, v) = put_config(&c, &s, &edit, None).await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("Origin"),
        "{v}"
    );
    let r = c
        .delete(format!("{}/api/sessions/looping", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(!std::fs::read_to_string(&s.cfg)
        .unwrap()
        .contains("max_repeats = 9"));
    let (status, _) = get_json(&c, &format!("{}/api/sessions/looping", s.base)).await;
    assert_eq!(status, 200, "the session is still there");
    let (status, v) = put_config(&c, &s, &edit, Some(&s.base)).await;
    assert_eq!(status, 200, "{v}");

    let s = start("bearer", &["--token", "s3cret-token"]);
    let r = no_redirect()
        .get(format!("{}/?token=s3cret-token", s.base))
        .send()
        .await
        .unwrap();
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    let pair = cookie.split(';').next().unwrap().to_string();
    let put = |auth: Option<(&str, String)>| {
        let mut req = c
            .put(format!("{}/api/config", s.base))
            .header("content-type", "application/json")
            .body(edit.to_string());
        if let Some((k, v)) = auth {
            req = req.header(k, v);
        }
        req
    };
    let r = put(Some(("cookie", pair))).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 403, "the cookie alone is not enough");
    let r = put(Some(("authorization", "Bearer s3cret-token".into())))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "a script with the token");
    assert!(std::fs::read_to_string(&s.cfg)
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
    let out = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .args(["ui", "--listen", "0.0.0.0:0"])
        .env_remove("TOOLBRAKE_UI_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without a token"));
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
    if let Some(keep) = std::env::var_os("TOOLBRAKE_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// What the pages say of a stop must be what happened: the streak counts refused
/// attempts too, so the page says the agent *asked* that many times (two of the five
/// `npm test` calls ran); an ask the operator approved is drawn as an ask, not as a plain
/// allow; and the footer names the store and how long it keeps a session.
#[tokio::test(flavor = "multi_thread")]
async fn the_pages_say_what_ran_and_what_was_asked() {
    let config = "[streak]\nmax_repeats = 3\n[breaker]\non_limit = \"ask\"\n[breaker.limits]\nexact = 2\ncmd = 2\n";
    let s = serve(tmpdir("ui", "words"), config, &[]);
    {
        let set = toolbrake::settings::load(Some(&s.cfg)).unwrap();
        let store = set
            .store
            .open(
                toolbrake::settings::StoreKind::Sqlite,
                &toolbrake::settings::process_env,
            )
            .unwrap();
        let engine = toolbrake_core::Engine::new(set.engine);
        let sessions = toolbrake_session::Sessions::new(&engine, store.as_ref());
        let npm = json!({"command": "npm test"});
        for i in 0..5 {
            let id = format!("n{i}");
            let call = toolbrake_core::Call {
                session: "npm",
                id: &id,
                tool: "Bash",
                args: &npm,
            };
            if sessions.pre("npm", &call).unwrap().runs() {
                sessions
                    .post("npm", &id, &toolbrake_core::Outcome::success("1 failing"))
                    .unwrap();
            }
        }
        let read = json!({"path": "notes.txt"});
        for i in 0..2 {
            let id = format!("r{i}");
            let call = toolbrake_core::Call {
                session: "asked",
                id: &id,
                tool: "read_notes",
                args: &read,
            };
            let d = sessions.pre("asked", &call).unwrap();
            if d.verdict == toolbrake_core::Verdict::Ask {
                assert!(sessions.answer("asked", &id, true).unwrap().runs());
            }
            sessions
                .post(
                    "asked",
                    &id,
                    &toolbrake_core::Outcome::success(format!("page {i}")),
                )
                .unwrap();
        }
    }
    let c = client();
    let npm = get_text(&c, format!("{}/sessions/npm", s.base)).await;
    assert!(
        npm.contains("It asked 5 times in a row to run `npm test`: the streak brake stopped it."),
        "{npm}"
    );
    assert!(!npm.contains("It ran `npm test` 5 times"), "{npm}");
    let asked = get_text(&c, format!("{}/sessions/asked", s.base)).await;
    assert!(
        asked.contains("data-answer=\"approved\""),
        "the approved ask is drawn as an ask: {asked}"
    );
    assert!(asked.contains("asked, approved"), "{asked}");
    assert!(asked.contains("1 asked (1 approved)"), "{asked}");
    let home = get_text(&c, format!("{}/", s.base)).await;
    assert!(
        home.contains("forgets a session once it has been idle longer than"),
        "{home}"
    );
}
