//! Command-line surface: one module per subcommand.

mod config;
mod explain;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// A circuit breaker for AI agents' tool calls.
#[derive(Debug, Parser)]
#[command(name = "loopbrake", version, about, long_about = None)]
pub struct Cli {
    /// Configuration file (default lookup: $LOOPBRAKE_CONFIG, ./loopbrake.toml,
    /// $XDG_CONFIG_HOME/loopbrake/config.toml, built-in defaults).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate or print configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Show how a call is identified: canonical JSON, hash, and every fingerprint.
    Explain {
        /// Tool name, e.g. `bash`.
        tool: String,
        /// Arguments as JSON, e.g. '{"command":"ls"}'; `-` reads them from stdin.
        args: String,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a configuration file (or the one the lookup finds) and print the effective configuration.
    Check {
        /// The file to check.
        path: Option<PathBuf>,
    },
    /// Print a commented configuration file holding the defaults.
    Default,
}

/// Errors reported to the user with exit code 2.
pub type CliError = Box<dyn std::error::Error>;

/// Runs one parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Config(ConfigCommand::Check { path }) => {
            config::check(path.or(cli.config).as_deref())
        }
        Command::Config(ConfigCommand::Default) => config::default(),
        Command::Explain { tool, args } => explain::run(cli.config.as_deref(), &tool, &args),
    }
}
