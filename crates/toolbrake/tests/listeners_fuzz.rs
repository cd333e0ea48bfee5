//! Random and hostile requests at both running HTTP listeners (`toolbrake mcp --listen` in
//! front of the stand-in server, and `toolbrake ui`): random methods, paths, `Host` and
//! `Origin` names (loopback, rebound, junk), session ids (live, random, binary), other
//! headers and bodies (JSON-RPC messages with random parameters, random JSON, random
//! bytes). Every request gets a well-formed HTTP answer within a bound; none that names a
//! rebound `Host` (or none) or `Origin` is served; the process never panics or stops, and
//! it serves a legitimate request afterwards.

mod support;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use std::time::Duration;
use support::listener::*;
use toolbrake_testkit::arb_json;

/// How long any answer's head may take.
const BOUND: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
enum Name {
    /// The listener's own address.
    Own,
    /// `localhost:PORT`.
    Localhost,
    /// A rebound name (`evil.example:PORT`, `127.evil.example:PORT`).
    Rebound(&'static str),
    /// Any bytes a header value may hold.
    Raw(Vec<u8>),
}

#[derive(Debug, Clone)]
enum SessionId {
    /// A session the listener issued.
    Live,
    /// A well-formed id it never issued.
    Unknown(String),
    /// Junk.
    Raw(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Hostile {
    method: String,
    path: String,
    host: Option<Name>,
    origin: Option<Name>,
    session: Option<SessionId>,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

/// Header-value bytes: anything but the line breaks that would end the header.
fn value_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        any::<u8>().prop_filter("no line break", |b| *b != b'\r' && *b != b'\n'),
        0..max,
    )
}

fn arb_name() -> impl Strategy<Value = Name> {
    prop_oneof![
        3 => Just(Name::Own),
        1 => Just(Name::Localhost),
        2 => prop::sample::select(vec!["evil.example", "127.evil.example", "localhost.evil.example"])
            .prop_map(Name::Rebound),
        1 => value_bytes(40).prop_map(Name::Raw),
    ]
}

fn arb_body() -> impl Strategy<Value = Vec<u8>> {
    let rpc = (
        prop::sample::select(vec![
            "initialize",
            "tools/call",
            "tools/list",
            "ping",
            "notifications/initialized",
            "resources/read",
        ]),
        prop_oneof![Just(None), arb_json().prop_map(Some)],
        arb_json(),
    )
        .prop_map(|(method, id, params)| {
            let mut m = json!({"jsonrpc": "2.0", "method": method, "params": params});
            if let Some(id) = id {
                m["id"] = id;
            }
            m.to_string().into_bytes()
        });
    prop_oneof![
        3 => rpc,
        1 => arb_json().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..256),
        1 => Just(Vec::new()),
    ]
}

/// What a listener serves: the methods its clients use and its paths (the first the
/// main one), which hostile requests mostly aim at.
struct Surface {
    methods: &'static [&'static str],
    paths: &'static [&'static str],
}

fn arb_request(surface: &Surface) -> impl Strategy<Value = Hostile> {
    let method = prop_oneof![
        6 => prop::sample::select(surface.methods.to_vec()).prop_map(str::to_string),
        2 => prop::sample::select(vec!["GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS", "PATCH"])
            .prop_map(str::to_string),
        1 => "[A-Za-z]{1,10}",
    ];
    let main = surface.paths[0];
    let path = prop_oneof![
        4 => Just(main.to_string()),
        1 => prop::sample::select(surface.paths.to_vec()).prop_map(str::to_string),
        1 => (prop::sample::select(surface.paths.to_vec()), "[!-~]{0,40}")
            .prop_map(|(p, tail)| format!("{p}{tail}")),
    ];
    let session = prop_oneof![
        Just(SessionId::Live),
        "[0-9a-f]{32}".prop_map(SessionId::Unknown),
        value_bytes(80).prop_map(SessionId::Raw),
    ];
    let header = (
        prop_oneof![
            prop::sample::select(vec![
                "Authorization",
                "Content-Type",
                "Accept",
                "Cookie",
                "Mcp-Protocol-Version",
                "Last-Event-ID",
                "X-Forwarded-For",
            ])
            .prop_map(str::to_string),
            "[A-Za-z][A-Za-z0-9-]{0,15}",
        ]
        .prop_filter("framing stays honest", |n| {
            !matches!(
                n.to_ascii_lowercase().as_str(),
                "content-length"
                    | "transfer-encoding"
                    | "connection"
                    | "host"
                    | "expect"
                    | "upgrade"
                    | "te"
            )
        }),
        prop_oneof![
            prop::sample::select(vec![
                "application/json",
                "application/json, text/event-stream",
                "text/event-stream",
                "Bearer nope",
            ])
            .prop_map(|v| v.as_bytes().to_vec()),
            value_bytes(64),
        ],
    );
    (
        method,
        path,
        prop::option::weighted(0.9, arb_name()),
        prop::option::of(arb_name()),
        prop::option::of(session),
        prop::collection::vec(header, 0..5),
        arb_body(),
    )
        .prop_map(
            |(method, path, host, origin, session, headers, body)| Hostile {
                method,
                path,
                host,
                origin,
                session,
                headers,
                body,
            },
        )
}

fn render(r: &Hostile, l: &Listener, live: &str) -> Vec<u8> {
    let port = l.addr.port();
    let name = |n: &Name| -> Vec<u8> {
        match n {
            Name::Own => l.host().into_bytes(),
            Name::Localhost => format!("localhost:{port}").into_bytes(),
            Name::Rebound(h) => format!("{h}:{port}").into_bytes(),
            Name::Raw(b) => b.clone(),
        }
    };
    let mut out = format!("{} {} HTTP/1.1\r\n", r.method, r.path).into_bytes();
    let mut header = |k: &str, v: &[u8]| {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    };
    if let Some(h) = &r.host {
        header("Host", &name(h));
    }
    if let Some(o) = &r.origin {
        let mut v = b"http://".to_vec();
        v.extend(name(o));
        header("Origin", &v);
    }
    match &r.session {
        // The live session stays live (its requests are the ones a rebound page would
        // want served): a DELETE names one never issued instead.
        Some(SessionId::Live) if r.method == "DELETE" => {
            header("Mcp-Session-Id", b"00000000000000000000000000000000")
        }
        Some(SessionId::Live) => header("Mcp-Session-Id", live.as_bytes()),
        Some(SessionId::Unknown(s)) => header("Mcp-Session-Id", s.as_bytes()),
        Some(SessionId::Raw(b)) => header("Mcp-Session-Id", b),
        None => {}
    }
    for (k, v) in &r.headers {
        header(k, v);
    }
    header("Connection", b"close");
    header("Content-Length", r.body.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&r.body);
    out
}

/// Sends `cases` hostile requests; `server_errors` are the 5xx statuses the listener may
/// answer with (none other).
fn fuzz(l: &mut Listener, surface: &Surface, live: &str, server_errors: &[u16], cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&arb_request(surface), |r| {
            let raw = render(&r, l, live);
            let answer = exchange(l.addr, &raw, false, BOUND);
            let shown = String::from_utf8_lossy(&raw);
            prop_assert!(answer.is_ok(), "{:?} → {answer:?}", shown);
            let status = answer.map(|a| a.status).unwrap_or_default();
            let rebound = matches!(r.host, None | Some(Name::Rebound(_)))
                || matches!(r.origin, Some(Name::Rebound(_)));
            prop_assert!(
                !(rebound && (200..400).contains(&status)),
                "served without a loopback Host and Origin: {:?} → {}",
                shown,
                status
            );
            prop_assert!(
                status < 500 || server_errors.contains(&status),
                "{:?} → {}",
                shown,
                status
            );
            Ok(())
        })
        .unwrap();
    assert!(l.alive(), "the listener stopped");
    let err = l.stderr.lock().unwrap().clone();
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn the_mcp_listener_answers_every_hostile_request_and_keeps_serving() {
    // At most 8 stand-in servers at once; the fuzz's sessions expire soon after it.
    let mut l = mcp(
        "fuzz",
        "ok",
        &["--max-sessions", "8", "--session-idle", "5"],
    );
    let live = mcp_session(&l);
    // 502: the server did not answer initialize; 503: the sessions are all taken.
    let surface = Surface {
        methods: &["POST", "POST", "POST", "GET", "DELETE"],
        paths: &["/mcp", "/", "/mcp/"],
    };
    fuzz(&mut l, &surface, &live, &[502, 503], 192);
    // A legitimate client is still served (once the fuzz's sessions have expired, if they
    // took every slot).
    let started = std::time::Instant::now();
    let sid = loop {
        let a = send(
            l.addr,
            &request(
                "POST",
                "/mcp",
                Some(&l.host()),
                &mcp_headers(&[]),
                INITIALIZE,
            ),
        );
        if a.status == 200 {
            break a.header("mcp-session-id").unwrap().to_string();
        }
        assert_eq!(a.status, 503, "{a:?}");
        assert!(started.elapsed() < Duration::from_secs(15), "{a:?}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let call = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"work","arguments":{"after":"fuzz"}}}"#;
    let a = send(
        l.addr,
        &request(
            "POST",
            "/mcp",
            Some(&l.host()),
            &mcp_headers(&[("Mcp-Session-Id", &sid)]),
            call,
        ),
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains("done"), "{}", a.body);
}

#[test]
fn the_dashboard_answers_every_hostile_request_and_keeps_serving() {
    let mut l = ui("fuzz", &[]);
    let surface = Surface {
        methods: &["GET", "GET", "PUT", "DELETE"],
        paths: &[
            "/api/sessions",
            "/",
            "/settings",
            "/assets/app.js",
            "/api/sessions/",
            "/sessions/",
            "/api/config",
        ],
    };
    fuzz(&mut l, &surface, "", &[], 192);
    let a = send(
        l.addr,
        &request("GET", "/api/sessions", Some(&l.host()), &[], ""),
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains("\"sessions\""), "{}", a.body);
}
