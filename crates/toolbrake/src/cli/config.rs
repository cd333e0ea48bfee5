//! `toolbrake config check` and `toolbrake config default`.

use super::CliError;
use std::path::Path;
use std::process::ExitCode;
use toolbrake::settings;
use toolbrake_config::ConfigToml;

pub fn check(path: Option<&Path>) -> Result<ExitCode, CliError> {
    let s = settings::load(path)?;
    outln!("# ok: configuration from {}", s.source);
    for notice in s.notices() {
        outln!("# {notice}");
    }
    out!("{}", s.engine.to_toml());
    outln!(
        "\n[protocol]\nmax_line_bytes = {}",
        s.protocol.max_line_bytes
    );
    out!("\n{}", s.store.to_toml());
    out!("\n{}", s.fetch.to_toml());
    out!("\n{}", s.telemetry.to_toml());
    if !s.trust.is_empty() {
        let projects: Vec<String> = s
            .trust
            .iter()
            .map(|p| format!("{:?}", p.display().to_string()))
            .collect();
        outln!("\n[trust]\nprojects = [{}]", projects.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn default() -> Result<ExitCode, CliError> {
    out!("{}", settings::DEFAULT_FILE);
    Ok(ExitCode::SUCCESS)
}
