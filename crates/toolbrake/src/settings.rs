//! Finding and loading `toolbrake.toml`: the lookup order, the environment, the size
//! limit, and the commented default file. Each table is read and validated by the crate
//! that owns it (`[streak]`/`[breaker]`: the core; `[store]`: the store crate;
//! `[protocol]`: the protocol crate), all at load time; this module only finds the file,
//! parses it, and hands each table over.
//!
//! Lookup order: `--config PATH`, `$TOOLBRAKE_CONFIG`, `./toolbrake.toml`,
//! `$XDG_CONFIG_HOME/toolbrake/config.toml` (or `~/.config/toolbrake/config.toml`),
//! then the built-in defaults. A project's `./toolbrake.toml` sets everything but the
//! user-only tables ([`trust`]: `[store]`, `[telemetry]`, `[trust]`), which come from the
//! user's file unless it trusts the project.

mod protect;
mod trust;
pub use protect::{agent_environment, protected, AGENT_VARIABLES};
pub use trust::{Disabled, Ignored, Origin, USER_ONLY};

use std::fmt;
use std::path::{Path, PathBuf};
use toolbrake_config::{engine_from_tables, parse_toml};
use toolbrake_core::config::{unknown_key, Config, ConfigError};

/// Configuration files larger than this are refused.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Top-level tables of `toolbrake.toml`.
pub const TABLES: &[&str] = &[
    "streak",
    "breaker",
    "budget",
    "protocol",
    "store",
    "fetch",
    "telemetry",
    "trust",
];

pub use toolbrake_fetch::settings::{fetch_table, FetchSettings};
pub use toolbrake_protocol::settings::{protocol_table, ProtocolSettings};
pub use toolbrake_store::settings::{shown_url, store_table, StoreKind, StoreSettings};
pub use toolbrake_telemetry::trace::{telemetry_table, TelemetrySettings};

/// Everything `toolbrake.toml` configures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// The engines.
    pub engine: Config,
    /// The protocol.
    pub protocol: ProtocolSettings,
    /// The store.
    pub store: StoreSettings,
    /// `web_fetch_file`.
    pub fetch: FetchSettings,
    /// Traces.
    pub telemetry: TelemetrySettings,
    /// The projects whose own file may set the user-only tables (`[trust] projects`).
    pub trust: Vec<PathBuf>,
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
    /// `web_fetch_file`'s settings.
    pub fetch: FetchSettings,
    /// Traces (`[telemetry]`; the `OTEL_*` environment wins over it).
    pub telemetry: TelemetrySettings,
    /// The projects the user trusts (`[trust] projects`).
    pub trust: Vec<PathBuf>,
    /// Where it came from.
    pub source: Source,
    /// Who chose the file (`None` for the built-in defaults).
    pub origin: Option<Origin>,
    /// What a project's file set that only the user may, and was left out.
    pub ignored: Option<Ignored>,
    /// The engines a project's file turned off.
    pub disabled: Option<Disabled>,
}

impl Settings {
    /// What a person should be told once about a project's file: what it set that was left
    /// out, and the engines it turned off (empty for the user's own configuration).
    pub fn notices(&self) -> Vec<String> {
        self.ignored
            .iter()
            .map(Ignored::message)
            .chain(self.disabled.iter().map(Disabled::message))
            .collect()
    }
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

/// The 1-based line where a dotted key is written in `text` (a table header, a key, or a
/// key of an inline table), when the text parses.
pub fn line_of(text: &str, dotted: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let parts = toolbrake_config::key_parts(dotted);
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
    locate_origin(explicit, env, cwd).map(|(p, _)| p)
}

/// [`locate`], and who chose the file.
pub fn locate_origin(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> Option<(PathBuf, Origin)> {
    if let Some(p) = explicit {
        return Some((p.to_path_buf(), Origin::Named));
    }
    if let Some(p) = env("TOOLBRAKE_CONFIG").filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(p), Origin::Named));
    }
    let local = cwd.join("toolbrake.toml");
    if local.is_file() {
        return Some((local, Origin::Project));
    }
    user_file(env)
        .filter(|p| p.is_file())
        .map(|p| (p, Origin::User))
}

/// The user's configuration file, whether or not it exists:
/// `$XDG_CONFIG_HOME/toolbrake/config.toml`, else `~/.config/toolbrake/config.toml`
/// (`None` without either variable).
pub fn user_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })
        .map(|d| d.join("toolbrake").join("config.toml"))
}

/// Which file an editor of the configuration (the dashboard) changes, and who reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Editable {
    /// Named with `--config` or `$TOOLBRAKE_CONFIG`: read by what is given the same name.
    Named(PathBuf),
    /// `./toolbrake.toml` of the working folder: read by what runs in that folder, where it
    /// shadows the user's file (named here when that exists too).
    Project {
        /// The project file.
        path: PathBuf,
        /// The user's file it shadows, when there is one.
        shadows: Option<PathBuf>,
    },
    /// The user's file (created on the first edit when missing): read by what runs
    /// anywhere without a project file or a named one.
    User(PathBuf),
}

impl Editable {
    /// The file.
    pub fn path(&self) -> &Path {
        match self {
            Editable::Named(p) | Editable::User(p) => p,
            Editable::Project { path, .. } => path,
        }
    }
}

/// The file to edit so that what is written is what hooks, `serve` and `mcp` read: the one
/// the lookup finds, else the user's file (even if it does not exist yet: the hooks find
/// it once it does), else `./toolbrake.toml` when there is no home directory.
pub fn editable(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> Editable {
    if let Some(p) = explicit {
        return Editable::Named(p.to_path_buf());
    }
    if let Some(p) = env("TOOLBRAKE_CONFIG").filter(|p| !p.is_empty()) {
        return Editable::Named(PathBuf::from(p));
    }
    let local = cwd.join("toolbrake.toml");
    match user_file(env) {
        Some(user) if !local.is_file() => Editable::User(user),
        user => Editable::Project {
            path: local,
            shadows: user.filter(|u| u.is_file()),
        },
    }
}

/// Parses configuration text (all tables validated).
pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, ConfigError> {
    from_table(&parse_toml(text)?, env)
}

/// Validates a parsed configuration document (every table, as [`parse`] does): for hosts
/// that receive it as data rather than as a file (the Python package's `config=dict`).
pub fn from_table(
    table: &toml::Table,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Loaded, ConfigError> {
    for key in table.keys() {
        if !TABLES.contains(&key.as_str()) {
            return Err(unknown_key("", key, TABLES));
        }
    }
    Ok(Loaded {
        engine: engine_from_tables(table, env)?,
        protocol: protocol_table(table.get("protocol"))?,
        store: store_table(table.get("store"))?,
        fetch: fetch_table(table.get("fetch"))?,
        telemetry: telemetry_table(table.get("telemetry"))?,
        trust: trust::trust_table(table.get("trust"))?,
    })
}

/// Reads and validates one file.
pub fn load_file(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, LoadError> {
    load_file_table(path, env).map(|(loaded, _)| loaded)
}

/// [`load_file`], and the file's parsed table.
fn load_file_table(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Loaded, toml::Table), LoadError> {
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
    let invalid = |error: ConfigError| LoadError::Invalid {
        path: path.display().to_string(),
        line: line_of(&text, &error.key),
        error,
    };
    let table = parse_toml(&text).map_err(invalid)?;
    let loaded = from_table(&table, env).map_err(invalid)?;
    Ok((loaded, table))
}

/// The user's own configuration: their file when it exists, else the defaults.
fn load_user(env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, LoadError> {
    match user_file(env).filter(|p| p.is_file()) {
        Some(path) => load_file(&path, env),
        None => parse("", env).map_err(|error| LoadError::Invalid {
            path: "built-in defaults".into(),
            line: None,
            error,
        }),
    }
}

/// What loading a file found: the configuration, what a project's file set that was left
/// out, and the engines it turned off.
type Found = (Loaded, Option<Ignored>, Option<Disabled>);

/// Loads the file found by the lookup, confining a project's file to what it may set.
fn load_found(
    path: &Path,
    origin: Origin,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Found, LoadError> {
    if origin != Origin::Project {
        return load_file(path, env).map(|l| (l, None, None));
    }
    let (project, table) = load_file_table(path, env)?;
    let user = load_user(env)?;
    let disabled = Disabled::of(path, &table);
    let (loaded, ignored) = trust::confine(path, &table, project, &user, env);
    Ok((loaded, ignored, disabled))
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
    let (loaded, ignored, disabled, source, origin) = match locate_origin(explicit, env, cwd) {
        Some((path, origin)) => {
            let (loaded, ignored, disabled) = load_found(&path, origin, env)?;
            (loaded, ignored, disabled, Source::File(path), Some(origin))
        }
        None => (
            parse("", env).map_err(|error| LoadError::Invalid {
                path: "built-in defaults".into(),
                line: None,
                error,
            })?,
            None,
            None,
            Source::Defaults,
            None,
        ),
    };
    Ok(Settings {
        engine: loaded.engine,
        protocol: loaded.protocol,
        store: loaded.store,
        fetch: loaded.fetch,
        telemetry: loaded.telemetry,
        trust: loaded.trust,
        source,
        origin,
        ignored,
        disabled,
    })
}

/// The `[store]` settings to use when the configuration cannot be loaded: the defaults,
/// except `fail_closed` (and the state `path`) when the file parses as TOML and sets them.
/// A configuration with a typo elsewhere must not turn a fail-closed policy open. A
/// project's file names no store: the user's file is read for them instead.
pub fn store_settings_of_broken(explicit: Option<&Path>) -> StoreSettings {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut s = StoreSettings::default();
    let path = match locate_origin(explicit, &process_env, &cwd) {
        Some((_, Origin::Project)) => user_file(&process_env).filter(|p| p.is_file()),
        found => found.map(|(p, _)| p),
    };
    let Some(path) = path else {
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

/// The commented default configuration (`toolbrake config default`).
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
            "toolbrake.toml, line 2: `streak.max_repeat` is not a setting; did you mean `streak.max_repeats`?"
        );
        let e = load_file_text("[streak]\nmax_repeats = 0\n");
        assert_eq!(
            e,
            "toolbrake.toml, line 2: `streak.max_repeats = 0` is not valid: it must be a whole number from 1 to 4294967295."
        );
        let e = load_file_text("[streak\n");
        assert!(
            e.starts_with("toolbrake.toml: the file is not valid TOML (line 1, column 8): "),
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
            "toolbrake-settings-{}-{}",
            std::process::id(),
            text.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("toolbrake.toml");
        std::fs::write(&path, text).unwrap();
        let e = load_file(&path, &|_| None).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        e.replace(&format!("{}/", dir.display()), "")
    }
    use toolbrake_core::config::no_env;

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

/// Watches the configuration file a long-running command loaded (`serve`, `mcp`): when
/// it changes, it is loaded again; an invalid edit is reported once and the previous
/// configuration stays in force. A change is any new version of the file: another file
/// swapped in (a rename, `rsync -a`, a symlink pointed elsewhere: a new device or inode,
/// of the file or of the link), or the file rewritten (`cp -p`: its change time moves even
/// when its size and modification time are put back).
#[derive(Debug)]
pub struct Watcher {
    path: PathBuf,
    origin: Origin,
    stamp: Option<Stamp>,
    /// The configuration last loaded, to tell which tables an edit changed.
    current: Loaded,
    /// The tables the command takes into use when they change.
    applies: Vec<&'static str>,
}

/// One version of the configuration file, as the file system tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    /// The file the path leads to (symlinks followed).
    file: Version,
    /// The path itself, when it is a symlink.
    link: Option<Version>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
    /// The status change time (seconds, nanoseconds): no one can set it back.
    changed: (i64, i64),
}

impl Version {
    fn of(m: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let (device, inode, changed) = {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino(), (m.ctime(), m.ctime_nsec()))
        };
        #[cfg(not(unix))]
        let (device, inode, changed) = (0, 0, (0, 0));
        Version {
            device,
            inode,
            len: m.len(),
            modified: m.modified().ok(),
            changed,
        }
    }
}

fn stamp_of(path: &Path) -> Option<Stamp> {
    let file = Version::of(&std::fs::metadata(path).ok()?);
    let link = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.file_type().is_symlink())
        .map(|m| Version::of(&m));
    Some(Stamp { file, link })
}

/// The tables of `toolbrake.toml` whose values differ between `a` and `b`.
fn changed_tables(a: &Loaded, b: &Loaded) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if a.engine.streak != b.engine.streak {
        changed.push("streak");
    }
    // What self-protection guards is filled in by the running command (`protect`), never
    // read from the file: a freshly loaded file has none, which is no change of the file.
    let mut breaker = b.engine.breaker.clone();
    breaker.protect(a.engine.breaker.protected().clone());
    if a.engine.breaker != breaker {
        changed.push("breaker");
    }
    if a.protocol != b.protocol {
        changed.push("protocol");
    }
    if a.store != b.store {
        changed.push("store");
    }
    if a.fetch != b.fetch {
        changed.push("fetch");
    }
    if a.telemetry != b.telemetry {
        changed.push("telemetry");
    }
    if a.trust != b.trust {
        changed.push("trust");
    }
    changed
}

fn tables_list(tables: &[&str]) -> String {
    tables
        .iter()
        .map(|t| format!("[{t}]"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Watcher {
    /// Watches the file `settings` came from; `None` for built-in defaults. `applies`
    /// names the tables the command takes into use when they change (e.g. `streak`,
    /// `breaker`, `fetch`): only those are reported reloaded; a change to any other is
    /// reported as waiting for a restart.
    pub fn new(settings: &Settings, applies: &[&'static str]) -> Option<Self> {
        match &settings.source {
            Source::File(path) => Some(Watcher {
                path: path.clone(),
                origin: settings.origin.unwrap_or(Origin::Named),
                stamp: stamp_of(path),
                current: Loaded {
                    engine: settings.engine.clone(),
                    protocol: settings.protocol,
                    store: settings.store.clone(),
                    fetch: settings.fetch.clone(),
                    telemetry: settings.telemetry.clone(),
                    trust: settings.trust.clone(),
                },
                applies: applies.to_vec(),
            }),
            Source::Defaults => None,
        }
    }

    /// What the file's latest edit, if any, means for the running command: nothing, a
    /// configuration to take into use, tables that wait for a restart, or an invalid file
    /// kept out. Each but the first comes with the line the operator reads.
    pub fn poll(&mut self) -> Reload {
        let now = stamp_of(&self.path);
        if now == self.stamp {
            return Reload::Unchanged;
        }
        self.stamp = now;
        let loaded = match load_found(&self.path, self.origin, &process_env) {
            Ok((l, _, _)) => l,
            Err(e) => {
                return Reload::Rejected(format!(
                    "toolbrake: {e}; keeping the previous configuration"
                ))
            }
        };
        let (applied, waiting): (Vec<&str>, Vec<&str>) = changed_tables(&self.current, &loaded)
            .into_iter()
            .partition(|t| self.applies.contains(t));
        self.current = loaded.clone();
        let waiting = if waiting.is_empty() {
            String::new()
        } else {
            format!(
                "{} changed too and take effect only when toolbrake restarts",
                tables_list(&waiting)
            )
        };
        if applied.is_empty() {
            return if waiting.is_empty() {
                Reload::Unchanged
            } else {
                Reload::Waiting(format!("toolbrake: {}: {waiting}", self.path.display()))
            };
        }
        let line = format!(
            "toolbrake: reloaded {}: {} now in force{}",
            self.path.display(),
            tables_list(&applied),
            if waiting.is_empty() {
                String::new()
            } else {
                format!("; {waiting}")
            }
        );
        Reload::Applied(Box::new(loaded), line)
    }
}

/// What [`Watcher::poll`] found.
#[derive(Debug)]
pub enum Reload {
    /// Nothing to do.
    Unchanged,
    /// A valid edit of tables the command applies: the configuration, and the line saying
    /// what is now in force.
    Applied(Box<Loaded>, String),
    /// A valid edit of tables that take effect only after a restart: the line saying so.
    Waiting(String),
    /// An invalid file: the previous configuration stays; the line saying why.
    Rejected(String),
}
