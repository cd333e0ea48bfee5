//! `toolbrake mcp [--fetch-tool] -- COMMAND [ARGS…]`: the MCP proxy in front of a stdio
//! server (or `--url` a Streamable HTTP one), optionally offering `web_fetch_file`.

use super::operate::{Operate, Telemetry};
use super::CliError;
use super::Connections;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use toolbrake::settings::{self, process_env, StoreKind};
use toolbrake::Engine;
use toolbrake_http::HttpLimits;
use toolbrake_mcp::events::ProxyEvents;
use toolbrake_mcp::listen::{Downstream, Listen, SessionLimits};
use toolbrake_mcp::{Options, ProxyError};

/// What `toolbrake mcp` was asked to do (its command-line arguments). Without a server
/// the error names all three ways to give one: a command, `--url`, `--fetch-tool`.
#[derive(Debug, clap::Args)]
#[command(group(
    clap::ArgGroup::new("server")
        .required(true)
        .multiple(true)
        .args(["command", "url", "fetch_tool"])
))]
#[command(override_usage = "toolbrake mcp [OPTIONS] -- <COMMAND>...\n       \
     toolbrake mcp [OPTIONS] --url <URL>\n       \
     toolbrake mcp [OPTIONS] --fetch-tool [-- <COMMAND>... | --url <URL>]")]
pub struct Server {
    /// The session of calls whose `_meta` names no conversation (default: one per
    /// proxy process). Proxies that share a store and a session count together.
    #[arg(long, env = "TOOLBRAKE_SESSION")]
    pub session: Option<String>,
    /// Seconds the operator has to answer an ask (through the client's elicitation).
    #[arg(long, default_value_t = 120)]
    pub ask_timeout: u64,
    /// A Streamable HTTP server's endpoint (e.g. http://127.0.0.1:3001/mcp) instead
    /// of a command.
    #[arg(long, conflicts_with = "command")]
    pub url: Option<String>,
    /// Offer `web_fetch_file` (fetch a URL to a file under the working directory, per
    /// `[fetch]`) next to the server's tools, and send shell fetches to it. With no
    /// server command or --url, serve only that tool.
    #[arg(long)]
    pub fetch_tool: bool,
    /// Serve MCP's Streamable HTTP transport at http://ADDR/mcp instead of stdio: each
    /// client session gets its own server (and toolbrake session).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// With --listen: require `Authorization: Bearer TOKEN` on every request (needed to
    /// listen beyond loopback).
    #[arg(
        long,
        env = "TOOLBRAKE_MCP_TOKEN",
        hide_env_values = true,
        requires = "listen"
    )]
    pub token: Option<String>,
    /// With --listen: client sessions kept at once (503 past it).
    #[arg(
        long,
        value_name = "N",
        default_value_t = SessionLimits::MAX_SESSIONS as u64,
        value_parser = clap::value_parser!(u64).range(1..=65536),
        requires = "listen"
    )]
    pub max_sessions: u64,
    /// With --listen: client sessions kept at once for one client address (429 past it).
    #[arg(
        long,
        value_name = "N",
        default_value_t = SessionLimits::MAX_PER_CLIENT as u64,
        value_parser = clap::value_parser!(u64).range(1..=65536),
        requires = "listen"
    )]
    pub max_sessions_per_client: u64,
    /// With --listen: seconds after which a session with no request, none in flight and
    /// no GET stream open ends (its client then gets 404 and starts a new one).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = SessionLimits::IDLE.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..),
        requires = "listen"
    )]
    pub session_idle: u64,
    /// With --listen: the connections' limits.
    #[command(flatten)]
    pub connections: Connections,
    /// Metrics and logs.
    #[command(flatten)]
    pub operate: Operate,
    /// The server's command and arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(config: Option<&Path>, server: Server) -> Result<ExitCode, CliError> {
    let Server {
        session,
        ask_timeout,
        url,
        fetch_tool,
        listen,
        token,
        max_sessions,
        max_sessions_per_client,
        session_idle,
        connections,
        operate,
        command,
    } = server;
    let telemetry = Telemetry::new(&operate)?;
    let sessions = SessionLimits {
        max_sessions: usize::try_from(max_sessions).unwrap_or(usize::MAX),
        max_per_client: usize::try_from(max_sessions_per_client).unwrap_or(usize::MAX),
        idle: Duration::from_secs(session_idle),
    };
    let token = token.filter(|t| !t.is_empty());
    if let Some(addr) = listen {
        if !addr.ip().is_loopback() && token.is_none() {
            return Err(format!(
                "refusing to serve MCP on {addr} without a token: anyone who reaches it could call the server's tools; pass --token (or set TOOLBRAKE_MCP_TOKEN), or listen on 127.0.0.1"
            )
            .into());
        }
    }
    let mut s = settings::load(config)?;
    // What the agents' calls must not change (self-protection), kept across reloads.
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let protected = settings::protected(&s, StoreKind::Memory, &process_env, &cwd);
    s.engine.breaker.protect(protected.clone());
    // What an edit of the file changes in a running proxy: the engines, and the fetch
    // tool's settings when it offers it (the store is opened once).
    let applies: &[&str] = if fetch_tool {
        &["streak", "breaker", "fetch"]
    } else {
        toolbrake_core::config::ENGINE_TABLES
    };
    let watcher = settings::Watcher::new(&s, applies);
    let fetch = if fetch_tool {
        // The breaker sends shell fetches to the tool this proxy now offers.
        s.engine
            .breaker
            .offer_fetch_tool(toolbrake_fetch::TOOL_NAME);
        let root = std::env::current_dir()?;
        Some(Arc::new(
            toolbrake_fetch::Fetcher::new(s.fetch.clone(), &root)
                .map_err(|e| format!("cannot use {} as the workspace root: {e}", root.display()))?,
        ))
    } else {
        None
    };
    for notice in s.notices() {
        telemetry.warn(&notice);
    }
    let store = telemetry.store(s.store.open(StoreKind::Memory, &process_env)?);
    // The store's counters are read by the metrics endpoint, or by others sharing the
    // store (the dashboard, their own metrics); a memory store without one has no reader.
    let counters = store.shared() || operate.metrics.is_some();
    let default_session = session.unwrap_or_else(|| {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        format!("mcp-proxy:{}:{t}", std::process::id())
    });
    let fetcher = fetch.clone();
    let reloads = telemetry.clone();
    let reload: Option<toolbrake_mcp::Reloader> = watcher.map(|mut w| {
        Box::new(move || {
            reloads.reloaded(w.poll()).map(|mut l| {
                l.engine.breaker.protect(protected.clone());
                if let Some(f) = &fetcher {
                    l.engine
                        .breaker
                        .offer_fetch_tool(toolbrake_fetch::TOOL_NAME);
                    f.reconfigure(l.fetch);
                }
                Engine::new(l.engine)
            })
        }) as toolbrake_mcp::Reloader
    });
    // Built before the runtime: the exporter runs on the SDK's own thread.
    let traces = telemetry.traces(&s.telemetry, "mcp");
    let opts = Options {
        engine: Engine::new(s.engine.clone()),
        reload,
        store,
        default_session,
        ask_timeout: Duration::from_secs(ask_timeout),
        fail_closed: s.store.fail_closed,
        http_session: None,
        fetch,
        observer: traces.observer(telemetry.observer()),
        events: Some(telemetry.clone() as Arc<dyn ProxyEvents>),
        counters,
    };
    // One client on stdio: its stdin and stdout are waited on in the reactor too (see
    // toolbrake_mcp::stdio), so with the memory store a message is read, judged and
    // written on this one thread, a current-thread runtime (no worker to wake). A store
    // that may block (SQLite, Redis) keeps one worker, so it runs beside the relay in
    // block_in_place; the HTTP listener serves its sessions on every core.
    let mut rt = match (listen.is_none(), opts.store.may_block()) {
        (true, false) => tokio::runtime::Builder::new_current_thread(),
        (true, true) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(1);
            b
        }
        (false, _) => tokio::runtime::Builder::new_multi_thread(),
    };
    let rt = rt.enable_all().build()?;
    let outcome = rt.block_on(async move {
        // The metrics endpoint, bound before anything else starts.
        let metrics_addr = match telemetry.endpoint() {
            Some((addr, endpoint)) => {
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
                let bound = l.local_addr()?;
                tokio::spawn(toolbrake_telemetry::http::serve(
                    l,
                    endpoint,
                    HttpLimits::default(),
                ));
                if listen.is_none() {
                    telemetry.metrics_at("mcp", bound);
                }
                Some(bound)
            }
            None => None,
        };
        if let Some(addr) = listen {
            let downstream = match (url, command.is_empty()) {
                (Some(u), _) => Downstream::Url(u),
                (None, false) => Downstream::Command(command.to_vec()),
                (None, true) => Downstream::None,
            };
            let template = opts;
            let store = template.store;
            let fetch = template.fetch;
            let observer = template.observer;
            let events = template.events;
            let (ask_timeout, fail_closed) = (template.ask_timeout, template.fail_closed);
            // The stdio relay's reloader, asked once per new client session instead.
            let current = std::sync::Mutex::new((template.engine, template.reload));
            let options = move |session: String| {
                // Each new client session starts with the configuration as it is now.
                let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(engine) = current.1.as_mut().and_then(|reload| reload()) {
                    current.0 = engine;
                }
                Options {
                    engine: current.0.clone(),
                    store: store.clone(),
                    default_session: session,
                    ask_timeout,
                    fail_closed,
                    http_session: None,
                    fetch: fetch.clone(),
                    reload: None,
                    observer: observer.clone(),
                    events: events.clone(),
                    counters,
                }
            };
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            telemetry.info(&format!(
                "toolbrake mcp: serving MCP (Streamable HTTP) at http://{}/mcp",
                listener.local_addr()?
            ));
            if let Some(bound) = metrics_addr {
                telemetry.metrics_at("mcp", bound);
            }
            toolbrake_mcp::listen::serve(
                Listen {
                    options: Box::new(options),
                    downstream,
                    token,
                    sessions,
                    http: connections.limits(),
                },
                listener,
            )
            .await?;
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(url) = url {
            telemetry.downstream_started();
            return match toolbrake_mcp::run_http(
                opts,
                toolbrake_mcp::stdio::stdin(),
                toolbrake_mcp::stdio::stdout(),
                url,
            )
            .await
            {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    if matches!(e, ProxyError::Downstream(_)) {
                        telemetry.downstream_failed();
                    }
                    telemetry.error(&format!("toolbrake mcp: {e}; stopping"));
                    Ok(ExitCode::from(1))
                }
            };
        }
        let Some(program) = command.first() else {
            // `--fetch-tool` alone: a server offering only web_fetch_file.
            return match toolbrake_mcp::run_fetch_only(
                opts,
                toolbrake_mcp::stdio::stdin(),
                toolbrake_mcp::stdio::stdout(),
            )
            .await
            {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    telemetry.error(&format!("toolbrake mcp: {e}; stopping"));
                    Ok(ExitCode::from(1))
                }
            };
        };
        telemetry.downstream_started();
        let run = toolbrake_mcp::run_child(
            opts,
            toolbrake_mcp::stdio::stdin(),
            toolbrake_mcp::stdio::stdout(),
            &command,
        )
        .await
        .map_err(|e| {
            telemetry.downstream_failed();
            format!("cannot start the MCP server {program:?}: {e}")
        })?;
        match run.result {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(e @ ProxyError::Downstream(_)) => {
                telemetry.downstream_failed();
                let status = run.status.map(|st| format!(" ({st})")).unwrap_or_default();
                telemetry.error(&format!("toolbrake mcp: {e}{status}; stopping"));
                Ok(ExitCode::from(1))
            }
            Err(e) => Err(e.to_string().into()),
        }
    });
    // Tokio reads stdin on a blocking thread that a runtime drop would wait for (until
    // the client writes or closes): do not wait for it.
    rt.shutdown_background();
    drop(traces);
    outcome
}
