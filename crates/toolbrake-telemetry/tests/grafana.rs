//! The Grafana dashboard in `docs/` queries only metrics toolbrake exports: every `expr`
//! names at least one `toolbrake_*` metric, and each one it names is in the exposition of
//! a store that saw one of each event.

use serde_json::{json, Value};
use std::collections::BTreeSet;
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::{Call, Engine, Outcome};
use toolbrake_session::{unjudged, Sessions};
use toolbrake_store::{MemoryStore, Store};

/// The metric names of an exposition's samples.
fn exported() -> BTreeSet<String> {
    let store = MemoryStore::new();
    let streak = Engine::new(Config::default());
    let s = Sessions::new(&streak, &store);
    let args = json!({"command": "ls"});
    for i in 0..3 {
        let id = i.to_string();
        let call = Call {
            session: "s",
            id: &id,
            tool: "Bash",
            args: &args,
        };
        if s.pre("s", &call).unwrap().runs() {
            s.post("s", &id, &Outcome::success("same")).unwrap();
        }
    }
    // A replayed run: the call refused ran all the same and returned the same again.
    s.post("s", "2", &Outcome::success("same")).unwrap();
    s.count_unjudged(&unjudged("payload", false)).unwrap();
    let breaker =
        Engine::new(Config::from_toml_str("[streak]\nenabled = false\n", &no_env).unwrap());
    let b = Sessions::new(&breaker, &store);
    for (session, approved) in [("a", Some(true)), ("b", Some(false)), ("c", None)] {
        for i in 1..=12 {
            let id = i.to_string();
            let description = ["1st", "2nd", "3rd"][i % 3];
            let args = json!({"command": "curl -s https://api.example.com/v1/x", "description": description});
            let call = Call {
                session,
                id: &id,
                tool: "bash",
                args: &args,
            };
            if b.pre(session, &call).unwrap().runs() {
                b.post(session, &id, &Outcome::success("ok")).unwrap();
            }
        }
        match approved {
            Some(a) => drop(b.answer(session, "12", a).unwrap()),
            None => drop(b.user_message(session).unwrap()),
        }
    }
    let mut text = String::new();
    toolbrake_telemetry::counters::render(
        &store.counters().unwrap(),
        &store.list().unwrap(),
        20,
        &mut text,
    );
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

fn exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    _ => exprs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
        _ => {}
    }
}

/// `toolbrake_*` identifiers in a PromQL expression.
fn metrics_named(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("toolbrake_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn every_dashboard_query_names_a_metric_toolbrake_exports() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana-dashboard.json"
    );
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut all = Vec::new();
    exprs(&dashboard, &mut all);
    assert!(all.len() >= 5, "{all:?}");
    let exported = exported();
    for e in &all {
        let named = metrics_named(e);
        assert!(!named.is_empty(), "{e} names no toolbrake metric");
        for m in named {
            assert!(
                exported.contains(&m),
                "{e} names {m}, not exported: {exported:?}"
            );
        }
    }
    // Every family the store counts shows up in that exposition.
    for (name, _) in toolbrake_telemetry::counters::COUNTERS {
        assert!(exported.contains(*name), "{name}");
    }
}
