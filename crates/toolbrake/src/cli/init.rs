//! `toolbrake init`: the hooks into the hosts' settings (Cline's hook files), and
//! toolbrake's plugin (the Node package) into opencode's and Kilo Code's configuration.

use super::CliError;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolbrake::settings;
use toolbrake_hooks::{init as hooks_init, Dialect};

fn home() -> Result<PathBuf, CliError> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| "HOME is not set; use --project or set HOME".into())
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Which settings file `init` edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's settings.
    User,
    /// The project's shared (committed) settings.
    Project,
    /// The project's personal settings (Claude Code's `settings.local.json`).
    Local,
}

/// The project a `--project` or `--local` install is for, found as the host finds it: the
/// nearest folder, from the working one up, holding the host's own folder (`.claude`,
/// `.codex`, `.gemini`; the user's, in the home folder, does not count) or a git
/// repository's root; else the working folder. Absolute.
fn project_root(dialect: Dialect) -> Result<PathBuf, CliError> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the working folder: {e}"))?;
    let own = dialect.place().folder();
    Ok(project_root_marked(&cwd, |d| d.join(own).is_dir()))
}

/// The nearest folder from `cwd` up that is a git repository's root or that `marked`
/// (the host's own folder or file; one in the home folder does not count: that is the
/// user's), else `cwd`.
fn project_root_marked(cwd: &Path, marked: impl Fn(&Path) -> bool) -> PathBuf {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .and_then(|h| std::fs::canonicalize(h).ok());
    let found = cwd.ancestors().find(|d| {
        let is_home = home
            .as_deref()
            .is_some_and(|h| std::fs::canonicalize(d).is_ok_and(|c| c == h));
        d.join(".git").exists() || (!is_home && marked(d))
    });
    found.unwrap_or(cwd).to_path_buf()
}

/// The settings file `init` edits (absolute).
fn settings_file(dialect: Dialect, scope: Scope) -> Result<PathBuf, CliError> {
    let file = settings_file_named(dialect, scope)?;
    Ok(std::path::absolute(&file).unwrap_or(file))
}

fn settings_file_named(dialect: Dialect, scope: Scope) -> Result<PathBuf, CliError> {
    let place = dialect.place();
    Ok(match (scope, place.local) {
        (Scope::Local, None) => {
            return Err(format!("--local is for Claude Code (settings.local.json); {} has no personal project file: use --project or the default user settings", place.title).into())
        }
        (Scope::Local, Some(file)) => project_root(dialect)?.join(file),
        (Scope::Project, _) => project_root(dialect)?.join(place.project),
        (Scope::User, _) => match place.user_env.and_then(|(var, file)| env_dir(var).map(|d| d.join(file))) {
            Some(file) => file,
            None => home()?.join(place.user),
        },
    })
}

/// Whether `toolbrake` on `PATH` is this very program: then the hook command can be the
/// bare name, which stays right for teammates and after reinstalls. Not when a launcher put
/// this program's folder on `PATH` for the one run (`npx toolbrake init claude`: npm's
/// `node_modules/.bin`; `uvx` or `uv run`, which set `UV`): a host running the hook later
/// would not find the bare name, so the hook names the full path.
fn on_path_is_self(this: &Path) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    if std::env::var_os("UV").is_some() {
        return false;
    }
    std::env::split_paths(&path)
        .filter(|d| !d.ends_with("node_modules/.bin"))
        .map(|d| d.join("toolbrake"))
        .find(|c| c.is_file())
        .and_then(|c| c.canonicalize().ok())
        .is_some_and(|c| c == this)
}

/// The command the hosts run: this program (by name when `PATH` finds it, else its path
/// as one shell word), `hook`, the dialect.
fn hook_command(dialect: Dialect) -> Result<String, CliError> {
    let this = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok());
    let exe = match &this {
        Some(p) if on_path_is_self(p) => "toolbrake".to_string(),
        Some(p) => p
            .to_str()
            .ok_or_else(|| {
                format!(
                    "this program's path {} is not UTF-8, which the hosts' settings files cannot hold; install it elsewhere",
                    p.display()
                )
            })?
            .to_string(),
        None => "toolbrake".to_string(),
    };
    Ok(hooks_init::command_for(&exe, dialect)?)
}

/// The largest settings file `init` reads (a host's settings are a few kilobytes).
const MAX_SETTINGS_BYTES: u64 = 4 << 20;

pub fn init(
    config: Option<&Path>,
    dialect: Dialect,
    scope: Scope,
    remove: bool,
) -> Result<ExitCode, CliError> {
    if dialect == Dialect::Cline {
        return init_cline(config, scope, remove);
    }
    let named = settings_file(dialect, scope)?;
    if !remove {
        // Hooks over a broken configuration would run unchecked: say so now, not later.
        if let Err(e) = settings::load(config) {
            return Err(format!(
                "not installing: the configuration is invalid. {e} Fix it (see `toolbrake config check`) and run init again; nothing was changed."
            )
            .into());
        }
    }
    if dialect == Dialect::Copilot {
        retire_former_copilot_file(&named)?;
    }
    let command = hook_command(dialect)?;
    let strip = |s: &mut serde_json::Value| hooks_init::remove(s, dialect);
    let install = |s: &mut serde_json::Value| hooks_init::install(s, dialect, &command);
    let done = edit_json(
        &named,
        "hooks",
        (!remove).then_some(command.as_str()),
        &strip,
        (!remove).then_some(&install as &Edit<'_>),
    )?;
    if scope == Scope::Local && !remove && !git_ignores(&named) {
        outln!(
            "Note: git does not ignore {}: Claude Code ignores only the personal settings files it creates itself. Add `.claude/settings.local.json` to the project's .gitignore so it is not committed.",
            named.display()
        );
    }
    Ok(done)
}

/// Whether the git repository holding `path` ignores it (true outside a repository, or
/// without git: nothing would commit it).
fn git_ignores(path: &Path) -> bool {
    let Some(dir) = path.parent() else {
        return true;
    };
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["check-ignore", "-q", "--"])
        .arg(path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    // 0: ignored; 1: not ignored; 128: not a repository (or another failure).
    !matches!(status.map(|s| s.code()), Ok(Some(1)))
}

/// A change `init` makes to a settings document (what it installed or removed).
type Edit<'a> = dyn Fn(&mut serde_json::Value) -> Result<hooks_init::Changes, String> + 'a;

/// Whether a settings document holds nothing of the user's: no key, or only the format
/// `version` Copilot's and Cursor's hook files carry.
fn holds_nothing(v: &serde_json::Value) -> bool {
    v.as_object()
        .is_some_and(|o| o.keys().all(|k| k == "version"))
}

/// GitHub Copilot CLI reads every file in its hooks folder; a build from before the rename
/// wrote its hooks into one named after the project's former name, beside ours. Its hooks
/// go (install and `--remove` alike: their program is gone), and the file too when nothing
/// else is left in it.
fn retire_former_copilot_file(ours: &Path) -> Result<(), CliError> {
    let former = ours.with_file_name(format!("{}.json", toolbrake_hooks::former::NAME));
    // Only a regular file (or a link to one) is read, and a settings file's size: a FIFO
    // or a device a cloned repository planted at that name (`init copilot --project`)
    // would hang `init` or fill its memory, and no build of ours ever wrote one.
    let Ok(Some(text)) = toolbrake::files::read_regular(&former, MAX_SETTINGS_BYTES) else {
        return Ok(());
    };
    let Ok(mut settings) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(()); // not a hooks file Copilot could read either: not ours to judge
    };
    if hooks_init::remove(&mut settings, Dialect::Copilot).map_or(true, |c| c.is_empty()) {
        return Ok(());
    }
    let left = settings
        .as_object()
        .is_some_and(|o| o.keys().any(|k| k != "version"));
    if left {
        edit_json(
            &former,
            "hooks",
            None,
            &|s| hooks_init::remove(s, Dialect::Copilot),
            None,
        )?;
    } else {
        std::fs::remove_file(&former)
            .map_err(|e| format!("cannot remove {}: {e}", former.display()))?;
        outln!(
            "Removed {}: hooks an earlier build installed under the project's former name.",
            former.display()
        );
    }
    Ok(())
}

/// Reads a host's JSON settings file (through a symlink, to its target), applies `install`
/// (or, without one, `strip`, which removes what is toolbrake's), and, when it changed
/// something, writes it back in the user's key order after a first backup of the user's
/// own file; prints what it did. A file that holds nothing of the user's is never backed
/// up, and is deleted when what is toolbrake's is removed from it (`init` made it). `what`
/// names what is installed; `runs`, the command it runs.
fn edit_json(
    named: &Path,
    what: &str,
    runs: Option<&str>,
    strip: &Edit<'_>,
    install: Option<&Edit<'_>>,
) -> Result<ExitCode, CliError> {
    let remove = install.is_none();
    // A symlinked settings file (dotfiles repositories do this) is updated where it points.
    let path = match std::fs::symlink_metadata(named) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(named).map_err(|e| {
            format!(
                "{} is a symlink that does not resolve: {e}",
                named.display()
            )
        })?,
        _ => named.to_path_buf(),
    };
    // Only a regular file, and a settings file's size: a link to /dev/zero or a FIFO a
    // cloned repository planted (`init --project`) is refused, never read for ever.
    let existing = toolbrake::files::read_regular(&path, MAX_SETTINGS_BYTES)
        .map_err(|e| format!("cannot read {}: {e}; nothing was changed", path.display()))?;
    let mut settings: serde_json::Value = match &existing {
        Some(text) if !text.trim().is_empty() => serde_json::from_str(text).map_err(|e| {
            format!(
                "{} is not valid JSON (line {}, column {}); fix it first, nothing was changed",
                path.display(),
                e.line(),
                e.column()
            )
        })?,
        _ => serde_json::json!({}),
    };
    // What of the file is the user's own: it without toolbrake's entries.
    let users_own = {
        let mut v = settings.clone();
        existing.is_some() && strip(&mut v).is_ok() && !holds_nothing(&v)
    };
    let changes = install.unwrap_or(strip)(&mut settings)
        .map_err(|e| format!("{}: {e}; nothing was changed", path.display()))?;
    if changes.is_empty() {
        outln!(
            "{}: already {} toolbrake's {what} — nothing to change.",
            path.display(),
            if remove { "without" } else { "has" },
        );
    } else {
        if existing.is_some() && toolbrake::files::is_read_only(&path) {
            return Err(format!(
                "{} is read-only: toolbrake does not replace a file you made read-only. Make it writable (chmod u+w) and run init again; nothing was changed.",
                path.display()
            )
            .into());
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        // The file keeps its mode (a private settings file stays private), and so does
        // its backup.
        let mode = toolbrake::files::mode_of(&path).unwrap_or(0o600);
        if remove && !users_own {
            std::fs::remove_file(&path)
                .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
            outln!(
                "Removed {}: toolbrake made it, and it held nothing else ({}).",
                path.display(),
                changes.events.join(", ")
            );
            return Ok(ExitCode::SUCCESS);
        }
        // The first backup is the user's own file: a later install or removal never
        // replaces it with a version toolbrake wrote, and a file that held only
        // toolbrake's entries is no one's to restore.
        if let Some(text) = existing.as_ref().filter(|_| users_own) {
            let backup = PathBuf::from(format!("{}.toolbrake-backup", path.display()));
            // (A link planted at its name is no backup: it is replaced, never followed.)
            if std::fs::symlink_metadata(&backup).is_ok_and(|m| m.file_type().is_file()) {
                outln!(
                    "Backup of the file before toolbrake first changed it, kept: {}",
                    backup.display()
                );
            } else {
                toolbrake::files::replace_own(&backup, text.as_bytes(), Some(mode))
                    .map_err(|e| format!("cannot write the backup {}: {e}", backup.display()))?;
                outln!("Backup of the previous file: {}", backup.display());
            }
        }
        let body = hooks_init::render(existing.as_deref(), &settings);
        toolbrake::files::replace(&path, body.as_bytes(), Some(mode))
            .map_err(|e| format!("cannot replace {}: {e}", path.display()))?;
        outln!(
            "{} toolbrake's {what} {} {} ({}).",
            if remove { "Removed" } else { "Installed" },
            if remove { "from" } else { "into" },
            path.display(),
            changes.events.join(", ")
        );
        // Only what changed is shown: the rest of the file is the user's own, and can hold
        // credentials (API keys under "env").
        if let Some(runs) = runs {
            outln!("Each runs: {runs}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The line that marks a Cline hook file as toolbrake's own.
const CLINE_MARK: &str = "# Written by `toolbrake init cline`";

fn is_our_cline_file(path: &Path) -> bool {
    cline_file_marked(path, CLINE_MARK)
}

/// A Cline hook file a build from before the rename wrote ([`toolbrake_hooks::former`]):
/// `init` rewrites it and `--remove` deletes it.
fn is_former_cline_file(path: &Path) -> bool {
    cline_file_marked(path, &toolbrake_hooks::former::cline_mark())
}

fn cline_file_marked(path: &Path, mark: &str) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
        && toolbrake::files::read_regular(path, MAX_SETTINGS_BYTES)
            .is_ok_and(|t| t.is_some_and(|t| t.lines().any(|l| l.starts_with(mark))))
}

/// `toolbrake init cline`: Cline runs hook *files* named by event from `~/.cline/hooks`
/// (`$CLINE_DIR/hooks`) or a workspace's `.clinerules/hooks`. Each of toolbrake's is a
/// small shell script running `toolbrake hook cline`, named `<Event>`, or `<Event>.sh`
/// when the user already has a hook of that name (Cline runs both). Files toolbrake did
/// not write are never changed; `--remove` deletes only toolbrake's.
fn init_cline(config: Option<&Path>, scope: Scope, remove: bool) -> Result<ExitCode, CliError> {
    let dir = settings_file(Dialect::Cline, scope)?;
    if !remove {
        if let Err(e) = settings::load(config) {
            return Err(format!(
                "not installing: the configuration is invalid. {e} Fix it (see `toolbrake config check`) and run init again; nothing was changed."
            )
            .into());
        }
    }
    let mut changed = Vec::new();
    if remove {
        for event in toolbrake_hooks::cline::EVENTS {
            for name in [event.to_string(), format!("{event}.sh")] {
                let path = dir.join(&name);
                if is_our_cline_file(&path) || is_former_cline_file(&path) {
                    std::fs::remove_file(&path)
                        .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
                    changed.push(name);
                }
            }
        }
        if changed.is_empty() {
            outln!(
                "{}: already without toolbrake's hooks — nothing to change.",
                dir.display()
            );
        } else {
            outln!(
                "Removed toolbrake's hooks from {} ({}).",
                dir.display(),
                changed.join(", ")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let command = hook_command(Dialect::Cline)?;
    let mut skipped = Vec::new();
    for event in toolbrake_hooks::cline::EVENTS {
        let plain = dir.join(event);
        let sh = dir.join(format!("{event}.sh"));
        let script = format!(
            "#!/bin/sh\n{CLINE_MARK}: Cline runs this file for its {event} hook; `toolbrake init cline --remove` deletes it.\nexec {command}\n"
        );
        let ours = [&plain, &sh].into_iter().find(|p| is_our_cline_file(p));
        // Ours as it would be written now: nothing to do. Ours running another program
        // (the binary moved): re-pointed in place.
        if let Some(p) = ours {
            if std::fs::read_to_string(p).is_ok_and(|t| t == script) {
                continue;
            }
        }
        let path = if let Some(p) = ours {
            p.clone()
        } else if is_former_cline_file(&plain) {
            plain
        } else if is_former_cline_file(&sh) {
            sh
        } else if std::fs::symlink_metadata(&plain).is_err() {
            plain
        } else if std::fs::symlink_metadata(&sh).is_err() {
            sh
        } else {
            skipped.push(event.to_string());
            continue;
        };
        toolbrake::files::replace_own(&path, script.as_bytes(), Some(0o755))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        changed.push(
            path.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        );
    }
    if changed.is_empty() && skipped.is_empty() {
        outln!(
            "{}: already has toolbrake's hooks — nothing to change.",
            dir.display()
        );
    } else if !changed.is_empty() {
        outln!(
            "Installed toolbrake's hooks into {} ({}).",
            dir.display(),
            changed.join(", ")
        );
    }
    if !skipped.is_empty() {
        return Err(format!(
            "{}: {} and {}.sh are both your own files, so toolbrake's hook for {} was not installed; rename one and run init again",
            dir.display(),
            skipped[0],
            skipped[0],
            skipped.join(", ")
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// The hosts that load toolbrake as a plugin (the Node package's `opencode.js`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginHost {
    /// opencode.
    Opencode,
    /// Kilo Code's CLI, an opencode fork.
    Kilo,
}

impl PluginHost {
    /// The configuration's name (`opencode`, `kilo`): the folder under
    /// `$XDG_CONFIG_HOME` and the file's stem.
    fn name(self) -> &'static str {
        match self {
            PluginHost::Opencode => "opencode",
            PluginHost::Kilo => "kilo",
        }
    }
}

/// `NAME.json`, or `NAME.jsonc` when only that one exists, in `dir`.
fn json_or_jsonc(dir: &Path, name: &str) -> PathBuf {
    let json = dir.join(format!("{name}.json"));
    let jsonc = dir.join(format!("{name}.jsonc"));
    if !json.exists() && jsonc.exists() {
        jsonc
    } else {
        json
    }
}

/// The configuration file `init opencode|kilo` edits (absolute): the user's,
/// `$XDG_CONFIG_HOME/NAME/NAME.json`, or the project's, `NAME.json` at its root (the
/// nearest folder up holding one, a `.NAME` folder or a git repository's root).
fn plugin_config_file(host: PluginHost, scope: Scope) -> Result<PathBuf, CliError> {
    let name = host.name();
    let file = match scope {
        Scope::Local => {
            return Err(format!("--local is for Claude Code (settings.local.json); {name} has no personal project file: use --project or the default user settings").into())
        }
        Scope::User => {
            let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
                Some(d) => PathBuf::from(d),
                None => home()?.join(".config"),
            };
            json_or_jsonc(&config.join(name), name)
        }
        Scope::Project => {
            let cwd = std::env::current_dir()
                .map_err(|e| format!("cannot read the working folder: {e}"))?;
            let root = project_root_marked(&cwd, |d| {
                d.join(format!(".{name}")).is_dir()
                    || d.join(format!("{name}.json")).is_file()
                    || d.join(format!("{name}.jsonc")).is_file()
            });
            json_or_jsonc(&root, name)
        }
    };
    Ok(std::path::absolute(&file).unwrap_or(file))
}

/// The folder of toolbrake's Node package a plugin spec names (`file://` or a path; the
/// folder, or a file in it), if it is one: its `package.json` names `toolbrake` and it has
/// `opencode.js`.
fn node_package(spec: &str) -> Option<PathBuf> {
    node_package_named(spec, "toolbrake")
}

/// The folder of a Node package called `name` with `opencode.js` that a plugin spec names.
fn node_package_named(spec: &str, name: &str) -> Option<PathBuf> {
    let path = Path::new(spec.strip_prefix("file://").unwrap_or(spec));
    let dir = if path.is_file() { path.parent()? } else { path };
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).ok()?).ok()?;
    (manifest["name"] == name && dir.join("opencode.js").is_file()).then(|| dir.to_path_buf())
}

/// Whether a plugin entry is toolbrake's: its Node package, or a path that was one
/// (`…/bindings/node`, `…/node_modules/toolbrake`, with or without `/opencode.js`); or the
/// package of a build from before the rename ([`toolbrake_hooks::former`]), which `init`
/// re-points and `--remove` removes.
fn is_our_plugin(base: &Path, spec: &str) -> bool {
    let former = toolbrake_hooks::former::NAME;
    // A relative spec names a folder relative to the configuration file, as opencode
    // resolves it.
    let resolved = if spec.starts_with('.') {
        base.join(spec).display().to_string()
    } else {
        spec.to_string()
    };
    if node_package(&resolved).is_some() || node_package_named(&resolved, former).is_some() {
        return true;
    }
    let path = spec.strip_prefix("file://").unwrap_or(spec);
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix("/opencode.js").unwrap_or(path);
    path.ends_with("/bindings/node")
        || path.ends_with("/node_modules/toolbrake")
        || path.ends_with(&format!("/node_modules/{former}"))
}

/// `toolbrake init opencode|kilo`: names the Node package's folder in the host's `plugin`
/// list (or removes it).
pub fn init_plugin(
    host: PluginHost,
    scope: Scope,
    remove: bool,
    package: Option<&Path>,
) -> Result<ExitCode, CliError> {
    let file = plugin_config_file(host, scope)?;
    let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let ours = |spec: &str| is_our_plugin(&base, spec);
    if remove {
        return edit_json(
            &file,
            "plugin",
            None,
            &|s| hooks_init::plugin::remove(s, ours),
            None,
        );
    }
    let name = host.name();
    let Some(package) = package else {
        return Err(format!(
            "{name} loads toolbrake as a plugin from its Node package: build it (cd bindings/node && npm ci && npm run build) and name its folder, `toolbrake init {name} --plugin /path/to/toolbrake/bindings/node`; nothing was changed"
        )
        .into());
    };
    let dir = std::fs::canonicalize(package)
        .ok()
        .and_then(|p| node_package(&p.display().to_string()))
        .ok_or_else(|| {
            format!(
                "{} is not toolbrake's Node package (a folder whose package.json names `toolbrake`, with opencode.js); nothing was changed",
                package.display()
            )
        })?;
    let built = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".node"))
        })
        .unwrap_or(false);
    if !built {
        return Err(format!(
            "{} has no native addon yet: run `npm ci && npm run build` there first; nothing was changed",
            dir.display()
        )
        .into());
    }
    // The user's own file names the folder as it is on this machine. The project's file is
    // committed and read on every teammate's machine: it names the folder relative to
    // itself (opencode resolves a spec starting with `.` against the configuration file's
    // folder), which resolves wherever the project is checked out.
    let spec = match scope {
        Scope::Project => relative_spec(&base, &dir),
        _ => dir.display().to_string(),
    };
    let done = edit_json(
        &file,
        "plugin",
        Some(&spec),
        &|s| hooks_init::plugin::remove(s, ours),
        Some(&|s| hooks_init::plugin::install(s, &spec, ours)),
    )?;
    if scope == Scope::Project {
        outln!(
            "{} names the plugin relative to the project: every teammate who runs {name} here needs toolbrake's Node package, built, at {spec} (docs/opencode.md says how).{}",
            file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            if spec.starts_with("..") {
                " That folder is outside the project: teammates need the same layout, or install the package into the project (npm install /path/to/toolbrake-VERSION.tgz) and run init again."
            } else {
                ""
            }
        );
    }
    Ok(done)
}

/// `to` as a path relative to the folder `from` (both absolute), as a plugin spec:
/// `./…` inside it, `../…` outside. Computed on the paths' components, as opencode joins
/// them (`path.resolve(folder, spec)`), never through the file system.
fn relative_spec(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec![String::from(".")];
    if common < from.len() {
        parts = vec![String::from(".."); from.len() - common];
    }
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}
