//! The proxy's promise to every message that is not a `tools/call` (or its answer, or the
//! `initialize` answer): it reaches the other side byte for byte, both ways. Random
//! requests, notifications and responses, written the way no serializer would write them
//! (keys out of order, spaces, `1.50`, escapes a parser would undo), go through the proxy
//! in process; what comes out must be exactly what went in.

mod support;

use proptest::prelude::*;
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use toolbrake_core::config::Config;
use toolbrake_core::Engine;
use toolbrake_testkit::arb_json;

/// JSON text of `v` no serializer writes: spaces around every token of the pretty form,
/// on one line (a JSON string cannot hold a raw newline, so the newlines are all layout).
fn odd(v: &Value) -> String {
    serde_json::to_string_pretty(v)
        .unwrap()
        .replace('\n', " ")
        .replace(':', " : ")
}

/// Params whose text changes if anything parses and writes them again.
fn params(v: &Value) -> String {
    format!(
        r#"{{ "z": 1.50, "e": 1E3, "s": "\u0041\/b\u00e9", "a": {} }}"#,
        odd(v)
    )
}

#[derive(Debug, Clone)]
enum Msg {
    /// A client request (not tools/call): the server answers it.
    Request(String, Value),
    /// A client notification.
    Notification(String, Value),
    /// A server notification or request.
    FromServer(String, Option<u64>, Value),
}

fn arb_msg() -> impl Strategy<Value = Msg> {
    let request = prop::sample::select(vec![
        "ping",
        "tools/list",
        "resources/list",
        "resources/read",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "vendor/x",
    ]);
    let notification = prop::sample::select(vec![
        "notifications/initialized",
        "notifications/progress",
        "notifications/roots/list_changed",
    ]);
    let server = prop::sample::select(vec![
        "notifications/message",
        "notifications/tools/list_changed",
        "sampling/createMessage",
        "roots/list",
    ]);
    prop_oneof![
        (request, arb_json()).prop_map(|(m, p)| Msg::Request(m.into(), p)),
        (notification, arb_json()).prop_map(|(m, p)| Msg::Notification(m.into(), p)),
        (server, prop::option::of(1u64..1000), arb_json()).prop_map(|(m, id, p)| Msg::FromServer(
            m.into(),
            id,
            p
        )),
    ]
}

async fn exercise(msgs: Vec<Msg>) -> Result<(), TestCaseError> {
    let support::Wired {
        proxy,
        mut client_w,
        mut at_client,
        mut server_w,
        mut at_server,
    } = support::wire(support::options(
        Engine::new(Config::default()),
        "passthrough",
    ));
    let within = Duration::from_secs(5);
    // One message at a time: what one side writes, the other must read unchanged.
    async fn pass(
        from: &mut (impl AsyncWriteExt + Unpin),
        to: &mut tokio::io::Lines<BufReader<impl tokio::io::AsyncRead + Unpin>>,
        line: &str,
        within: Duration,
    ) -> Result<(), TestCaseError> {
        from.write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let got = tokio::time::timeout(within, to.next_line()).await;
        let Ok(Ok(Some(got))) = got else {
            return Err(TestCaseError::fail(format!("nothing came out for {line}")));
        };
        prop_assert_eq!(got.as_str(), line);
        Ok(())
    }
    for (i, msg) in msgs.iter().enumerate() {
        let id = 100 + i;
        match msg {
            Msg::Request(method, p) => {
                // Id as a string with an escape, "method" before "jsonrpc".
                let request = format!(
                    r#"{{"method":"{method}", "id" : "r\u002d{id}","jsonrpc":"2.0","params":{}}}"#,
                    params(p)
                );
                pass(&mut client_w, &mut at_server, &request, within).await?;
                let answer = format!(
                    r#"{{ "result" : {}, "id":"r-{id}", "jsonrpc":"2.0" }}"#,
                    params(p)
                );
                pass(&mut server_w, &mut at_client, &answer, within).await?;
            }
            Msg::Notification(method, p) => {
                let note = format!(
                    r#"{{"params":{}, "method" : "{method}","jsonrpc":"2.0"}}"#,
                    params(p)
                );
                pass(&mut client_w, &mut at_server, &note, within).await?;
            }
            Msg::FromServer(method, sid, p) => {
                let head = match sid {
                    Some(n) => format!(r#""id": {n}.0, "#),
                    None => String::new(),
                };
                let line = format!(
                    r#"{{{head}"method":"{method}","params":{},"jsonrpc":"2.0"}}"#,
                    params(p)
                );
                pass(&mut server_w, &mut at_client, &line, within).await?;
                if let Some(n) = sid {
                    // The client's answer to the server's request goes back unchanged too.
                    let answer =
                        format!(r#"{{"jsonrpc":"2.0","result":{},"id":{n}.0}}"#, params(p));
                    pass(&mut client_w, &mut at_server, &answer, within).await?;
                }
            }
        }
    }
    prop_assert!(!proxy.is_finished(), "the proxy stopped");
    proxy.abort();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn messages_other_than_tool_calls_pass_byte_for_byte(msgs in prop::collection::vec(arb_msg(), 1..16)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(exercise(msgs))?;
    }
}
