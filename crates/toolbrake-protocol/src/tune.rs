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

use crate::event::{self, Event};
use crate::import::Importer;
use crate::processor::{parse_event, Processor, Record};
use crate::report::{recorded_output_of, Report};
use crate::Input;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::io::{self, BufRead};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use toolbrake_core::canonical::call_digest;
use toolbrake_core::config::{no_env, Config, ConfigError};
use toolbrake_core::engine::Prepared;
use toolbrake_core::progress::{Digested, OutputDigest};
use toolbrake_core::{Call, Engine};
use toolbrake_store::MemoryStore;

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
        let read = crate::read_input(input, importer, max_line, &mut |item| {
            let (line, parsed) = match item {
                Input::Line(no, bytes) => (no, parse_event(bytes)),
                Input::TooLong(no, message) => (no, Err(message)),
                Input::Event(no, value, _) => (no, event::parse_owned(value)),
            };
            match parsed {
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

    /// Tool calls among them.
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

/// The keys the default sweep varies, each with the ladder of values it steps along
/// (loosest last; `"off"` after the numbers where the key can be turned off).
const KNOBS: &[(&str, &[u32], bool)] = &[
    ("streak.max_repeats", &[2, 3, 4, 5, 6, 8, 10, 12], false),
    ("breaker.unchanged_limit", &[1, 2, 3, 4, 5, 6, 8], true),
    ("breaker.fail_limit", &[3, 4, 5, 6, 8, 10, 12], true),
    ("breaker.cycle_limit", &[2, 3, 4, 5, 6, 8], true),
    (
        "breaker.struggle_ask_at",
        &[8, 10, 12, 16, 20, 24, 32],
        true,
    ),
    ("breaker.window", &[8, 12, 16, 24, 32, 48, 64], false),
    ("breaker.limits.exact", &[6, 8, 10, 12, 16, 20, 24], true),
    ("breaker.limits.cmd", &[6, 8, 10, 12, 16, 20, 24], true),
];

/// The keys of the combined variations "repeats looser" and "failures looser".
const REPEAT_KEYS: &[&str] = &[
    "streak.max_repeats",
    "breaker.limits.exact",
    "breaker.limits.cmd",
];
const FAILURE_KEYS: &[&str] = &[
    "breaker.unchanged_limit",
    "breaker.fail_limit",
    "breaker.cycle_limit",
    "breaker.struggle_ask_at",
];

/// Most settings one sweep judges (a `--sweep` grid is a product and grows fast).
pub const MAX_SETTINGS: usize = 1000;

/// The keys the default sweep varies, as `--sweep` names them.
pub fn default_keys() -> Vec<&'static str> {
    KNOBS.iter().map(|(k, _, _)| *k).collect()
}

/// One configuration judged: the base with some keys changed.
#[derive(Debug, Clone)]
pub struct Setting {
    /// `base`, `defaults` or a combined variation's name; `None` for a plain variation.
    pub name: Option<&'static str>,
    /// The keys that differ from the base (dotted, as `--sweep` names them) and their values.
    pub changes: Vec<(String, Value)>,
    /// The validated configuration.
    pub config: Config,
    /// How far from the base: the sum over changed keys of |ln(value / base value)|
    /// (2 for a key turned on or off). Ties in the recommendation go to the nearest.
    pub distance: f64,
}

impl Setting {
    /// The changes as `key=value, …` (`(base)` for none).
    pub fn label(&self) -> String {
        let changes = self
            .changes
            .iter()
            .map(|(k, v)| format!("{k}={}", shown(v)))
            .collect::<Vec<_>>()
            .join(", ");
        match (self.name, changes.is_empty()) {
            (Some("base"), _) | (None, true) => "(base)".into(),
            (Some(name), true) => format!("{name} (= base)"),
            (Some(name), false) => format!("{name}: {changes}"),
            (None, false) => changes,
        }
    }

    /// The label in a table row: a combined variation by its name alone (its changes are
    /// listed under the table).
    pub fn row_label(&self) -> String {
        match self.name {
            Some(name) if name != "base" && !self.changes.is_empty() => name.to_string(),
            _ => self.label(),
        }
    }

    /// The changes as a partial configuration document: `{"streak": {"max_repeats": 4},
    /// "breaker": {"limits": {"exact": 16}}}` (what `--write` merges into a file).
    pub fn edit(&self) -> Value {
        let mut doc = Value::Object(Map::new());
        for (key, value) in &self.changes {
            set_path(&mut doc, &toolbrake_config::key_parts(key), value.clone());
        }
        doc
    }

    /// The changes as `toolbrake.toml` text (`[streak]`, `[breaker]`, `[breaker.limits]`).
    pub fn toml(&self) -> String {
        let doc = self.edit();
        ["streak", "breaker"]
            .iter()
            .filter_map(|t| doc.get(*t).map(|s| toolbrake_config::section_to_toml(t, s)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn get_path<'a>(tree: &'a Value, parts: &[String]) -> Option<&'a Value> {
    parts.iter().try_fold(tree, |v, p| v.get(p))
}

fn set_path(tree: &mut Value, parts: &[String], value: Value) {
    let mut cur = tree;
    for p in &parts[..parts.len() - 1] {
        let Value::Object(map) = cur else { return };
        cur = map
            .entry(p.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let (Value::Object(map), Some(last)) = (cur, parts.last()) {
        map.insert(last.clone(), value);
    }
}

/// The configuration `base` becomes with `changes` applied, validated as a file would be.
fn apply(base: &Value, changes: &[(String, Value)]) -> Result<Config, ConfigError> {
    let mut tree = base.clone();
    for (key, value) in changes {
        set_path(&mut tree, &toolbrake_config::key_parts(key), value.clone());
    }
    Config::from_sections(tree.get("streak"), tree.get("breaker"), &no_env)
}

/// How far `value` is from `base` (see [`Setting::distance`]).
fn distance(base: Option<&Value>, value: &Value) -> f64 {
    match (base.and_then(Value::as_f64), value.as_f64()) {
        (Some(b), Some(v)) if b > 0.0 && v > 0.0 => (v / b).ln().abs(),
        _ if base == Some(value) => 0.0,
        _ => 2.0,
    }
}

/// The sweep's settings: the base first, then (with `defaults`) the base with every
/// varied key at its default, then the variations, without duplicates.
struct Builder {
    base: Value,
    settings: Vec<Setting>,
}

impl Builder {
    fn new(base: &Config) -> Self {
        let base_value = base.to_value();
        Builder {
            settings: vec![Setting {
                name: Some("base"),
                changes: Vec::new(),
                config: base.clone(),
                distance: 0.0,
            }],
            base: base_value,
        }
    }

    /// Adds the base with `changes` (those equal to the base's dropped), unless the same
    /// setting is already there.
    fn add(
        &mut self,
        name: Option<&'static str>,
        changes: Vec<(String, Value)>,
    ) -> Result<(), ConfigError> {
        let changes: Vec<(String, Value)> = changes
            .into_iter()
            .filter(|(k, v)| get_path(&self.base, &toolbrake_config::key_parts(k)) != Some(v))
            .collect();
        let config = apply(&self.base, &changes)?;
        if self.settings.iter().any(|s| s.config == config) {
            return Ok(());
        }
        let distance = changes
            .iter()
            .map(|(k, v)| distance(get_path(&self.base, &toolbrake_config::key_parts(k)), v))
            .sum();
        self.settings.push(Setting {
            name,
            changes,
            config,
            distance,
        });
        Ok(())
    }
}

/// One key's ladder around the base's value: its values (the base's inserted where it
/// belongs when it is not a rung) and the base's position.
fn ladder(base: &Value, key: &str, rungs: &[u32], off: bool) -> (Vec<Value>, usize) {
    let mut values: Vec<Value> = rungs.iter().map(|n| json!(n)).collect();
    let current = get_path(base, &toolbrake_config::key_parts(key))
        .cloned()
        .unwrap_or(Value::Null);
    match current.as_u64() {
        Some(n) if !rungs.iter().any(|r| u64::from(*r) == n) => {
            let at = rungs
                .iter()
                .position(|r| u64::from(*r) > n)
                .unwrap_or(rungs.len());
            values.insert(at, current.clone());
        }
        _ => {}
    }
    if off {
        values.push(json!("off"));
    }
    let at = values
        .iter()
        .position(|v| *v == current)
        .unwrap_or(values.len() / 2);
    (values, at)
}

fn step(values: &[Value], at: usize, by: isize) -> Value {
    let i = (at as isize + by).clamp(0, values.len() as isize - 1) as usize;
    values[i].clone()
}

/// The default sweep around `base`: the base; the base with the varied keys at their
/// defaults (when that differs); each key one step stricter and one and two steps looser
/// (two stricter at the loose end of its ladder); and five combined variations: every
/// key one step stricter, one and two steps looser, the repeat gates one step looser,
/// the failure gates one step looser. About 30 settings.
pub fn default_sweep(base: &Config) -> Vec<Setting> {
    let mut b = Builder::new(base);
    let defaults = Config::default().to_value();
    let ladders: Vec<(&str, Vec<Value>, usize)> = KNOBS
        .iter()
        .map(|(k, rungs, off)| {
            let (values, at) = ladder(&b.base, k, rungs, *off);
            (*k, values, at)
        })
        .collect();
    // Every candidate below is valid by construction (rungs inside each key's range); a
    // combination the core refuses is left out rather than failing the sweep.
    let default_changes: Vec<(String, Value)> = KNOBS
        .iter()
        .filter_map(|(k, _, _)| {
            get_path(&defaults, &toolbrake_config::key_parts(k)).map(|v| (k.to_string(), v.clone()))
        })
        .collect();
    let _ = b.add(Some("defaults"), default_changes);
    for (key, values, at) in &ladders {
        let steps: &[isize] = if at + 2 < values.len() {
            &[-1, 1, 2]
        } else {
            &[-2, -1, 1]
        };
        for &by in steps {
            let _ = b.add(None, vec![(key.to_string(), step(values, *at, by))]);
        }
    }
    let combined: [(&'static str, isize, &[&str]); 5] = [
        ("all stricter", -1, &[]),
        ("all looser", 1, &[]),
        ("all much looser", 2, &[]),
        ("repeats looser", 1, REPEAT_KEYS),
        ("failures looser", 1, FAILURE_KEYS),
    ];
    for (name, by, only) in combined {
        let changes = ladders
            .iter()
            .filter(|(k, _, _)| only.is_empty() || only.contains(k))
            .map(|(k, values, at)| (k.to_string(), step(values, *at, by)))
            .collect();
        let _ = b.add(Some(name), changes);
    }
    b.settings
}

/// A `--sweep KEY=V1,V2,…` value: the key (as the user wrote it) and its values.
pub fn parse_sweep_arg(arg: &str) -> Result<(String, Vec<Value>), String> {
    let (key, values) = arg.split_once('=').ok_or_else(|| {
        format!("--sweep {arg:?} must be KEY=V1,V2,… (e.g. streak.max_repeats=3,4,5)")
    })?;
    let values: Vec<Value> = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| {
            if let Ok(i) = v.parse::<i64>() {
                json!(i)
            } else if let Ok(b) = v.parse::<bool>() {
                json!(b)
            } else {
                json!(v.trim_matches('"'))
            }
        })
        .collect();
    if values.is_empty() {
        return Err(format!("--sweep {arg:?} names no value after `=`"));
    }
    Ok((key.trim().to_string(), values))
}

/// The dotted key `--sweep` means by `key`: `streak.X` and `breaker.X` as written, a bare
/// `X` (or `limits.X`) found in the one table that has it. Only single values can be swept
/// (not lists or tables); `breaker.limits` takes any fingerprint prefix.
fn resolve_key(base: &Value, key: &str) -> Result<String, String> {
    let parts = toolbrake_config::key_parts(key);
    let candidates: Vec<Vec<String>> = match parts.first().map(String::as_str) {
        Some("streak" | "breaker") => vec![parts.clone()],
        _ => ["streak", "breaker"]
            .iter()
            .map(|t| {
                std::iter::once(t.to_string())
                    .chain(parts.iter().cloned())
                    .collect()
            })
            .collect(),
    };
    let sweepable = |p: &Vec<String>| {
        let is_limit = p.len() == 3 && p[0] == "breaker" && p[1] == "limits" && !p[2].is_empty();
        is_limit
            || matches!(
                get_path(base, p),
                Some(Value::Number(_) | Value::String(_) | Value::Bool(_))
            )
    };
    let found: Vec<&Vec<String>> = candidates.iter().filter(|p| sweepable(p)).collect();
    match found.as_slice() {
        [one] => Ok(one
            .iter()
            .map(|p| {
                if p.contains('.') {
                    format!("{p:?}")
                } else {
                    p.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(".")),
        [] => Err(format!(
            "--sweep: `{key}` is not a setting that takes one value (e.g. {})",
            default_keys().join(", ")
        )),
        _ => Err(format!(
            "--sweep: `{key}` is in both [streak] and [breaker]; write streak.{key} or breaker.{key}"
        )),
    }
}

/// The sweep `--sweep` asks for: the base, then every combination of the values given
/// (the product of the lists), each validated as a configuration file would be.
pub fn grid_sweep(base: &Config, grid: &[(String, Vec<Value>)]) -> Result<Vec<Setting>, String> {
    let mut b = Builder::new(base);
    let mut keys: Vec<String> = Vec::new();
    for (key, _) in grid {
        let k = resolve_key(&b.base, key)?;
        if keys.contains(&k) {
            return Err(format!(
                "--sweep names `{k}` twice; give its values in one list"
            ));
        }
        keys.push(k);
    }
    let total = grid
        .iter()
        .try_fold(1usize, |n, (_, vs)| n.checked_mul(vs.len()))
        .filter(|n| *n < MAX_SETTINGS)
        .ok_or_else(|| {
            format!(
                "--sweep makes more than {} settings (the product of its lists); sweep fewer values",
                MAX_SETTINGS - 1
            )
        })?;
    for n in 0..total {
        let mut rest = n;
        let mut changes = Vec::with_capacity(grid.len());
        for ((_, values), key) in grid.iter().zip(&keys).rev() {
            changes.push((key.clone(), values[rest % values.len()].clone()));
            rest /= values.len();
        }
        changes.reverse();
        b.add(None, changes).map_err(|e| format!("--sweep: {e}"))?;
    }
    Ok(b.settings)
}

/// What one setting did to the corpus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Stopped calls whose recorded output repeated the last identical call's.
    pub waste: u64,
    /// Stopped calls whose recorded output was new: the run lost information.
    pub harmful: u64,
    /// Calls stopped (denied, or asked about and not approved).
    pub stopped: u64,
    /// Sessions with at least one stopped call (asked about or denied).
    pub sessions_stopped: u64,
    /// Sessions.
    pub sessions: u64,
    /// Events in error (an id no call opened, say).
    pub errors: u64,
    first_error: Option<usize>,
}

impl Figures {
    /// The index of the first event in error (see [`Corpus::origin`]).
    pub fn first_error(&self) -> Option<usize> {
        self.first_error
    }
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
) -> (Figures, Option<String>) {
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
            first_error: first_error.as_ref().map(|(i, _)| *i),
        },
        first_error.map(|(_, m)| m),
    )
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
    /// The setting that stops the most waste with no harmful stop (ties: the nearest to
    /// the base), when one has none.
    pub recommended: Option<usize>,
    /// The message of the first line in error under the base, when one was.
    pub base_error: Option<String>,
    /// Events and calls judged.
    pub events: usize,
    /// Calls judged.
    pub calls: u64,
    /// Where the base came from (a file, or the built-in defaults), for the headings.
    pub base_source: String,
}

/// Replays `corpus` under every setting, `jobs` settings at a time (each on its own
/// thread, processor and store), and finds the frontier and the recommendation.
pub fn measure(corpus: &Corpus, settings: Vec<Setting>, jobs: usize) -> Tuning {
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
    let mut judged: Vec<(usize, Figures, Option<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(s) = settings.get(i) else { break };
                        let calls = prepared.as_deref().filter(|_| alike[i]);
                        let (f, e) = judge(corpus, &s.config, calls);
                        mine.push((i, f, e));
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
    judged.sort_by_key(|(i, _, _)| *i);
    let base_error = judged.first().and_then(|(_, _, e)| e.clone());
    let figures: Vec<Figures> = judged.into_iter().map(|(_, f, _)| f).collect();
    let frontier = frontier(&figures);
    let recommended = figures
        .iter()
        .enumerate()
        .filter(|(_, f)| f.harmful == 0)
        .max_by(|(i, a), (j, b)| {
            a.waste.cmp(&b.waste).then(
                settings[*j]
                    .distance
                    .total_cmp(&settings[*i].distance)
                    .then(j.cmp(i)),
            )
        })
        .map(|(i, _)| i);
    Tuning {
        settings,
        figures,
        frontier,
        recommended,
        base_error,
        events: corpus.events(),
        calls: corpus.calls(),
        base_source: String::new(),
    }
}

/// Pareto: a setting is on the frontier when no other stops at least as much waste with at
/// most as many harmful stops, and is better on one of the two.
fn frontier(figures: &[Figures]) -> Vec<bool> {
    figures
        .iter()
        .map(|a| {
            !figures.iter().any(|b| {
                b.waste >= a.waste
                    && b.harmful <= a.harmful
                    && (b.waste > a.waste || b.harmful < a.harmful)
            })
        })
        .collect()
}

impl Tuning {
    /// The table, the frontier, the recommendation and its `toolbrake.toml` snippet.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "toolbrake tune: {} settings over {} events ({} calls, {} sessions)",
            self.settings.len(),
            self.events,
            self.calls,
            self.figures.first().map_or(0, |f| f.sessions)
        );
        if !self.base_source.is_empty() {
            let _ = writeln!(o, "base: the configuration from {}", self.base_source);
        }
        let _ = writeln!(
            o,
            "waste: stopped calls whose recorded output repeated the last identical call's; harmful: stopped calls whose recorded output was new.\n"
        );
        let labels: Vec<String> = self.settings.iter().map(Setting::row_label).collect();
        let width = labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
            .max(7);
        let _ = writeln!(
            o,
            "{:>3}  {:<width$}  {:>5}  {:>7}  {:>7}  {:>8}  frontier",
            "#", "setting", "waste", "harmful", "stopped", "sessions"
        );
        for (i, (label, f)) in labels.iter().zip(&self.figures).enumerate() {
            let mark = match (self.frontier[i], self.recommended == Some(i)) {
                (true, true) => "*  <- recommended",
                (false, true) => "   <- recommended",
                (true, false) => "*",
                (false, false) => "",
            };
            let _ = writeln!(
                o,
                "{:>3}  {:<width$}  {:>5}  {:>7}  {:>7}  {:>8}  {mark}",
                i + 1,
                label,
                f.waste,
                f.harmful,
                f.stopped,
                f.sessions_stopped
            );
        }
        let named: Vec<(usize, &Setting)> = self
            .settings
            .iter()
            .enumerate()
            .filter(|(_, s)| s.name.is_some_and(|n| n != "base") && !s.changes.is_empty())
            .collect();
        if !named.is_empty() {
            let _ = writeln!(o);
            for (i, s) in named {
                let _ = writeln!(o, "{:>3}  {}", i + 1, s.label());
            }
        }
        let _ = writeln!(
            o,
            "\n* on the frontier: no other setting stops more waste with no more harmful stops."
        );
        match self.recommended {
            None => {
                let _ = writeln!(
                    o,
                    "No setting stops waste without a harmful stop on this history; try looser values with --sweep."
                );
            }
            Some(r) => {
                let f = &self.figures[r];
                let base = &self.figures[0];
                let _ = writeln!(
                    o,
                    "Recommended: #{} {}: {} waste calls stopped, 0 harmful stops (base: {} waste, {} harmful).",
                    r + 1,
                    labels[r],
                    f.waste,
                    base.waste,
                    base.harmful
                );
                if self.settings[r].changes.is_empty() {
                    let _ = writeln!(
                        o,
                        "Your configuration is the recommendation: nothing to change."
                    );
                } else {
                    let _ = writeln!(
                        o,
                        "\nAs toolbrake.toml:\n\n{}",
                        self.settings[r].toml().trim_end()
                    );
                }
            }
        }
        o
    }

    /// The figures for machines.
    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .settings
            .iter()
            .zip(&self.figures)
            .enumerate()
            .map(|(i, (s, f))| {
                json!({
                    "name": s.name,
                    "changes": s.edit(),
                    "waste": f.waste,
                    "harmful": f.harmful,
                    "stopped": f.stopped,
                    "sessions_stopped": f.sessions_stopped,
                    "frontier": self.frontier[i],
                    "recommended": self.recommended == Some(i),
                })
            })
            .collect();
        json!({
            "events": self.events,
            "calls": self.calls,
            "sessions": self.figures.first().map_or(0, |f| f.sessions),
            "settings": rows,
            "recommended": self.recommended.map(|r| json!({
                "index": r,
                "changes": self.settings[r].edit(),
                "toml": self.settings[r].toml(),
            })),
        })
    }

    /// One self-contained page: the frontier as a chart (waste stopped against harmful
    /// stops; the base, the defaults and the recommendation marked) beside the table.
    /// maud escapes every inserted value.
    pub fn html(&self) -> String {
        let labels: Vec<String> = self.settings.iter().map(Setting::label).collect();
        let page = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { "toolbrake tune" }
                    style { (PreEscaped(CSS)) }
                }
                body {
                    h1 { "toolbrake tune" }
                    p id="summary" {
                        @if !self.base_source.is_empty() { "Base: the configuration from " (self.base_source) ". " }
                        (self.settings.len()) " settings over " (self.events) " events (" (self.calls) " calls). "
                        b { "Waste" } ": stopped calls whose recorded output repeated the last identical call's. "
                        b { "Harmful" } ": stopped calls whose recorded output was new."
                    }
                    div class="side" {
                        (self.chart())
                        table id="settings" {
                            tr { th { "#" } th { "setting" } th { "waste" } th { "harmful" } th { "stopped" } th { "sessions" } th { "" } }
                            @for (i, (label, f)) in labels.iter().zip(&self.figures).enumerate() {
                                tr class={ @if self.frontier[i] { "frontier" } @if self.recommended == Some(i) { " recommended" } } {
                                    td { (i + 1) } td { (label) } td { (f.waste) } td { (f.harmful) } td { (f.stopped) } td { (f.sessions_stopped) }
                                    td { @if self.frontier[i] { "frontier" } @if self.recommended == Some(i) { " · recommended" } }
                                }
                            }
                        }
                    }
                    @match self.recommended {
                        Some(r) => {
                            p id="recommendation" { "Recommended: #" (r + 1) " " (labels[r]) ": " (self.figures[r].waste) " waste calls stopped, 0 harmful stops." }
                            @if !self.settings[r].changes.is_empty() {
                                pre { (self.settings[r].toml()) }
                            }
                        }
                        None => p id="recommendation" { "No setting stops waste without a harmful stop on this history." }
                    }
                }
            }
        };
        page.into_string() + "\n"
    }

    fn chart(&self) -> Markup {
        let (w, h, left, bottom, top, right) = (560.0, 380.0, 56.0, 44.0, 16.0, 16.0);
        let max_x = self
            .figures
            .iter()
            .map(|f| f.harmful)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let max_y = self
            .figures
            .iter()
            .map(|f| f.waste)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let x = |v: u64| left + v as f64 / max_x * (w - left - right);
        let y = |v: u64| h - bottom - v as f64 / max_y * (h - bottom - top);
        let mut front: Vec<&Figures> = self
            .figures
            .iter()
            .zip(&self.frontier)
            .filter(|(_, on)| **on)
            .map(|(f, _)| f)
            .collect();
        front.sort_by_key(|f| (f.harmful, f.waste));
        let line: String = front
            .iter()
            .map(|f| format!("{:.1},{:.1}", x(f.harmful), y(f.waste)))
            .collect::<Vec<_>>()
            .join(" ");
        let defaults = self
            .settings
            .iter()
            .position(|s| s.name == Some("defaults"));
        let ticks = |max: f64| -> Vec<u64> {
            let step = ((max / 4.0).ceil() as u64).max(1);
            (0..=4)
                .map(|k| k * step)
                .filter(|v| *v as f64 <= max)
                .collect()
        };
        html! {
            svg id="frontier" xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {w} {h}")) role="img" {
                title { "waste stopped against harmful stops, one dot per setting" }
                line x1=(left) y1=(h - bottom) x2=(w - right) y2=(h - bottom) stroke="#999" {}
                line x1=(left) y1=(top) x2=(left) y2=(h - bottom) stroke="#999" {}
                @for t in ticks(max_x) {
                    text x=(format!("{:.1}", x(t))) y=(h - bottom + 14.0) text-anchor="middle" { (t) }
                }
                @for t in ticks(max_y) {
                    text x=(left - 6.0) y=(format!("{:.1}", y(t) + 4.0)) text-anchor="end" { (t) }
                }
                text x=(format!("{:.0}", (left + w - right) / 2.0)) y=(h - 8.0) text-anchor="middle" { "harmful stops" }
                text x="14" y=(format!("{:.0}", (top + h - bottom) / 2.0)) text-anchor="middle" transform=(format!("rotate(-90 14 {:.0})", (top + h - bottom) / 2.0)) { "waste stopped" }
                @if front.len() > 1 {
                    polyline class="frontier" points=(line) fill="none" stroke="#2f6fdb" stroke-width="1.5" {}
                }
                @for (i, f) in self.figures.iter().enumerate() {
                    circle class={ "setting" @if self.frontier[i] { " frontier" } } cx=(format!("{:.1}", x(f.harmful))) cy=(format!("{:.1}", y(f.waste))) r="4"
                        fill=(if self.frontier[i] { "#2f6fdb" } else { "#bbb" }) {
                        title { "#" (i + 1) " " (self.settings[i].label()) ": " (f.waste) " waste, " (f.harmful) " harmful" }
                    }
                }
                (marker(x(self.figures[0].harmful), y(self.figures[0].waste), if self.settings[0].config == Config::default() { "base = defaults" } else { "base" }, "#222", "square"))
                @if let Some(d) = defaults {
                    (marker(x(self.figures[d].harmful), y(self.figures[d].waste), "defaults", "#8a5a00", "diamond"))
                }
                @if let Some(r) = self.recommended {
                    (marker(x(self.figures[r].harmful), y(self.figures[r].waste), "recommended", "#1a8a3a", "ring"))
                }
            }
        }
    }
}

/// A labelled marker on the chart.
fn marker(cx: f64, cy: f64, label: &str, color: &str, shape: &str) -> Markup {
    html! {
        g class={ "marker " (label.split(' ').next().unwrap_or(label)) } {
            @match shape {
                "square" => rect x=(format!("{:.1}", cx - 6.0)) y=(format!("{:.1}", cy - 6.0)) width="12" height="12" fill="none" stroke=(color) stroke-width="1.5" {},
                "diamond" => polygon points=(format!("{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}", cx, cy - 8.0, cx + 8.0, cy, cx, cy + 8.0, cx - 8.0, cy)) fill="none" stroke=(color) stroke-width="1.5" {},
                _ => circle cx=(format!("{cx:.1}")) cy=(format!("{cy:.1}")) r="9" fill="none" stroke=(color) stroke-width="2" {},
            }
            // Each marker's label on its own side (base above right, defaults above left,
            // the recommendation below right): markers that meet never overlap in words.
            @let (dx, dy, anchor) = match label.split(' ').next().unwrap_or(label) {
                "defaults" => (-10.0, -8.0, "end"),
                "recommended" => (12.0, 20.0, "start"),
                _ => (10.0, -8.0, "start"),
            };
            text x=(format!("{:.1}", cx + dx)) y=(format!("{:.1}", cy + dy)) text-anchor=(anchor) fill=(color) { (label) }
        }
    }
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}h1{font-size:20px}\
.side{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}#frontier{width:560px;max-width:100%;height:auto;flex:none}\
table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}td:nth-child(2),th:nth-child(2){text-align:left}\
tr.frontier td{color:#1b4fa8}tr.recommended td{font-weight:bold;background:#e8f5ec}pre{background:#f5f5f5;padding:8px;display:inline-block}svg text{font:11px system-ui,sans-serif}";

#[cfg(test)]
mod tests {
    use super::*;

    /// The values a sweep gives `key` when it varies that key alone.
    fn alone(settings: &[Setting], key: &str) -> Vec<String> {
        settings
            .iter()
            .filter(|s| s.name.is_none() && s.changes.len() == 1 && s.changes[0].0 == key)
            .map(|s| shown(&s.changes[0].1))
            .collect()
    }
    use toolbrake_config::ConfigToml;

    fn config(toml: &str) -> Config {
        Config::from_toml_str(toml, &no_env).unwrap()
    }

    #[test]
    fn the_default_sweep_has_about_thirty_distinct_settings_around_the_base() {
        let settings = default_sweep(&Config::default());
        assert!((28..=31).contains(&settings.len()), "{}", settings.len());
        assert_eq!(settings[0].label(), "(base)");
        for (i, a) in settings.iter().enumerate() {
            for b in &settings[i + 1..] {
                assert_ne!(a.config, b.config, "{} and {}", a.label(), b.label());
            }
        }
        // Each key is varied alone, one step stricter and two looser.
        assert_eq!(alone(&settings, "streak.max_repeats"), ["2", "4", "5"]);
        assert_eq!(alone(&settings, "breaker.limits.exact"), ["10", "16", "20"]);
        assert_eq!(alone(&settings, "breaker.window"), ["12", "24", "32"]);
    }

    #[test]
    fn a_custom_base_is_swept_around_its_own_values_and_against_the_defaults() {
        let base = config("[streak]\nmax_repeats = 7\n[breaker]\nfail_limit = \"off\"\n");
        let settings = default_sweep(&base);
        let defaults = settings
            .iter()
            .find(|s| s.name == Some("defaults"))
            .expect("the defaults are judged beside a custom base");
        assert_eq!(
            defaults.toml(),
            "[streak]\nmax_repeats = 3\n\n[breaker]\nfail_limit = 5\n"
        );
        // 7 is not a rung: it is put between 6 and 8.
        assert_eq!(alone(&settings, "streak.max_repeats"), ["6", "8", "10"]);
        // Off is the loosest rung: only stricter values are left.
        assert_eq!(alone(&settings, "breaker.fail_limit"), ["10", "12"]);
    }

    #[test]
    fn a_grid_is_every_combination_validated_and_keys_are_resolved() {
        let grid = vec![
            parse_sweep_arg("max_repeats=2,3").unwrap(),
            parse_sweep_arg("limits.exact=8,off").unwrap(),
        ];
        let settings = grid_sweep(&Config::default(), &grid).unwrap();
        let labels: Vec<String> = settings.iter().map(Setting::label).collect();
        assert_eq!(
            labels,
            [
                "(base)",
                "streak.max_repeats=2, breaker.limits.exact=8",
                "streak.max_repeats=2, breaker.limits.exact=off",
                "breaker.limits.exact=8",
                "breaker.limits.exact=off",
            ]
        );
        assert_eq!(
            settings[1].edit(),
            json!({"streak": {"max_repeats": 2}, "breaker": {"limits": {"exact": 8}}})
        );
        let e = grid_sweep(
            &Config::default(),
            &[parse_sweep_arg("breaker.window=2").unwrap()],
        )
        .unwrap_err();
        assert!(e.contains("breaker.window"), "{e}");
        let e = grid_sweep(
            &Config::default(),
            &[parse_sweep_arg("enabled=false").unwrap()],
        )
        .unwrap_err();
        assert!(e.contains("both [streak] and [breaker]"), "{e}");
        let big: Vec<_> = (0..4)
            .map(|i| {
                let key = ["max_repeats", "window", "fail_limit", "cycle_limit"][i];
                (key.to_string(), (2..8).map(|n| json!(n)).collect())
            })
            .collect();
        assert!(grid_sweep(&Config::default(), &big)
            .unwrap_err()
            .contains("more than 999"));
    }

    #[test]
    fn the_frontier_is_the_settings_no_other_beats() {
        let f = |waste, harmful| Figures {
            waste,
            harmful,
            ..Figures::default()
        };
        let figures = [f(5, 0), f(8, 2), f(8, 3), f(3, 0), f(5, 0), f(9, 9)];
        assert_eq!(frontier(&figures), [true, true, false, false, true, true]);
    }
}
