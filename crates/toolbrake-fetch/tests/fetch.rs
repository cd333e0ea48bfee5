//! `web_fetch_file` against a real HTTP server on 127.0.0.1, started by each test.

use axum::extract::Path as UrlPath;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use axum::Router;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use toolbrake_fetch::{FetchError, FetchSettings, Fetcher};

async fn server() -> String {
    let app = Router::new()
        .route(
            "/data.json",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    "{\"rows\": [1, 2, 3]}",
                )
            }),
        )
        .route(
            "/page",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    "<h1>hi</h1>",
                )
            }),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "no such thing") }),
        )
        .route("/big", get(|| async { "x".repeat(100_000) }))
        .route(
            "/hop/{n}",
            get(|UrlPath(n): UrlPath<u32>| async move {
                if n == 0 {
                    "arrived".into_response()
                } else {
                    Redirect::temporary(&format!("/hop/{}", n - 1)).into_response()
                }
            }),
        )
        .route(
            "/set",
            get(|| async { ([(header::SET_COOKIE, "sid=abc123; Path=/")], "set") }),
        )
        .route(
            "/echo-cookie",
            get(|h: HeaderMap| async move {
                h.get(header::COOKIE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("none")
                    .to_string()
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn fetcher(root: &Path, settings: FetchSettings) -> Fetcher {
    Fetcher::new(settings, root).unwrap()
}

#[tokio::test]
async fn the_body_goes_to_a_file_and_the_answer_describes_it() {
    let base = server().await;
    let root = tempfile::tempdir().unwrap();
    let f = fetcher(root.path(), FetchSettings::default());
    let got = f
        .call("s1", &json!({"url": format!("{base}/data.json")}))
        .await
        .unwrap();
    assert_eq!(got.status_code, 200);
    assert_eq!(got.kind, "json");
    assert_eq!(got.bytes, 19);
    assert!(
        got.path.starts_with("fetched/127.0.0.1-") && got.path.ends_with(".json"),
        "{got:?}"
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join(&got.path)).unwrap(),
        "{\"rows\": [1, 2, 3]}"
    );
    let result = got.to_mcp_result();
    assert_eq!(result["isError"], false);
    assert_eq!(result["structuredContent"]["statusCode"], 200);
    assert!(
        !result.to_string().contains("rows"),
        "never the body: {result}"
    );

    let got = f
        .call(
            "s1",
            &json!({"url": format!("{base}/page"), "path": "pages/home.html"}),
        )
        .await
        .unwrap();
    assert_eq!((got.path.as_str(), got.kind), ("pages/home.html", "html"));
    assert_eq!(
        std::fs::read_to_string(root.path().join("pages/home.html")).unwrap(),
        "<h1>hi</h1>"
    );
}

#[tokio::test]
async fn an_http_error_is_written_and_reported_as_a_tool_error() {
    let base = server().await;
    let root = tempfile::tempdir().unwrap();
    let f = fetcher(root.path(), FetchSettings::default());
    let got = f
        .call("s1", &json!({"url": format!("{base}/missing")}))
        .await
        .unwrap();
    assert_eq!(got.status_code, 404);
    assert_eq!(got.to_mcp_result()["isError"], true);
    assert_eq!(
        std::fs::read_to_string(root.path().join(&got.path)).unwrap(),
        "no such thing"
    );
}

#[tokio::test]
async fn redirects_are_followed_up_to_the_cap() {
    let base = server().await;
    let root = tempfile::tempdir().unwrap();
    let f = fetcher(
        root.path(),
        FetchSettings {
            max_redirects: 2,
            ..FetchSettings::default()
        },
    );
    let got = f
        .call("s1", &json!({"url": format!("{base}/hop/2")}))
        .await
        .unwrap();
    assert_eq!(got.final_url, format!("{base}/hop/0"));
    let e = f
        .call("s1", &json!({"url": format!("{base}/hop/3")}))
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::TooManyRedirects(2)), "{e}");
    assert_eq!(
        e.to_string(),
        "stopped after 2 redirects ([fetch] max_redirects)"
    );
}

#[tokio::test]
async fn a_body_over_max_bytes_is_cut_and_marked() {
    let base = server().await;
    let root = tempfile::tempdir().unwrap();
    let f = fetcher(
        root.path(),
        FetchSettings {
            max_bytes: 1000,
            ..FetchSettings::default()
        },
    );
    let got = f
        .call("s1", &json!({"url": format!("{base}/big")}))
        .await
        .unwrap();
    assert_eq!((got.bytes, got.truncated), (1000, true));
    assert_eq!(
        std::fs::metadata(root.path().join(&got.path))
            .unwrap()
            .len(),
        1000
    );
    assert_eq!(got.to_json()["truncated"], true);
}

#[tokio::test]
async fn paths_outside_the_workspace_root_are_refused() {
    let base = server().await;
    let outside = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("f.txt"), root.path().join("link.txt")).unwrap();
    std::fs::create_dir(root.path().join("inside")).unwrap();
    std::os::unix::fs::symlink(root.path().join("inside"), root.path().join("alias")).unwrap();
    let f = fetcher(root.path(), FetchSettings::default());
    let url = format!("{base}/data.json");
    for path in [
        "../x.json".to_string(),
        "a/../../x.json".to_string(),
        outside.path().join("x.json").display().to_string(),
        "escape/x.json".to_string(),
        "link.txt".to_string(),
    ] {
        let e = f
            .call("s1", &json!({"url": url, "path": path}))
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("refusing to write outside the workspace root"),
            "{path}: {e}"
        );
    }
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
    // A symlink that stays inside is fine.
    let got = f
        .call("s1", &json!({"url": url, "path": "alias/x.json"}))
        .await
        .unwrap();
    assert_eq!(got.path, "inside/x.json");
    assert!(root.path().join("inside/x.json").is_file());
}

#[tokio::test]
async fn private_hosts_are_refused_when_configured() {
    let base = server().await;
    let root = tempfile::tempdir().unwrap();
    let f = fetcher(
        root.path(),
        FetchSettings {
            allow_private_hosts: false,
            ..FetchSettings::default()
        },
    );
    let e = f
        .call("s1", &json!({"url": format!("{base}/data.json")}))
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::PrivateHost(_)), "{e}");
    let port = base.rsplit(':').next().unwrap();
    // By name: refused after resolution.
    let e = f
        .call(
            "s1",
            &json!({"url": format!("http://localhost:{port}/data.json")}),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::PrivateHost(_)), "{e}");
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn cookies_are_kept_per_session() {
    let base = server().await;
    let root = tempfile::tempdir().unwrap();
    let f = fetcher(root.path(), FetchSettings::default());
    f.call("a", &json!({"url": format!("{base}/set")}))
        .await
        .unwrap();
    let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
    let mine = f
        .call(
            "a",
            &json!({"url": format!("{base}/echo-cookie"), "path": "a.txt"}),
        )
        .await
        .unwrap();
    let theirs = f
        .call(
            "b",
            &json!({"url": format!("{base}/echo-cookie"), "path": "b.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(read(&mine.path), "sid=abc123");
    assert_eq!(read(&theirs.path), "none");
}

#[tokio::test]
async fn bad_arguments_and_slow_servers_get_clear_errors() {
    let base = server().await;
    let root = tempfile::tempdir().unwrap();
    let f = fetcher(
        root.path(),
        FetchSettings {
            timeout: Duration::from_millis(300),
            ..FetchSettings::default()
        },
    );
    let e = f.call("s1", &json!({})).await.unwrap_err();
    assert!(e.to_string().contains("`url` is required"), "{e}");
    let e = f
        .call("s1", &json!({"url": "file:///etc/passwd"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("only http and https"), "{e}");
    let e = f
        .call("s1", &json!({"url": "https://user:hunter2-secret-pw@"}))
        .await
        .unwrap_err();
    assert!(!e.to_string().contains("hunter2-secret-pw"), "{e}");
    let e = f
        .call(
            "s1",
            &json!({"url": format!("{base}/data.json"), "path": 3}),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("`path` must be"), "{e}");
    let started = std::time::Instant::now();
    let e = f
        .call("s1", &json!({"url": format!("{base}/slow")}))
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::Http(_)), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(e.to_mcp_result()["isError"], true);
}

/// A server whose `/held` answers only once the test lets it (`go`), after telling the test
/// the request arrived: the window between the path check and the write, held open.
async fn held_server() -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<()>,
    Arc<tokio::sync::Notify>,
) {
    let (arrived_tx, arrived) = tokio::sync::mpsc::unbounded_channel();
    let go = Arc::new(tokio::sync::Notify::new());
    let released = go.clone();
    let app = Router::new().route(
        "/held",
        get(move || {
            let (arrived_tx, released) = (arrived_tx.clone(), released.clone());
            async move {
                let _ = arrived_tx.send(());
                released.notified().await;
                "the body"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), arrived, go)
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test]
async fn a_symlink_planted_at_a_temporary_name_is_not_written_through() {
    let base = server().await;
    let outside = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    // The names a partial body went to before: `.<name>.part-<pid>-<n>`.
    for n in 0..4 {
        std::os::unix::fs::symlink(
            outside.path().join(format!("stolen-{n}")),
            root.path()
                .join(format!(".x.json.part-{}-{n}", std::process::id())),
        )
        .unwrap();
    }
    let f = fetcher(root.path(), FetchSettings::default());
    let got = f
        .call(
            "s1",
            &json!({"url": format!("{base}/data.json"), "path": "x.json"}),
        )
        .await
        .unwrap();
    assert_eq!(got.path, "x.json");
    assert_eq!(
        entries(outside.path()),
        Vec::<String>::new(),
        "nothing outside"
    );
    let meta = std::fs::symlink_metadata(root.path().join("x.json")).unwrap();
    assert!(meta.is_file(), "a plain file, not a link");
    assert_eq!(
        std::fs::read_to_string(root.path().join("x.json")).unwrap(),
        "{\"rows\": [1, 2, 3]}"
    );
    assert!(
        !entries(root.path())
            .iter()
            .any(|e| e.starts_with(".web_fetch_file-")),
        "no partial file left: {:?}",
        entries(root.path())
    );
}

#[tokio::test]
async fn a_directory_swapped_for_a_symlink_during_the_fetch_is_refused() {
    let (base, mut arrived, go) = held_server().await;
    let outside = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    let f = fetcher(root.path(), FetchSettings::default());
    // `sub` exists when the path is checked and is swapped for a link out meanwhile;
    // `new` does not exist yet and is planted as one.
    for (path, dir) in [("sub/x.json", "sub"), ("new/deeper/x.json", "new")] {
        let swap = async {
            arrived.recv().await.unwrap();
            let d = root.path().join(dir);
            if d.exists() {
                std::fs::rename(&d, root.path().join(format!("{dir}-was"))).unwrap();
            }
            std::os::unix::fs::symlink(outside.path(), &d).unwrap();
            go.notify_one();
        };
        let args = json!({"url": format!("{base}/held"), "path": path});
        let (got, ()) = tokio::join!(f.call("s1", &args), swap);
        let e = got.unwrap_err();
        assert!(matches!(e, FetchError::OutsideRoot(_)), "{path}: {e}");
        assert_eq!(
            e.to_string(),
            format!(
                "refusing to write outside the workspace root ({path}: {dir} became a symlink during the fetch)"
            )
        );
        assert_eq!(
            e.to_mcp_result()["isError"],
            true,
            "the model reads a refusal"
        );
        assert_eq!(
            entries(outside.path()),
            Vec::<String>::new(),
            "{path}: nothing written outside"
        );
    }
}

#[tokio::test]
async fn new_settings_apply_to_the_next_fetch_and_sessions_keep_their_cookies() {
    let base = server().await;
    let root = tempfile::tempdir().unwrap();
    let f = fetcher(root.path(), FetchSettings::default());
    f.call("a", &json!({"url": format!("{base}/set")}))
        .await
        .unwrap();
    assert!(!f.reconfigure(FetchSettings::default()), "nothing changed");
    assert!(f.reconfigure(FetchSettings {
        max_bytes: 4,
        ..FetchSettings::default()
    }));
    let got = f
        .call(
            "a",
            &json!({"url": format!("{base}/echo-cookie"), "path": "a.txt"}),
        )
        .await
        .unwrap();
    assert_eq!((got.bytes, got.truncated), (4, true));
    assert_eq!(
        std::fs::read_to_string(root.path().join("a.txt")).unwrap(),
        "sid="
    );
    f.reconfigure(FetchSettings {
        cookie_jar: false,
        allow_private_hosts: false,
        ..FetchSettings::default()
    });
    let e = f
        .call("a", &json!({"url": format!("{base}/echo-cookie")}))
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::PrivateHost(_)), "{e}");
    f.reconfigure(FetchSettings::default());
    let got = f
        .call(
            "a",
            &json!({"url": format!("{base}/echo-cookie"), "path": "b.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.path().join(&got.path)).unwrap(),
        "none",
        "turning the jar off forgot the cookies"
    );
}
