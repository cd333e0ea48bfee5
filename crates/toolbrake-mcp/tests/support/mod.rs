//! Helpers shared by this crate's integration tests: the proxy's options with nothing
//! optional switched on, and the proxy running in process between two in-memory pipes.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;
use tokio::io::{BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};
use tokio::task::JoinHandle;
use toolbrake_core::Engine;
use toolbrake_mcp::{run, Options, ProxyError};
use toolbrake_store::MemoryStore;

/// Options for `engine` in `session` over a memory store: asks time out after 200 ms,
/// calls that cannot be judged run (fail open), and no HTTP session, `web_fetch_file`,
/// reloading, observer or events. Tests change what they need with `..options(…)`.
pub fn options(engine: Engine, session: &str) -> Options {
    Options {
        engine,
        store: Arc::new(MemoryStore::new()),
        default_session: session.into(),
        ask_timeout: Duration::from_millis(200),
        fail_closed: false,
        http_session: None,
        fetch: None,
        reload: None,
        observer: None,
        events: None,
        counters: true,
    }
}

/// The proxy running between a client and a server the test plays, each end split into
/// its writer and its lines.
pub struct Wired {
    pub proxy: JoinHandle<Result<(), ProxyError>>,
    pub client_w: WriteHalf<DuplexStream>,
    pub at_client: Lines<BufReader<ReadHalf<DuplexStream>>>,
    pub server_w: WriteHalf<DuplexStream>,
    pub at_server: Lines<BufReader<ReadHalf<DuplexStream>>>,
}

/// Starts the proxy with `opts` between two in-memory pipes (1 MiB each way).
pub fn wire(opts: Options) -> Wired {
    use tokio::io::AsyncBufReadExt;
    let (client_side, proxy_side) = tokio::io::duplex(1 << 20);
    let (proxy_in, proxy_out) = tokio::io::split(proxy_side);
    let (server_side, proxy_server_side) = tokio::io::duplex(1 << 20);
    let (server_in, server_out) = tokio::io::split(proxy_server_side);
    let proxy = tokio::spawn(run(opts, proxy_in, proxy_out, server_in, server_out));
    let (client_r, client_w) = tokio::io::split(client_side);
    let (server_r, server_w) = tokio::io::split(server_side);
    Wired {
        proxy,
        client_w,
        at_client: BufReader::new(client_r).lines(),
        server_w,
        at_server: BufReader::new(server_r).lines(),
    }
}

/// Writes `msg` as one line.
pub async fn send<W: tokio::io::AsyncWrite + Unpin>(w: &mut W, msg: &serde_json::Value) {
    use tokio::io::AsyncWriteExt;
    w.write_all(format!("{msg}\n").as_bytes()).await.unwrap();
}

/// The next line, within 5 s (a test fails instead of hanging).
pub async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut Lines<R>) -> String {
    tokio::time::timeout(Duration::from_secs(5), lines.next_line())
        .await
        .expect("a line within 5 s")
        .unwrap()
        .expect("a line, not the end")
}
