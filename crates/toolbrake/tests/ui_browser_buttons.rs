//! The dashboard's feedback and reset buttons in a real browser (headless Chromium,
//! `support::browser`): driven with the keyboard and the mouse, through the page's
//! confirmation, their effect read back from the store; and the feedback API refusing what
//! it must.

mod support;
use support::browser::*;

use serde_json::{json, Value};
use std::time::Duration;
use toolbrake_core::Feedback;

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
