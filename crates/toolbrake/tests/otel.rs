//! Traces as a collector receives them: the real `toolbrake` (`serve`, `hook claude`,
//! `mcp`) exporting to a local OTLP/HTTP receiver, whose requests are decoded with
//! `opentelemetry-proto`: span names, the GenAI attributes, the verdicts, parentage from the
//! host's `traceparent`, and no credential from the arguments anywhere; and nothing sent
//! when traces are not configured.

mod support;
use support::*;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolbrake_testkit::CREDENTIAL_CASES;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE}-{PARENT}-01")
}

/// One span as received.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    trace: String,
    span: String,
    parent: String,
    kind: i32,
    attrs: BTreeMap<String, String>,
    events: Vec<(String, BTreeMap<String, String>)>,
    /// 0 unset, 1 ok, 2 error.
    status: i32,
    status_message: String,
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

/// A local OTLP/HTTP receiver: POST /v1/traces, protobuf bodies, answered 200.
struct Receiver {
    port: u16,
    spans: Arc<Mutex<Vec<Got>>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (spans.clone(), requests.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (s, r) = (s.clone(), r.clone());
                std::thread::spawn(move || serve_connection(conn, &s, &r));
            }
        });
        Receiver {
            port,
            spans,
            requests,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }

    /// The spans once `n` have arrived (or all after a while: the test then fails on them).
    fn wait_for(&self, n: usize) -> Vec<Got> {
        let start = Instant::now();
        while self.spans.lock().unwrap().len() < n && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.spans()
    }
}

fn serve_connection(conn: TcpStream, spans: &Mutex<Vec<Got>>, requests: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let request_line = line.trim().to_string();
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        requests.lock().unwrap().push(request_line);
        let req = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        for rs in req.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .map(|r| attrs(&r.attributes))
                .and_then(|a| a.get("service.name").cloned())
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for sp in ss.spans {
                    let status = sp.status.clone().unwrap_or_default();
                    spans.lock().unwrap().push(Got {
                        service: service.clone(),
                        name: sp.name.clone(),
                        trace: hex(&sp.trace_id),
                        span: hex(&sp.span_id),
                        parent: hex(&sp.parent_span_id),
                        kind: sp.kind,
                        attrs: attrs(&sp.attributes),
                        events: sp
                            .events
                            .iter()
                            .map(|e| (e.name.clone(), attrs(&e.attributes)))
                            .collect(),
                        status: status.code,
                        status_message: status.message,
                    });
                }
            }
        }
        let _ = conn.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
        );
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every value a span carries: attributes, event attributes, status message.
fn all_values(spans: &[Got]) -> String {
    let mut out = String::new();
    for s in spans {
        out.push_str(&format!("{} {} ", s.name, s.status_message));
        for v in s.attrs.values() {
            out.push_str(v);
            out.push(' ');
        }
        for (n, a) in &s.events {
            out.push_str(n);
            for v in a.values() {
                out.push_str(v);
                out.push(' ');
            }
        }
    }
    out
}

fn serve(dir: &Path, config: &str, env: &[(&str, String)], input: &str) -> String {
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(&cfg, config).unwrap();
    let mut c = isolated_bin();
    c.arg("--config").arg(&cfg).args(["serve", "--stdio"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = run_with_stdin(&mut c, input.as_bytes());
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

fn lines(events: &[Value]) -> String {
    events.iter().map(|e| format!("{e}\n")).collect()
}

#[test]
fn serve_exports_a_span_per_judged_call_in_the_hosts_trace() {
    let rx = Receiver::start();
    let dir = tmpdir("otel", "serve");
    let tp = traceparent();
    let mut events = Vec::new();
    // Three identical calls returning the same: the third is denied.
    for i in 1..=3 {
        events.push(
            json!({"event": "call", "session": "s1", "id": format!("c{i}"), "tool": "bash",
            "args": {"command": "make test"}, "traceparent": tp}),
        );
        events.push(
            json!({"event": "result", "session": "s1", "id": format!("c{i}"),
            "outcome": {"text": "same"}}),
        );
    }
    // A call that fails.
    events.push(
        json!({"event": "call", "session": "f", "id": "f1", "tool": "bash",
        "args": {"command": "make test"}, "traceparent": tp}),
    );
    events.push(json!({"event": "result", "session": "f", "id": "f1",
        "outcome": {"exit_code": 1, "text": "boom"}}));
    // Every credential shape in the arguments, each its own call and session.
    for (i, case) in CREDENTIAL_CASES.iter().enumerate() {
        events.push(
            json!({"event": "call", "session": format!("cred{i}"), "id": "x", "tool": "bash",
            "args": {"command": case.text}, "traceparent": tp}),
        );
        events.push(
            json!({"event": "result", "session": format!("cred{i}"), "id": "x",
            "outcome": {"text": case.text}}),
        );
    }
    // An invalid traceparent is ignored: a root span of a new trace.
    events.push(
        json!({"event": "call", "session": "s2", "id": "r", "tool": "read",
        "args": {"path": "a"}, "traceparent": "00-zz-00f067aa0ba902b7-01"}),
    );
    let out = serve(
        &dir,
        "[telemetry]\nrecord_arguments = true\nservice_name = \"from-table\"\n",
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint())],
        &lines(&events),
    );
    let verdicts: Vec<String> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["verdict"].as_str().map(str::to_string))
        .collect();
    assert_eq!(verdicts[2], "deny", "{out}");
    let expected = 4 + CREDENTIAL_CASES.len() + 1;
    let spans = rx.wait_for(expected);
    assert_eq!(spans.len(), expected, "{spans:#?}");
    assert!(rx
        .requests
        .lock()
        .unwrap()
        .iter()
        .all(|r| r.starts_with("POST /v1/traces ")));
    let call = |id: &str| -> Got {
        spans
            .iter()
            .find(|s| s.attrs.get("gen_ai.tool.call.id").map(String::as_str) == Some(id))
            .cloned()
            .unwrap_or_else(|| panic!("no span of {id}: {spans:#?}"))
    };
    for s in &spans {
        assert_eq!(s.service, "from-table");
        assert_eq!(s.kind, 1, "INTERNAL"); // SPAN_KIND_INTERNAL
        assert_eq!(s.attrs["gen_ai.operation.name"], "execute_tool");
        assert_eq!(
            s.name,
            format!("execute_tool {}", s.attrs["gen_ai.tool.name"])
        );
        assert_eq!(s.attrs["toolbrake.session.hash"].len(), 16);
    }
    let (c1, c2, c3) = (call("f1"), call("c2"), call("c3"));
    for s in [&c1, &c2, &c3] {
        assert_eq!(s.trace, TRACE, "{s:#?}");
        assert_eq!(s.parent, PARENT, "{s:#?}");
        assert_eq!(s.attrs["gen_ai.tool.name"], "bash");
    }
    assert_eq!(c3.attrs["toolbrake.verdict"], "deny");
    assert_eq!(c3.attrs["toolbrake.engine"], "streak");
    assert_eq!(c3.attrs["toolbrake.gate.count"], "3");
    assert_eq!(c3.attrs["toolbrake.gate.limit"], "3");
    assert_eq!(c3.status, 0, "a denial is a judgement, not a failure");
    assert!(c3.events.is_empty(), "a denied call has no outcome");
    // The failed call: an error status and its reason; the succeeded one: ok.
    assert_eq!(c1.status, 2);
    assert_eq!(c1.attrs["error.type"], "exit");
    let outcome = |s: &Got| {
        s.events
            .iter()
            .find(|(n, _)| n == "toolbrake.outcome")
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| panic!("no outcome: {s:#?}"))
    };
    assert_eq!(outcome(&c1)["toolbrake.outcome"], "failed");
    assert_eq!(outcome(&c1)["toolbrake.failure.reason"], "exit");
    assert_eq!(outcome(&c2)["toolbrake.outcome"], "ok");
    assert_eq!(c2.status, 0);
    // Arguments only redacted; the output never.
    assert_eq!(
        c1.attrs["gen_ai.tool.call.arguments"],
        r#"{"command":"make test"}"#
    );
    let seen = all_values(&spans);
    assert!(!seen.contains("boom"), "an output reached a span");
    for case in CREDENTIAL_CASES {
        assert!(
            !seen.contains(case.secret),
            "{} ({}) reached a span",
            case.secret,
            case.row
        );
    }
    assert!(seen.contains("[REDACTED]"), "arguments were not recorded");
    let root = call("r");
    assert_ne!(root.trace, TRACE);
    assert_eq!(root.parent, "");
}

fn hook(dir: &Path, payload: &Value, env: &[(&str, String)]) -> (String, Duration) {
    let mut c = isolated_bin();
    c.env("TOOLBRAKE_STATE", dir.join("state.db"))
        .current_dir(dir)
        .args(["hook", "claude"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let start = Instant::now();
    let out = run_with_stdin(&mut c, payload.to_string().as_bytes());
    let took = start.elapsed();
    assert!(out.status.success());
    (String::from_utf8(out.stdout).unwrap(), took)
}

#[test]
fn a_hooks_judgement_and_outcome_meet_in_the_hosts_trace() {
    let rx = Receiver::start();
    let dir = tmpdir("otel", "hook");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint()),
        ("TRACEPARENT", traceparent()),
    ];
    let secret = CREDENTIAL_CASES[0];
    let input = json!({"command": secret.text});
    let (quiet, _) = hook(
        &dir,
        &json!({"session_id": "h1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": input, "tool_use_id": "t1"}),
        &env,
    );
    assert!(
        !quiet.contains("deny"),
        "the hook's answer is unchanged: {quiet}"
    );
    hook(
        &dir,
        &json!({"session_id": "h1", "hook_event_name": "PostToolUse", "tool_name": "Bash",
                "tool_input": input, "tool_use_id": "t1",
                "tool_response": {"stdout": "", "stderr": "failed", "exit_code": 2}}),
        &env,
    );
    let spans = rx.wait_for(2);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let judged = spans
        .iter()
        .find(|s| s.name == "execute_tool Bash")
        .unwrap();
    let outcome = spans
        .iter()
        .find(|s| s.name == "toolbrake.outcome")
        .unwrap();
    assert_eq!(judged.trace, TRACE);
    assert_eq!(judged.parent, PARENT);
    assert_eq!(judged.attrs["toolbrake.verdict"], "allow");
    assert_eq!(judged.attrs["gen_ai.tool.call.id"], "t1");
    assert_eq!(outcome.trace, TRACE);
    assert_eq!(
        outcome.parent, judged.span,
        "the outcome is the judgement's child"
    );
    assert_eq!(outcome.events[0].0, "toolbrake.outcome");
    assert!(!all_values(&spans).contains(secret.secret));
    assert!(!judged.attrs.contains_key("gen_ai.tool.call.arguments"));
}

#[test]
fn a_collector_that_never_answers_delays_a_hook_by_at_most_its_deadline() {
    // Accepts connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = Arc::new(Mutex::new(Vec::new()));
    let h = held.clone();
    std::thread::spawn(move || {
        for c in silent.incoming().flatten() {
            h.lock().unwrap().push(c);
        }
    });
    let dir = tmpdir("otel", "silent");
    let (_, took) = hook(
        &dir,
        &json!({"session_id": "h", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": "ls"}, "tool_use_id": "t1"}),
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )],
    );
    // The hook gives the export 200 ms; a hung collector must not hold the host.
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(!held.lock().unwrap().is_empty(), "the export was attempted");
}

#[test]
fn nothing_is_sent_when_traces_are_off() {
    let rx = Receiver::start();
    let dir = tmpdir("otel", "off");
    let input = lines(&[
        json!({"event": "call", "session": "s", "id": "1", "tool": "bash",
        "args": {"command": "ls"}, "traceparent": traceparent()}),
    ]);
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint());
    for off in [
        ("OTEL_SDK_DISABLED", "true".to_string()),
        ("OTEL_TRACES_EXPORTER", "none".to_string()),
    ] {
        serve(&dir, "", &[endpoint.clone(), off], &input);
    }
    // A table endpoint, turned off by the environment.
    serve(
        &dir,
        &format!("[telemetry]\nendpoint = \"{}\"\n", rx.endpoint()),
        &[("OTEL_SDK_DISABLED", "true".into())],
        &input,
    );
    // Nothing configured: no exporter, not even to the default port, when it can be watched.
    let default_port = TcpListener::bind("127.0.0.1:4318").ok();
    serve(&dir, "", &[], &input);
    std::thread::sleep(Duration::from_millis(300));
    assert!(rx.requests.lock().unwrap().is_empty());
    if let Some(l) = default_port {
        l.set_nonblocking(true).unwrap();
        assert!(l.accept().is_err(), "a connection to the default OTLP port");
    }
}

#[test]
fn the_telemetry_table_is_validated_at_load() {
    let dir = tmpdir("otel", "table");
    let cfg = dir.join("lb.toml");
    std::fs::write(&cfg, "[telemetry]\nendpoint = \"ftp://x\"\n").unwrap();
    let out = isolated_bin()
        .arg("--config")
        .arg(&cfg)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2") && err.contains("telemetry.endpoint"),
        "{err}"
    );
    std::fs::write(
        &cfg,
        "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nheaders = { authorization = \"Bearer sk-live-0123456789abcdef\" }\n",
    )
    .unwrap();
    let out = isolated_bin()
        .arg("--config")
        .arg(&cfg)
        .args(["config", "check"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("authorization = \"hidden\""), "{shown}");
    assert!(!shown.contains("sk-live"), "{shown}");
}

#[test]
fn an_mcp_call_is_a_span_from_judgement_to_outcome_under_its_meta_traceparent() {
    let rx = Receiver::start();
    let mut child = isolated_bin()
        .args(["mcp", "--", "python3"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/fake_mcp_server.py"))
        .arg("ok")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut exchange = move |v: Value| -> Option<Value> {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
        v.get("id")?;
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        serde_json::from_str(&line).ok()
    };
    exchange(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    exchange(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let answer = exchange(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "work", "arguments": {"n": 1}, "_meta": {"traceparent": traceparent()}}}),
    )
    .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "done");
    drop(exchange); // closes the proxy's stdin: it exits and exports
    let out = output_with_deadline_of(child, 15);
    assert!(out.status.success());
    let spans = rx.wait_for(1);
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let s = &spans[0];
    assert_eq!(s.name, "execute_tool work");
    assert_eq!((s.trace.as_str(), s.parent.as_str()), (TRACE, PARENT));
    assert_eq!(s.attrs["toolbrake.verdict"], "allow");
    assert_eq!(s.events.len(), 1, "{s:#?}");
    assert_eq!(s.events[0].0, "toolbrake.outcome");
    assert_eq!(s.events[0].1["toolbrake.outcome"], "ok");
}

/// Waits (bounded) for a child whose stdin is closed.
fn output_with_deadline_of(mut child: std::process::Child, secs: u64) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(secs), "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs `toolbrake hook claude` with `env`, state (and `hook.log`) in `dir`: its output.
fn hook_output(dir: &Path, payload: &Value, env: &[(&str, String)]) -> std::process::Output {
    let mut c = isolated_bin();
    c.env("TOOLBRAKE_STATE", dir.join("state.db"))
        .current_dir(dir)
        .args(["hook", "claude"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = run_with_stdin(&mut c, payload.to_string().as_bytes());
    assert!(out.status.success());
    out
}

const ENDPOINT_SECRETS: [&str; 3] = ["bob", "PW-s3cret", "tok-s3cret"];

#[track_caller]
fn assert_no_endpoint_secret(what: &str, text: &str) {
    for s in ENDPOINT_SECRETS {
        assert!(!text.contains(s), "{what} shows {s}: {text}");
    }
}

#[test]
fn an_endpoints_user_password_and_query_values_are_never_shown() {
    let dir = tmpdir("otel", "endpoint-secrets");
    // Endpoints the exporter refuses (a space; two ports), so that the hook and serve say
    // why traces are off, naming the endpoint.
    let refused = [
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://bob:PW-s3cret@collector.invalid:4318/v1/traces?token=tok-s3cret&x=a b",
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://bob:PW-s3cret@collector.invalid:4318:1/?token=tok-s3cret",
        ),
    ];
    for (i, (var, endpoint)) in refused.iter().enumerate() {
        let env = [(*var, endpoint.to_string())];
        let out = hook_output(
            &dir,
            &json!({"session_id": "e", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                    "tool_input": {"command": "ls"}, "tool_use_id": format!("t{i}")}),
            &env,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("traces are off") && stderr.contains("collector.invalid"),
            "{var}: {stderr}"
        );
        assert_no_endpoint_secret("the hook's stderr", &stderr);
        let mut c = isolated_bin();
        c.args(["serve", "--stdio"]).env(var, endpoint);
        let out = run_with_stdin(&mut c, b"");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("traces are off"), "{var}: {stderr}");
        assert_no_endpoint_secret("serve's log", &stderr);
    }
    let log = std::fs::read_to_string(dir.join("hook.log")).unwrap();
    assert_eq!(log.matches("traces are off").count(), 2, "{log}");
    assert_no_endpoint_secret("hook.log", &log);
    // The table: an endpoint refused for its password, and one shown by `config check`.
    let cfg = dir.join("named.toml");
    std::fs::write(
        &cfg,
        "[telemetry]\nendpoint = \"https://bob:PW-s3cret@collector.invalid/?token=tok-s3cret\"\n",
    )
    .unwrap();
    let check = || {
        isolated_bin()
            .arg("--config")
            .arg(&cfg)
            .args(["config", "check"])
            .output()
            .unwrap()
    };
    let out = check();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("telemetry.endpoint"), "{err}");
    assert_no_endpoint_secret("a refused endpoint's error", &err);
    std::fs::write(
        &cfg,
        "[telemetry]\nendpoint = \"http://collector.invalid:4318/?token=tok-s3cret\"\n",
    )
    .unwrap();
    let out = check();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("endpoint = \"http://collector.invalid:4318/?token=[REDACTED]\""),
        "{shown}"
    );
    assert_no_endpoint_secret("config check", &shown);
}

#[test]
fn an_endpoints_query_stays_after_the_traces_path() {
    let rx = Receiver::start();
    let dir = tmpdir("otel", "query");
    serve(
        &dir,
        "",
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("{}/?tenant=a", rx.endpoint()),
        )],
        &lines(&[
            json!({"event": "call", "session": "q", "id": "1", "tool": "read", "args": {"path": "a"}}),
        ]),
    );
    rx.wait_for(1);
    let requests = rx.requests.lock().unwrap().clone();
    assert!(!requests.is_empty());
    for r in requests {
        assert!(r.starts_with("POST /v1/traces?tenant=a "), "{r}");
    }
}

#[test]
fn spans_redact_and_cut_tool_names_and_call_ids_and_never_quote_an_output() {
    let rx = Receiver::start();
    let dir = tmpdir("otel", "span-values");
    let key = "sk-proj-FakeOpenAi0123456789abcdef";
    let github = "ghp_FakeGithub0123456789abcdefghijkl";
    let long_id = "i".repeat(200_000);
    let long_tool = "t".repeat(1_000);
    let events = [
        // A call id that is a credential; a tool named after one.
        json!({"event": "call", "session": "a", "id": key, "tool": github, "args": {}}),
        // A 200 KB call id; a 1,000-character tool name.
        json!({"event": "call", "session": "b", "id": long_id, "tool": long_tool, "args": {}}),
        // A shell call killed by a signal whose name is the output's text.
        json!({"event": "call", "session": "c", "id": "k", "tool": "bash",
               "args": {"command": "make"}}),
        json!({"event": "result", "session": "c", "id": "k",
               "outcome": {"text": "building\n[killed by signal: out of memory in build-output-text]"}}),
    ];
    serve(
        &dir,
        "",
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint())],
        &lines(&events),
    );
    let spans = rx.wait_for(3);
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let seen = all_values(&spans);
    for secret in [
        "FakeOpenAi0123456789abcdef",
        "FakeGithub0123456789abcdefghijkl",
        "build-output-text",
    ] {
        assert!(!seen.contains(secret), "{secret} reached a span");
    }
    for s in &spans {
        let id = &s.attrs["gen_ai.tool.call.id"];
        let tool = &s.attrs["gen_ai.tool.name"];
        assert!(id.chars().count() <= 256, "a call id of {} chars", id.len());
        assert!(
            tool.chars().count() <= 128,
            "a tool of {} chars",
            tool.len()
        );
        assert_eq!(s.name, format!("execute_tool {tool}"));
    }
    let killed = spans
        .iter()
        .find(|s| s.attrs["gen_ai.tool.call.id"] == "k")
        .unwrap();
    assert_eq!(killed.status, 2);
    assert_eq!(killed.attrs["error.type"], "signal");
    assert_eq!(killed.status_message, "the command was killed");
}
