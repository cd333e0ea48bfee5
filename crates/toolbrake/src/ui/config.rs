//! The settings behind the dashboard: the effective configuration as JSON, and edits that
//! are validated whole and written atomically into the file people wrote.
//!
//! An edit is a read-modify-write under an advisory lock on `.NAME.lock` beside the file
//! (so concurrent edits, from this process or another, take turns and none is lost), and
//! may name the version it was based on (`If-Match`: the `version` a view returned, a hash
//! of the file's bytes): an edit based on a stale read is refused, not merged blindly. The
//! result is written to a temporary file and loaded from there exactly as `toolbrake`
//! loads its configuration (size limit included) before it is renamed over the file.

use crate::files;
use crate::settings::{self, process_env, LoadError, Loaded, TABLES};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use toolbrake_core::config::{unknown_key, ConfigError};

/// Why an edit was not written.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The edited file would not be valid: the key, the value and the rule.
    #[error("{0}")]
    Invalid(ConfigError),
    /// The edit is not a document of tables.
    #[error("{0}")]
    Shape(String),
    /// The file on disk cannot be read or parsed as it is.
    #[error("cannot read {path}: {why}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The edit was based on a version of the file that is no longer the current one.
    #[error("the configuration file changed since it was read (another edit was saved); nothing was written: reload the settings and make the change again")]
    Stale,
    /// The edited file would be larger than toolbrake loads.
    #[error("the edited file would be {size} bytes, over the {} byte limit toolbrake loads; nothing was written", settings::MAX_CONFIG_BYTES)]
    TooLarge {
        /// Its size.
        size: u64,
    },
    /// Another edit kept the file locked for too long.
    #[error("another edit of {path} is still in progress; nothing was written: try again")]
    Busy {
        /// The file.
        path: PathBuf,
    },
    /// Writing failed (the file is unchanged).
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Sub-tables whose keys are names (merged key by key, never replaced whole).
const NAMED_TABLES: &[&str] = &["limits", "ignore_args", "host_aliases", "tools"];

fn read(path: &Path) -> Result<String, EditError> {
    let unreadable = |why: String| EditError::Unreadable {
        path: path.to_path_buf(),
        why,
    };
    // One read of the opened file (a FIFO swapped in after a check never blocks it).
    crate::files::read_regular(path, settings::MAX_CONFIG_BYTES)
        .map(Option::unwrap_or_default)
        .map_err(|e| unreadable(e.to_string()))
}

/// The version of a file's text that edits name (`If-Match`): a strong entity tag, the
/// quoted hex of the first 16 bytes of its SHA-256.
pub fn version_of(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    format!("\"{}\"", hex::encode(&digest[..16]))
}

/// Whether an `If-Match` header value names `current` (a list of tags, or `*`).
fn matches(if_match: &str, current: &str) -> bool {
    if_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag == current)
}

fn loaded(path: &Path) -> Result<(Loaded, bool, String), EditError> {
    let text = read(path)?;
    let exists = path.is_file();
    let l = settings::parse(&text, &process_env).map_err(EditError::Invalid)?;
    Ok((l, exists, version_of(&text)))
}

fn toml_json(text: &str) -> Value {
    toml::from_str::<toml::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or(Value::Null)
}

fn sections(l: &Loaded) -> Value {
    let engine = l.engine.to_value();
    let store = toml_json(&l.store.to_toml());
    let fetch = toml_json(&l.fetch.to_toml());
    json!({
        "streak": engine["streak"],
        "breaker": engine["breaker"],
        "protocol": {"max_line_bytes": l.protocol.max_line_bytes},
        "store": store.get("store").cloned().unwrap_or(Value::Null),
        "fetch": fetch.get("fetch").cloned().unwrap_or(Value::Null),
    })
}

/// The configuration file, its effective values (credentials hidden) and the defaults.
pub fn view(path: &Path) -> Result<Value, EditError> {
    let (l, exists, version) = loaded(path)?;
    Ok(json!({
        "file": path.display().to_string(),
        "exists": exists,
        "version": version,
        "effective": sections(&l),
        "defaults": sections(&Loaded::default()),
    }))
}

fn to_toml_value(v: &Value) -> Option<toml_edit::Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64()?.into(),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => {
            let mut a = toml_edit::Array::new();
            for item in items {
                a.push(to_toml_value(item)?);
            }
            a.into()
        }
        Value::Object(m) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, x) in m {
                if let Some(x) = to_toml_value(x) {
                    t.insert(k, x);
                }
            }
            t.into()
        }
    })
}

/// Applies a partial document (`{"streak": {"max_repeats": 5}}`; `null` removes a key,
/// so its default applies) to the file, validates the result with the rules of `config
/// check`, and replaces the file atomically. On any error the file is untouched.
pub fn apply_edit(path: &Path, edit: &Value) -> Result<(), EditError> {
    apply_edit_if(path, edit, None).map(|_| ())
}

/// [`apply_edit`], only when the file is still at the version `if_match` names (an
/// `If-Match` header value; `None` applies the edit to whatever the file holds now).
/// Returns the new version.
pub fn apply_edit_if(
    path: &Path,
    edit: &Value,
    if_match: Option<&str>,
) -> Result<String, EditError> {
    let _lock = lock(path)?;
    let text = read(path)?;
    if if_match.is_some_and(|tag| !matches(tag, &version_of(&text))) {
        return Err(EditError::Stale);
    }
    let mut doc: toml_edit::DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| EditError::Unreadable {
                path: path.to_path_buf(),
                why: e.message().to_string(),
            })?;
    let tables = edit.as_object().ok_or_else(|| {
        EditError::Shape(
            "the edit must be an object of tables, e.g. {\"streak\": {\"max_repeats\": 5}}".into(),
        )
    })?;
    for (section, keys) in tables {
        if !TABLES.contains(&section.as_str()) {
            return Err(EditError::Invalid(unknown_key("", section, TABLES)));
        }
        let keys = keys.as_object().ok_or_else(|| {
            EditError::Shape(format!("`{section}` must be an object of settings"))
        })?;
        let table = doc
            .entry(section)
            .or_insert_with(toml_edit::table)
            .as_table_like_mut()
            .ok_or_else(|| EditError::Shape(format!("`{section}` in the file is not a table")))?;
        for (key, value) in keys {
            match value {
                Value::Null => {
                    table.remove(key);
                }
                Value::Object(sub) if NAMED_TABLES.contains(&key.as_str()) => {
                    if table.get(key).and_then(|i| i.as_table_like()).is_none() {
                        table.insert(
                            key,
                            toml_edit::Item::Value(toml_edit::InlineTable::new().into()),
                        );
                    }
                    let inner = table
                        .get_mut(key)
                        .and_then(|i| i.as_table_like_mut())
                        .ok_or_else(|| {
                            EditError::Shape(format!("`{section}.{key}` is not a table"))
                        })?;
                    for (k, x) in sub {
                        match to_toml_value(x) {
                            Some(v) => set_keeping_comments(inner, k, v),
                            None => {
                                inner.remove(k);
                            }
                        }
                    }
                }
                other => {
                    let v = to_toml_value(other).expect("not null");
                    set_keeping_comments(table, key, v);
                }
            }
        }
    }
    let new_text = doc.to_string();
    let io = |source| EditError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Loaded from the temporary file exactly as every command will load the result.
    let check = |tmp: &Path| match settings::load_file(tmp, &process_env) {
        Ok(_) => Ok(()),
        Err(LoadError::Invalid { error, .. }) => Err(EditError::Invalid(error)),
        Err(LoadError::TooLarge { size, .. }) => Err(EditError::TooLarge { size }),
        Err(LoadError::NotUtf8 { .. }) => Err(EditError::Shape("the edit is not UTF-8".into())),
        Err(LoadError::Read { source, .. }) => Err(io(source)),
    };
    files::replace_checked(path, new_text.as_bytes(), None, check, io)?;
    Ok(version_of(&new_text))
}

/// How long an edit waits for another one to finish.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Holds the advisory lock on `.NAME.lock` beside the file (beside a symlink's target, so
/// every name of the file shares it) until dropped.
fn lock(path: &Path) -> Result<std::fs::File, EditError> {
    let io = |source| EditError::Io {
        path: path.to_path_buf(),
        source,
    };
    // The user's file may not exist yet, nor its folder (`~/.config/toolbrake`).
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let target = files::write_target(path).map_err(io)?;
    let name = target.file_name().map_or_else(
        || "toolbrake.toml".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let lock_path = target.with_file_name(format!(".{name}.lock"));
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let file = opts.open(&lock_path).map_err(io)?;
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => return Ok(file),
            Err(fs4::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(fs4::TryLockError::WouldBlock) => {
                return Err(EditError::Busy {
                    path: path.to_path_buf(),
                })
            }
            Err(fs4::TryLockError::Error(e)) => return Err(io(e)),
        }
    }
}

/// Sets `key`, keeping the comments around a value it replaces.
fn set_keeping_comments(table: &mut dyn toml_edit::TableLike, key: &str, mut v: toml_edit::Value) {
    if let Some(old) = table.get_mut(key).and_then(|i| i.as_value_mut()) {
        *v.decor_mut() = old.decor().clone();
        *old = v;
        return;
    }
    table.insert(key, toml_edit::Item::Value(v));
}
