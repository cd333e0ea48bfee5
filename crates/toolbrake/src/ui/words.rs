//! Plain words for what a session did and why a call was stopped, from what the store
//! keeps: the decisions' codes, the fingerprint nearest its gate (its kind tells what was
//! repeated: a command, a fetch, a write) and the outcomes. The same previews the store
//! keeps (redacted, cut); nothing else is read.

use serde_json::Value;
use toolbrake_core::breaker::Kind;

/// What a fingerprint says was done, in words: "ran `pytest tests/test_a.py`",
/// "fetched api.example.com/v1", "called Read with the same arguments".
pub(super) fn action(fp: &str) -> String {
    let rest = fp.split_once(':').map_or(fp, |(_, r)| r);
    match Kind::named(fp) {
        // `cmd:VERB:COMMAND`.
        Some(Kind::Cmd) => format!("ran `{}`", rest.split_once(':').map_or(rest, |(_, c)| c)),
        Some(Kind::Net) => format!("fetched {rest}"),
        Some(Kind::Host) => format!("called the host {rest}"),
        Some(Kind::Site) => format!("called the site {rest}"),
        Some(Kind::Sink) => format!("wrote to {rest}"),
        Some(Kind::Family) => "fetched over HTTP".to_string(),
        Some(Kind::Verb) => format!("ran `{rest}` commands"),
        Some(Kind::Exact) => exact(rest),
        // A kind this page has no words for (or none): the fingerprint as it is.
        _ => format!("called {fp}"),
    }
}

/// `Tool:{json}` (the `exact:` fingerprint's text, perhaps cut): the command or the path
/// it names when there is one, else the tool with the same arguments.
fn exact(rest: &str) -> String {
    let (tool, args) = rest.split_once(':').unwrap_or((rest, ""));
    for (key, verb) in [
        ("command", "ran"),
        ("cmd", "ran"),
        ("file_path", "on"),
        ("path", "on"),
        ("url", "fetching"),
    ] {
        if let Some(v) = string_arg(args, key) {
            return match verb {
                "ran" => format!("ran `{v}`"),
                "fetching" => format!("fetched {v}"),
                _ => format!("called {tool} on {v}"),
            };
        }
    }
    format!("called {tool} with the same arguments")
}

/// The string value of `"key":"…"` in a (possibly cut) canonical JSON text.
fn string_arg(json: &str, key: &str) -> Option<String> {
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(json) {
        return m.get(key).and_then(Value::as_str).map(str::to_string);
    }
    let at = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let tail = &json[at..];
    let mut out = String::new();
    let mut chars = tail.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    // Cut before the value ended: what there is, marked as cut.
    Some(format!("{}…", out.trim_end_matches(" (+").trim_end()))
}

fn times(n: u64) -> String {
    if n == 1 {
        "once".into()
    } else {
        format!("{n} times")
    }
}

/// Why a decision stopped (or asked about, or warned of) a call, in a sentence; `None`
/// for a call allowed outright.
/// `in_a_row`: the session's streak count, for a stop of the streak brake (which keeps no
/// gauge).
pub(super) fn reason(e: &Value, in_a_row: Option<u64>) -> Option<String> {
    let verdict = e["verdict"].as_str().unwrap_or("");
    let near = e["near"].as_array();
    let fp = near
        .and_then(|n| n.first())
        .and_then(Value::as_str)
        .or_else(|| e["preview"].as_str())
        .unwrap_or("");
    let count = near.and_then(|n| n.get(1)).and_then(Value::as_u64);
    let limit = near.and_then(|n| n.get(2)).and_then(Value::as_u64);
    let did = action(fp);
    // A gauge at its gate: the breaker's repeat track stopped it; below it, another track
    // (the same failure or output again, a cycle) did.
    let how_often = match (count, limit) {
        (Some(c), Some(l)) if c >= l => format!("{}, reaching its gate of {l}", times(c)),
        (Some(c), _) => format!(
            "{} while its result kept coming back the same or failing",
            times(c)
        ),
        _ => "again and again".into(),
    };
    let code = e["code"].as_str().unwrap_or("");
    Some(match (verdict, code) {
        ("allow", _) | ("", _) => return None,
        // The streak counts every attempt, the refused ones too (a refusal extends the
        // streak): it *asked* that many times; only those before the first refusal ran.
        (_, toolbrake_core::streak::CODE) => match count.or(in_a_row) {
            Some(n) if n > 1 => format!(
                "It asked {n} times in a row to {}: the streak brake stopped it.",
                infinitive(&did)
            ),
            _ => format!(
                "It asked again and again to {}: the streak brake stopped it.",
                infinitive(&did)
            ),
        },
        (v, toolbrake_core::budget::CODE) => format!(
            "The run reached its budget (its calls and the calls toolbrake stopped in it): {}.",
            if v == "ask" {
                "toolbrake asked you before letting it go on"
            } else {
                "toolbrake stopped it"
            }
        ),
        (_, toolbrake_core::breaker::SHELL_HTTP_CODE) => {
            "It fetched a web address through the shell; it was sent to the fetch tool instead."
                .into()
        }
        ("advise", _) => {
            format!("It {did} {how_often}: toolbrake told it to step back and summarise.")
        }
        ("ask", _) => {
            format!("It {did} {how_often}: toolbrake asked you before letting it run again.")
        }
        _ => format!("It {did} {how_often}: toolbrake stopped it."),
    })
}

/// "ran `ls`" as "run `ls`": the words of [`action`] after "to".
fn infinitive(did: &str) -> String {
    for (past, present) in [
        ("ran ", "run "),
        ("fetched ", "fetch "),
        ("called ", "call "),
        ("wrote ", "write "),
    ] {
        if let Some(rest) = did.strip_prefix(past) {
            return format!("{present}{rest}");
        }
    }
    format!("repeat what it did ({did})")
}

/// What a session kept doing, one sentence per fingerprint that came near its gate
/// (nearest first): "ran `pytest tests/test_a.py` 6 times (its gate is at 8), failing
/// each time". `log` is the session's recent decisions, `near` its gauges.
pub(super) fn kept_doing(log: &[Value], near: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for n in near.iter().take(3) {
        let fp = n["fingerprint"].as_str().unwrap_or("");
        let (count, limit) = (
            n["count"].as_u64().unwrap_or(0),
            n["limit"].as_u64().unwrap_or(0),
        );
        if count < 2 {
            continue;
        }
        // The outcomes of the recent calls this gauge was read after.
        let outcomes: Vec<&str> = log
            .iter()
            .filter(|e| e["near"][0].as_str() == Some(fp))
            .filter_map(|e| e["outcome"].as_str())
            .collect();
        let tail = match (
            outcomes.iter().filter(|o| **o == "failed").count(),
            outcomes.len(),
        ) {
            (_, 0) => String::new(),
            (f, n) if f == n && n > 1 => ", the same failure each time".into(),
            (0, n) if n > 1 => ", each time it ran fine".into(),
            (f, n) => format!(", {f} of the last {n} failed"),
        };
        out.push(format!(
            "{} {} (its gate is at {limit}){tail}.",
            capitalise(&action(fp)),
            times(count)
        ));
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// "3 agents", "1 agent".
pub(super) fn count_of(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How long ago `ms` was, before `now_ms`: "just now", "4 min ago", "3 h ago", "2 days ago".
pub(super) fn ago(now_ms: u64, ms: u64) -> String {
    let s = now_ms.saturating_sub(ms) / 1000;
    match s {
        0..=59 => "just now".into(),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => count_of(s / 86_400, "day ago", "days ago"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fingerprints_read_as_actions() {
        assert_eq!(
            action("cmd:pytest:pytest tests/test_a.py"),
            "ran `pytest tests/test_a.py`"
        );
        assert_eq!(
            action("net:api.example.com/v1"),
            "fetched api.example.com/v1"
        );
        assert_eq!(
            action("exact:Bash:{\"command\":\"curl -s 'https://x/?token=[REDACTED]'\"}"),
            "ran `curl -s 'https://x/?token=[REDACTED]'`"
        );
        assert_eq!(
            action("exact:Bash:{\"command\":\"make test && echo a very long… (+40 more chars)"),
            "ran `make test && echo a very long… (+40 more chars)…`"
        );
        assert_eq!(
            action("exact:Read:{\"file_path\":\"/w/a.rs\"}"),
            "called Read on /w/a.rs"
        );
        assert_eq!(
            action("exact:Glob:{\"n\":1}"),
            "called Glob with the same arguments"
        );
    }

    #[test]
    fn a_stop_is_told_by_its_code_and_gauge() {
        let e = json!({"verdict": "deny", "code": "REPEAT_TOOL_BLOCKED", "near": ["cmd:pytest:pytest", 8, 8]});
        assert_eq!(
            reason(&e, None).unwrap(),
            "It ran `pytest` 8 times, reaching its gate of 8: toolbrake stopped it."
        );
        let e = json!({"verdict": "deny", "code": "LOOP_BRAKE", "preview": "exact:Bash:{\"command\":\"ls\"}"});
        assert_eq!(
            reason(&e, Some(6)).unwrap(),
            "It asked 6 times in a row to run `ls`: the streak brake stopped it."
        );
        assert_eq!(reason(&json!({"verdict": "allow"}), None), None);
        let e = json!({"verdict": "deny", "code": "RUN_BUDGET", "preview": "exact:Bash:{}"});
        assert_eq!(
            reason(&e, None).unwrap(),
            "The run reached its budget (its calls and the calls toolbrake stopped in it): toolbrake stopped it."
        );
    }

    #[test]
    fn what_it_kept_doing_names_the_outcomes() {
        let log = vec![
            json!({"near": ["cmd:pytest:pytest", 5, 8], "outcome": "failed"}),
            json!({"near": ["cmd:pytest:pytest", 6, 8], "outcome": "failed"}),
        ];
        let near = vec![json!({"fingerprint": "cmd:pytest:pytest", "count": 6, "limit": 8})];
        assert_eq!(
            kept_doing(&log, &near),
            ["Ran `pytest` 6 times (its gate is at 8), the same failure each time."]
        );
        assert_eq!(ago(10_000_000, 10_000_000 - 5 * 60_000), "5 min ago");
    }
}
