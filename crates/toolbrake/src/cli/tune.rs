//! `toolbrake tune`: the recorded history replayed under a sweep of settings; the table,
//! the frontier, the recommendation as `toolbrake.toml`. The sweep itself is
//! `toolbrake_protocol::tune`; this module parses flags, reads the input as `replay`
//! does, and prints or writes what the sweep found.

use super::replay::{check_format, open_input, write_private};
use super::CliError;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolbrake::settings;
use toolbrake_protocol::import;
use toolbrake_protocol::tune::{self, Corpus, ReadError};

/// How `toolbrake tune` was asked to run.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read recorded runs in this format instead of protocol events:
    /// trajectory, claude-code or codex.
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Sweep these values of one key instead of the default sweep (repeatable; the
    /// settings are every combination), e.g. `--sweep streak.max_repeats=3,4,5`.
    #[arg(long, value_name = "KEY=V1,V2,…")]
    pub sweep: Vec<String>,
    /// Settings judged side by side (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,
    /// Merge the recommendation into this configuration file (comments and other
    /// settings kept; created owner-only when missing).
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Write the frontier chart and the table as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the figures as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Input files (gzip is read directly); `-` or none reads stdin.
    pub files: Vec<PathBuf>,
}

fn name_of(path: &Path) -> String {
    if path == Path::new("-") {
        "stdin".into()
    } else {
        path.display().to_string()
    }
}

pub fn run(config: Option<&Path>, args: Args) -> Result<ExitCode, CliError> {
    let s = settings::load(config)?;
    let from = args.from.as_deref();
    check_format(from)?;
    // The settings first: a typo in --sweep is reported before a long read.
    let settings = if args.sweep.is_empty() {
        tune::default_sweep(&s.engine)
    } else {
        let grid = args
            .sweep
            .iter()
            .map(|a| tune::parse_sweep_arg(a))
            .collect::<Result<Vec<_>, _>>()?;
        tune::grid_sweep(&s.engine, &grid)?
    };
    let inputs: Vec<PathBuf> = if args.files.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        args.files.clone()
    };
    let mut corpus = Corpus::default();
    let mut skipped = import::Warnings::default();
    for path in &inputs {
        let (input, mut importer) = open_input(path, from, "tune")?;
        corpus
            .read(
                &name_of(path),
                input,
                importer.as_deref_mut(),
                s.protocol.max_line_bytes,
            )
            .map_err(|e| match e {
                ReadError::Io(e) => format!("while reading {}: {e}", path.display()),
                line => format!("{}, {line}", name_of(path)),
            })?;
        if let Some(imp) = &importer {
            if imp.warnings().total() > 0 {
                warn!("toolbrake: {}: skipped {}", path.display(), imp.warnings());
                skipped.merge(imp.warnings());
            }
        }
    }
    if corpus.calls() == 0 {
        return Err("the input holds no tool calls: there is nothing to tune on".into());
    }
    if corpus.recorded_outputs() == 0 {
        return Err(format!(
            "the input records no tool outputs ({} calls, no result with an output or an outcome): tune cannot tell waste from harmful stops, so it cannot measure harm, without them",
            corpus.calls()
        )
        .into());
    }
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    );
    let mut tuning = tune::measure(&corpus, settings, jobs);
    tuning.base_source = s.source.to_string();
    if let (Some(message), Some(i)) = (&tuning.base_error, tuning.figures[0].first_error()) {
        let (source, line) = corpus.origin(i);
        return Err(format!("{source}, line {line}: {message}").into());
    }
    if args.json {
        outln!("{}", tuning.json());
    } else {
        out!("{}", tuning.text());
        if skipped.total() > 0 {
            outln!("\nSkipped input: {skipped}");
        }
    }
    if let Some(path) = &args.html {
        write_private(path, tuning.html().as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        warn!("toolbrake: wrote {}", path.display());
    }
    if let Some(path) = &args.write {
        match tuning.recommended {
            None => {
                return Err(format!(
                    "no setting stops waste without a harmful stop: nothing was written to {}",
                    path.display()
                )
                .into())
            }
            Some(r) if tuning.settings[r].changes.is_empty() => {
                if path.exists() {
                    warn!(
                        "toolbrake: the recommendation is your configuration: {} left as it is",
                        path.display()
                    );
                } else {
                    warn!(
                        "toolbrake: the recommendation is the configuration in force: nothing to write, {} not created",
                        path.display()
                    );
                }
            }
            Some(r) => {
                toolbrake::ui::apply_edit(path, &tuning.settings[r].edit())
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                warn!(
                    "toolbrake: merged the recommendation into {}",
                    path.display()
                );
            }
        }
    }
    io::stdout().flush()?;
    Ok(ExitCode::SUCCESS)
}
