//! The run-level stop line (`[budget]`), a third engine, off by default.
//!
//! Where the streak brake and the breaker judge a call by what came just before it, the
//! budget judges the run as a whole: its score is the calls the run has made plus the calls
//! toolbrake has stopped in it, over the session's whole life (a user message does not
//! reset it). Past the line, a call is asked about (hosts where nobody can answer stop
//! it, as for every ask); an approval lifts the line for the rest of the run. The line is
//! meant to be calibrated on the user's own good runs (`toolbrake tune --calibrate
//! --budget`), so that at most a chosen share of good runs ever crosses it.
//!
//! A configuration is per file: hooks read the project directory's `toolbrake.toml`, so
//! each project has its own line; a library or protocol host gives each project its own
//! configuration.

use crate::table::{as_table, dotted, get_bool, get_int, show, unknown_key, ConfigError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The engine's name in decisions (`"engine": "budget"`).
pub const ENGINE: &str = "budget";

/// The refusal code of a call stopped at the line (its ask declined or unanswered).
pub const CODE: &str = "RUN_BUDGET";

/// What the model reads when a call past the line was stopped.
pub const STOPPED_TEXT: &str = "toolbrake stopped this call: this run has gone past its run-level line of tool calls ([budget] line), and nobody approved going on. Tell the user what you have done so far and what is left; do not retry the same call.";

/// The keys of `[budget]`.
const KEYS: &[&str] = &["enabled", "line"];

/// The largest line accepted.
pub const MAX_LINE: u32 = 1_000_000;

/// The `[budget]` table: whether the line is on, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetConfig {
    enabled: bool,
    line: u32,
}

impl Default for BudgetConfig {
    /// Off; a line of 200 when turned on without one.
    fn default() -> Self {
        BudgetConfig {
            enabled: false,
            line: 200,
        }
    }
}

impl BudgetConfig {
    /// Validates the `[budget]` table (absent: the defaults). Every error names the key,
    /// the value and the rule.
    pub fn from_value(v: Option<&Value>) -> Result<Self, ConfigError> {
        let mut c = BudgetConfig::default();
        let Some(table) = as_table("budget", v)? else {
            return Ok(c);
        };
        for (key, v) in table {
            match key.as_str() {
                "enabled" => c.enabled = get_bool("budget", key, v)?,
                "line" => {
                    let n = get_int("budget", key, v)?;
                    c.line = u32::try_from(n)
                        .ok()
                        .filter(|n| (1..=MAX_LINE).contains(n))
                        .ok_or_else(|| {
                            ConfigError::new(
                                dotted("budget", key),
                                show(v),
                                format!("must be a whole number from 1 to {MAX_LINE} (a run's calls plus the calls toolbrake stopped)"),
                            )
                        })?;
                }
                _ => return Err(unknown_key("budget", key, KEYS)),
            }
        }
        Ok(c)
    }

    /// The table with every key written out.
    pub fn to_value(&self) -> Value {
        json!({"enabled": self.enabled, "line": self.line})
    }

    /// The line, when the budget is on.
    pub fn line(&self) -> Option<u32> {
        self.enabled.then_some(self.line)
    }
}

/// One run's budget: a plain value kept with the session's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetState {
    /// Calls judged in the run.
    #[serde(default, rename = "c")]
    calls: u32,
    /// Calls stopped in the run (by any engine).
    #[serde(default, rename = "s")]
    stopped: u32,
    /// The call asked about at the line, while its ask is pending.
    #[serde(default, rename = "p", skip_serializing_if = "Option::is_none")]
    pending: Option<String>,
    /// An operator approved going past the line: not asked again in this run.
    #[serde(default, rename = "w", skip_serializing_if = "std::ops::Not::not")]
    waived: bool,
}

impl BudgetState {
    /// Whether nothing was counted yet.
    pub fn is_empty(&self) -> bool {
        *self == BudgetState::default()
    }

    /// The run's score so far: its calls plus the calls stopped.
    pub fn score(&self) -> u64 {
        u64::from(self.calls) + u64::from(self.stopped)
    }

    /// Counts a call stopped by any engine.
    pub(crate) fn count_stop(&mut self) {
        self.stopped = self.stopped.saturating_add(1);
    }

    /// The call whose ask at the line is pending.
    pub fn pending(&self) -> Option<&str> {
        self.pending.as_deref()
    }

    /// Counts a new call of the run.
    pub(crate) fn count_call(&mut self) {
        self.calls = self.calls.saturating_add(1);
    }

    /// Whether a call about to run is past the line: `Some(text)` (the operator's
    /// question) when it is, the call then asked about and pending.
    pub(crate) fn check(&mut self, config: &BudgetConfig, call_id: &str) -> Option<String> {
        let line = config.line()?;
        if self.waived || self.score() <= u64::from(line) {
            return None;
        }
        self.pending = Some(call_id.to_string());
        Some(format!(
            "This run has made {} tool calls, and toolbrake stopped {} of them: {} in all, past the run-level line of {line} ([budget] line, calibrated on past good runs by `toolbrake tune --calibrate --budget`). Approve to let the run go on without this line; decline to stop this call.",
            self.calls,
            self.stopped,
            self.score()
        ))
    }

    /// Settles the pending ask at the line: `Some(approved)` when `call_id` is it.
    pub(crate) fn answer(&mut self, call_id: &str, approved: bool) -> Option<bool> {
        if self.pending.as_deref() != Some(call_id) {
            return None;
        }
        self.pending = None;
        self.waived |= approved;
        Some(approved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_validated_with_its_key_value_and_rule() {
        assert_eq!(BudgetConfig::from_value(None).unwrap().line(), None);
        let on = BudgetConfig::from_value(Some(&json!({"enabled": true, "line": 40}))).unwrap();
        assert_eq!(on.line(), Some(40));
        assert_eq!(BudgetConfig::from_value(Some(&on.to_value())).unwrap(), on);
        for (bad, key) in [
            (json!({"line": 0}), "budget.line"),
            (json!({"line": -3}), "budget.line"),
            (json!({"line": 2_000_000}), "budget.line"),
            (json!({"line": 1.5}), "budget.line"),
            (json!({"enabled": "yes"}), "budget.enabled"),
            (json!({"lien": 5}), "budget.lien"),
        ] {
            let e = BudgetConfig::from_value(Some(&bad)).unwrap_err();
            assert_eq!(e.key, key, "{bad}");
        }
        let e = BudgetConfig::from_value(Some(&json!({"lien": 5}))).unwrap_err();
        assert!(e.rule.contains("did you mean `budget.line`"), "{e}");
    }

    #[test]
    fn a_run_is_asked_about_once_past_its_line_and_an_approval_lifts_it() {
        let config = BudgetConfig::from_value(Some(&json!({"enabled": true, "line": 3}))).unwrap();
        let mut st = BudgetState::default();
        let next = |st: &mut BudgetState, id: &str| {
            st.count_call();
            st.check(&config, id)
        };
        assert_eq!(next(&mut st, "1"), None);
        st.count_stop();
        assert_eq!(next(&mut st, "2"), None);
        // 3 calls + 1 stop = 4 > 3.
        let ask = next(&mut st, "3").unwrap();
        assert!(ask.contains("made 3 tool calls, and toolbrake stopped 1 of them: 4 in all, past the run-level line of 3"), "{ask}");
        assert_eq!(st.pending(), Some("3"));
        assert_eq!(st.answer("other", true), None);
        assert_eq!(st.answer("3", false), Some(false));
        assert!(next(&mut st, "4").is_some());
        assert_eq!(st.answer("4", true), Some(true));
        assert_eq!(next(&mut st, "5"), None);
        // Off: counted, never asked.
        let mut st = BudgetState::default();
        for i in 0..10 {
            st.count_call();
            assert_eq!(st.check(&BudgetConfig::default(), &i.to_string()), None);
        }
        assert_eq!(st.score(), 10);
    }
}
