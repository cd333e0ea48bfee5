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

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid configuration: {} = {}: {}",
            self.key, self.value, self.rule
        )
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
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ConfigError::new("(file)", "(toml)", e.message().to_string())
        })?;
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
pub(crate) fn show(v: &toml::Value) -> String {
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

/// An "unknown key" error that suggests the closest valid name when one is close.
pub(crate) fn unknown_key(prefix: &str, key: &str, valid: &[&str]) -> ConfigError {
    let best = valid
        .iter()
        .map(|v| (strsim::jaro_winkler(&key.to_lowercase(), v), *v))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let rule = match best {
        Some((score, name)) if score >= 0.75 => {
            format!("unknown key; did you mean `{}`?", dotted(prefix, name))
        }
        _ => format!(
            "unknown key; valid keys here are: {}",
            valid
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    ConfigError::new(dotted(prefix, key), "(set)", rule)
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
