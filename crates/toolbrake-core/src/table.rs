//! Reading one table of settings: [`ConfigError`] (naming key, value and rule) and the
//! typed getters every section's validation uses, so the sections and the whole
//! configuration import them from here rather than from each other.

use serde_json::Value;
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
    /// An error about `key`, its `value` as written, and the `rule` it broke.
    pub fn new(key: impl Into<String>, value: impl Into<String>, rule: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            value: value.into(),
            rule: rule.into(),
        }
    }
}

/// The `key` of a syntax error in a settings file (its `value` names the format and the
/// position: `TOML (line 1, column 9)`).
pub const SYNTAX: &str = "(syntax)";
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
                "the file is not valid {}: {}{end}",
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

/// A settings table as the core reads it: a format-neutral tree of values (whatever file
/// or API the settings came from; `toolbrake-config` reads TOML into it).
pub type Table = serde_json::Map<String, Value>;

pub(crate) fn as_table<'a>(
    key: &str,
    v: Option<&'a Value>,
) -> Result<Option<&'a Table>, ConfigError> {
    match v {
        None => Ok(None),
        Some(Value::Object(t)) => Ok(Some(t)),
        Some(other) => Err(ConfigError::new(
            if key.is_empty() { "(document)" } else { key },
            show(other),
            "must be a table",
        )),
    }
}

/// A value as error messages show it (strings quoted), cut to a sane length.
pub fn show(v: &Value) -> String {
    let s = match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    cut(s)
}

/// Cuts a shown value to 80 characters.
pub fn cut(s: String) -> String {
    if s.chars().count() > 80 {
        let cut: String = s.chars().take(80).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// `prefix.key` for error messages.
pub fn dotted(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// An "unknown key" error under `prefix` (a table name, or `""` at the top level) that
/// suggests the closest valid name when one is close, else lists the valid ones.
pub fn unknown_key<S: AsRef<str>>(prefix: &str, key: &str, valid: &[S]) -> ConfigError {
    let best = valid
        .iter()
        .map(|v| {
            (
                strsim::jaro_winkler(&key.to_lowercase(), v.as_ref()),
                v.as_ref(),
            )
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let rule = match best {
        Some((score, name)) if score >= 0.75 => {
            format!("is not a setting; did you mean `{}`?", dotted(prefix, name))
        }
        _ => format!(
            "is not a setting; the settings here are {}",
            valid
                .iter()
                .map(|v| format!("`{}`", v.as_ref()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    ConfigError::new(dotted(prefix, key), KEY_ITSELF, rule)
}

pub(crate) fn get_bool(prefix: &str, key: &str, v: &Value) -> Result<bool, ConfigError> {
    v.as_bool().ok_or_else(|| {
        ConfigError::new(
            dotted(prefix, key),
            show(v),
            "must be a boolean (true or false)",
        )
    })
}

/// An integer (a whole number too large for 64 bits reads as `i64::MAX`, out of every range).
pub(crate) fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) if n.is_i64() => n.as_i64(),
        Value::Number(n) if n.is_u64() => Some(i64::MAX),
        _ => None,
    }
}

pub(crate) fn get_int(prefix: &str, key: &str, v: &Value) -> Result<i64, ConfigError> {
    match v {
        Value::Number(n) if n.is_f64() => Err(ConfigError::new(
            dotted(prefix, key),
            show(v),
            "must be an integer",
        )),
        _ => as_int(v).ok_or_else(|| {
            ConfigError::new(
                dotted(prefix, key),
                show(v),
                "must be a number (an integer)",
            )
        }),
    }
}

pub(crate) fn get_string_list(
    prefix: &str,
    key: &str,
    v: &Value,
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
