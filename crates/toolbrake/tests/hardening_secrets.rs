//! Secrets that reached an operator through a side door (issue 39): a webhook's secret
//! path in the `net:` fingerprint the breaker names (a URL without its scheme), seen in
//! `replay`'s answers and its report.

mod support;
use support::*;

use serde_json::json;

/// A `curl -X POST` to each webhook, five times, as protocol events: the third is denied
/// by the `net:` gate (the only one counted).
fn webhook_loop(url: &str) -> String {
    let mut events = String::new();
    for i in 0..5 {
        for e in [
            json!({"event": "call", "session": "s1", "id": format!("c{i}"), "tool": "Bash",
                   "args": {"command": format!("curl -s -X POST -d '{{\"text\":\"deployed\"}}' {url}")}}),
            json!({"event": "result", "id": format!("c{i}"),
                   "outcome": {"exit_code": 0, "text": "ok"}}),
        ] {
            events.push_str(&e.to_string());
            events.push('\n');
        }
    }
    events
}

#[test]
fn a_webhook_loop_is_denied_and_reported_without_the_webhooks_secret() {
    let dir = tmpdir("hardening", "webhooks");
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        "[streak]\nenabled = false\n\n[breaker]\non_limit = \"deny\"\nblock_shell_http = false\n\n\
         [breaker.limits]\nexact = \"off\"\ncmd = \"off\"\nhost = \"off\"\nsink = \"off\"\nnet = 3\n",
    )
    .unwrap();
    for (url, secret) in [
        (
            "https://hooks.slack.com/services/T000/B000/XXXXSECRETslack",
            "XXXXSECRETslack",
        ),
        (
            "https://discord.com/api/webhooks/123/TOKENSECRETdiscord",
            "TOKENSECRETdiscord",
        ),
    ] {
        let events = webhook_loop(url);
        let html = dir.join("report.html");
        let out = run_with_stdin(
            isolated_bin()
                .arg("--config")
                .arg(&cfg)
                .args(["replay", "--report", "--html"])
                .arg(&html)
                .arg("-"),
            events.as_bytes(),
        );
        assert_success(&out);
        let report = String::from_utf8(out.stdout).unwrap();
        let out = run_with_stdin(
            isolated_bin()
                .arg("--config")
                .arg(&cfg)
                .args(["replay", "-"]),
            events.as_bytes(),
        );
        assert_success(&out);
        let answers = String::from_utf8(out.stdout).unwrap();
        assert!(
            answers.contains(r#"{"id":"c2","verdict":"deny""#),
            "the loop is still judged: {answers}"
        );
        let html = std::fs::read_to_string(&html).unwrap();
        for (surface, text) in [
            ("replay's answers", &answers),
            ("the report", &report),
            ("the HTML report", &html),
        ] {
            assert!(
                !text.contains(secret),
                "{surface} shows the secret {secret:?} of {url}:\n{text}"
            );
        }
        assert!(
            answers.contains("net:") && answers.contains("[REDACTED]"),
            "the denial names the net: fingerprint, redacted: {answers}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
