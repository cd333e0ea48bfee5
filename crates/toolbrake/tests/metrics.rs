//! `--metrics ADDR` and `--log-format json` of the long-running commands, through the real
//! binary: `toolbrake serve --stdio` fed a scripted loop on stdin, `toolbrake mcp --listen`
//! in front of a server that dies, and a real Prometheus (Debian's `prometheus`;
//! `scripts/test` installs it when missing) scraping `serve`.

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::listener::{exchange, mcp_headers, request, send};
use support::prometheus::Prometheus;

/// A running `toolbrake serve --stdio EXTRA…`; killed when dropped.
struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<String>>,
    /// The thread reading stderr: it ends when the command's stderr closes.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    dir: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn start(name: &str, extra: &[&str]) -> Serve {
        let dir = support::tmpdir("metrics", name);
        let cfg = dir.join("toolbrake.toml");
        std::fs::write(&cfg, "[streak]\nmax_repeats = 3\n").unwrap();
        let mut child = support::isolated_bin()
            .arg("--config")
            .arg(&cfg)
            .env_remove("TOOLBRAKE_METRICS_TOKEN")
            .current_dir(&dir)
            .args(["serve", "--stdio"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let stderr_reader = std::thread::spawn(move || {
            let mut l = String::new();
            while err.read_line(&mut l).map(|n| n > 0).unwrap_or(false) {
                sink.lock().unwrap().push_str(&l);
                l.clear();
            }
        });
        Serve {
            child,
            stdin: Some(stdin),
            stdout,
            stderr,
            stderr_reader: Some(stderr_reader),
            dir,
        }
    }

    /// Sends one event and waits for its answer line.
    fn event(&mut self, event: &Value) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{event}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    fn metrics_addr(&self) -> SocketAddr {
        metrics_addr_in(&self.stderr)
    }

    /// Waits for `text` on stderr, which a thread of the test reads as it comes (it may
    /// come after the answer line it goes with is read, on a loaded machine).
    fn wait_for_stderr(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = self.stderr.lock().unwrap().clone();
            if seen.contains(text) {
                return;
            }
            assert!(Instant::now() < deadline, "no {text:?} in {seen:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The address of the metrics endpoint, as the command logged it on stderr.
fn metrics_addr_in(stderr: &Mutex<String>) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = stderr.lock().unwrap().clone();
        if let Some(addr) = text
            .lines()
            .filter(|l| l.contains("metrics at"))
            .find_map(|l| l.split("http://").nth(1))
            .and_then(|w| w.split('/').next())
        {
            return addr.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no metrics address in {text:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `GET /metrics` from a loopback name: the body.
fn scrape(addr: SocketAddr) -> String {
    let a = send(
        addr,
        &request("GET", "/metrics", Some(&addr.to_string()), &[], ""),
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert!(
        a.header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{a:?}"
    );
    assert!(a.body.ends_with("# EOF\n"), "{}", a.body);
    a.body
}

/// The value of one series (its name and labels exactly as exposed).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The scripted loop: the same call three times, each with the same result; the third is
/// refused by the streak brake (`max_repeats = 3`).
fn scripted_loop(serve: &mut Serve, args: &Value) -> Vec<Value> {
    let mut answers = Vec::new();
    for i in 1..=3 {
        let id = format!("c{i}");
        let call = serde_json::json!({"event": "call", "session": "s1", "id": id, "tool": "bash", "args": args});
        answers.push(serve.event(&call));
        let result = serde_json::json!({"event": "result", "session": "s1", "id": id, "outcome": {"exit_code": 7, "text": "Connection refused"}});
        answers.push(serve.event(&result));
    }
    answers
}

#[test]
fn serve_metrics_show_a_streak_deny_its_latency_and_nothing_left_in_flight() {
    let mut serve = Serve::start("serve", &["--metrics", "127.0.0.1:0"]);
    let args = serde_json::json!({"command": "curl http://127.0.0.1:9/health"});
    let answers = scripted_loop(&mut serve, &args);
    assert_eq!(answers[4]["verdict"], "deny", "{answers:?}");
    assert_eq!(answers[4]["engine"], "streak", "{answers:?}");
    let text = scrape(serve.metrics_addr());
    assert_eq!(
        value(
            &text,
            r#"toolbrake_process_calls_judged_total{verdict="deny",engine="streak"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            r#"toolbrake_process_decision_seconds_count{operation="pre"}"#
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "toolbrake_process_calls_in_flight"),
        Some(0.0),
        "{text}"
    );
    // The store's own latency, under the same endpoint.
    assert!(
        value(
            &text,
            r#"toolbrake_process_store_seconds_count{operation="update"}"#
        )
        .is_some_and(|n| n >= 6.0),
        "{text}"
    );
    // The store's counters (what every process sharing the store counted) under the same
    // endpoint, once: the deny by the streak brake, and the session it holds.
    let store_denies: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("toolbrake_calls_judged_total{")
                && l.contains(r#"verdict="deny""#)
                && l.contains(r#"engine="streak""#)
        })
        .collect();
    assert!(
        store_denies.len() == 1 && store_denies[0].ends_with(" 1"),
        "{text}"
    );
    assert_eq!(
        value(&text, "toolbrake_sessions_active"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    // Neither the session key nor anything of the arguments is a label.
    assert!(
        !text.contains("s1") && !text.contains("127.0.0.1:9"),
        "{text}"
    );
}

#[test]
fn a_call_judged_and_not_yet_recorded_is_in_flight() {
    let mut serve = Serve::start("inflight", &["--metrics", "127.0.0.1:0"]);
    let call = serde_json::json!({"event": "call", "session": "s1", "id": "c1", "tool": "bash", "args": {"command": "ls"}});
    assert_eq!(serve.event(&call)["verdict"], "allow");
    let addr = serve.metrics_addr();
    assert_eq!(
        value(&scrape(addr), "toolbrake_process_calls_in_flight"),
        Some(1.0)
    );
    let result =
        serde_json::json!({"event": "result", "session": "s1", "id": "c1", "output": "a b"});
    serve.event(&result);
    assert_eq!(
        value(&scrape(addr), "toolbrake_process_calls_in_flight"),
        Some(0.0)
    );
}

#[test]
fn a_broken_configuration_edit_is_counted_as_a_rejected_reload() {
    let mut serve = Serve::start("reload", &["--metrics", "127.0.0.1:0"]);
    let call = |id: &str| serde_json::json!({"event": "call", "session": "s1", "id": id, "tool": "bash", "args": {"command": "ls"}});
    serve.event(&call("c1"));
    std::fs::write(
        serve.dir.join("toolbrake.toml"),
        "[streak]\nmax_repeats = \"many\"\n",
    )
    .unwrap();
    // The file is looked at before each event.
    serve.event(&call("c2"));
    let addr = serve.metrics_addr();
    let text = scrape(addr);
    assert_eq!(
        value(
            &text,
            r#"toolbrake_process_config_reloads_total{result="rejected"}"#
        ),
        Some(1.0),
        "{text}"
    );
    serve.wait_for_stderr("keeping the previous configuration");
    // A valid edit afterwards is taken into use and counted as such.
    std::fs::write(
        serve.dir.join("toolbrake.toml"),
        "[streak]\nmax_repeats = 5\n",
    )
    .unwrap();
    serve.event(&call("c3"));
    assert_eq!(
        value(
            &scrape(addr),
            r#"toolbrake_process_config_reloads_total{result="ok"}"#
        ),
        Some(1.0)
    );
}

#[test]
fn the_metrics_endpoint_serves_get_metrics_only_and_refuses_rebound_names() {
    let serve = Serve::start("boundary", &["--metrics", "127.0.0.1:0"]);
    let addr = serve.metrics_addr();
    let host = addr.to_string();
    let post = send(addr, &request("POST", "/metrics", Some(&host), &[], ""));
    assert_eq!(post.status, 405, "{post:?}");
    let other = send(addr, &request("GET", "/", Some(&host), &[], ""));
    assert_eq!(other.status, 404, "{other:?}");
    // A page whose name was rebound to 127.0.0.1 sends its own name.
    let rebound = send(
        addr,
        &request("GET", "/metrics", Some("evil.example"), &[], ""),
    );
    assert_eq!(rebound.status, 403, "{rebound:?}");
}

#[test]
fn with_a_token_every_scrape_needs_it_and_beyond_loopback_one_is_required() {
    let serve = Serve::start(
        "token",
        &[
            "--metrics",
            "127.0.0.1:0",
            "--metrics-token",
            "s3cret-token",
        ],
    );
    let addr = serve.metrics_addr();
    let host = addr.to_string();
    let none = send(addr, &request("GET", "/metrics", Some(&host), &[], ""));
    assert_eq!(none.status, 401, "{none:?}");
    let wrong = send(
        addr,
        &request(
            "GET",
            "/metrics",
            Some(&host),
            &[("Authorization", "Bearer s3cret-tokem")],
            "",
        ),
    );
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let right = send(
        addr,
        &request(
            "GET",
            "/metrics",
            Some("metrics.internal.example"),
            &[("Authorization", "Bearer s3cret-token")],
            "",
        ),
    );
    assert_eq!(right.status, 200, "{right:?}");

    let mut refused = support::isolated_bin();
    refused.env_remove("TOOLBRAKE_METRICS_TOKEN").args([
        "serve",
        "--stdio",
        "--metrics",
        "0.0.0.0:0",
    ]);
    let out = support::output_with_deadline(refused, 20);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "{err}");
}

#[test]
fn mcp_listen_metrics_count_a_downstream_that_dies_and_its_client_session() {
    // The stand-in server exits (status 3) on the first tools/call.
    let l = support::listener::mcp("metrics-crash", "crash", &["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr_in(&l.stderr);
    let sid = support::listener::mcp_session(&l);
    let text = scrape(addr);
    assert_eq!(
        value(&text, "toolbrake_process_downstream_starts_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "toolbrake_process_client_sessions"),
        Some(1.0),
        "{text}"
    );
    let call =
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"work","arguments":{}}}"#;
    let _ = exchange(
        l.addr,
        &request(
            "POST",
            "/mcp",
            Some(&l.host()),
            &mcp_headers(&[("Mcp-Session-Id", &sid)]),
            call,
        ),
        true,
        Duration::from_secs(10),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = scrape(addr);
        let errors = value(&text, "toolbrake_process_downstream_errors_total");
        let sessions = value(&text, "toolbrake_process_client_sessions");
        if errors == Some(1.0) && sessions == Some(0.0) {
            // The call was judged before the server died: with an endpoint to read them,
            // the memory store keeps the operators' counters.
            assert!(
                text.lines()
                    .any(|l| l.starts_with("toolbrake_calls_judged_total{")
                        && l.contains(r#"tool="work""#)
                        && l.ends_with(" 1")),
                "{text}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn json_logs_are_json_lines_with_the_decision_and_no_secret_of_the_arguments() {
    let case = &toolbrake_testkit::CREDENTIAL_CASES[0];
    let mut serve = Serve::start("json-log", &["--log-format", "json"]);
    let args = serde_json::json!({"command": case.text});
    let answers = scripted_loop(&mut serve, &args);
    assert_eq!(answers[4]["verdict"], "deny");
    // A rejected reload's warning is a JSON line too.
    std::fs::write(serve.dir.join("toolbrake.toml"), "[streak\n").unwrap();
    let call = serde_json::json!({"event": "call", "session": "s1", "id": "c9", "tool": "read", "args": {"path": "a"}});
    serve.event(&call);
    // At the end of its input serve exits; its stderr is then read to the end.
    drop(serve.stdin.take());
    let _ = serve.child.wait();
    if let Some(reader) = serve.stderr_reader.take() {
        reader.join().unwrap();
    }
    let text = serve.stderr.lock().unwrap().clone();
    assert!(!text.contains(case.secret), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let denied = lines
        .iter()
        .find(|v| v["event"] == "judged" && v["verdict"] == "deny")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(denied["engine"], "streak");
    assert_eq!(denied["tool"], "bash");
    assert_eq!(denied["call_id"], "c3");
    assert_eq!(denied["gate"], 3);
    assert_eq!(denied["count"], 3);
    assert!(denied["elapsed_ms"].is_number() && denied["ts"].is_string());
    assert_eq!(
        lines.iter().filter(|v| v["event"] == "recorded").count(),
        3,
        "{text}"
    );
    let warning = lines
        .iter()
        .find(|v| v["level"] == "warn")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(warning["message"]
        .as_str()
        .unwrap()
        .contains("keeping the previous configuration"));
}

/// A free loopback port (bound, read, released).
#[test]
fn a_real_prometheus_scrapes_serve_and_its_api_returns_the_streak_deny() {
    let mut serve = Serve::start("prometheus", &["--metrics", "127.0.0.1:0"]);
    let target = serve.metrics_addr();
    let args = serde_json::json!({"command": "curl http://127.0.0.1:9/health"});
    let answers = scripted_loop(&mut serve, &args);
    assert_eq!(answers[4]["verdict"], "deny");
    let prometheus = Prometheus::start(
        &serve.dir.join("prometheus"),
        "toolbrake-serve",
        &target.to_string(),
        None,
    );
    // The process's own count and the store's, from the same scrape.
    for query in [
        r#"toolbrake_process_calls_judged_total{verdict="deny",engine="streak"}"#,
        r#"toolbrake_calls_judged_total{verdict="deny",engine="streak"}"#,
    ] {
        let series = prometheus.series(query);
        assert_eq!(series.len(), 1, "{series:?}");
        assert_eq!(series[0]["metric"]["job"], "toolbrake-serve", "{series:?}");
        assert_eq!(series[0]["value"][1], "1", "{series:?}");
    }
}
