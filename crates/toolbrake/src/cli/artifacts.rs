//! What a release ships beside the binary, generated from the command line's own
//! definition so they never drift from it: shell completions (`clap_complete`) and the man
//! page (`clap_mangen`).

use super::{Cli, CliError};
use clap::CommandFactory;
use std::io::Write;
use std::process::ExitCode;

/// `toolbrake completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<ExitCode, CliError> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "toolbrake", &mut out);
    std::io::stdout().lock().write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// `toolbrake man`: the man page, toolbrake(1) (its SUBCOMMANDS section lists every
/// command; `toolbrake help COMMAND` has their flags).
pub fn man() -> Result<ExitCode, CliError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    std::io::stdout().lock().write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}
