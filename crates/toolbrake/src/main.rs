//! The `toolbrake` command: parses the command line and hands each subcommand to its
//! module under `cli/`. Every decision is made by `toolbrake-core`.

mod allocator;
mod cli;

use clap::Parser;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: allocator::Switch = allocator::Switch;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    if args.judges_in_bulk() {
        allocator::use_mimalloc();
    }
    match cli::run(args) {
        Ok(code) => code,
        // The reader of our output went away: nothing left to say, and nothing failed.
        Err(e) if cli::is_closed_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "toolbrake: {e}");
            ExitCode::from(2)
        }
    }
}
