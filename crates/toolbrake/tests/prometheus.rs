//! `toolbrake ui`'s `/metrics` scraped by a real Prometheus (Debian's `prometheus`;
//! `scripts/test` installs it when missing): real `toolbrake hook claude` processes make a
//! loop on one SQLite file, the dashboard serves the store's counters behind its token, and
//! Prometheus's HTTP API returns the series. Also the endpoint itself over HTTP: the token,
//! the content type, no session key in the text.

mod support;
use support::prometheus::{http_get, Prometheus};
use support::*;

use serde_json::json;
use std::path::Path;
use std::process::Command;

const TOKEN: &str = "metrics-test-token-1234";

fn toolbrake(cfg: &Path) -> Command {
    let mut c = isolated_bin();
    c.arg("--config").arg(cfg);
    c
}

/// One `toolbrake hook claude` process with `payload` on its stdin; its stdout.
fn hook(cfg: &Path, payload: &str) -> String {
    let out = run_with_stdin(toolbrake(cfg).args(["hook", "claude"]), payload.as_bytes());
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn prometheus_scrapes_the_stores_counters_through_the_dashboard() {
    let dir = tmpdir("prometheus", "scrape");
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\nkind = \"sqlite\"\npath = \"{}\"\n",
            dir.join("state.db").display()
        ),
    )
    .unwrap();

    // A loop, hook process by hook process: the third identical call is denied.
    let session = "prom-session-7f3a";
    let mut outs = Vec::new();
    for i in 0..3 {
        let payload = json!({"session_id": session, "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": "curl -s https://example.com/x"},
            "tool_use_id": format!("t{i}")});
        outs.push(hook(&cfg, &payload.to_string()));
    }
    assert!(outs[2].contains("\"deny\""), "{outs:?}");
    // A payload that cannot be read: the failure policy (fail open) applies, and is counted.
    hook(&cfg, "{not json");

    let ui = support::listener::ui_at(&cfg, &["--token", TOKEN]);
    let addr = ui.host();

    // The endpoint: the token is required, the text is OpenMetrics, no session key in it.
    let status = |answer: &str| answer.split_whitespace().nth(1).map(str::to_string);
    let refused = http_get(&addr, "/metrics", None).unwrap();
    assert_eq!(status(&refused).as_deref(), Some("401"), "{refused}");
    let text = http_get(&addr, "/metrics", Some(TOKEN)).unwrap();
    assert_eq!(status(&text).as_deref(), Some("200"), "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{text}"
    );
    for line in [
        r#"toolbrake_calls_judged_total{verdict="allow",engine="none",track="none",tool="Bash"} 2"#,
        r#"toolbrake_calls_judged_total{verdict="deny",engine="streak",track="streak",tool="Bash"} 1"#,
        r#"toolbrake_unjudged_calls_total{policy="fail_open"} 1"#,
        "toolbrake_sessions_active 1",
        "toolbrake_sessions_gated 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(!text.contains(session), "{text}");
    assert!(!text.contains("example.com"), "{text}");

    // Prometheus scrapes it with the token and answers the series.
    let prometheus = Prometheus::start(&dir.join("prometheus"), "toolbrake", &addr, Some(TOKEN));
    let series =
        prometheus.series(r#"toolbrake_calls_judged_total{verdict="deny",engine="streak"}"#);
    assert_eq!(series.len(), 1, "{series:?}");
    assert_eq!(series[0]["metric"]["tool"], "Bash");
    assert_eq!(series[0]["metric"]["track"], "streak");
    assert_eq!(series[0]["metric"]["job"], "toolbrake");
    assert_eq!(series[0]["value"][1], "1", "{series:?}");
    drop(prometheus);
    let _ = std::fs::remove_dir_all(&dir);
}
