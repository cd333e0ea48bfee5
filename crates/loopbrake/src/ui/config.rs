//! The settings behind the dashboard: the effective configuration as JSON, and edits that
//! are validated whole and written atomically into the file people wrote.

use crate::settings::{self, process_env, Loaded, TABLES};
use loopbrake_core::config::{unknown_key, ConfigError};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

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
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(unreadable(e.to_string())),
        Ok(m) if !m.is_file() => Err(unreadable("not a regular file".into())),
        Ok(m) if m.len() > settings::MAX_CONFIG_BYTES => {
            Err(unreadable(format!("{} bytes is too large", m.len())))
        }
        Ok(_) => std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string())),
    }
}

fn loaded(path: &Path) -> Result<(Loaded, bool), EditError> {
    let text = read(path)?;
    let exists = path.is_file();
    let l = settings::parse(&text, &process_env).map_err(EditError::Invalid)?;
    Ok((l, exists))
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
    let (l, exists) = loaded(path)?;
    Ok(json!({
        "file": path.display().to_string(),
        "exists": exists,
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
    let text = read(path)?;
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
    settings::parse(&new_text, &process_env).map_err(EditError::Invalid)?;
    write_atomically(path, &new_text)
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

/// Writes `text` beside `path` and renames it over: readers see the old file or the new
/// one, never a part. A new file is owner-only; an existing one keeps its permissions.
fn write_atomically(path: &Path, text: &str) -> Result<(), EditError> {
    let io = |source| EditError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(
        || "loopbrake.toml".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o777);
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}
