//! `toolbrake ui`: the dashboard over the configured store.

use super::CliError;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolbrake::settings::{self, process_env, StoreKind};
use toolbrake::ui::{serve, Ui};
use toolbrake_http::HttpLimits;

pub fn run(
    config: Option<&Path>,
    listen: SocketAddr,
    token: Option<String>,
    limits: HttpLimits,
) -> Result<ExitCode, CliError> {
    let token = token.filter(|t| !t.is_empty());
    if !listen.ip().is_loopback() && token.is_none() {
        return Err(format!(
            "refusing to serve the dashboard on {listen} without a token: it shows and changes what toolbrake does; pass --token (or set TOOLBRAKE_UI_TOKEN), or listen on 127.0.0.1"
        )
        .into());
    }
    let s = settings::load(config)?;
    let cwd = std::env::current_dir()?;
    let editable = settings::editable(config, &process_env, &cwd);
    let config_path: PathBuf = editable.path().to_path_buf();
    let store = s.store.open(StoreKind::Sqlite, &process_env)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr()?;
        eprintln!(
            "toolbrake ui: http://{addr}/ ({}; settings in {})",
            store.describe(),
            config_path.display()
        );
        if let settings::Editable::Project {
            shadows: Some(user),
            ..
        } = &editable
        {
            eprintln!(
                "toolbrake ui: {} shadows your configuration {} for everything run in {}",
                config_path.display(),
                user.display(),
                cwd.display()
            );
        }
        serve(
            Ui {
                store,
                config_path,
                editable,
                token,
                listen: addr,
            },
            listener,
            limits,
        )
        .await?;
        Ok::<_, CliError>(ExitCode::SUCCESS)
    })
}
