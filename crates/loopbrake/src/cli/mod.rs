//! Command-line surface: one module per subcommand.

mod config;
mod explain;
mod replay;

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
    /// Replay protocol events (or recorded runs) through the engines: one output line per event.
    Replay {
        /// Read recorded runs in this format instead of protocol events:
        /// trajectory, claude-code or codex.
        #[arg(long, value_name = "FORMAT")]
        from: Option<String>,
        /// Print a summary for people instead of protocol lines.
        #[arg(long)]
        report: bool,
        /// Write the report as one self-contained HTML page.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Input files (gzip is read directly); `-` or none reads stdin.
        files: Vec<PathBuf>,
    },
    /// Serve the protocol as a long-running sidecar: one answer line per event, at once.
    Serve {
        /// Speak the protocol on stdin/stdout.
        #[arg(long, required = true)]
        stdio: bool,
    },
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
        Command::Replay {
            from,
            report,
            html,
            files,
        } => replay::replay(
            cli.config.as_deref(),
            from.as_deref(),
            report,
            html.as_deref(),
            &files,
        ),
        Command::Serve { stdio: _ } => replay::serve(cli.config.as_deref()),
    }
}
