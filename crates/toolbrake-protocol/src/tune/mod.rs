//! `toolbrake tune`: one recorded history replayed under many settings, each judged by
//! the replay report's own judge (waste stopped, harmful stops), the Pareto frontier, and
//! the recommendation.
//!
//! The input is read and parsed once into a [`Corpus`] (events in memory, in order); each
//! [`Setting`] is the user's starting configuration (the *base*) with some keys changed;
//! [`measure`] replays the corpus under every setting side by side on several threads,
//! each with a fresh [`Processor`] over its own [`MemoryStore`], and feeds every handled
//! event to a [`Report`], whose totals are the figures. So the base's figures are, by
//! construction, what `toolbrake replay --report` says of the same input.
//!
//! A *waste* stop is a stopped call whose recorded output repeated the last identical
//! call's; a *harmful* stop is one whose recorded output was new (the report's "new
//! information"). Neither needs labels, but both need recorded outputs.

use crate::calibrate::Share;
use crate::event::{self, Event};
use crate::processor::{parse_event, Processor, Record};
use crate::record::recorded_output_of;
use crate::report::Report;
use crate::stream::Input;
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{self, BufRead};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use toolbrake_core::canonical::call_digest;
use toolbrake_core::config::Config;
use toolbrake_core::engine::Prepared;
use toolbrake_core::progress::{Digested, OutputDigest};
use toolbrake_core::{Call, Engine};
use toolbrake_import::Importer;
use toolbrake_store::MemoryStore;

pub mod calibration;
mod figures;
mod recommend;
mod render;
mod sweep;

pub use figures::{Figures, RunFigures};
pub use recommend::DEFAULT_MAX_HARMFUL;
pub use sweep::{
    calibration_ladder, default_keys, default_sweep, grid_sweep, parse_sweep_arg, Setting,
    MAX_SETTINGS,
};

/// The recorded history, parsed once: every event in input order, with where it came from.
#[derive(Debug, Default)]
pub struct Corpus {
    /// (line number in its source, event).
    events: Vec<(u64, Event)>,
    /// What the report needs of each event and no setting changes, computed once: a
    /// call's identity digest, a result's recorded output.
    digests: Vec<Digests>,
    /// (index of the source's first event, the source's name), in order.
    sources: Vec<(usize, String)>,
    calls: u64,
    outputs: u64,
    /// The most calls of one run kept ([`Corpus::with_run_cap`]); `None`: every call.
    run_cap: Option<u64>,
    /// With a cap: calls seen in each run (its session, sub-agents counted in it).
    run_calls: crate::report::Map<String, u64>,
    /// With a cap: the calls skipped and not yet answered, by session key, so that their
    /// answers and results are skipped too (at most `MAX_OPEN_CALLS` each, as the
    /// processor holds).
    skipped_open: crate::report::Map<String, VecDeque<String>>,
}

/// The report's inputs of one event that do not depend on the setting, and a result's
/// output digest, which the engines make of it under every setting alike.
#[derive(Debug, Clone, Copy)]
enum Digests {
    Call(Option<[u8; 32]>),
    Result(Option<OutputDigest>, Digested),
    None,
}

/// Why an input could not be read into a [`Corpus`].
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Reading failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A line is not an event: the message `toolbrake replay` answers it with.
    #[error("line {line}: {message}")]
    Line {
        /// The line's number (1-based).
        line: u64,
        /// What is wrong with it (positions and field names, never content).
        message: String,
    },
}

impl Corpus {
    /// A corpus that keeps at most `max` calls of each run (a session with its
    /// sub-agents): a run's later calls, and the answers and results of those calls, are
    /// read but not kept. Such a run is *cut* ([`Corpus::cut_runs`]): its figures cover
    /// its first `max` calls only. This bounds the time and memory of replaying one run
    /// under every setting (calibration: [`calibration::MAX_RUN_CALLS`]).
    pub fn with_run_cap(max: u64) -> Self {
        Corpus {
            run_cap: Some(max.max(1)),
            ..Corpus::default()
        }
    }

    /// Whether `ev` is one a run cap leaves out: a call past its run's cap (remembered),
    /// or the answer or result of such a call (forgotten with its result).
    fn past_cap(&mut self, ev: &Event) -> bool {
        let Some(cap) = self.run_cap else {
            return false;
        };
        match ev {
            Event::Call {
                session, id, agent, ..
            } => {
                let run = run_of(session);
                let seen = match self.run_calls.get_mut(run) {
                    Some(n) => {
                        *n += 1;
                        *n
                    }
                    None => {
                        self.run_calls.insert(run.to_string(), 1);
                        1
                    }
                };
                if seen <= cap {
                    return false;
                }
                let key = toolbrake_session::key(session, agent.as_deref());
                let q = self.skipped_open.entry(key).or_default();
                q.retain(|x| x != id);
                if q.len() >= toolbrake_core::MAX_OPEN_CALLS {
                    q.pop_front();
                }
                q.push_back(id.clone());
                true
            }
            Event::Answer { id, session, .. } => self.skipped(id, session.as_deref(), false),
            Event::Result { id, session, .. } => self.skipped(id, session.as_deref(), true),
            _ => false,
        }
    }

    /// Whether call `id` (of `session` when given: its key or a sub-agent's) was skipped
    /// and is still open; with `close`, it is no longer.
    fn skipped(&mut self, id: &str, session: Option<&str>, close: bool) -> bool {
        let prefix = session.map(toolbrake_core::engine::agent_key_prefix);
        let hit = self.skipped_open.iter_mut().find(|(key, q)| {
            let ours = match (session, &prefix) {
                (Some(s), Some(p)) => key.as_str() == s || key.starts_with(p.as_str()),
                _ => true,
            };
            ours && q.iter().any(|x| x == id)
        });
        match hit {
            Some((_, q)) => {
                if close {
                    q.retain(|x| x != id);
                }
                true
            }
            None => false,
        }
    }

    /// The runs cut by the cap, by name, with the calls each made in all (more than the
    /// cap; the first cap of them were kept), in name order.
    pub fn cut_runs(&self) -> Vec<(String, u64)> {
        let mut cut: Vec<(String, u64)> = match self.run_cap {
            Some(cap) => self
                .run_calls
                .iter()
                .filter(|(_, n)| **n > cap)
                .map(|(name, n)| (name.clone(), *n))
                .collect(),
            None => Vec::new(),
        };
        cut.sort();
        cut
    }

    /// The cap on calls kept per run, when one was set.
    pub fn run_cap(&self) -> Option<u64> {
        self.run_cap
    }

    /// Reads one input (protocol lines, or with `importer` a recorded run) to its end and
    /// appends its events. A line that is not a valid event stops the reading with the
    /// error `toolbrake replay` would have answered it with.
    pub fn read(
        &mut self,
        source: &str,
        input: impl BufRead,
        importer: Option<&mut (dyn Importer + '_)>,
        max_line: usize,
    ) -> Result<(), ReadError> {
        self.sources.push((self.events.len(), source.to_string()));
        let mut bad: Option<(u64, String)> = None;
        let stop = || io::Error::other("stopped at a bad line");
        let read = crate::stream::read_input(input, importer, max_line, &mut |item| {
            let (line, parsed) = match item {
                Input::Line(no, bytes) => (no, parse_event(bytes)),
                Input::TooLong(no, message) => (no, Err(message)),
                Input::Event(no, value, _) => (no, event::parse_owned(value)),
            };
            match parsed {
                Ok(ev) if self.past_cap(&ev) => Ok(()),
                Ok(ev) => {
                    let digests = match &ev {
                        Event::Call { tool, args, .. } => {
                            self.calls += 1;
                            Digests::Call(call_digest(tool, args).ok())
                        }
                        Event::Result { outcome, .. } => {
                            let digested = Digested::of(outcome);
                            let output = recorded_output_of(outcome, digested);
                            self.outputs += u64::from(output.is_some());
                            Digests::Result(output, digested)
                        }
                        _ => Digests::None,
                    };
                    self.events.push((line, ev));
                    self.digests.push(digests);
                    Ok(())
                }
                Err(message) => {
                    bad = Some((line, message));
                    Err(stop())
                }
            }
        });
        match (bad, read) {
            (Some((line, message)), _) => Err(ReadError::Line { line, message }),
            (None, Err(e)) => Err(ReadError::Io(e)),
            (None, Ok(())) => Ok(()),
        }
    }

    /// Events read.
    pub fn events(&self) -> usize {
        self.events.len()
    }

    /// Tool calls among them (kept: those past a run's cap are not).
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Results that recorded what the call returned (an output or an outcome field).
    pub fn recorded_outputs(&self) -> u64 {
        self.outputs
    }

    /// The source and line the `i`-th event came from.
    pub fn origin(&self, i: usize) -> (&str, u64) {
        let source = self
            .sources
            .iter()
            .rev()
            .find(|(first, _)| *first <= i)
            .map_or("", |(_, name)| name.as_str());
        (source, self.events.get(i).map_or(0, |(line, _)| *line))
    }
}

/// The run a session key belongs to: a sub-agent's session counts in its parent's.
fn run_of(session: &str) -> &str {
    session
        .split_once(toolbrake_core::engine::AGENT_SEPARATOR)
        .map_or(session, |(run, _)| run)
}

/// Every call of the corpus as `engine` prepares it ([`Engine::prepare`]; `None` for other
/// events, and for a call it cannot prepare, which the processor then answers itself).
fn prepare(corpus: &Corpus, engine: &Engine) -> Vec<Option<Prepared>> {
    corpus
        .events
        .iter()
        .map(|(_, ev)| {
            let Event::Call {
                session,
                id,
                tool,
                args,
                agent,
                ..
            } = ev
            else {
                return None;
            };
            let key = toolbrake_session::key(session, agent.as_deref());
            let call = Call {
                session: &key,
                id,
                tool,
                args,
            };
            engine.prepare(&call).ok()
        })
        .collect()
}

/// Replays the corpus under one configuration: the figures of one setting. `prepared`:
/// the corpus's calls as prepared by an engine this setting's [`Engine::derives_like`],
/// made once for every such setting.
fn judge(
    corpus: &Corpus,
    config: &Config,
    prepared: Option<&[Option<Prepared>]>,
) -> (Figures, Vec<(String, RunFigures)>, Option<String>) {
    // The digests the report needs come from the corpus (computed once, not per setting),
    // and no call's preview is shown: the processor computes neither, nor the output lines
    // of events in no error.
    let mut p = Processor::new(Engine::new(config.clone()), Arc::new(MemoryStore::new()))
        .with_counters(false)
        .with_lines(false);
    let mut report = Report::default();
    let mut first_error = None;
    for (i, ((line, ev), digests)) in corpus.events.iter().zip(&corpus.digests).enumerate() {
        let digested = match digests {
            Digests::Result(_, d) => Some(*d),
            _ => None,
        };
        let mut h = match prepared.and_then(|all| all[i].as_ref()) {
            Some(call) => p.handle_prepared(ev, *line, call),
            None => p.handle_digested(ev, *line, digested),
        };
        match (&mut h.record, digests) {
            (Record::Call { digest, .. }, Digests::Call(d)) => *digest = *d,
            (Record::Result { output, .. }, Digests::Result(o, _)) => *output = *o,
            _ => {}
        }
        if h.is_error && first_error.is_none() {
            let message = serde_json::from_str::<Value>(&h.line)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or_default();
            first_error = Some((i, message));
        }
        report.add(&h.record);
    }
    let t = report.totals();
    (
        Figures {
            waste: t.waste,
            harmful: t.new_information,
            stopped: t.stopped,
            sessions_stopped: t.gated,
            sessions: t.sessions,
            errors: report.errors,
            calls: t.calls,
            bytes_saved: t.bytes_saved,
            first_error: first_error.as_ref().map(|(i, _)| *i),
        },
        runs_of(&report),
        first_error.map(|(_, m)| m),
    )
}

/// The report's sessions as runs: a sub-agent's session counted in its parent's run, in
/// order of first appearance.
fn runs_of(report: &Report) -> Vec<(String, RunFigures)> {
    let mut runs: Vec<(String, RunFigures)> = Vec::new();
    let mut index: crate::report::Map<&str, usize> = crate::report::Map::default();
    for s in &report.sessions {
        let name = run_of(&s.name);
        let i = *index.entry(name).or_insert_with(|| {
            runs.push((name.to_string(), RunFigures::default()));
            runs.len() - 1
        });
        let r = &mut runs[i].1;
        r.calls += s.calls;
        r.stopped += s.denials;
        r.harmful += s.new_information;
    }
    runs
}

/// The sweep's result: every setting with its figures, the frontier and the recommendation.
#[derive(Debug)]
pub struct Tuning {
    /// The settings, the base first.
    pub settings: Vec<Setting>,
    /// Their figures, in the same order.
    pub figures: Vec<Figures>,
    /// Whether each is on the frontier: no other setting stops more waste with no more
    /// harmful stops, or as much waste with fewer.
    pub frontier: Vec<bool>,
    /// The setting that stops the most waste with harmful stops within
    /// [`Tuning::max_harmful`] of its stops (ties: the nearest to the base); when none is
    /// within it, the one with the smallest share of harmful stops. `None` only for no
    /// settings.
    pub recommended: Option<usize>,
    /// The harmful-stop budget of the recommendation: the largest share of a setting's
    /// stops that may be harmful.
    pub max_harmful: Share,
    /// Each setting's figures per run, in the same order as [`Tuning::run_names`].
    pub runs: Vec<Vec<RunFigures>>,
    /// The runs' names (session keys), in order of first appearance.
    pub run_names: Vec<String>,
    /// The message of the first line in error under the base, when one was.
    pub base_error: Option<String>,
    /// Events and calls judged.
    pub events: usize,
    /// Calls judged.
    pub calls: u64,
    /// The cap on calls judged per run, when one was set ([`Corpus::with_run_cap`]).
    pub run_cap: Option<u64>,
    /// The runs the cap cut, with the calls each made in all (only the first
    /// [`Tuning::run_cap`] of them were judged), in name order.
    pub cut_runs: Vec<(String, u64)>,
    /// Where the base came from (a file, or the built-in defaults), for the headings.
    pub base_source: String,
}

/// Replays `corpus` under every setting, `jobs` settings at a time (each on its own
/// thread, processor and store), and finds the frontier and the recommendation within the
/// harmful-stop budget `max_harmful`.
pub fn measure(corpus: &Corpus, settings: Vec<Setting>, jobs: usize, max_harmful: Share) -> Tuning {
    // The calls prepared once, by the base's engine, for every setting that prepares them
    // alike (the default sweep changes only gates, window and stages: all of them).
    let base = settings.first().map(|s| Engine::new(s.config.clone()));
    let alike: Vec<bool> = settings
        .iter()
        .map(|s| {
            base.as_ref()
                .is_some_and(|b| b.derives_like(&Engine::new(s.config.clone())))
        })
        .collect();
    let prepared = base
        .as_ref()
        .filter(|_| alike.iter().filter(|a| **a).count() > 1)
        .map(|b| prepare(corpus, b));
    let next = AtomicUsize::new(0);
    let threads = jobs.clamp(1, settings.len().max(1));
    let mut judged: Vec<Judged> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(s) = settings.get(i) else { break };
                        let calls = prepared.as_deref().filter(|_| alike[i]);
                        let (f, runs, e) = judge(corpus, &s.config, calls);
                        mine.push((i, f, runs, e));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    judged.sort_by_key(|(i, _, _, _)| *i);
    let base_error = judged.first().and_then(|(_, _, _, e)| e.clone());
    let run_names: Vec<String> = judged
        .first()
        .map(|(_, _, runs, _)| runs.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    // Each setting's runs in the first setting's order, matched by name (a run every
    // setting sees; one seen by another setting only is left out).
    let at: crate::report::Map<&str, usize> = run_names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut figures = Vec::with_capacity(judged.len());
    let mut runs = Vec::with_capacity(judged.len());
    for (_, f, r, _) in &judged {
        figures.push(*f);
        let mut mine = vec![RunFigures::default(); run_names.len()];
        for (name, figures) in r {
            if let Some(&i) = at.get(name.as_str()) {
                mine[i] = *figures;
            }
        }
        runs.push(mine);
    }
    let frontier = recommend::frontier(&figures);
    let recommended = recommend::recommend(&figures, &settings, max_harmful);
    Tuning {
        settings,
        figures,
        frontier,
        recommended,
        max_harmful,
        runs,
        run_names,
        base_error,
        events: corpus.events(),
        calls: corpus.calls(),
        run_cap: corpus.run_cap(),
        cut_runs: corpus.cut_runs(),
        base_source: String::new(),
    }
}

/// One setting judged: its index, figures, runs and first error.
type Judged = (usize, Figures, Vec<(String, RunFigures)>, Option<String>);
