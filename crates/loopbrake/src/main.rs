//! The `loopbrake` command: parses the command line and hands each subcommand to its
//! module under `cli/`. Every decision is made by `loopbrake-core`.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("loopbrake: {e}");
            ExitCode::from(2)
        }
    }
}
