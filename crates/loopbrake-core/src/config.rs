//! Engine configuration: the `[streak]` and `[breaker]` tables of `loopbrake.toml`,
//! validated completely when loaded.
//!
//! Parsing TOML text is pure; *finding* the file (and reading environment variables)
//! is the caller's job: the environment reaches this module as a lookup function, so
//! the core never reads process state itself. Every error names the key, the value and
//! the rule it broke.

use crate::breaker::BreakerConfig;
use crate::streak::StreakConfig;
use std::fmt;

/// A configuration that cannot be used, with the key, the offending value and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted key, e.g. `breaker.window`, or the environment variable's name.
    pub key: String,
    /// The value as written (TOML syntax), or `(missing)`.
    pub value: String,
    /// The rule it broke, as a sentence fragment.
    pub rule: String,
}

impl ConfigError {
    pub(crate) fn new(
        key: impl Into<String>,
        value: impl Into<String>,
        rule: impl Into<String>,
    ) -> Self {
        ConfigError {
            key: key.into(),
            value: value.into(),
            rule: rule.into(),
        }
    }
}

/// The `key` of a TOML syntax error (its `value` is the position).
pub const SYNTAX: &str = "(toml syntax)";
/// The `value` of an error about a key itself (an unknown or retired key), not its value.
pub const KEY_ITSELF: &str = "(set)";

impl fmt::Display for ConfigError {
    /// One sentence: `` `streak.max_repeats = 0` is not valid: it must be a whole number >= 1. ``,
    /// `` `streak.max_repeat` is not a setting; did you mean `streak.max_repeats`? ``, or
    /// `the file is not valid TOML (line 1, column 9): …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = if self.rule.ends_with(['.', '?', ')']) {
            ""
        } else {
            "."
        };
        if self.key == SYNTAX {
            write!(
                f,
                "the file is not valid TOML ({}): {}{end}",
                self.value, self.rule
            )
        } else if self.value == KEY_ITSELF {
            write!(f, "`{}` {}{end}", self.key, self.rule)
        } else {
            write!(
                f,
                "`{} = {}` is not valid: it {}{end}",
                self.key, self.value, self.rule
            )
        }
    }
}

impl std::error::Error for ConfigError {}

/// Reads an environment variable; `|name| std::env::var(name).ok()` in a real process.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// An environment with no variables set.
pub fn no_env(_: &str) -> Option<String> {
    None
}

/// The whole engine configuration: both engines' tables.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// The streak brake (`[streak]`).
    pub streak: StreakConfig,
    /// The breaker (`[breaker]`).
    pub breaker: BreakerConfig,
}

/// Top-level tables the engine configuration owns.
pub const ENGINE_TABLES: &[&str] = &["streak", "breaker"];

impl Config {
    /// Parses and validates `loopbrake.toml` text containing only engine tables.
    ///
    /// ```
    /// use loopbrake_core::config::{Config, no_env};
    /// let cfg = Config::from_toml_str("[streak]\nmax_repeats = 5\n", &no_env).unwrap();
    /// assert_eq!(cfg.streak.max_repeats(), 5);
    /// let err = Config::from_toml_str("[streak]\nmax_repeats = 0\n", &no_env).unwrap_err();
    /// assert_eq!(err.key, "streak.max_repeats");
    /// ```
    pub fn from_toml_str(text: &str, env: EnvLookup<'_>) -> Result<Self, ConfigError> {
        let table = parse_toml(text)?;
        for key in table.keys() {
            if !ENGINE_TABLES.contains(&key.as_str()) {
                return Err(unknown_key("", key, ENGINE_TABLES));
            }
        }
        Self::from_tables(table.get("streak"), table.get("breaker"), env)
    }

    /// Builds the configuration from the `[streak]` and `[breaker]` values of an already
    /// parsed file (either may be absent), so a host that owns more tables can reuse it.
    pub fn from_tables(
        streak: Option<&toml::Value>,
        breaker: Option<&toml::Value>,
        env: EnvLookup<'_>,
    ) -> Result<Self, ConfigError> {
        let streak_table = as_table("streak", streak)?;
        let breaker_table = as_table("breaker", breaker)?;
        Ok(Config {
            streak: StreakConfig::from_table(streak_table, env)?,
            breaker: BreakerConfig::from_table(breaker_table)?,
        })
    }
}

/// Parses TOML text; a syntax error names its line and column.
pub fn parse_toml(text: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|e| {
        let at = e
            .span()
            .map(|sp| {
                let before = &text[..sp.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                format!("line {line}, column {col}")
            })
            .unwrap_or_else(|| "(unknown position)".to_string());
        ConfigError::new(SYNTAX, at, e.message().trim_end().to_string())
    })
}

pub(crate) fn as_table<'a>(
    key: &str,
    v: Option<&'a toml::Value>,
) -> Result<Option<&'a toml::Table>, ConfigError> {
    match v {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(other) => Err(ConfigError::new(key, show(other), "must be a table")),
    }
}

/// TOML rendering of a value for error messages, cut to a sane length.
pub fn show(v: &toml::Value) -> String {
    let s = match v {
        toml::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    if s.chars().count() > 80 {
        let cut: String = s.chars().take(80).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// `prefix.key` for error messages.
pub(crate) fn dotted(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// An "unknown key" error under `prefix` (a table name, or `""` at the top level) that
/// suggests the closest valid name when one is close, else lists the valid ones.
pub fn unknown_key(prefix: &str, key: &str, valid: &[&str]) -> ConfigError {
    let best = valid
        .iter()
        .map(|v| (strsim::jaro_winkler(&key.to_lowercase(), v), *v))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let rule = match best {
        Some((score, name)) if score >= 0.75 => {
            format!("is not a setting; did you mean `{}`?", dotted(prefix, name))
        }
        _ => format!(
            "is not a setting; the settings here are {}",
            valid
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    ConfigError::new(dotted(prefix, key), KEY_ITSELF, rule)
}

pub(crate) fn get_bool(prefix: &str, key: &str, v: &toml::Value) -> Result<bool, ConfigError> {
    v.as_bool().ok_or_else(|| {
        ConfigError::new(
            dotted(prefix, key),
            show(v),
            "must be a boolean (true or false)",
        )
    })
}

pub(crate) fn get_int(prefix: &str, key: &str, v: &toml::Value) -> Result<i64, ConfigError> {
    match v {
        toml::Value::Integer(i) => Ok(*i),
        toml::Value::Float(_) => Err(ConfigError::new(
            dotted(prefix, key),
            show(v),
            "must be an integer",
        )),
        _ => Err(ConfigError::new(
            dotted(prefix, key),
            show(v),
            "must be a number (an integer)",
        )),
    }
}

pub(crate) fn get_string_list(
    prefix: &str,
    key: &str,
    v: &toml::Value,
) -> Result<Vec<String>, ConfigError> {
    let arr = v.as_array().ok_or_else(|| {
        ConfigError::new(dotted(prefix, key), show(v), "must be an array of strings")
    })?;
    arr.iter()
        .map(|item| {
            item.as_str().map(str::to_string).ok_or_else(|| {
                ConfigError::new(dotted(prefix, key), show(v), "must be an array of strings")
            })
        })
        .collect()
}

impl Config {
    /// The effective configuration as a complete `loopbrake.toml` (what
    /// `loopbrake config check` prints). Parsing it back gives the same configuration.
    pub fn to_toml(&self) -> String {
        format!(
            "[streak]\nenabled = {}\nmax_repeats = {}\nprogress = {}\nprogress_limit = {}\n\n{}",
            self.streak.enabled(),
            self.streak.max_repeats(),
            self.streak.progress(),
            self.streak.progress_limit(),
            self.breaker.to_toml()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effective_configuration_round_trips() {
        let custom = Config::from_toml_str(
            "[streak]\nmax_repeats = 4\n[breaker]\nwarn_at = 0\nlimits = { \"host:a.b\" = 3, site = 30 }\nhost_aliases = { \"x.y\" = \"z.y\" }",
            &no_env,
        )
        .unwrap();
        for cfg in [Config::default(), custom] {
            let text = cfg.to_toml();
            assert_eq!(
                Config::from_toml_str(&text, &no_env).unwrap(),
                cfg,
                "{text}"
            );
        }
    }

    #[test]
    fn environment_fallback_only_when_the_key_is_missing() {
        let env = |k: &str| (k == "LOOPBRAKE_MAX_REPEATS").then(|| "7".to_string());
        assert_eq!(
            Config::from_toml_str("", &env)
                .unwrap()
                .streak
                .max_repeats(),
            7
        );
        assert_eq!(
            Config::from_toml_str("[streak]\nmax_repeats = 4", &env)
                .unwrap()
                .streak
                .max_repeats(),
            4
        );
        let legacy = |k: &str| (k == "DSH_LOOP_BRAKE_MAX_REPEATS").then(|| "5".to_string());
        assert_eq!(
            Config::from_toml_str("", &legacy)
                .unwrap()
                .streak
                .max_repeats(),
            5
        );
        for bad in ["3.5", "0", "many", "-2", "", " 3", "3\n", "4294967296"] {
            let env = |k: &str| (k == "LOOPBRAKE_MAX_REPEATS").then(|| bad.to_string());
            let e = Config::from_toml_str("", &env).unwrap_err();
            assert_eq!(e.key, "LOOPBRAKE_MAX_REPEATS", "{bad}");
        }
    }

    #[test]
    fn unknown_and_mistyped_keys_are_errors() {
        let e = Config::from_toml_str("[streak]\nmax_repeat = 3", &no_env).unwrap_err();
        assert_eq!(e.key, "streak.max_repeat");
        assert!(e.rule.contains("did you mean `streak.max_repeats`"), "{e}");
        let e = Config::from_toml_str("[streak]\nmax_repeats = \"3\"", &no_env).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.value.as_str()),
            ("streak.max_repeats", "\"3\"")
        );
        let e = Config::from_toml_str("[strek]\n", &no_env).unwrap_err();
        assert!(e.rule.contains("`streak`"), "{e}");
        assert!(Config::from_toml_str("streak = 3", &no_env).is_err());
        assert!(Config::from_toml_str("[streak\n", &no_env).is_err());
    }
}
