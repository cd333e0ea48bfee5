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
use toolbrake_protocol::calibrate::Share;
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
    /// The harmful-stop budget of the recommendation: the largest share of a setting's
    /// stops that may be harmful (0.02, 2% or 1/50; 0 for none).
    #[arg(long, value_name = "SHARE", default_value = "1/50")]
    pub max_harmful: String,
    /// Calibrate on this history instead: the strictest setting that harms at most
    /// `--alpha` of good runs, by the split-conformal bound (a promise, with its conditions).
    #[arg(long, conflicts_with_all = ["sweep", "html"])]
    pub calibrate: bool,
    /// The share of good runs the promise allows to be harmed (with --calibrate).
    #[arg(
        long,
        value_name = "SHARE",
        default_value = "0.05",
        requires = "calibrate"
    )]
    pub alpha: String,
    /// Also calibrate the run-level stop line (`[budget]`: a run's calls plus the calls
    /// stopped), α split in halves between it and the setting (with --calibrate).
    #[arg(long, requires = "calibrate")]
    pub budget: bool,
    /// Which runs were resolved: one JSON object a line, `{"session", "resolved"}` (the
    /// trajectory format's labels.jsonl); runs without a label are good when they ended
    /// without a stop (with --calibrate).
    #[arg(long, value_name = "FILE", requires = "calibrate")]
    pub labels: Option<PathBuf>,
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
    let max_harmful = parse_max_harmful(&args.max_harmful)?;
    let alpha = if args.calibrate {
        Some(Share::parse(&args.alpha).map_err(|e| format!("--alpha: {e}"))?)
    } else {
        None
    };
    let mut labels = tune::calibration::RunLabels::default();
    if let Some(path) = &args.labels {
        let file = std::fs::File::open(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        labels
            .read_labels(io::BufReader::new(file))
            .map_err(|e| format!("{}, {e}", path.display()))?;
    }
    // The settings first: a typo in --sweep is reported before a long read.
    let mut base_at = 0;
    let settings = if args.calibrate {
        let (ladder, at) = tune::calibration_ladder(&s.engine);
        base_at = at;
        ladder
    } else if args.sweep.is_empty() {
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
    // Calibration replays at most the first MAX_RUN_CALLS calls of a run: a longer one is
    // cut, and counted so that the promise only gets more cautious.
    let mut corpus = if args.calibrate {
        Corpus::with_run_cap(tune::calibration::MAX_RUN_CALLS)
    } else {
        Corpus::default()
    };
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
    let mut tuning = tune::measure(&corpus, settings, jobs, max_harmful);
    tuning.base_source = s.source.to_string();
    if let (Some(message), Some(i)) = (&tuning.base_error, tuning.figures[0].first_error()) {
        let (source, line) = corpus.origin(i);
        return Err(format!("{source}, line {line}: {message}").into());
    }
    if let Some(alpha) = alpha {
        read_feedback(&s, &mut labels);
        let promise = tune::calibration::calibrate(&tuning, base_at, &labels, alpha, args.budget)?;
        if args.json {
            outln!("{}", promise.json(&tuning));
        } else {
            out!("{}", promise.text(&tuning));
            if skipped.total() > 0 {
                outln!("\nSkipped input: {skipped}");
            }
        }
        if let Some(path) = &args.write {
            toolbrake::ui::apply_edit(path, &promise.edit(&tuning))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            warn!(
                "toolbrake: merged the calibrated setting into {}",
                path.display()
            );
            if let Some(r) = promise.refused_line() {
                warn!(
                    "toolbrake: [budget] left as it is in {}: the calibrated run-level line {} is above the largest `[budget] line` ({})",
                    path.display(),
                    r.line.value,
                    toolbrake_core::budget::MAX_LINE
                );
            }
        }
        io::stdout().flush()?;
        return Ok(ExitCode::SUCCESS);
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
                    "no setting was judged: nothing was written to {}",
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

/// `--max-harmful`: a share in [0, 1) (0 allows no harmful stop).
fn parse_max_harmful(text: &str) -> Result<Share, String> {
    let zero = text
        .trim()
        .trim_end_matches('%')
        .trim()
        .chars()
        .all(|c| c == '0' || c == '.');
    if zero && !text.trim().is_empty() && text.trim() != "." {
        return Ok(Share::at_most(0, 1).expect("0 is a share"));
    }
    Share::parse(text).map_err(|e| format!("--max-harmful: {e}"))
}

/// The marks people left on stored runs (`toolbrake feedback`), by session key, added to
/// `labels` (a labels file's own mark wins). Read from the configured store when it is one
/// that outlives a process (an existing SQLite file, Redis); a store that cannot be read
/// leaves a warning and no marks.
fn read_feedback(s: &settings::Settings, labels: &mut tune::calibration::RunLabels) {
    use toolbrake::settings::{process_env, StoreKind};
    let kind = s.store.kind.unwrap_or(StoreKind::Sqlite);
    if kind == StoreKind::Memory
        || (kind == StoreKind::Sqlite && !s.store.sqlite_path(&process_env).exists())
    {
        return;
    }
    let listed = s
        .store
        .open(StoreKind::Sqlite, &process_env)
        .and_then(|store| store.list());
    match listed {
        Ok(sessions) => {
            for info in sessions {
                if let Some(f) = info.state.feedback {
                    labels.feedback.entry(info.key).or_insert(f);
                }
            }
        }
        Err(e) => warn!("toolbrake: marks from `toolbrake feedback` not read: {e}"),
    }
}
