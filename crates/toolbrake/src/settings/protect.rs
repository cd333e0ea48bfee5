//! What self-protection protects (docs/decisions.md, "Self-protection"): the core
//! recognises a call that would lift or edit toolbrake itself, given as data the files and
//! keys toolbrake keeps; this finds them for the process that judges (the state file, the
//! configuration files, the Redis key prefix, the binary's own path).

use super::{user_file, Settings, StoreKind};
use std::path::{Path, PathBuf};
use toolbrake_core::breaker::self_guard::Protected;

/// The variables hosts set for the commands their agents run (Claude Code's Bash tool,
/// Codex's sandbox, Gemini CLI's and Qwen Code's shell, Cursor's agent): `sessions reset`
/// and `feedback` note in the session's history that they ran inside an agent's
/// environment when one is set.
pub const AGENT_VARIABLES: &[&str] = &[
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CODEX_SANDBOX",
    "CODEX_SANDBOX_NETWORK_DISABLED",
    "GEMINI_CLI",
    "QWEN_CODE",
    "CURSOR_AGENT",
];

/// The first of [`AGENT_VARIABLES`] set (and not empty) in `env`.
pub fn agent_environment(env: &dyn Fn(&str) -> Option<String>) -> Option<&'static str> {
    AGENT_VARIABLES
        .iter()
        .copied()
        .find(|v| env(v).is_some_and(|x| !x.is_empty()))
}

/// Variables a command may name toolbrake's files by.
const VARS: &[&str] = &[
    "HOME",
    "XDG_STATE_HOME",
    "XDG_CONFIG_HOME",
    "TOOLBRAKE_STATE",
    "TOOLBRAKE_CONFIG",
];

/// What the running process protects, for `settings` loaded in `cwd` (`default` is the
/// store kind the adapter uses when none is configured).
pub fn protected(
    settings: &Settings,
    default: StoreKind,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> Protected {
    let mut files: Vec<PathBuf> = Vec::new();
    let kind = settings.store.kind.unwrap_or(default);
    if kind == StoreKind::Sqlite {
        files.push(settings.store.sqlite_path(env));
    }
    if let super::Source::File(p) = &settings.source {
        files.push(p.clone());
    }
    files.extend(user_file(env));
    files.push(cwd.join("toolbrake.toml"));
    if let Some(p) = env("TOOLBRAKE_CONFIG").filter(|p| !p.is_empty()) {
        files.push(PathBuf::from(p));
    }
    let mut out: Vec<String> = Vec::new();
    for f in files {
        let f = if f.is_relative() { cwd.join(f) } else { f };
        // The path as written and as the file system resolves it (a symlinked home).
        let real = f
            .parent()
            .and_then(|d| d.canonicalize().ok())
            .and_then(|d| f.file_name().map(|n| d.join(n)));
        for p in std::iter::once(f).chain(real) {
            let s = p.to_string_lossy().into_owned();
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    let binaries = std::env::current_exe()
        .ok()
        .into_iter()
        .flat_map(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            [p.to_string_lossy().into_owned(), name]
        })
        .filter(|s| !s.is_empty())
        .collect();
    Protected {
        files: out,
        redis_prefix: (kind == StoreKind::Redis).then(|| settings.store.key_prefix.clone()),
        binaries,
        vars: VARS
            .iter()
            .filter_map(|v| env(v).filter(|x| !x.is_empty()).map(|x| (v.to_string(), x)))
            .collect(),
    }
}
