//! Finding and loading `loopbrake.toml`: the lookup order, the environment, the size
//! limit, and the commented default file. All validation happens here, at load time.
//!
//! Lookup order: `--config PATH`, `$LOOPBRAKE_CONFIG`, `./loopbrake.toml`,
//! `$XDG_CONFIG_HOME/loopbrake/config.toml` (or `~/.config/loopbrake/config.toml`),
//! then the built-in defaults.

use loopbrake_core::config::{parse_toml, show, unknown_key, Config, ConfigError};
use std::fmt;
use std::path::{Path, PathBuf};

/// Configuration files larger than this are refused.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Top-level tables of `loopbrake.toml`.
pub const TABLES: &[&str] = &["streak", "breaker", "protocol", "store"];

/// Which store keeps session state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// In this process's memory.
    Memory,
    /// The embedded SQLite file.
    Sqlite,
    /// A Redis (or Valkey, KeyDB, Cluster) server shared by many processes and machines.
    Redis,
}

/// The `[store]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// The configured kind; `None` lets each adapter choose (hooks: sqlite, others: memory).
    pub kind: Option<StoreKind>,
    /// The SQLite file (default `$XDG_STATE_HOME/loopbrake/state.db`).
    pub path: Option<PathBuf>,
    /// Sessions idle longer than this are forgotten (default 7 days).
    pub idle_ttl: std::time::Duration,
    /// How long to wait for a store held by another process (default 3 s).
    pub lock_timeout: std::time::Duration,
    /// When loopbrake itself fails, refuse the call (true) or let it run (false, default).
    pub fail_closed: bool,
    /// Redis: `redis://…` or `rediss://…` (TLS); credentials in it, or in
    /// `$LOOPBRAKE_REDIS_USERNAME` / `$LOOPBRAKE_REDIS_PASSWORD`. The first node of a
    /// cluster.
    pub url: String,
    /// Redis Cluster: every seed node given (`url` as an array); empty for one server.
    pub cluster_nodes: Vec<String>,
    /// Redis: speak the Cluster protocol (set, or implied by several URLs).
    pub cluster: bool,
    /// Redis: the prefix of every key.
    pub key_prefix: String,
    /// Redis: connecting gives up after this long.
    pub connect_timeout: std::time::Duration,
    /// Redis: a command waiting longer than this fails.
    pub command_timeout: std::time::Duration,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            kind: None,
            path: None,
            idle_ttl: std::time::Duration::from_secs(7 * 24 * 3600),
            lock_timeout: std::time::Duration::from_secs(3),
            fail_closed: false,
            url: "redis://127.0.0.1:6379".to_string(),
            cluster_nodes: Vec::new(),
            cluster: false,
            key_prefix: "loopbrake:".to_string(),
            connect_timeout: std::time::Duration::from_secs(2),
            command_timeout: std::time::Duration::from_secs(2),
        }
    }
}

const STORE_KEYS: &[&str] = &[
    "kind",
    "path",
    "idle_ttl",
    "lock_timeout",
    "fail_closed",
    "url",
    "cluster",
    "key_prefix",
    "connect_timeout",
    "command_timeout",
];

fn store_err(key: &str, v: &toml::Value, rule: &str) -> ConfigError {
    ConfigError {
        key: format!("store.{key}"),
        value: show(v),
        rule: rule.into(),
    }
}

/// A duration from `min` to `max`: the range the code that uses it can hold (a SQLite busy
/// timeout is a 32-bit count of milliseconds; a socket timeout of days is a hang).
fn duration(
    key: &str,
    v: &toml::Value,
    min: std::time::Duration,
    max: std::time::Duration,
) -> Result<std::time::Duration, ConfigError> {
    let rule = format!(
        "must be a duration such as \"7d\", \"12h\", \"30s\" or \"500ms\", from {} to {}",
        humantime::format_duration(min),
        humantime::format_duration(max)
    );
    let d = v
        .as_str()
        .and_then(|s| humantime::parse_duration(s.trim()).ok())
        .ok_or_else(|| store_err(key, v, &rule))?;
    if d < min || d > max {
        return Err(store_err(key, v, &rule));
    }
    Ok(d)
}

const MS: std::time::Duration = std::time::Duration::from_millis(1);
const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

fn store_table(v: Option<&toml::Value>) -> Result<StoreSettings, ConfigError> {
    let mut s = StoreSettings::default();
    let Some(v) = v else { return Ok(s) };
    let t = v
        .as_table()
        .ok_or_else(|| store_err("", v, "must be a table"))?;
    for (k, val) in t {
        match k.as_str() {
            "kind" => {
                s.kind = Some(match val.as_str() {
                    Some("memory") => StoreKind::Memory,
                    Some("sqlite") => StoreKind::Sqlite,
                    Some("redis") => StoreKind::Redis,
                    _ => {
                        return Err(store_err(
                            k,
                            val,
                            "must be \"memory\", \"sqlite\" or \"redis\"",
                        ))
                    }
                })
            }
            "path" => {
                s.path = Some(PathBuf::from(
                    val.as_str()
                        .filter(|p| !p.is_empty())
                        .ok_or_else(|| store_err(k, val, "must be a non-empty path"))?,
                ))
            }
            "idle_ttl" => {
                s.idle_ttl = duration(k, val, std::time::Duration::from_secs(1), 3650 * DAY)?
            }
            "lock_timeout" => s.lock_timeout = duration(k, val, MS, DAY)?,
            "url" => {
                // One server's URL, or a list of cluster nodes.
                let urls: Vec<&str> = match val {
                    toml::Value::Array(items) => {
                        items.iter().map(|i| i.as_str().unwrap_or("")).collect()
                    }
                    other => vec![other.as_str().unwrap_or("")],
                };
                for u in &urls {
                    if let Err(rule) = check_redis_url(u) {
                        // Never echo the value: a URL can carry a password.
                        return Err(ConfigError {
                            key: "store.url".into(),
                            value: "(not shown)".into(),
                            rule: format!(
                                "{rule} (or an array of such URLs, the nodes of a cluster)"
                            ),
                        });
                    }
                }
                if urls.is_empty() {
                    return Err(store_err(k, val, "must name at least one Redis URL"));
                }
                s.url = urls[0].to_string();
                if urls.len() > 1 {
                    s.cluster = true;
                    s.cluster_nodes = urls.iter().map(|u| u.to_string()).collect();
                }
            }
            "cluster" => {
                let b = val
                    .as_bool()
                    .ok_or_else(|| store_err(k, val, "must be a boolean (true or false)"))?;
                // Several URLs already mean a cluster; `false` cannot undo that.
                s.cluster |= b;
            }
            "key_prefix" => {
                s.key_prefix = val
                    .as_str()
                    .filter(|p| !p.contains(['{', '}']))
                    .ok_or_else(|| {
                        store_err(
                            k,
                            val,
                            "must be a string without braces (braces mark the session's hash tag)",
                        )
                    })?
                    .to_string()
            }
            "connect_timeout" => s.connect_timeout = duration(k, val, MS, DAY)?,
            "command_timeout" => s.command_timeout = duration(k, val, MS, DAY)?,
            "fail_closed" => {
                s.fail_closed = val
                    .as_bool()
                    .ok_or_else(|| store_err(k, val, "must be a boolean (true or false)"))?
            }
            _ => return Err(unknown_key("store", k, STORE_KEYS)),
        }
    }
    Ok(s)
}

/// Whether `u` is a Redis URL the client can use: `redis://` or `rediss://` with a host and
/// an optional numeric database, or `redis+unix://` / `unix://` with a socket path.
fn check_redis_url(u: &str) -> Result<(), &'static str> {
    const RULE: &str = "must be a redis:// or rediss:// URL with a host (and optionally a port and a database number), or a redis+unix:// socket path";
    let parsed = url::Url::parse(u).map_err(|_| RULE)?;
    match parsed.scheme() {
        "redis" | "rediss" => {
            if parsed.host_str().is_none_or(str::is_empty) {
                return Err(RULE);
            }
            let db = parsed.path().trim_start_matches('/');
            if !db.is_empty() && db.parse::<u32>().is_err() {
                return Err(
                    "must name a numeric database after the host (redis://host:6379/0), if any",
                );
            }
            Ok(())
        }
        "redis+unix" | "unix" if !parsed.path().is_empty() => Ok(()),
        _ => Err(RULE),
    }
}

/// A Redis URL as it may be shown: any password (and user name) replaced.
pub fn shown_url(u: &str) -> String {
    match url::Url::parse(u) {
        Ok(mut parsed) => {
            if !parsed.username().is_empty() {
                let _ = parsed.set_username("hidden");
            }
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("hidden"));
            }
            parsed.to_string()
        }
        Err(_) => "(not shown)".to_string(),
    }
}

impl StoreSettings {
    /// The `[store]` table as TOML, every key written out, credentials hidden.
    pub fn to_toml(&self) -> String {
        let d = |d: std::time::Duration| {
            toml::Value::String(humantime::format_duration(d).to_string()).to_string()
        };
        let s = |v: &str| toml::Value::String(v.to_string()).to_string();
        let mut out = String::from("[store]\n");
        match self.kind {
            Some(k) => {
                let name = match k {
                    StoreKind::Memory => "memory",
                    StoreKind::Sqlite => "sqlite",
                    StoreKind::Redis => "redis",
                };
                out.push_str(&format!("kind = {}\n", s(name)));
            }
            None => out.push_str(
                "# kind: unset (hooks and sessions use sqlite, replay and serve memory)\n",
            ),
        }
        if let Some(p) = &self.path {
            out.push_str(&format!("path = {}\n", s(&p.display().to_string())));
        }
        out.push_str(&format!("idle_ttl = {}\n", d(self.idle_ttl)));
        out.push_str(&format!("lock_timeout = {}\n", d(self.lock_timeout)));
        out.push_str(&format!("fail_closed = {}\n", self.fail_closed));
        if self.cluster_nodes.len() > 1 {
            let list: Vec<String> = self
                .cluster_nodes
                .iter()
                .map(|u| s(&shown_url(u)))
                .collect();
            out.push_str(&format!("url = [{}]\n", list.join(", ")));
        } else {
            out.push_str(&format!("url = {}\n", s(&shown_url(&self.url))));
        }
        out.push_str(&format!("cluster = {}\n", self.cluster));
        out.push_str(&format!("key_prefix = {}\n", s(&self.key_prefix)));
        out.push_str(&format!("connect_timeout = {}\n", d(self.connect_timeout)));
        out.push_str(&format!("command_timeout = {}\n", d(self.command_timeout)));
        out
    }

    /// The SQLite file: `$LOOPBRAKE_STATE`, else `[store] path`, else
    /// `$XDG_STATE_HOME/loopbrake/state.db` (or `~/.local/state/loopbrake/state.db`).
    pub fn sqlite_path(&self, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
        if let Some(p) = env("LOOPBRAKE_STATE").filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        if let Some(p) = &self.path {
            return p.clone();
        }
        let base = env("XDG_STATE_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                env("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".local/state"))
            })
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("loopbrake").join("state.db")
    }

    /// Opens the configured store, or `default` when `kind` is not set.
    pub fn open(
        &self,
        default: StoreKind,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<std::sync::Arc<dyn loopbrake_store::Store>, loopbrake_store::StoreError> {
        match self.kind.unwrap_or(default) {
            StoreKind::Memory => Ok(std::sync::Arc::new(
                loopbrake_store::MemoryStore::with_idle_ttl(
                    self.idle_ttl.as_millis().min(u64::MAX as u128) as u64,
                ),
            )),
            StoreKind::Sqlite => Ok(std::sync::Arc::new(loopbrake_store::SqliteStore::open(
                &self.sqlite_path(env),
                loopbrake_store::SqliteOptions {
                    idle_ttl: self.idle_ttl,
                    lock_timeout: self.lock_timeout,
                },
            )?)),
            StoreKind::Redis => Ok(std::sync::Arc::new(loopbrake_store::RedisStore::new(
                loopbrake_store::RedisOptions {
                    url: self.url.clone(),
                    key_prefix: self.key_prefix.clone(),
                    idle_ttl: self.idle_ttl,
                    connect_timeout: self.connect_timeout,
                    command_timeout: self.command_timeout,
                    username: env("LOOPBRAKE_REDIS_USERNAME").filter(|u| !u.is_empty()),
                    password: env("LOOPBRAKE_REDIS_PASSWORD").filter(|p| !p.is_empty()),
                    cluster: self.cluster.then(|| {
                        if self.cluster_nodes.is_empty() {
                            vec![self.url.clone()]
                        } else {
                            self.cluster_nodes.clone()
                        }
                    }),
                },
            )?)),
        }
    }
}

/// The `[protocol]` table: settings of `replay` and `serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolSettings {
    /// Input lines longer than this are error lines (default 16 MiB).
    pub max_line_bytes: usize,
}

impl Default for ProtocolSettings {
    fn default() -> Self {
        ProtocolSettings {
            max_line_bytes: 16 << 20,
        }
    }
}

/// Everything `loopbrake.toml` configures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// The engines.
    pub engine: Config,
    /// The protocol.
    pub protocol: ProtocolSettings,
    /// The store.
    pub store: StoreSettings,
}

fn protocol_table(v: Option<&toml::Value>) -> Result<ProtocolSettings, ConfigError> {
    let mut p = ProtocolSettings::default();
    let Some(v) = v else { return Ok(p) };
    let t = v.as_table().ok_or_else(|| ConfigError {
        key: "protocol".into(),
        value: show(v),
        rule: "must be a table".into(),
    })?;
    for (k, val) in t {
        match k.as_str() {
            "max_line_bytes" => match val.as_integer() {
                Some(n) if (1024..=(1i64 << 32)).contains(&n) => p.max_line_bytes = n as usize,
                _ => {
                    return Err(ConfigError {
                        key: "protocol.max_line_bytes".into(),
                        value: show(val),
                        rule: "must be an integer from 1024 to 4294967296".into(),
                    })
                }
            },
            _ => return Err(unknown_key("protocol", k, &["max_line_bytes"])),
        }
    }
    Ok(p)
}

/// Where the configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file.
    File(PathBuf),
    /// No file was found: built-in defaults (plus the environment).
    Defaults,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Defaults => write!(f, "built-in defaults"),
        }
    }
}

/// A loaded, validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The engines' configuration.
    pub engine: Config,
    /// The protocol's settings.
    pub protocol: ProtocolSettings,
    /// The store's settings.
    pub store: StoreSettings,
    /// Where it came from.
    pub source: Source,
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is too large.
    #[error("configuration file {path} is {size} bytes; the limit is {MAX_CONFIG_BYTES}")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// The file is not UTF-8.
    #[error("configuration file {path} is not valid UTF-8")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// A value broke a rule.
    #[error("{path}{}: {error}", line.map(|n| format!(", line {n}")).unwrap_or_default())]
    Invalid {
        /// The file (or `built-in defaults` for an environment variable).
        path: String,
        /// The line of the offending key, when it is in the file.
        line: Option<usize>,
        /// What is wrong.
        error: ConfigError,
    },
}

/// Splits a dotted key as errors name it (`breaker.limits."host:a.b"`) into its parts.
fn key_parts(dotted: &str) -> Vec<String> {
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

/// The 1-based line where a dotted key is written in `text` (a table header, a key, or a
/// key of an inline table), when the text parses.
pub fn line_of(text: &str, dotted: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let parts = key_parts(dotted);
    let mut span = None;
    let mut item: Option<&toml_edit::Item> = None;
    for part in &parts {
        let (key_span, next) = match item {
            None => {
                let (k, v) = doc.as_table().get_key_value(part)?;
                (k.span(), v)
            }
            Some(toml_edit::Item::Table(t)) => {
                let (k, v) = t.get_key_value(part)?;
                (k.span(), v)
            }
            Some(toml_edit::Item::Value(toml_edit::Value::InlineTable(t))) => {
                let (k, v) = t.get_key_value(part)?;
                (k.span(), v)
            }
            _ => return span.map(|s: std::ops::Range<usize>| line_at(text, s.start)),
        };
        // A table header keeps its own span; a dotted or inline key has the key's.
        span = key_span
            .or_else(|| next.as_table().and_then(|t| t.span()))
            .or(span);
        item = Some(next);
    }
    span.map(|s| line_at(text, s.start))
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Reads the process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Finds the configuration file to use, or `None` for the defaults.
pub fn locate(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = env("LOOPBRAKE_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let local = cwd.join("loopbrake.toml");
    if local.is_file() {
        return Some(local);
    }
    let config_home = env("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        });
    config_home
        .map(|d| d.join("loopbrake").join("config.toml"))
        .filter(|p| p.is_file())
}

/// Parses configuration text (all tables validated).
pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, ConfigError> {
    let table = parse_toml(text)?;
    for key in table.keys() {
        if !TABLES.contains(&key.as_str()) {
            return Err(unknown_key("", key, TABLES));
        }
    }
    Ok(Loaded {
        engine: Config::from_tables(table.get("streak"), table.get("breaker"), env)?,
        protocol: protocol_table(table.get("protocol"))?,
        store: store_table(table.get("store"))?,
    })
}

/// Reads and validates one file.
pub fn load_file(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, LoadError> {
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| LoadError::NotUtf8 {
        path: path.to_path_buf(),
    })?;
    parse(&text, env).map_err(|error| LoadError::Invalid {
        path: path.display().to_string(),
        line: line_of(&text, &error.key),
        error,
    })
}

/// Loads the configuration by the lookup order, from this process's environment.
pub fn load(explicit: Option<&Path>) -> Result<Settings, LoadError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    load_with(explicit, &process_env, &cwd)
}

/// [`load`] with an explicit environment and working directory (for tests and hosts).
pub fn load_with(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> Result<Settings, LoadError> {
    let (loaded, source) = match locate(explicit, env, cwd) {
        Some(path) => (load_file(&path, env)?, Source::File(path)),
        None => (
            parse("", env).map_err(|error| LoadError::Invalid {
                path: "built-in defaults".into(),
                line: None,
                error,
            })?,
            Source::Defaults,
        ),
    };
    Ok(Settings {
        engine: loaded.engine,
        protocol: loaded.protocol,
        store: loaded.store,
        source,
    })
}

/// The `[store]` settings to use when the configuration cannot be loaded: the defaults,
/// except `fail_closed` (and the state `path`) when the file parses as TOML and sets them.
/// A configuration with a typo elsewhere must not turn a fail-closed policy open.
pub fn store_settings_of_broken(explicit: Option<&Path>) -> StoreSettings {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut s = StoreSettings::default();
    let Some(path) = locate(explicit, &process_env, &cwd) else {
        return s;
    };
    let Ok(meta) = std::fs::metadata(&path) else {
        return s;
    };
    if !meta.is_file() || meta.len() > MAX_CONFIG_BYTES {
        return s;
    }
    let Some(table) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
    else {
        return s;
    };
    let store = table.get("store").and_then(toml::Value::as_table);
    if let Some(b) = store
        .and_then(|t| t.get("fail_closed"))
        .and_then(toml::Value::as_bool)
    {
        s.fail_closed = b;
    }
    if let Some(p) = store
        .and_then(|t| t.get("path"))
        .and_then(toml::Value::as_str)
        .filter(|p| !p.is_empty())
    {
        s.path = Some(PathBuf::from(p));
    }
    s
}

/// The commented default configuration (`loopbrake config default`).
pub const DEFAULT_FILE: &str = include_str!("default-config.toml");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_line_of_the_key() {
        for (text, line) in [
            ("[streak]\nmax_repeat = 3\n", 2),
            ("# c\n[breaker]\nwindow = 16\nlimits = { net = 1 }\n", 4),
            ("[breaker.limits]\n\"host:a.b\" = 1\n", 2),
            ("streek = 1\n", 1),
            ("[store]\nlock_timeout = \"forever\"\n", 2),
        ] {
            let error = parse(text, &|_| None).unwrap_err();
            assert_eq!(line_of(text, &error.key), Some(line), "{text}: {error}");
        }
        let e = load_file_text("[streak]\nmax_repeat = 3\n");
        assert_eq!(
            e,
            "loopbrake.toml, line 2: `streak.max_repeat` is not a setting; did you mean `streak.max_repeats`?"
        );
        let e = load_file_text("[streak]\nmax_repeats = 0\n");
        assert_eq!(
            e,
            "loopbrake.toml, line 2: `streak.max_repeats = 0` is not valid: it must be a whole number from 1 to 4294967295."
        );
        let e = load_file_text("[streak\n");
        assert!(
            e.starts_with("loopbrake.toml: the file is not valid TOML (line 1, column 8): "),
            "{e}"
        );
    }

    #[test]
    fn several_redis_urls_mean_a_cluster() {
        let l = parse(
            "[store]\nkind = \"redis\"\nurl = [\"redis://a:pw@10.0.0.1:6379\", \"redis://10.0.0.2:6379\"]\n",
            &|_| None,
        )
        .unwrap();
        assert!(l.store.cluster);
        assert_eq!(l.store.cluster_nodes.len(), 2);
        let shown = l.store.to_toml();
        assert!(
            shown.contains(
                "url = [\"redis://hidden:hidden@10.0.0.1:6379\", \"redis://10.0.0.2:6379\"]"
            ),
            "{shown}"
        );
        assert!(shown.contains("cluster = true"));
        let one = parse("[store]\ncluster = true\n", &|_| None).unwrap();
        assert!(one.store.cluster && one.store.cluster_nodes.is_empty());
        let e = parse(
            "[store]\nurl = [\"redis://ok:1\", \"http://no\"]\n",
            &|_| None,
        )
        .unwrap_err();
        assert_eq!(e.key, "store.url");
        assert!(parse("[store]\nurl = []\n", &|_| None).is_err());
    }

    fn load_file_text(text: &str) -> String {
        let dir = std::env::temp_dir().join(format!(
            "loopbrake-settings-{}-{}",
            std::process::id(),
            text.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("loopbrake.toml");
        std::fs::write(&path, text).unwrap();
        let e = load_file(&path, &|_| None).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        e.replace(&format!("{}/", dir.display()), "")
    }
    use loopbrake_core::config::no_env;

    #[test]
    fn the_default_file_is_the_defaults() {
        assert_eq!(parse(DEFAULT_FILE, &no_env).unwrap(), Loaded::default());
    }

    #[test]
    fn unknown_tables_are_refused() {
        let e = parse("[stream]\n", &no_env).unwrap_err();
        assert_eq!(e.key, "stream");
    }
}
