//! Engine configuration: the `streak` and `breaker` sections, validated completely when
//! built.
//!
//! The core reads no file format: it validates a tree of values ([`Table`]), whichever
//! file or API it came from (`toolbrake-config` reads `toolbrake.toml` into it and prints
//! [`Config::to_value`] back as TOML). *Finding* the file and reading environment
//! variables is the caller's job: the environment reaches this module as a lookup
//! function, so the core never reads process state itself. Every error names the key, the
//! value and the rule it broke.

use crate::breaker::BreakerConfig;
use crate::streak::StreakConfig;
use crate::table::as_table;
pub use crate::table::{
    cut, dotted, no_env, show, unknown_key, ConfigError, EnvLookup, Table, KEY_ITSELF, SYNTAX,
};
use serde_json::Value;

/// The whole engine configuration: both engines' tables.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// The streak brake (`[streak]`).
    pub streak: StreakConfig,
    /// The breaker (`[breaker]`).
    pub breaker: BreakerConfig,
    /// The run-level stop line (`[budget]`), off by default.
    pub budget: crate::budget::BudgetConfig,
}

/// Top-level tables the engine configuration owns.
pub const ENGINE_TABLES: &[&str] = &["streak", "breaker", "budget"];

impl Config {
    /// Validates a document holding only engine tables (`{"streak": {…}, "breaker": {…}}`).
    ///
    /// ```
    /// use toolbrake_core::config::{Config, no_env};
    /// let cfg = Config::from_value(&serde_json::json!({"streak": {"max_repeats": 5}}), &no_env).unwrap();
    /// assert_eq!(cfg.streak.max_repeats(), 5);
    /// let err = Config::from_value(&serde_json::json!({"streak": {"max_repeats": 0}}), &no_env).unwrap_err();
    /// assert_eq!(err.key, "streak.max_repeats");
    /// ```
    pub fn from_value(doc: &Value, env: EnvLookup<'_>) -> Result<Self, ConfigError> {
        let table = as_table("", Some(doc))?.expect("present");
        for key in table.keys() {
            if !ENGINE_TABLES.contains(&key.as_str()) {
                return Err(unknown_key("", key, ENGINE_TABLES));
            }
        }
        Self::from_sections(table.get("streak"), table.get("breaker"), env)?
            .with_budget(table.get("budget"))
    }

    /// The same configuration with the `[budget]` section read (absent: off).
    pub fn with_budget(mut self, budget: Option<&Value>) -> Result<Self, ConfigError> {
        self.budget = crate::budget::BudgetConfig::from_value(budget)?;
        Ok(self)
    }

    /// Builds the configuration from the `streak` and `breaker` sections of a document
    /// (either may be absent; the budget is off: [`Config::with_budget`] reads its
    /// section), so a host that owns more sections can reuse it.
    pub fn from_sections(
        streak: Option<&Value>,
        breaker: Option<&Value>,
        env: EnvLookup<'_>,
    ) -> Result<Self, ConfigError> {
        let streak_table = as_table("streak", streak)?;
        let breaker_table = as_table("breaker", breaker)?;
        Ok(Config {
            streak: StreakConfig::from_table(streak_table, env)?,
            breaker: BreakerConfig::from_table(breaker_table)?,
            budget: crate::budget::BudgetConfig::default(),
        })
    }

    /// The effective configuration, every key written out (a stage or gate that is off
    /// reads `"off"`); [`Config::from_value`] of it gives the same configuration.
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "streak": self.streak.to_value(),
            "breaker": self.breaker.to_value(),
            "budget": self.budget.to_value(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_effective_configuration_round_trips() {
        let custom = Config::from_value(
            &json!({"streak": {"max_repeats": 4}, "breaker": {"warn_at": 0}}),
            &no_env,
        )
        .unwrap();
        for cfg in [Config::default(), custom] {
            let v = cfg.to_value();
            assert_eq!(Config::from_value(&v, &no_env).unwrap(), cfg, "{v}");
        }
    }

    #[test]
    fn environment_fallback_only_when_the_key_is_missing() {
        let env = |k: &str| (k == "TOOLBRAKE_MAX_REPEATS").then(|| "7".to_string());
        assert_eq!(
            Config::from_value(&json!({}), &env)
                .unwrap()
                .streak
                .max_repeats(),
            7
        );
        assert_eq!(
            Config::from_value(&json!({"streak": {"max_repeats": 4}}), &env)
                .unwrap()
                .streak
                .max_repeats(),
            4
        );
        let legacy = |k: &str| (k == "DSH_LOOP_BRAKE_MAX_REPEATS").then(|| "5".to_string());
        assert_eq!(
            Config::from_value(&json!({}), &legacy)
                .unwrap()
                .streak
                .max_repeats(),
            5
        );
        for bad in ["3.5", "0", "many", "-2", "", " 3", "3\n", "4294967296"] {
            let env = |k: &str| (k == "TOOLBRAKE_MAX_REPEATS").then(|| bad.to_string());
            let e = Config::from_value(&json!({}), &env).unwrap_err();
            assert_eq!(e.key, "TOOLBRAKE_MAX_REPEATS", "{bad}");
        }
    }

    #[test]
    fn unknown_and_mistyped_keys_are_errors() {
        let e = Config::from_value(&json!({"streak": {"max_repeat": 3}}), &no_env).unwrap_err();
        assert_eq!(e.key, "streak.max_repeat");
        assert!(e.rule.contains("did you mean `streak.max_repeats`"), "{e}");
        let e = Config::from_value(&json!({"streak": {"max_repeats": "3"}}), &no_env).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.value.as_str()),
            ("streak.max_repeats", "\"3\"")
        );
        let e = Config::from_value(&json!({"strek": {}}), &no_env).unwrap_err();
        assert!(e.rule.contains("`streak`"), "{e}");
        assert!(Config::from_value(&json!({"streak": 3}), &no_env).is_err());
    }
}
