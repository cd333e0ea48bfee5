//! Bounded random client messages through the proxy's message path, in process: random
//! bytes, random JSON, JSON-RPC requests with random (sometimes too deep) arguments. The
//! proxy never panics or stops, and every request with an id gets exactly one answer
//! (toolbrake's refusal or the server's result).

mod support;

use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_testkit::arb_json;

/// A client line, and the id of the answer it must get (if it is a request).
#[derive(Debug, Clone)]
enum Line {
    Junk(Vec<u8>),
    Request(String, Value),
}

fn arb_line() -> impl Strategy<Value = Line> {
    let request = (
        prop::sample::select(vec![
            "tools/call",
            "tools/call",
            "tools/list",
            "ping",
            "resources/list",
        ]),
        prop::sample::select(vec!["work", "echo", ""]),
        arb_json(),
        0usize..3,
    )
        .prop_map(|(method, name, args, deep)| {
            let args = if deep == 0 {
                // Deeper than the parser's limit.
                let d = 200;
                Value::String(format!("{}{}", "[".repeat(d), "]".repeat(d)))
            } else {
                args
            };
            (method.to_string(), json!({"name": name, "arguments": args}))
        });
    prop_oneof![
        1 => prop::collection::vec(any::<u8>().prop_filter("one line", |b| *b != b'\n'), 0..48).prop_map(Line::Junk),
        1 => arb_json().prop_map(|v| Line::Junk(serde_json::to_vec(&v).unwrap())),
        3 => request.prop_map(|(m, p)| Line::Request(m, p)),
    ]
}

fn render(line: &Line, id: u64) -> Vec<u8> {
    match line {
        Line::Junk(b) => b.clone(),
        Line::Request(method, params) => {
            let args = params["arguments"].clone();
            // A "deep" argument is spliced in raw, so the line really nests that deep.
            let args_text = match args.as_str() {
                Some(s) if s.starts_with('[') => s.to_string(),
                _ => args.to_string(),
            };
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"name":{},"arguments":{args_text}}}}}"#,
                params["name"]
            )
            .into_bytes()
        }
    }
}

async fn exercise(lines: Vec<Line>) -> Result<(), TestCaseError> {
    let support::Wired {
        proxy,
        mut client_w,
        at_client: mut answers,
        server_w: mut w,
        at_server: mut lines_in,
    } = support::wire(support::options(
        Engine::new(Config::from_toml_str("[streak]\nmax_repeats = 2", &no_env).unwrap()),
        "fuzz",
    ));
    // The server: answers every JSON-RPC request (however deep its params), ignores
    // anything else.
    #[derive(serde::Deserialize)]
    struct Request {
        id: Option<Value>,
        method: Option<String>,
        #[allow(dead_code)]
        params: Option<serde::de::IgnoredAny>,
    }
    let server = tokio::spawn(async move {
        while let Ok(Some(l)) = lines_in.next_line().await {
            if !l.trim_start().starts_with('{') {
                continue;
            }
            let Ok(v) = serde_json::from_str::<Request>(&l) else {
                continue;
            };
            if let (Some(id), Some(_)) = (v.id, v.method) {
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "ok"}]}});
                if w.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
                    break;
                }
            }
        }
    });
    let mut expected = BTreeSet::new();
    for (i, line) in lines.iter().enumerate() {
        let id = 1000 + i as u64;
        if matches!(line, Line::Request(..)) {
            expected.insert(id);
        }
        client_w.write_all(&render(line, id)).await.unwrap();
        client_w.write_all(b"\n").await.unwrap();
    }
    let mut got = BTreeSet::new();
    while got.len() < expected.len() {
        let next = tokio::time::timeout(Duration::from_secs(5), answers.next_line()).await;
        let Ok(Ok(Some(l))) = next else {
            return Err(TestCaseError::fail(format!(
                "missing answers: {:?}",
                expected.difference(&got).collect::<Vec<_>>()
            )));
        };
        let v: Value = serde_json::from_str(&l).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Some(id) = v.get("id").and_then(Value::as_u64).filter(|id| *id >= 1000) {
            prop_assert!(got.insert(id), "two answers for {}", id);
        }
    }
    prop_assert_eq!(&got, &expected);
    prop_assert!(!proxy.is_finished(), "the proxy stopped");
    proxy.abort();
    server.abort();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_request_gets_one_answer(lines in prop::collection::vec(arb_line(), 1..24)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(exercise(lines))?;
    }
}
