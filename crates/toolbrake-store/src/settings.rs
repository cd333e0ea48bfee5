//! The `[store]` table of `toolbrake.toml`: which store, where, its timeouts and failure
//! policy, validated when loaded (every error names the key, the value and the rule;
//! credentials are never shown), and the store it opens.

use std::path::PathBuf;
use toolbrake_config::show;
use toolbrake_core::config::{unknown_key, ConfigError};

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
    /// The SQLite file (default `$XDG_STATE_HOME/toolbrake/state.db`).
    pub path: Option<PathBuf>,
    /// Sessions idle longer than this are forgotten (default 7 days).
    pub idle_ttl: std::time::Duration,
    /// How long to wait for a store held by another process (default 3 s).
    pub lock_timeout: std::time::Duration,
    /// When toolbrake itself fails, refuse the call (true) or let it run (false, default).
    pub fail_closed: bool,
    /// Redis: `redis://…` or `rediss://…` (TLS); credentials in it, or in
    /// `$TOOLBRAKE_REDIS_USERNAME` / `$TOOLBRAKE_REDIS_PASSWORD`. The first node of a
    /// cluster.
    pub url: String,
    /// Redis Cluster: every seed node given (`url` as an array); empty for one server.
    pub cluster_nodes: Vec<String>,
    /// Redis: speak the Cluster protocol (set, or implied by several URLs).
    pub cluster: bool,
    /// Redis: the prefix of every key.
    pub key_prefix: String,
    /// Redis: connecting (TCP, TLS, authentication, database) gives up this long after
    /// the store operation that connects started. One operation, connecting included,
    /// never waits longer than the larger of this and `command_timeout` in all.
    pub connect_timeout: std::time::Duration,
    /// Redis: a store operation's commands (an update's round trips, retries included)
    /// give up this long after they began, in all, not per reply; the failure policy
    /// then applies.
    pub command_timeout: std::time::Duration,
    /// Memory: at most this many sessions; past it, those idle longest are forgotten
    /// (0: no bound).
    pub max_sessions: usize,
    /// Memory: at most about this many bytes of session state (its JSON length); past
    /// it, the sessions idle longest are forgotten (0: no bound).
    pub max_bytes: u64,
    /// Memory: a session idle this long is kept compressed (its JSON, deflated) until its
    /// next call (default 1 minute).
    pub compact_after: std::time::Duration,
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
            key_prefix: "toolbrake:".to_string(),
            connect_timeout: std::time::Duration::from_secs(2),
            command_timeout: std::time::Duration::from_secs(2),
            max_sessions: 100_000,
            max_bytes: 256 << 20,
            compact_after: std::time::Duration::from_secs(60),
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
    "max_sessions",
    "max_bytes",
    "compact_after",
];

fn store_err(key: &str, v: &toml::Value, rule: &str) -> ConfigError {
    ConfigError {
        key: format!("store.{key}"),
        value: show(v),
        rule: rule.into(),
    }
}

/// One end of a duration's range as docs/configuration.md writes it: in the largest unit that divides
/// it (`3650 days`, `1 day`, `1 s`, `1 ms`), never in calendar years and months.
fn range_end(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    let (n, unit) = [
        (86_400_000, "day"),
        (3_600_000, "h"),
        (60_000, "min"),
        (1_000, "s"),
        (1, "ms"),
    ]
    .into_iter()
    .find(|(u, _)| ms.is_multiple_of(*u) && ms >= *u)
    .map_or((ms, "ms"), |(u, name)| (ms / u, name));
    match unit {
        "day" if n != 1 => format!("{n} days"),
        _ => format!("{n} {unit}"),
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
        range_end(min),
        range_end(max)
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

/// Reads and validates the `[store]` table (absent: the defaults).
pub fn store_table(v: Option<&toml::Value>) -> Result<StoreSettings, ConfigError> {
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
            "compact_after" => {
                s.compact_after = duration(k, val, std::time::Duration::ZERO, 3650 * DAY)?
            }
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
            "max_sessions" => {
                s.max_sessions = val
                    .as_integer()
                    .filter(|n| (0..=1_000_000_000).contains(n))
                    .ok_or_else(|| {
                        store_err(k, val, "must be an integer from 0 (no bound) to 1000000000")
                    })? as usize
            }
            "max_bytes" => {
                s.max_bytes = val
                    .as_integer()
                    .filter(|n| *n == 0 || (1 << 16..=1 << 40).contains(n))
                    .ok_or_else(|| {
                        store_err(
                            k,
                            val,
                            "must be an integer: 0 (no bound), or from 65536 to 1099511627776",
                        )
                    })? as u64
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
            toml::Value::String(toolbrake_config::show_duration(d)).to_string()
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
        out.push_str(&format!("max_sessions = {}\n", self.max_sessions));
        out.push_str(&format!("max_bytes = {}\n", self.max_bytes));
        out.push_str(&format!("compact_after = {}\n", d(self.compact_after)));
        out
    }

    /// The SQLite file: `$TOOLBRAKE_STATE`, else `[store] path`, else
    /// `$XDG_STATE_HOME/toolbrake/state.db` (or `~/.local/state/toolbrake/state.db`).
    pub fn sqlite_path(&self, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
        if let Some(p) = env("TOOLBRAKE_STATE").filter(|p| !p.is_empty()) {
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
        base.join("toolbrake").join("state.db")
    }

    /// Opens the configured store, or `default` when `kind` is not set.
    pub fn open(
        &self,
        default: StoreKind,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<std::sync::Arc<dyn crate::Store>, crate::StoreError> {
        match self.kind.unwrap_or(default) {
            StoreKind::Memory => Ok(std::sync::Arc::new(
                crate::MemoryStore::with_idle_ttl(
                    self.idle_ttl.as_millis().min(u64::MAX as u128) as u64
                )
                .with_limits(self.max_sessions, self.max_bytes)
                .with_compact_after(self.compact_after),
            )),
            StoreKind::Sqlite => Ok(std::sync::Arc::new(crate::SqliteStore::open(
                &self.sqlite_path(env),
                crate::SqliteOptions {
                    idle_ttl: self.idle_ttl,
                    lock_timeout: self.lock_timeout,
                },
            )?)),
            StoreKind::Redis => Ok(std::sync::Arc::new(crate::RedisStore::new(
                crate::RedisOptions {
                    url: self.url.clone(),
                    key_prefix: self.key_prefix.clone(),
                    idle_ttl: self.idle_ttl,
                    connect_timeout: self.connect_timeout,
                    command_timeout: self.command_timeout,
                    username: env("TOOLBRAKE_REDIS_USERNAME").filter(|u| !u.is_empty()),
                    password: env("TOOLBRAKE_REDIS_PASSWORD").filter(|p| !p.is_empty()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<StoreSettings, ConfigError> {
        let v: toml::Value = toml::from_str(text).unwrap();
        store_table(v.get("store"))
    }

    #[test]
    fn the_memory_bounds_are_read_checked_and_written_out() {
        let d = StoreSettings::default();
        assert_eq!((d.max_sessions, d.max_bytes), (100_000, 256 << 20));
        let s = table("[store]\nmax_sessions = 10\nmax_bytes = 0\n").unwrap();
        assert_eq!((s.max_sessions, s.max_bytes), (10, 0));
        assert!(s.to_toml().contains("max_sessions = 10\nmax_bytes = 0\n"));
        let e = table("[store]\nmax_bytes = 100\n").unwrap_err();
        assert_eq!(e.key, "store.max_bytes");
        let e = table("[store]\nmax_sessions = -1\n").unwrap_err();
        assert_eq!(e.key, "store.max_sessions");
    }

    #[test]
    fn compact_after_is_read_checked_and_written_out() {
        assert_eq!(
            StoreSettings::default().compact_after,
            std::time::Duration::from_secs(60)
        );
        let s = table("[store]\ncompact_after = \"30s\"\n").unwrap();
        assert_eq!(s.compact_after, std::time::Duration::from_secs(30));
        assert!(s.to_toml().contains("compact_after = \"30s\"\n"));
        let s = table("[store]\ncompact_after = \"0s\"\n").unwrap();
        assert_eq!(s.compact_after, std::time::Duration::ZERO);
        for bad in ["\"soon\"", "60", "\"3651d\""] {
            let e = table(&format!("[store]\ncompact_after = {bad}\n")).unwrap_err();
            assert_eq!(e.key, "store.compact_after");
            assert_eq!(e.value, bad);
            assert!(e.rule.contains("must be a duration"), "{}", e.rule);
        }
    }
}
