//! `toolbrake replay` and `toolbrake serve --stdio`: the event protocol over files and
//! over a long-running stdin/stdout pipe.

use super::CliError;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolbrake::settings::{self, process_env, StoreKind};
use toolbrake::Engine;
use toolbrake_protocol::import::{self, Importer};
use toolbrake_protocol::report::Report;
use toolbrake_protocol::{run, run_sharded, Handled, LineWriter, Processor, Sink};

/// Opens a file (or stdin for `-`), decompressing gzip transparently.
fn open(path: &Path) -> io::Result<Box<dyn BufRead>> {
    let raw: Box<dyn Read> = if path == Path::new("-") {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(path)?)
    };
    let mut buffered = BufReader::with_capacity(64 * 1024, raw);
    let magic = buffered.fill_buf()?;
    if magic.len() >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
        Ok(Box::new(BufReader::with_capacity(
            64 * 1024,
            flate2::bufread::MultiGzDecoder::new(buffered),
        )))
    } else {
        Ok(Box::new(buffered))
    }
}

/// The importer format of the input's first line, when it is a recorded run rather than
/// protocol events (peeked from the buffer; nothing is consumed).
fn recorded_format(input: &mut Box<dyn BufRead>) -> Option<&'static str> {
    let buf = input.fill_buf().ok()?;
    let end = buf.iter().position(|b| *b == b'\n').unwrap_or(buf.len());
    import::detect(&buf[..end])
}

/// Refuses a `--from` that names no importer.
pub(super) fn check_format(from: Option<&str>) -> Result<(), CliError> {
    match from {
        Some(f) if !import::FORMATS.contains(&f) => Err(format!(
            "unknown format {f:?} for --from; expected one of {}",
            import::FORMATS.join(", ")
        )
        .into()),
        _ => Ok(()),
    }
}

/// An opened input and, with `--from`, the importer that reads it.
pub(super) type Opened = (Box<dyn BufRead>, Option<Box<dyn Importer>>);

/// One input as `replay` and `tune` read it: the file (or stdin), and the importer of
/// `--from`; without `--from`, a recorded run is refused with the flag that reads it
/// (`command` is the subcommand the message suggests).
pub(super) fn open_input(
    path: &Path,
    from: Option<&str>,
    command: &str,
) -> Result<Opened, CliError> {
    let mut input = open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if from.is_none() {
        if let Some(format) = recorded_format(&mut input) {
            return Err(format!(
                "{} looks like a recorded run in the {format} format, not protocol events: run `toolbrake {command} --from {format}` on it",
                path.display()
            )
            .into());
        }
    }
    if let Some(f) = from {
        if let Some(why) = format_mismatch(&mut input, f, path) {
            return Err(why.into());
        }
    }
    let importer = from.and_then(|f| import::by_name(f, &path.display().to_string()));
    Ok((input, importer))
}

/// Writes a report readable by its owner only (it names tools, hosts and commands),
/// replacing any previous one atomically.
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    toolbrake::files::replace(path, bytes, Some(0o600)).map(|_| ())
}

/// An importer that counts the events it made: input of which nothing could be read (a
/// file in another format) is an error, not an empty report.
struct Counted {
    inner: Box<dyn Importer>,
    events: u64,
}

impl Importer for Counted {
    fn feed(&mut self, line: &[u8], out: &mut Vec<serde_json::Value>) {
        let before = out.len();
        self.inner.feed(line, out);
        self.events += (out.len() - before) as u64;
    }
    fn finish(&mut self, out: &mut Vec<serde_json::Value>) {
        let before = out.len();
        self.inner.finish(out);
        self.events += (out.len() - before) as u64;
    }
    fn warnings(&self) -> &import::Warnings {
        self.inner.warnings()
    }
    fn warn(&mut self, reason: &'static str) {
        self.inner.warn(reason)
    }
}

/// Why `--from FORMAT` does not fit the input's first line: it is a recorded run in
/// another format, or protocol events.
fn format_mismatch(input: &mut Box<dyn BufRead>, from: &str, path: &Path) -> Option<String> {
    let buf = input.fill_buf().ok()?;
    let end = buf.iter().position(|b| *b == b'\n').unwrap_or(buf.len());
    let line = &buf[..end];
    match import::detect(line) {
        Some(found) if found != from => Some(format!(
            "{} looks like a recorded run in the {found} format, not {from}: run `toolbrake replay --from {found}` on it",
            path.display()
        )),
        Some(_) => None,
        None => {
            let event = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(line)
                .is_ok_and(|m| m.contains_key("event"));
            event.then(|| {
                format!(
                    "{} looks like protocol events, not a recorded run in the {from} format: run `toolbrake replay` on it without --from",
                    path.display()
                )
            })
        }
    }
}

struct ReportSink<'a> {
    report: &'a mut Report,
}

impl Sink for ReportSink<'_> {
    fn handled(&mut self, h: &Handled) -> io::Result<()> {
        self.report.add(&h.record);
        Ok(())
    }
}

/// How `toolbrake replay` was asked to run (its command-line arguments).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read recorded runs in this format instead of protocol events:
    /// trajectory, claude-code or codex.
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Print a summary for people instead of protocol lines.
    #[arg(long)]
    pub report: bool,
    /// Write the report as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Threads judging sessions side by side (default: one per core, at most 8). The
    /// output is the same whatever the number; a store other than memory uses one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,
    /// Input files (gzip is read directly); `-` or none reads stdin.
    pub files: Vec<PathBuf>,
}

/// Judging threads by default: one per core, at most 8.
fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

pub fn replay(config: Option<&Path>, args: Args) -> Result<ExitCode, CliError> {
    let Args {
        from,
        report: want_report,
        html,
        jobs,
        files,
    } = args;
    let (from, html) = (from.as_deref(), html.as_deref());
    let s = settings::load(config)?;
    check_format(from)?;
    // Sessions spread over threads, each thread with its own memory store; a shared store
    // (SQLite, Redis) is replayed by one.
    let jobs = if s.store.kind.unwrap_or(StoreKind::Memory) == StoreKind::Memory {
        jobs.map_or_else(default_jobs, usize::from)
    } else {
        1
    };
    let engine = Engine::new(s.engine);
    let mut processors = Vec::with_capacity(jobs);
    for _ in 0..jobs {
        let store = s.store.open(StoreKind::Memory, &process_env)?;
        processors.push(
            // A replay is not traffic: it leaves the operators' counters alone, whatever
            // the store.
            Processor::new(engine.clone(), store)
                .with_fail_closed(s.store.fail_closed)
                .with_call_digests(want_report || html.is_some())
                // A report reads the records: the lines it would drop are not written.
                .with_lines(!want_report && html.is_none())
                .with_counters(false),
        );
    }
    let inputs: Vec<PathBuf> = if files.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        files.to_vec()
    };
    let mut report = Report::default();
    let stdout = io::stdout();
    // 64 KiB a write, as the input is read: with the default 8 KiB, a replay made eight
    // times as many `write` calls as `read` calls (1,601 for 13 MB of answers).
    let mut lines = LineWriter::new(
        io::BufWriter::with_capacity(64 * 1024, stdout.lock()),
        false,
    );
    let mut skipped = import::Warnings::default();
    for path in &inputs {
        let (input, importer) = open_input(path, from, "replay")?;
        let mut importer: Option<Counted> = importer.map(|inner| Counted { inner, events: 0 });
        let mut sink = ReportSink {
            report: &mut report,
        };
        let sink: &mut dyn Sink = if want_report || html.is_some() {
            &mut sink
        } else {
            &mut lines
        };
        let result = run_sharded(
            input,
            importer.as_mut().map(|i| i as &mut dyn Importer),
            std::mem::take(&mut processors),
            s.protocol.max_line_bytes,
            sink,
        );
        processors = result.map_err(|e| -> CliError {
            if e.kind() == io::ErrorKind::BrokenPipe {
                // Our reader went away (`replay … | head`): not a read error.
                e.into()
            } else {
                format!("while reading {}: {e}", path.display()).into()
            }
        })?;
        if let Some(imp) = &importer {
            if imp.events == 0 {
                let skipped = match imp.warnings().total() {
                    0 => "it is empty".to_string(),
                    _ => format!("skipped {}", imp.warnings()),
                };
                return Err(format!(
                    "nothing in {} could be read as a recorded run in the {} format ({skipped}); \
                     --from takes {}",
                    path.display(),
                    from.unwrap_or_default(),
                    import::FORMATS.join(", ")
                )
                .into());
            }
            if imp.warnings().total() > 0 {
                warn!("toolbrake: {}: skipped {}", path.display(), imp.warnings());
                skipped.merge(imp.warnings());
            }
        }
    }
    lines.flush()?;
    drop(lines);
    if want_report {
        out!("{}", report.text());
        if skipped.total() > 0 {
            outln!("\nSkipped input: {skipped}");
        }
    }
    if let Some(path) = html {
        write_private(path, report.html().as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if !want_report {
            let t = report.totals();
            warn!("toolbrake: wrote {}: {}", path.display(), t.summary());
        }
    }
    io::stdout().flush()?;
    // An error line, or a call judged without the store (degraded): the replay did not
    // answer every event as configured.
    Ok(
        if processors
            .iter()
            .any(|p| p.errors() > 0 || p.degraded() > 0)
        {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}

pub fn serve(
    config: Option<&Path>,
    operate: &super::operate::Operate,
) -> Result<ExitCode, CliError> {
    let telemetry = super::operate::Telemetry::new(operate)?;
    let mut s = settings::load(config)?;
    for notice in s.notices() {
        telemetry.warn(&notice);
    }
    // What the agents' calls must not change (self-protection), kept across reloads.
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let protected = settings::protected(&s, StoreKind::Memory, &process_env, &cwd);
    s.engine.breaker.protect(protected.clone());
    let store = telemetry.store(s.store.open(StoreKind::Memory, &process_env)?);
    let traces = telemetry.traces(&s.telemetry, "serve");
    let mut processor = Processor::new(Engine::new(s.engine.clone()), store)
        .with_fail_closed(s.store.fail_closed)
        .with_observer(traces.observer(telemetry.observer()));
    if let Some(mut watcher) = settings::Watcher::new(&s, toolbrake_core::config::ENGINE_TABLES) {
        let telemetry = telemetry.clone();
        processor = processor.with_reloader(Box::new(move || {
            telemetry.reloaded(watcher.poll()).map(|mut l| {
                l.engine.breaker.protect(protected.clone());
                Engine::new(l.engine)
            })
        }));
    }
    telemetry.serve_metrics_on_thread("serve")?;
    let stdin = io::stdin();
    let mut out = LineWriter::new(io::stdout().lock(), true);
    run(
        stdin.lock(),
        None,
        &mut processor,
        s.protocol.max_line_bytes,
        &mut out,
    )?;
    Ok(ExitCode::SUCCESS)
}
