//! `loopbrake mcp -- COMMAND [ARGS…]`: the MCP proxy in front of a stdio server.

use super::CliError;
use loopbrake::settings::{self, process_env, StoreKind};
use loopbrake::Engine;
use loopbrake_mcp::{run as proxy, Options, ProxyError};
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub fn run(
    config: Option<&Path>,
    session: Option<String>,
    ask_timeout: u64,
    url: Option<String>,
    command: &[String],
) -> Result<ExitCode, CliError> {
    let s = settings::load(config)?;
    let store = s.store.open(StoreKind::Memory, &process_env)?;
    let default_session = session.unwrap_or_else(|| {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        format!("mcp-proxy:{}:{t}", std::process::id())
    });
    let opts = Options {
        engine: Engine::new(s.engine),
        store,
        default_session,
        ask_timeout: Duration::from_secs(ask_timeout),
        fail_closed: s.store.fail_closed,
        http_session: None,
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
        let (program, args) = command.split_first().ok_or("no server command after --")?;
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
