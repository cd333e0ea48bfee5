//! `toolbrake tune --calibrate`: the strictest setting of the calibration ladder
//! ([`super::calibration_ladder`]) whose share of good runs with a harmful stop is at most
//! α by the split-conformal bound ([`crate::calibrate`]), and (with the run-level line) the
//! line over a run's calls plus the calls toolbrake stopped in it.
//!
//! Good runs: a run a person marked mistaken (`toolbrake feedback`) is good, one marked
//! stuck is not; otherwise the resolved label where the history has one (`--labels`),
//! otherwise a run that ended without a stop under the base configuration. A run that made
//! no tool call (a chat-only transcript) is left out: no setting could have stopped
//! anything in it, so it is evidence neither way, and counting it as good would make a
//! promise out of runs that tested nothing.
//!
//! A run longer than [`MAX_RUN_CALLS`] calls is *cut*: only its first `MAX_RUN_CALLS` calls
//! are replayed (replaying one run under the ladder's ten settings is linear in its calls:
//! a run of a million calls took minutes), so what the settings would do past them is
//! unknown. A cut run that is good is counted as harmed at every rung, and its run-level
//! score is the most its length allows (every call past the cut stopped), so a cut can only
//! make the setting looser and the line higher than the whole run would: the promise keeps
//! holding, only more cautiously.

use super::{RunFigures, Setting, Tuning};
use crate::calibrate::{self, is_good, rung_score, Line, Share, TooFew};
use crate::report::Map;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::io::BufRead;
use toolbrake_core::budget::MAX_LINE;
use toolbrake_core::Feedback;

/// The most calls of one run calibration replays. A replay costs about 12 µs a call a
/// setting (release build), so a cut run costs at most about 12 s on one core for the
/// ladder's ten settings (and about 260 MB held while read); runs of 100,000 calls are
/// runaway loops rather than the good runs a promise is about, and each one cut only makes
/// the promise more cautious.
pub const MAX_RUN_CALLS: u64 = 100_000;

/// What the history says of each run besides its calls.
#[derive(Debug, Default)]
pub struct RunLabels {
    /// Resolved or not, by session key (from a labels file).
    pub resolved: Map<String, bool>,
    /// A person's mark, by session key (from the store: `toolbrake feedback`).
    pub feedback: Map<String, Feedback>,
}

impl RunLabels {
    /// Reads a labels file: one JSON object a line with `session` and `resolved` (`true`,
    /// `false`, or `null` for never evaluated), other fields ignored; a `feedback` field
    /// (`"mistaken"`, `"stuck"`) is read too. Blank lines are skipped; a line that is not
    /// such an object is an error naming its number and the field.
    pub fn read_labels(&mut self, input: impl BufRead) -> Result<(), String> {
        for (n, line) in input.lines().enumerate() {
            let line = line.map_err(|e| e.to_string())?;
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&line)
                .map_err(|e| format!("line {}: not JSON ({e})", n + 1))?;
            let session = v["session"]
                .as_str()
                .ok_or_else(|| format!("line {}: `session` must be a string", n + 1))?;
            match &v["resolved"] {
                Value::Bool(b) => {
                    self.resolved.insert(session.to_string(), *b);
                }
                Value::Null => {}
                _ => {
                    return Err(format!(
                        "line {}: `resolved` must be true, false or null",
                        n + 1
                    ))
                }
            }
            match &v["feedback"] {
                Value::Null => {}
                Value::String(f) if Feedback::parse(f).is_some() => {
                    self.feedback
                        .insert(session.to_string(), Feedback::parse(f).expect("checked"));
                }
                _ => {
                    return Err(format!(
                        "line {}: `feedback` must be \"mistaken\" or \"stuck\"",
                        n + 1
                    ))
                }
            }
        }
        Ok(())
    }
}

/// How the good runs were found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GoodRuns {
    /// Good runs in all.
    pub good: u64,
    /// Runs in all, those without a tool call included.
    pub runs: u64,
    /// Runs that made no tool call: left out (neither good nor bad).
    pub without_calls: u64,
    /// Runs cut at the cap on calls replayed ([`MAX_RUN_CALLS`]), good or not.
    pub cut: u64,
    /// Good runs among them: counted harmed at every rung.
    pub cut_good: u64,
    /// Good by a resolved label.
    pub by_label: u64,
    /// Good because they ended without a stop (no label).
    pub by_no_stop: u64,
    /// Marked mistaken (good whatever else).
    pub mistaken: u64,
    /// Marked stuck (never good).
    pub stuck: u64,
}

/// The run-level line: a run whose calls plus calls stopped exceed it is past the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLine {
    /// The calibrated line over calls plus calls stopped.
    pub line: Line<u64>,
    /// Its share of the promise.
    pub alpha: Share,
}

impl RunLine {
    /// Whether `[budget] line` can hold it (1 to [`MAX_LINE`]). A line above that is not
    /// clamped: a lower line than the calibrated one would stop good runs the promise
    /// says it would not, so no line is offered instead.
    pub fn fits(&self) -> bool {
        (1..=u64::from(MAX_LINE)).contains(&self.line.value)
    }
}

/// What calibration promises, and the setting that keeps the promise.
#[derive(Debug, Clone)]
pub struct Promise {
    /// The share of good runs the whole promise allows to be harmed.
    pub alpha: Share,
    /// The share given to the call-level setting (all of α, or half with a run-level line).
    pub setting_alpha: Share,
    /// The good runs.
    pub good: GoodRuns,
    /// The conformal line over the good runs' rung scores.
    pub line: Line<usize>,
    /// The chosen rung of the ladder.
    pub rung: usize,
    /// Good runs of the calibration set the chosen rung harms (a cut run counted harmed).
    pub harmed: u64,
    /// The run-level line, when asked for.
    pub run_line: Option<RunLine>,
}

/// Why no promise can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalibrateError {
    /// Too few good runs (`without_calls`: runs left out because they made no tool call).
    #[error("cannot promise anything yet: {too_few}{}. Record more runs (or mark runs with `toolbrake feedback SESSION --mistaken`) and calibrate again", left_out(*.without_calls))]
    TooFew {
        /// How many good runs there are and how many the promise needs.
        too_few: TooFew,
        /// Runs without a tool call, left out.
        without_calls: u64,
    },
    /// Even the loosest rung harms more good runs than α allows.
    #[error("no setting of the ladder keeps the promise: even the loosest harms {harmed} of your {good} good runs, more than {alpha} allows")]
    NoRung {
        /// Good runs the loosest rung harms.
        harmed: u64,
        /// Good runs.
        good: u64,
        /// α.
        alpha: Share,
    },
}

/// The clause saying how many runs without a tool call were left out (none: nothing).
fn left_out(without_calls: u64) -> String {
    match without_calls {
        0 => String::new(),
        1 => "; 1 run without a tool call was left out (a run that called no tool is no evidence either way)".into(),
        n => format!("; {n} runs without a tool call were left out (a run that called no tool is no evidence either way)"),
    }
}

/// Calibrates on every run of `tuning` (judged under the ladder, `base_at` the base's
/// rung) at `alpha`; with `run_line`, α is split in halves between the setting and the
/// run-level line (a union bound: together at most α).
pub fn calibrate(
    tuning: &Tuning,
    base_at: usize,
    labels: &RunLabels,
    alpha: Share,
    run_line: bool,
) -> Result<Promise, CalibrateError> {
    let rungs = tuning.runs.len();
    let mut good = GoodRuns {
        runs: tuning.run_names.len() as u64,
        ..GoodRuns::default()
    };
    let mut members: Vec<usize> = Vec::new();
    // Each cut run's calls past the cap (by its index in `run_names`).
    let cut: Map<&str, u64> = tuning
        .cut_runs
        .iter()
        .map(|(name, all)| (name.as_str(), *all))
        .collect();
    let mut past_cap: Vec<Option<u64>> = vec![None; tuning.run_names.len()];
    for (i, name) in tuning.run_names.iter().enumerate() {
        if let Some(all) = cut.get(name.as_str()) {
            good.cut += 1;
            past_cap[i] = Some(all.saturating_sub(tuning.run_cap.unwrap_or(0)));
        }
        let feedback = labels.feedback.get(name).copied();
        let resolved = labels.resolved.get(name).copied();
        let run = &tuning.runs[base_at][i];
        if run.calls == 0 {
            good.without_calls += 1;
            continue;
        }
        let stopped = run.stopped > 0;
        match feedback {
            Some(Feedback::Mistaken) => good.mistaken += 1,
            Some(Feedback::Stuck) => good.stuck += 1,
            None => {}
        }
        if is_good(feedback, resolved, stopped) {
            members.push(i);
            good.cut_good += u64::from(past_cap[i].is_some());
            match (feedback, resolved) {
                (None, Some(_)) => good.by_label += 1,
                (None, None) => good.by_no_stop += 1,
                _ => {}
            }
        }
    }
    good.good = members.len() as u64;
    let setting_alpha = if run_line { alpha.half() } else { alpha };
    // A cut run: harmed at every rung for all anyone knows (the worst score).
    let scores: Vec<usize> = members
        .iter()
        .map(|&i| match past_cap[i] {
            Some(_) => rungs,
            None => rung_score((0..rungs).map(|j| u64::from(tuning.runs[j][i].harmful))),
        })
        .collect();
    let too_few = |too_few| CalibrateError::TooFew {
        too_few,
        without_calls: good.without_calls,
    };
    let line = calibrate::line(&scores, setting_alpha).map_err(too_few)?;
    if line.value >= rungs {
        return Err(CalibrateError::NoRung {
            harmed: members
                .iter()
                .filter(|&&i| tuning.runs[rungs - 1][i].harmful > 0 || past_cap[i].is_some())
                .count() as u64,
            good: good.good,
            alpha: setting_alpha,
        });
    }
    let rung = line.value;
    let harmed = members
        .iter()
        .filter(|&&i| tuning.runs[rung][i].harmful > 0 || past_cap[i].is_some())
        .count() as u64;
    let run_line = if run_line {
        let alpha = alpha.half();
        let scores: Vec<u64> = members
            .iter()
            .map(|&i| run_score_at_most(&tuning.runs[rung][i], past_cap[i].unwrap_or(0)))
            .collect();
        let line = calibrate::line(&scores, alpha).map_err(too_few)?;
        Some(RunLine { line, alpha })
    } else {
        None
    };
    Ok(Promise {
        alpha,
        setting_alpha,
        good,
        line,
        rung,
        harmed,
        run_line,
    })
}

/// A run's score for the run-level line: its calls plus the calls toolbrake stopped in it
/// (a recorded run holds every call it made, stopped or not).
pub fn run_score(r: &RunFigures) -> u64 {
    u64::from(r.calls) + u64::from(r.stopped)
}

/// The most a run's score can be when `past_cap` of its calls were not replayed: each of
/// them counted as a call and as stopped. A cut run's line score is this bound, so the
/// line is never lower than the whole runs' would be (a higher line stops fewer good runs).
pub fn run_score_at_most(r: &RunFigures, past_cap: u64) -> u64 {
    run_score(r).saturating_add(past_cap.saturating_mul(2))
}

/// The clause on runs cut at the cap (none: nothing).
fn cut_note(good: &GoodRuns, tuning: &Tuning) -> String {
    if good.cut == 0 {
        return String::new();
    }
    let cap = tuning.run_cap.unwrap_or(0);
    let skipped: u64 = tuning
        .cut_runs
        .iter()
        .map(|(_, all)| all.saturating_sub(cap))
        .sum();
    format!(
        "; {} longer than {cap} calls cut there ({skipped} calls past the cut not replayed): {} good of them counted harmed at every setting",
        if good.cut == 1 { "1 run".to_string() } else { format!("{} runs", good.cut) },
        good.cut_good
    )
}

impl Promise {
    /// The run-level line to offer: the calibrated one when `[budget] line` can hold it.
    pub fn offered_line(&self) -> Option<&RunLine> {
        self.run_line.as_ref().filter(|r| r.fits())
    }

    /// The calibrated run-level line that was not offered: above [`MAX_LINE`].
    pub fn refused_line(&self) -> Option<&RunLine> {
        self.run_line.as_ref().filter(|r| !r.fits())
    }

    /// The chosen setting.
    pub fn setting<'a>(&self, tuning: &'a Tuning) -> &'a Setting {
        &tuning.settings[self.rung]
    }

    /// The changes to write: the setting's, and the run-level line's `[budget]` table (only
    /// a line `[budget] line` accepts: a written file always loads).
    pub fn edit(&self, tuning: &Tuning) -> Value {
        let mut doc = self.setting(tuning).edit();
        if let (Some(r), Value::Object(map)) = (self.offered_line(), &mut doc) {
            map.insert(
                "budget".into(),
                json!({"enabled": true, "line": r.line.value}),
            );
        }
        doc
    }

    /// The changes as `toolbrake.toml` text.
    pub fn toml(&self, tuning: &Tuning) -> String {
        let doc = self.edit(tuning);
        ["streak", "breaker", "budget"]
            .iter()
            .filter_map(|t| doc.get(*t).map(|s| toolbrake_config::section_to_toml(t, s)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The promise in plain words, with its conditions and the figures behind it.
    pub fn text(&self, tuning: &Tuning) -> String {
        let mut o = String::new();
        let g = &self.good;
        let f = &tuning.figures[self.rung];
        let _ = writeln!(
            o,
            "toolbrake tune --calibrate: {} runs ({} calls){}{}, {} good: {} resolved by your labels, {} ended without a stop, {} marked mistaken (good); {} marked stuck (not good).",
            g.runs,
            tuning.calls,
            match g.without_calls {
                0 => String::new(),
                n => format!(
                    "; {n} without a tool call left out (no evidence either way); of the other {}",
                    g.runs - n
                ),
            },
            cut_note(g, tuning),
            g.good,
            g.by_label,
            g.by_no_stop,
            g.mistaken,
            g.stuck
        );
        let _ = writeln!(
            o,
            "\nPromise: no more than {} runs like your {} past good ones would get a call stopped that would have brought something new{}.",
            self.alpha.in_words(),
            g.good,
            if self.offered_line().is_some() {
                ", or cross the run-level line"
            } else {
                ""
            }
        );
        let _ = writeln!(
            o,
            "  How: split-conformal calibration at α = {} over the {} good runs (rank k = ⌈(n+1)(1−α)⌉ = {}, exact arithmetic), along {} settings with every gate stepped together; the setting is the strictest the k-th run allows.",
            self.setting_alpha,
            self.line.n,
            self.line.k,
            tuning.settings.len()
        );
        let _ = writeln!(
            o,
            "  Holds when: new runs are like these (the same agent and model, the same kind of tasks, this configuration otherwise), taken on average over runs. Recalibrate when any of them changes."
        );
        let s = self.setting(tuning);
        let _ = writeln!(
            o,
            "\nSetting: {} ({} of {} on the ladder, strictest first). On this history it harms {} of the {} good runs; over all runs it stops {} calls: {} waste, {} harmful; saved {} of calls, {} bytes of output.",
            s.label(),
            self.rung + 1,
            tuning.settings.len(),
            self.harmed,
            g.good,
            f.stopped,
            f.waste,
            f.harmful,
            crate::report::share_text(f.stopped, f.calls),
            f.bytes_saved
        );
        if let Some(r) = self.refused_line() {
            let _ = writeln!(
                o,
                "No run-level line: calibrated at α = {} (k = {} of {}), it would be {}, above the largest `[budget] line` toolbrake accepts ({MAX_LINE}). A lower line would stop good runs the promise counts on, so none is offered and `[budget]` is left as it is; the setting alone keeps the promise (calibrated at {}).",
                r.alpha, r.line.k, r.line.n, r.line.value, self.setting_alpha
            );
        }
        if let Some(r) = self.offered_line() {
            let past: u64 = tuning.runs[self.rung]
                .iter()
                .filter(|x| run_score(x) > r.line.value)
                .count() as u64;
            let _ = writeln!(
                o,
                "Run-level line: {} (a run's calls plus the calls toolbrake stopped; past it toolbrake asks, or stops where nobody can answer), calibrated at α = {} (k = {} of {}); {} of all {} runs here go past it.",
                r.line.value, r.alpha, r.line.k, r.line.n, past, g.runs
            );
        }
        if s.changes.is_empty() && self.offered_line().is_none() {
            let _ = writeln!(
                o,
                "\nYour configuration keeps the promise: nothing to change."
            );
        } else {
            let _ = writeln!(
                o,
                "\nAs toolbrake.toml:\n\n{}",
                self.toml(tuning).trim_end()
            );
        }
        o
    }

    /// The promise for machines.
    pub fn json(&self, tuning: &Tuning) -> Value {
        let f = &tuning.figures[self.rung];
        json!({
            "alpha": self.alpha.to_string(),
            "setting_alpha": self.setting_alpha.to_string(),
            "good_runs": self.good.good,
            "runs": self.good.runs,
            "left_out_without_calls": self.good.without_calls,
            "cut_runs": self.good.cut,
            "cut_good_runs": self.good.cut_good,
            "cut_at": tuning.run_cap,
            "calls_replayed": tuning.calls,
            "calls_not_replayed": tuning.cut_runs.iter().map(|(_, all)| all.saturating_sub(tuning.run_cap.unwrap_or(0))).sum::<u64>(),
            "good_by_label": self.good.by_label,
            "good_by_no_stop": self.good.by_no_stop,
            "marked_mistaken": self.good.mistaken,
            "marked_stuck": self.good.stuck,
            "k": self.line.k,
            "rung": self.rung,
            "rungs": tuning.settings.len(),
            "harmed_good_runs": self.harmed,
            "waste": f.waste,
            "harmful": f.harmful,
            "stopped": f.stopped,
            "calls": f.calls,
            "bytes_saved": f.bytes_saved,
            "run_line": self.offered_line().map(|r| json!({"line": r.line.value, "k": r.line.k, "alpha": r.alpha.to_string()})),
            "run_line_refused": self.refused_line().map(|r| json!({"line": r.line.value, "k": r.line.k, "alpha": r.alpha.to_string(), "max": MAX_LINE, "why": "above the largest [budget] line"})),
            "changes": self.edit(tuning),
            "toml": self.toml(tuning),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_read_with_their_errors_named() {
        let mut l = RunLabels::default();
        l.read_labels(
            "{\"session\":\"a\",\"resolved\":true}\n\n{\"session\":\"b\",\"resolved\":null,\"feedback\":\"mistaken\"}\n"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(l.resolved.get("a"), Some(&true));
        assert!(!l.resolved.contains_key("b"));
        assert_eq!(l.feedback.get("b"), Some(&Feedback::Mistaken));
        let e = l
            .read_labels("{\"session\":\"c\",\"resolved\":\"yes\"}\n".as_bytes())
            .unwrap_err();
        assert_eq!(e, "line 1: `resolved` must be true, false or null");
        let e = l
            .read_labels("{\"resolved\":true}\n".as_bytes())
            .unwrap_err();
        assert!(e.contains("`session`"), "{e}");
        let e = l
            .read_labels("{\"session\":\"c\",\"feedback\":\"bad\"}\n".as_bytes())
            .unwrap_err();
        assert!(e.contains("`feedback`"), "{e}");
    }
}
