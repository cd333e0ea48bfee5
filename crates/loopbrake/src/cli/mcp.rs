//! `loopbrake mcp [--fetch-tool] -- COMMAND [ARGS…]`: the MCP proxy in front of a stdio
//! server (or `--url` a Streamable HTTP one), optionally offering `web_fetch_file`.

use super::CliError;
use loopbrake::settings::{self, process_env, StoreKind};
use loopbrake::Engine;
use loopbrake_mcp::{run as proxy, Options, ProxyError};
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What `loopbrake mcp` was asked to do.
pub struct Server {
    pub session: Option<String>,
    pub ask_timeout: u64,
    pub url: Option<String>,
    pub fetch_tool: bool,
    pub command: Vec<String>,
}

pub fn run(config: Option<&Path>, server: Server) -> Result<ExitCode, CliError> {
    let Server {
        session,
        ask_timeout,
        url,
        fetch_tool,
        command,
    } = server;
    let mut s = settings::load(config)?;
    let fetch = if fetch_tool {
        // The breaker sends shell fetches to the tool this proxy now offers.
        s.engine
            .breaker
            .offer_fetch_tool(loopbrake_fetch::TOOL_NAME);
        let root = std::env::current_dir()?;
        Some(Arc::new(
            loopbrake_fetch::Fetcher::new(s.fetch.clone(), &root)
                .map_err(|e| format!("cannot use {} as the workspace root: {e}", root.display()))?,
        ))
    } else {
        None
    };
    let store = s.store.open(StoreKind::Memory, &process_env)?;
    let default_session = session.unwrap_or_else(|| {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        format!("mcp-proxy:{}:{t}", std::process::id())
    });
    let offered = fetch.is_some();
    let reload: Option<loopbrake_mcp::Reloader> = settings::Watcher::new(&s).map(|mut w| {
        Box::new(move || {
            w.changed().map(|mut l| {
                if offered {
                    l.engine
                        .breaker
                        .offer_fetch_tool(loopbrake_fetch::TOOL_NAME);
                }
                Engine::new(l.engine)
            })
        }) as loopbrake_mcp::Reloader
    });
    let opts = Options {
        engine: Engine::new(s.engine.clone()),
        reload,
        store,
        default_session,
        ask_timeout: Duration::from_secs(ask_timeout),
        fail_closed: s.store.fail_closed,
        http_session: None,
        fetch,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = rt.block_on(async move {
        if let Some(url) = url {
            return match loopbrake_mcp::run_http(opts, tokio::io::stdin(), tokio::io::stdout(), url)
                .await
            {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("loopbrake mcp: {e}; stopping");
                    Ok(ExitCode::from(1))
                }
            };
        }
        let Some((program, args)) = command.split_first() else {
            // `--fetch-tool` alone: a server offering only web_fetch_file.
            return match loopbrake_mcp::run_fetch_only(
                opts,
                tokio::io::stdin(),
                tokio::io::stdout(),
            )
            .await
            {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("loopbrake mcp: {e}; stopping");
                    Ok(ExitCode::from(1))
                }
            };
        };
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the MCP server {program:?}: {e}"))?;
        let server_in = child.stdout.take().ok_or("the server has no stdout")?;
        let server_out = child.stdin.take().ok_or("the server has no stdin")?;
        let result = proxy(
            opts,
            tokio::io::stdin(),
            tokio::io::stdout(),
            server_in,
            server_out,
        )
        .await;
        match result {
            Ok(()) => {
                // The client closed: the server sees its stdin close; give it a moment.
                if tokio::time::timeout(Duration::from_secs(5), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(e @ ProxyError::Downstream(_)) => {
                let status =
                    match tokio::time::timeout(Duration::from_millis(500), child.wait()).await {
                        Ok(Ok(st)) => format!(" ({st})"),
                        _ => {
                            let _ = child.kill().await;
                            String::new()
                        }
                    };
                eprintln!("loopbrake mcp: {e}{status}; stopping");
                Ok(ExitCode::from(1))
            }
            Err(e) => Err(e.to_string().into()),
        }
    });
    // Tokio reads stdin on a blocking thread that a runtime drop would wait for (until
    // the client writes or closes): do not wait for it.
    rt.shutdown_background();
    outcome
}
