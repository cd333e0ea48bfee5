//! `loopbrake config check` and `loopbrake config default`.

use super::CliError;
use loopbrake::settings;
use std::path::Path;
use std::process::ExitCode;

pub fn check(path: Option<&Path>) -> Result<ExitCode, CliError> {
    let s = settings::load(path)?;
    println!("# ok: configuration from {}", s.source);
    print!("{}", s.engine.to_toml());
    println!(
        "\n[protocol]\nmax_line_bytes = {}",
        s.protocol.max_line_bytes
    );
    print!("\n{}", s.store.to_toml());
    Ok(ExitCode::SUCCESS)
}

pub fn default() -> Result<ExitCode, CliError> {
    print!("{}", settings::DEFAULT_FILE);
    Ok(ExitCode::SUCCESS)
}
