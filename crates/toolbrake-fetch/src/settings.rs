//! The `[fetch]` table of `toolbrake.toml`: where `web_fetch_file` writes, and the caps on
//! what it fetches. Validated when loaded; every error names the key, the value and the rule.

use std::path::PathBuf;
use std::time::Duration;
use toolbrake_config::show;
use toolbrake_core::config::{unknown_key, ConfigError};

/// The `[fetch]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSettings {
    /// Where fetched files go, relative to the workspace root (default `fetched`).
    pub output_dir: PathBuf,
    /// Bodies longer than this are cut (and reported `truncated`); default 8 MiB.
    pub max_bytes: u64,
    /// The whole fetch (connect, redirects, body) gives up after this long; default 30 s.
    pub timeout: Duration,
    /// Redirects followed before giving up; default 5.
    pub max_redirects: usize,
    /// The `User-Agent` header.
    pub user_agent: String,
    /// Fetch private, loopback and link-local addresses (default true). When false they
    /// are refused after name resolution, redirects included.
    pub allow_private_hosts: bool,
    /// Keep cookies between fetches of one session (default true).
    pub cookie_jar: bool,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            output_dir: PathBuf::from("fetched"),
            max_bytes: 8 << 20,
            timeout: Duration::from_secs(30),
            max_redirects: 5,
            user_agent: format!("toolbrake-web-fetch-file/{}", env!("CARGO_PKG_VERSION")),
            allow_private_hosts: true,
            cookie_jar: true,
        }
    }
}

const KEYS: &[&str] = &[
    "output_dir",
    "max_bytes",
    "timeout",
    "max_redirects",
    "user_agent",
    "allow_private_hosts",
    "cookie_jar",
];

/// The largest `max_bytes` (1 GiB): a tool result is a file a model works on, not a mirror.
pub const MAX_MAX_BYTES: u64 = 1 << 30;

fn err(key: &str, v: &toml::Value, rule: impl Into<String>) -> ConfigError {
    ConfigError::new(format!("fetch.{key}"), show(v), rule)
}

/// Reads and validates the `[fetch]` table (absent: the defaults).
pub fn fetch_table(v: Option<&toml::Value>) -> Result<FetchSettings, ConfigError> {
    let mut s = FetchSettings::default();
    let Some(v) = v else { return Ok(s) };
    let t = v
        .as_table()
        .ok_or_else(|| ConfigError::new("fetch", show(v), "must be a table"))?;
    for (k, val) in t {
        match k.as_str() {
            "output_dir" => {
                let dir = val
                    .as_str()
                    .filter(|d| !d.trim().is_empty() && !d.contains('\0'))
                    .ok_or_else(|| {
                        err(
                            k,
                            val,
                            "must be a non-empty path (relative to the workspace root)",
                        )
                    })?;
                s.output_dir = PathBuf::from(dir);
            }
            "max_bytes" => match val.as_integer() {
                Some(n) if n >= 1 && n as u64 <= MAX_MAX_BYTES => s.max_bytes = n as u64,
                _ => {
                    return Err(err(
                        k,
                        val,
                        format!("must be an integer from 1 to {MAX_MAX_BYTES} (bytes)"),
                    ))
                }
            },
            "timeout" => {
                let rule = "must be a duration such as \"30s\" or \"500ms\", from 100ms to 10m";
                let d = val
                    .as_str()
                    .and_then(|s| humantime::parse_duration(s.trim()).ok())
                    .ok_or_else(|| err(k, val, rule))?;
                if d < Duration::from_millis(100) || d > Duration::from_secs(600) {
                    return Err(err(k, val, rule));
                }
                s.timeout = d;
            }
            "max_redirects" => match val.as_integer() {
                Some(n) if (0..=20).contains(&n) => s.max_redirects = n as usize,
                _ => return Err(err(k, val, "must be an integer from 0 to 20")),
            },
            "user_agent" => {
                let ua = val
                    .as_str()
                    .filter(|u| {
                        !u.is_empty()
                            && u.len() <= 512
                            && u.chars().all(|c| c == ' ' || c.is_ascii_graphic())
                    })
                    .ok_or_else(|| {
                        err(
                            k,
                            val,
                            "must be a non-empty string of printable ASCII, at most 512 characters",
                        )
                    })?;
                s.user_agent = ua.to_string();
            }
            "allow_private_hosts" => {
                s.allow_private_hosts = val
                    .as_bool()
                    .ok_or_else(|| err(k, val, "must be a boolean (true or false)"))?
            }
            "cookie_jar" => {
                s.cookie_jar = val
                    .as_bool()
                    .ok_or_else(|| err(k, val, "must be a boolean (true or false)"))?
            }
            _ => return Err(unknown_key("fetch", k, KEYS)),
        }
    }
    Ok(s)
}

impl FetchSettings {
    /// The table as `toolbrake.toml` text, every key written out.
    pub fn to_toml(&self) -> String {
        let mut t = toml::Table::new();
        t.insert(
            "output_dir".into(),
            self.output_dir.display().to_string().into(),
        );
        t.insert(
            "max_bytes".into(),
            toml::Value::Integer(self.max_bytes as i64),
        );
        t.insert(
            "timeout".into(),
            toolbrake_config::show_duration(self.timeout).into(),
        );
        t.insert(
            "max_redirects".into(),
            toml::Value::Integer(self.max_redirects as i64),
        );
        t.insert("user_agent".into(), self.user_agent.clone().into());
        t.insert(
            "allow_private_hosts".into(),
            self.allow_private_hosts.into(),
        );
        t.insert("cookie_jar".into(), self.cookie_jar.into());
        let mut doc = toml::Table::new();
        doc.insert("fetch".into(), toml::Value::Table(t));
        toml::to_string(&doc).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<FetchSettings, ConfigError> {
        let t = toolbrake_config::parse_toml(text)?;
        fetch_table(t.get("fetch"))
    }

    #[test]
    fn the_written_table_reads_back_the_same() {
        let custom = load("[fetch]\nmax_bytes = 1024\ntimeout = \"2s\"\nallow_private_hosts = false\noutput_dir = \"web\"").unwrap();
        for s in [FetchSettings::default(), custom] {
            assert_eq!(load(&s.to_toml()).unwrap(), s, "{}", s.to_toml());
        }
    }

    #[test]
    fn errors_name_the_key_value_and_rule() {
        let e = load("[fetch]\ntimeout = \"3 days\"").unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.value.as_str()),
            ("fetch.timeout", "\"3 days\"")
        );
        let e = load("[fetch]\nmax_bytes = 0").unwrap_err();
        assert_eq!(e.key, "fetch.max_bytes");
        let e = load("[fetch]\nmax_redirect = 2").unwrap_err();
        assert!(e.rule.contains("did you mean `fetch.max_redirects`"), "{e}");
        let e = load("[fetch]\nuser_agent = \"a\\nb\"").unwrap_err();
        assert_eq!(e.key, "fetch.user_agent");
    }
}
