//! A webhook URL's secret path never shows in what the breaker says of a `net:`
//! fingerprint. The `net:` fingerprint names a URL without its scheme
//! (`net:hooks.slack.com/services/…`): its preview in the denial, the advisories, the hits
//! and the stored state must hide the secret as the full URL's redaction does, while the
//! loop is still counted by the unredacted URL (two webhooks are two targets).

mod support;

use serde_json::json;
use support::Session;
use toolbrake_core::{Outcome, Verdict};

/// Only `net:` counts (gate 3, a warning and a summary demand before it).
fn session() -> Session {
    let mut limits = serde_json::Map::new();
    for k in [
        "exact", "cmd", "net", "sink", "host", "site", "family", "verb",
    ] {
        limits.insert(k.into(), if k == "net" { json!(3) } else { json!("off") });
    }
    limits.insert("family:http-fetch".into(), json!("off"));
    Session::new(json!({
        "streak": {"enabled": false},
        "breaker": {"on_limit": "deny", "warn_at": 1, "summarize_at": 2, "limits": limits,
                    "block_shell_http": false, "cycle_limit": "off"},
    }))
}

const WEBHOOKS: &[(&str, &str)] = &[
    (
        "https://hooks.slack.com/services/T00FAKE00/B00FAKE00/SlackHookSecret0123",
        "SlackHookSecret0123",
    ),
    (
        "https://discord.com/api/webhooks/123456789012345678/DiscordHookSecret_0123",
        "DiscordHookSecret_0123",
    ),
];

#[test]
fn a_webhook_loop_is_denied_without_showing_the_webhooks_secret() {
    for (url, secret) in WEBHOOKS {
        let mut s = session();
        let mut shown = String::new();
        let command = json!({
            "command": format!("curl -s -X POST -H 'Content-Type: application/json' -d '{{\"text\":\"build done\"}}' {url}")
        });
        for _ in 0..2 {
            let (d, advisories) = s.try_run("bash", command.clone(), Outcome::success("ok"));
            assert!(d.runs(), "{url}: {:?}", d.message);
            shown.push_str(&advisories.join("\n"));
            shown.push_str(&serde_json::to_string(&d.hits).unwrap());
        }
        let d = s.call("bash", command.clone());
        assert_eq!(d.verdict, Verdict::Deny, "{url}: {:?}", d.message);
        assert!(
            d.hits.iter().any(|h| h.fingerprint.starts_with("net:")),
            "{url}: the net: gate fired: {:?}",
            d.hits
        );
        let message = d.message.clone().unwrap();
        shown.push_str(&message);
        shown.push_str(&serde_json::to_string(&d.hits).unwrap());
        // What a store keeps of the session (the timeline, the open call's previews).
        shown.push_str(&serde_json::to_string(&s.st).unwrap());
        assert!(
            !shown.contains(secret),
            "{url}: the secret {secret:?} shows:\n{shown}"
        );
        assert!(
            message.contains("[REDACTED]"),
            "{url}: the denial marks the secret's place:\n{message}"
        );
    }
}

/// Redaction changes what is shown, never the identity: the two webhooks of one workspace
/// differ only in their secret path, and each counts on its own.
#[test]
fn two_webhooks_that_differ_only_in_their_secret_count_apart() {
    let mut s = session();
    for i in 0..4 {
        let url = format!(
            "https://hooks.slack.com/services/T00FAKE00/B00FAKE00/SlackHookSecret{}",
            i % 2
        );
        let d = s.run(
            "bash",
            json!({"command": format!("curl -s -X POST {url}")}),
            Outcome::success("ok"),
        );
        assert!(d.runs(), "call {}: {:?}", i + 1, d.message);
    }
}
