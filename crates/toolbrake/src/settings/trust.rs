//! What a project's own `toolbrake.toml` may set. Hooks installed for the whole user read
//! `./toolbrake.toml` of whatever project the agent works in, and a cloned repository ships
//! that file: it may tune detection (`[streak]`, `[breaker]`, `[protocol]`, `[fetch]`), but
//! where state lives (`[store]`) and what is recorded and where it is sent (`[telemetry]`)
//! come only from the user: their own file, a file they name (`--config`,
//! `$TOOLBRAKE_CONFIG`), the environment, or a project they list in their own file's
//! `[trust] projects`.

use super::Loaded;
use std::path::{Path, PathBuf};
use toolbrake_config::show;
use toolbrake_core::config::ConfigError;

/// Who chose the configuration file, which decides what it may set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Named by the user: `--config PATH` or `$TOOLBRAKE_CONFIG`.
    Named,
    /// `./toolbrake.toml` of the working folder: the project's, not the user's.
    Project,
    /// The user's own file.
    User,
}

/// The tables only the user's own configuration (or a trusted project) may set.
pub const USER_ONLY: &[&str] = &["store", "telemetry", "trust"];

/// What a project's file set that was not taken into use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// The project's file.
    pub file: PathBuf,
    /// The keys, dotted (`store.path`, `telemetry.endpoint`), in the file's order.
    pub keys: Vec<String>,
}

impl Ignored {
    /// The line a user reads, once.
    pub fn message(&self) -> String {
        if self.keys.iter().all(|k| k == "breaker.self_protection") {
            return format!(
                "toolbrake ignored `breaker.self_protection` in {}: a project's own file may \
                 tighten self-protection, never loosen it (the agent being braked can write \
                 that file). Set it in your own configuration ({}).",
                self.file.display(),
                super::user_file(&super::process_env)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "~/.config/toolbrake/config.toml".into()),
            );
        }
        format!(
            "toolbrake ignored {} in {}: a project's own file may tune detection, but where \
             state lives, what is recorded and where it is sent come only from your own \
             configuration ({}) or the environment. To let this project choose them, list its \
             folder in `[trust] projects` of your own file.",
            self.keys
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
            self.file.display(),
            super::user_file(&super::process_env)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "~/.config/toolbrake/config.toml".into()),
        )
    }
}

/// The engines a project's own file turned off (`enabled = false` in `[streak]` or
/// `[breaker]`). A project may tune detection, loosening included (it knows its own tools:
/// a repository whose tests poll on purpose), so this is allowed; but the brake the user
/// installed is then off in that project, and a person must be able to see that, once per
/// session, as for [`Ignored`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disabled {
    /// The project's file.
    pub file: PathBuf,
    /// The tables that turned their engine off, in this order: `streak`, `breaker`.
    pub tables: Vec<&'static str>,
}

impl Disabled {
    /// What the project's `table` (read from `file`) turned off, when it turned one off.
    pub fn of(file: &Path, table: &toml::Table) -> Option<Disabled> {
        let tables: Vec<&'static str> = ["streak", "breaker"]
            .into_iter()
            .filter(|t| {
                table
                    .get(*t)
                    .and_then(|v| v.get("enabled"))
                    .and_then(toml::Value::as_bool)
                    == Some(false)
            })
            .collect();
        (!tables.is_empty()).then(|| Disabled {
            file: file.to_path_buf(),
            tables,
        })
    }

    /// The line a user reads, once.
    pub fn message(&self) -> String {
        let keys = self
            .tables
            .iter()
            .map(|t| format!("`[{t}] enabled = false`"))
            .collect::<Vec<_>>()
            .join(", ");
        let (what, effect, lines) = match self.tables.as_slice() {
            ["streak"] => (
                "the streak brake",
                "it does not check tool calls in this project",
                "that line to turn it",
            ),
            ["breaker"] => (
                "the breaker",
                "it does not check tool calls in this project",
                "that line to turn it",
            ),
            _ => (
                "both engines, the streak brake and the breaker",
                "tool calls in this project are not checked for loops",
                "those lines to turn them",
            ),
        };
        format!(
            "toolbrake: this project's own file {} turns off {what} ({keys}), so {effect}. \
             Remove {lines} back on, or set $TOOLBRAKE_CONFIG to your own file to \
             use your settings here.",
            self.file.display(),
        )
    }
}

/// Reads `[trust]`: `projects`, a list of folders (absolute, or `~/…`).
pub fn trust_table(v: Option<&toml::Value>) -> Result<Vec<PathBuf>, ConfigError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let err = |key: &str, v: &toml::Value, rule: &str| ConfigError {
        key: format!("trust{}{key}", if key.is_empty() { "" } else { "." }),
        value: show(v),
        rule: rule.into(),
    };
    let t = v.as_table().ok_or_else(|| err("", v, "must be a table"))?;
    let mut projects = Vec::new();
    for (k, val) in t {
        if k != "projects" {
            return Err(toolbrake_core::config::unknown_key(
                "trust",
                k,
                &["projects"],
            ));
        }
        let list = val
            .as_array()
            .ok_or_else(|| err(k, val, "must be a list of folders"))?;
        for item in list {
            match item.as_str() {
                Some(p) if Path::new(p).is_absolute() || p.starts_with("~/") => {
                    projects.push(PathBuf::from(p))
                }
                _ => {
                    return Err(err(
                        k,
                        val,
                        &format!(
                            "must list folders, each by its absolute path or a path under ~/; {} is neither",
                            show(item)
                        ),
                    ))
                }
            }
        }
    }
    Ok(projects)
}

/// Whether the user's `[trust] projects` lists `folder` (compared with symlinks resolved).
fn trusted(folder: &Path, projects: &[PathBuf], env: &dyn Fn(&str) -> Option<String>) -> bool {
    let Ok(folder) = folder.canonicalize() else {
        return false;
    };
    projects.iter().any(|p| {
        let p = match p.strip_prefix("~") {
            Ok(rest) => match env("HOME").filter(|h| !h.is_empty()) {
                Some(home) => PathBuf::from(home).join(rest),
                None => return false,
            },
            Err(_) => p.clone(),
        };
        p.canonicalize().is_ok_and(|p| p == folder)
    })
}

/// The configuration in force when `project` (read from `file`, whose parsed text is
/// `table`) was found in the working folder: the project's own tables, with the user-only
/// ones taken from `user` (the user's file, or the defaults), unless the user trusts the
/// project's folder. Also what the project set that was left out.
pub fn confine(
    file: &Path,
    table: &toml::Table,
    project: Loaded,
    user: &Loaded,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Loaded, Option<Ignored>) {
    let folder = file.parent().unwrap_or(Path::new("."));
    // Self-protection may only be tightened by a project's file, trusted or not: the
    // agent being braked can write that file.
    let mut project = project;
    let floor = user.engine.breaker.self_protection();
    let loosened = project.engine.breaker.self_protection() < floor;
    if loosened {
        project.engine.breaker.set_self_protection(floor);
    }
    if trusted(folder, &user.trust, env) {
        let ignored = loosened.then(|| Ignored {
            file: file.to_path_buf(),
            keys: vec!["breaker.self_protection".into()],
        });
        return (
            Loaded {
                trust: user.trust.clone(),
                ..project
            },
            ignored,
        );
    }
    let mut keys: Vec<String> = USER_ONLY
        .iter()
        .filter_map(|t| table.get(*t).map(|v| (t, v)))
        .flat_map(|(t, v)| match v.as_table() {
            Some(inner) if !inner.is_empty() => {
                inner.keys().map(|k| format!("{t}.{k}")).collect::<Vec<_>>()
            }
            _ => vec![format!("[{t}]")],
        })
        .collect();
    if loosened {
        keys.push("breaker.self_protection".into());
    }
    let confined = Loaded {
        store: user.store.clone(),
        telemetry: user.telemetry.clone(),
        trust: user.trust.clone(),
        ..project
    };
    let ignored = (!keys.is_empty()).then(|| Ignored {
        file: file.to_path_buf(),
        keys,
    });
    (confined, ignored)
}
