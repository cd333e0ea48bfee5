//! `toolbrake.toml` for the engines: reads TOML text into the core's validated
//! [`Config`], and prints the effective configuration back as TOML.
//!
//! The core validates a format-neutral tree of values; this crate is the only place that
//! knows the engines' settings come from TOML. It also gives the crates that own other
//! tables (`[store]`, `[protocol]`) the shared pieces: [`parse_toml`] (syntax errors with
//! their line and column) and [`show`] (a value as an error message quotes it).
//! *Finding* the file is the binary's job.

use serde_json::Value;
use toolbrake_core::config::{
    cut, unknown_key, Config, ConfigError, EnvLookup, ENGINE_TABLES, SYNTAX,
};

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
            .unwrap_or_else(|| "unknown position".to_string());
        ConfigError::new(SYNTAX, format!("TOML ({at})"), e.message().trim_end())
    })
}

/// A TOML value as error messages show it (strings quoted), cut to a sane length.
pub fn show(v: &toml::Value) -> String {
    cut(match v {
        toml::Value::String(s) => format!("{s:?}"),
        toml::Value::Datetime(d) => d.to_string(),
        other => other.to_string(),
    })
}

/// A duration as people type it in `toolbrake.toml` and the docs write it: one whole number
/// and the largest unit that divides it (`"7d"`, `"36h"`, `"90m"`, `"30s"`, `"500ms"`), the
/// form `config check` and the dashboard show and every duration setting reads back. Never
/// a sum of units, nor calendar months and years (`"365d"`, not `"11months 30days 3h…"`).
pub fn show_duration(d: std::time::Duration) -> String {
    let ns = d.as_nanos();
    const UNITS: [(u128, &str); 7] = [
        (86_400_000_000_000, "d"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    let (size, unit) = UNITS
        .into_iter()
        .find(|(size, _)| ns >= *size && ns.is_multiple_of(*size))
        .unwrap_or((1_000_000_000, "s"));
    format!("{}{unit}", ns / size)
}

/// The value tree the core validates, from a TOML value found at `key`. TOML has two
/// kinds of values no setting takes and JSON cannot hold (dates, and floats that are
/// not numbers); they are errors naming their key.
pub fn to_value(key: &str, v: &toml::Value) -> Result<Value, ConfigError> {
    Ok(match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| {
                ConfigError::new(
                    key,
                    show(v),
                    "must be a finite number (no setting takes nan or inf)",
                )
            })?,
        toml::Value::Datetime(_) => {
            return Err(ConfigError::new(
                key,
                show(v),
                "must not be a date or time (no setting takes one)",
            ))
        }
        toml::Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| to_value(key, item))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, item)| Ok((k.clone(), to_value(&dotted_key(key, k), item)?)))
                .collect::<Result<_, ConfigError>>()?,
        ),
    })
}

/// `key.sub`, with `sub` quoted when it is not a bare TOML key.
fn dotted_key(key: &str, sub: &str) -> String {
    let bare = !sub.is_empty()
        && sub
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let sub = if bare {
        sub.to_string()
    } else {
        format!("{sub:?}")
    };
    if key.is_empty() {
        sub
    } else {
        format!("{key}.{sub}")
    }
}

/// The engine configuration from the `[streak]`, `[breaker]` and `[budget]` tables of a
/// parsed file (any may be absent; other tables are the caller's).
pub fn engine_from_tables(table: &toml::Table, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
    let section = |name: &str| table.get(name).map(|v| to_value(name, v)).transpose();
    Config::from_sections(
        section("streak")?.as_ref(),
        section("breaker")?.as_ref(),
        env,
    )?
    .with_budget(section("budget")?.as_ref())
}

/// A section as TOML text under its `[name]` header, nested tables as `[name.sub]`.
pub fn section_to_toml(name: &str, section: &Value) -> String {
    let mut doc = serde_json::Map::new();
    doc.insert(name.to_string(), section.clone());
    // A tree of strings, numbers, booleans, arrays and tables always serialises.
    toml::to_string(&doc).unwrap_or_default()
}

/// Reading and printing the engine configuration as `toolbrake.toml` text.
pub trait ConfigToml: Sized {
    /// Parses and validates text containing only engine tables.
    ///
    /// ```
    /// use toolbrake_config::ConfigToml;
    /// use toolbrake_core::config::{no_env, Config};
    /// let cfg = Config::from_toml_str("[streak]\nmax_repeats = 5\n", &no_env).unwrap();
    /// assert_eq!(cfg.streak.max_repeats(), 5);
    /// let err = Config::from_toml_str("[streak]\nmax_repeats = 0\n", &no_env).unwrap_err();
    /// assert_eq!(err.key, "streak.max_repeats");
    /// ```
    fn from_toml_str(text: &str, env: EnvLookup<'_>) -> Result<Self, ConfigError>;

    /// The effective configuration as `[streak]` and `[breaker]` tables, every key
    /// written out; parsing it back gives the same configuration.
    fn to_toml(&self) -> String;
}

impl ConfigToml for Config {
    fn from_toml_str(text: &str, env: EnvLookup<'_>) -> Result<Self, ConfigError> {
        let table = parse_toml(text)?;
        for key in table.keys() {
            if !ENGINE_TABLES.contains(&key.as_str()) {
                return Err(unknown_key("", key, ENGINE_TABLES));
            }
        }
        engine_from_tables(&table, env)
    }

    fn to_toml(&self) -> String {
        format!(
            "{}\n{}\n{}",
            section_to_toml("streak", &self.streak.to_value()),
            section_to_toml("breaker", &self.breaker.to_value()),
            section_to_toml("budget", &self.budget.to_value())
        )
    }
}

/// Splits a dotted key as configuration errors name it (`breaker.limits."host:a.b"`) into
/// its parts: dots inside double quotes belong to the part, the quotes are dropped.
pub fn key_parts(dotted: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in dotted.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
}

/// A JSON document as TOML, for hosts that hand the configuration over as data (the Node
/// and Python packages): `null` reads as absent (TOML has none), and every table is then
/// validated by the same code as a file's.
///
/// ```
/// let v = serde_json::json!({"streak": {"max_repeats": 4, "progress": null}});
/// let t = toolbrake_config::toml_of_json(&v).unwrap();
/// assert_eq!(t["streak"]["max_repeats"].as_integer(), Some(4));
/// assert!(t["streak"].get("progress").is_none());
/// ```
pub fn toml_of_json(v: &Value) -> Option<toml::Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(items.iter().filter_map(toml_of_json).collect()),
        Value::Object(m) => toml::Value::Table(
            m.iter()
                .filter_map(|(k, x)| Some((k.clone(), toml_of_json(x)?)))
                .collect(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use toolbrake_core::config::no_env;

    #[test]
    fn durations_are_shown_as_they_are_typed() {
        for (d, shown) in [
            (Duration::from_secs(7 * 86_400), "7d"),
            (Duration::from_secs(3650 * 86_400), "3650d"),
            (Duration::from_secs(36 * 3600), "36h"),
            (Duration::from_secs(90 * 60), "90m"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_micros(2500), "2500us"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(show_duration(d), shown);
        }
    }

    #[test]
    fn the_effective_configuration_round_trips_through_toml() {
        let custom = Config::from_toml_str(
            "[streak]\nmax_repeats = 4\n[breaker]\nwarn_at = 0\nlimits = { \"host:a.b\" = 3, site = 30 }\nhost_aliases = { \"x.y\" = \"z.y\" }",
            &no_env,
        )
        .unwrap();
        for cfg in [Config::default(), custom] {
            let text = cfg.to_toml();
            assert!(text.starts_with("[streak]\n"), "{text}");
            assert!(text.contains("\n[breaker.limits]\n"), "{text}");
            assert_eq!(
                Config::from_toml_str(&text, &no_env).unwrap(),
                cfg,
                "{text}"
            );
        }
    }

    #[test]
    fn errors_name_the_key_value_and_rule() {
        let e = Config::from_toml_str("[streak]\nmax_repeat = 3", &no_env).unwrap_err();
        assert_eq!(e.key, "streak.max_repeat");
        assert!(e.rule.contains("did you mean `streak.max_repeats`"), "{e}");
        let e = Config::from_toml_str("[streak]\nmax_repeats = \"3\"", &no_env).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.value.as_str()),
            ("streak.max_repeats", "\"3\"")
        );
        let e = Config::from_toml_str("[breaker]\nwarn_at = 2.5", &no_env).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`breaker.warn_at = 2.5` is not valid: it must be an integer."
        );
        let e = Config::from_toml_str("[strek]\n", &no_env).unwrap_err();
        assert!(e.rule.contains("`streak`"), "{e}");
        assert!(Config::from_toml_str("streak = 3", &no_env).is_err());
    }

    #[test]
    fn syntax_errors_and_values_no_setting_takes_are_named() {
        let e = Config::from_toml_str("[streak\n", &no_env).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the file is not valid TOML (line 1, column 8): "),
            "{e}"
        );
        let e = Config::from_toml_str("[breaker]\nwindow = nan", &no_env).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.value.as_str()),
            ("breaker.window", "nan")
        );
        let e = Config::from_toml_str("[breaker.limits]\n\"host:a b\" = 1979-05-27", &no_env)
            .unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.value.as_str()),
            ("breaker.limits.\"host:a b\"", "1979-05-27")
        );
        assert!(e.rule.contains("date"), "{e}");
    }
}
