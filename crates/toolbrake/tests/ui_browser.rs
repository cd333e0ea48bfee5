//! The dashboard's pages in a real browser (headless Chromium, `support::browser`): the
//! stops shown in words and pictures, every page checked with axe-core in the light and the
//! dark theme for the controls' names and the colours' contrast, and at 200 % zoom for
//! reflow. With `TOOLBRAKE_KEEP_SCREENSHOTS=DIR` the pages' screenshots are kept there (how
//! docs/dashboard*.png are made).

mod support;
use support::browser::*;
use support::*;

use serde_json::{json, Value};
use std::path::PathBuf;
use toolbrake::settings;
use toolbrake_core::{Call, Engine};
use toolbrake_session::Sessions;

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
        stops.contains("It asked 6 times in a row to run `curl -s 'https://api.example.com/v1/items?token=[REDACTED]'`: the streak brake stopped it."),
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
