//! Installing toolbrake's hooks into a host's settings (`toolbrake init`): a pure merge
//! over the settings JSON, idempotent, leaving every other hook and setting as it was. What
//! each host needs is its own module's (`Install`: its events and how its file holds a
//! handler; [`Place`]: where that file is); this file applies it. Reading, backing up and
//! writing the file is the caller's job.

use crate::Dialect;
use serde_json::{json, Map, Value};

/// An event `init` installs a handler for: (event, matcher, timeout in the host's unit:
/// seconds, milliseconds for Gemini CLI).
pub(crate) type Event = (&'static str, Option<&'static str>, Option<u64>);

/// What `init` writes into a host's settings file (each host's [`crate::host::Host::install`]).
pub(crate) struct Install {
    /// Which events get a handler, in this order.
    pub(crate) events: &'static [Event],
    /// How the file holds a handler.
    pub(crate) layout: Layout,
    /// Whether the file's top level is the events object itself (Factory Droid's
    /// `hooks.json`), rather than a settings object holding it under `"hooks"`.
    pub(crate) events_at_root: bool,
    /// The `name` each handler carries, where the host shows one (Gemini CLI).
    pub(crate) handler_name: Option<&'static str>,
    /// A setting that must be on for the host to run hooks at all, as (object, key):
    /// Gemini CLI's `hooksConfig.enabled`.
    pub(crate) switch: Option<(&'static str, &'static str)>,
    /// The hooks are executable files, not settings (Cline's; `toolbrake init cline`
    /// writes them).
    pub(crate) hook_files: bool,
}

impl Install {
    /// Claude Code's groups under `"hooks"`, no events: what a host changes from.
    pub(crate) const GROUPS: Install = Install {
        events: &[],
        layout: Layout::Groups,
        events_at_root: false,
        handler_name: None,
        switch: None,
        hook_files: false,
    };
}

/// Where `init` puts a host's hooks: paths relative to the project's root or the user's
/// home. Finding those folders (the working folder, `HOME`, the environment) is the
/// caller's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// The host's name, as its users know it (`Claude Code`).
    pub title: &'static str,
    /// The project's shared file (or Cline's folder of hook files); its first component is
    /// the host's own folder, which marks a project's root (`.claude`).
    pub project: &'static str,
    /// The project's personal file (Claude Code's `settings.local.json`), for the hosts that
    /// have one.
    pub local: Option<&'static str>,
    /// The user's file, under the home folder.
    pub user: &'static str,
    /// The environment variable naming the user's folder for this host, and the file under
    /// it, used instead of [`Place::user`] when it is set (`CODEX_HOME`).
    pub user_env: Option<(&'static str, &'static str)>,
}

impl Place {
    /// A host whose project and user files are the same path (`.qwen/settings.json`).
    pub(crate) const fn at(title: &'static str, path: &'static str) -> Place {
        Place {
            title,
            project: path,
            local: None,
            user: path,
            user_env: None,
        }
    }

    /// A host whose user file is elsewhere than its project file, and whose user folder an
    /// environment variable can name: `env` is (the variable, the file under it).
    pub(crate) const fn with_env(
        title: &'static str,
        project: &'static str,
        user: &'static str,
        env: (&'static str, &'static str),
    ) -> Place {
        Place {
            title,
            project,
            local: None,
            user,
            user_env: Some(env),
        }
    }

    /// The host's own folder in a project (`.claude`), which marks the project's root.
    pub fn folder(&self) -> &'static str {
        let project: &'static str = self.project;
        project.split('/').next().unwrap_or(project)
    }
}

/// How a host's file holds a handler.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Claude Code's groups: `{"matcher", "hooks": [{"type": "command", "command",
    /// "timeout"}]}`.
    Groups,
    /// GitHub Copilot CLI: `{"type": "command", "bash", "timeoutSec"}` straight in the
    /// event's list, the event on the command line.
    Copilot,
    /// Cursor: `{"command"}` straight in the event's list.
    Cursor,
}

fn layout(dialect: Dialect) -> Layout {
    dialect.host().install().layout
}

/// The command of a handler entry, whichever key its host uses.
fn entry_command(h: &Value) -> Option<&str> {
    h.get("command")
        .or_else(|| h.get("bash"))
        .and_then(Value::as_str)
}

/// The handler command `init` writes: the program's path as one POSIX shell word (every
/// host runs a hook command through `sh -c` or `bash -c`, and Cline's hook files through
/// `sh`), then `hook DIALECT`. A path with quotes, `$(…)`, backticks, spaces or any other
/// character a shell reads is single-quoted; a plain one stays bare. `Err` for a path
/// holding a NUL byte, which no shell word can carry.
pub fn command_for(program: &str, dialect: Dialect) -> Result<String, String> {
    let word = shlex::try_quote(program)
        .map_err(|_| format!("the program's path {program:?} holds a NUL byte"))?;
    Ok(format!("{word} hook {}", dialect.as_str()))
}

/// Whether a handler command is one of ours: exactly what `init` writes (any path to a
/// `toolbrake` binary, for this dialect). A user's command that merely mentions it
/// (`echo 'toolbrake hook claude …'`, `audit.sh && toolbrake hook claude`) is not.
pub fn is_ours(command: &str, dialect: Dialect) -> bool {
    program_of(command, dialect, "toolbrake").is_some()
}

/// Whether a handler command is one a build from before the rename installed (any path to
/// a binary of the project's former name, for this dialect): `install` replaces it and
/// `remove` removes it ([`crate::former`]).
pub fn is_former(command: &str, dialect: Dialect) -> bool {
    runs(command, dialect, crate::former::NAME)
}

/// Whether `command` runs `<path>/PROGRAM… hook DIALECT`.
fn runs(command: &str, dialect: Dialect, program: &str) -> bool {
    program_of(command, dialect, program).is_some()
}

/// The program's path when `command`, read as the shell reads it, is exactly
/// `PATH hook DIALECT` (GitHub Copilot CLI's with its event after) and PATH names a file
/// called `name` (or `name.exe`): a command as `init` writes it, never one that only
/// mentions it.
fn program_of(command: &str, dialect: Dialect, name: &str) -> Option<String> {
    let mut words = shlex::split(command)?;
    let n = words.len();
    let shape = n == 3 || (n == 4 && layout(dialect) == Layout::Copilot);
    if !shape || words[1] != "hook" || words[2] != dialect.as_str() {
        return None;
    }
    let prog = words.swap_remove(0);
    let base = prog.rsplit(['/', '\\']).next().unwrap_or(&prog);
    (base == name || base.strip_suffix(".exe") == Some(name)).then_some(prog)
}

/// What an install or removal changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Events a handler was added to (or removed from).
    pub events: Vec<String>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

fn hooks_obj(settings: &mut Value, dialect: Dialect) -> Result<&mut Map<String, Value>, String> {
    let root = settings
        .as_object_mut()
        .ok_or("the settings file does not hold a JSON object")?;
    if dialect.host().install().events_at_root {
        return Ok(root);
    }
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    hooks
        .as_object_mut()
        .ok_or_else(|| "\"hooks\" in the settings file is not an object".to_string())
}

fn group_has_ours(group: &Value, dialect: Dialect) -> bool {
    if layout(dialect) != Layout::Groups {
        return entry_command(group).is_some_and(|c| is_ours(c, dialect));
    }
    group
        .get("hooks")
        .and_then(Value::as_array)
        .is_some_and(|hs| {
            hs.iter()
                .any(|h| entry_command(h).is_some_and(|c| is_ours(c, dialect)))
        })
}

/// Adds toolbrake's handler (running `command`, as [`command_for`] makes it) to every
/// event it needs, once. A handler of ours that runs another program (the binary moved or
/// was reinstalled elsewhere) is re-pointed, and those a build from before the rename
/// installed ([`is_former`]) are replaced: their program is gone.
pub fn install(settings: &mut Value, dialect: Dialect, command: &str) -> Result<Changes, String> {
    let install = dialect.host().install();
    if install.hook_files {
        return Err("Cline's hooks are executable files, not settings".into());
    }
    let wanted = program_of(command, dialect, "toolbrake");
    let mut changes = remove_where(settings, dialect, |c, d| {
        is_former(c, d) || program_of(c, d, "toolbrake").is_some_and(|p| Some(p) != wanted)
    })?;
    if matches!(install.layout, Layout::Copilot | Layout::Cursor) {
        // Both hosts' hook files carry a format version.
        let root = settings
            .as_object_mut()
            .ok_or("the settings file does not hold a JSON object")?;
        if !root.contains_key("version") {
            root.insert("version".into(), json!(1));
        }
    }
    if let Some((object, key)) = install.switch {
        let root = settings
            .as_object_mut()
            .ok_or("the settings file does not hold a JSON object")?;
        let cfg = root.entry(object).or_insert_with(|| json!({}));
        let cfg = cfg
            .as_object_mut()
            .ok_or_else(|| format!("\"{object}\" in the settings file is not an object"))?;
        if cfg.get(key) != Some(&Value::Bool(true)) {
            cfg.insert(key.into(), Value::Bool(true));
            changes.events.push(format!("{object}.{key}"));
        }
    }
    let hooks = hooks_obj(settings, dialect)?;
    for (event, matcher, timeout) in install.events {
        let list = hooks.entry(*event).or_insert_with(|| json!([]));
        let arr = list
            .as_array_mut()
            .ok_or_else(|| format!("\"hooks.{event}\" in the settings file is not an array"))?;
        if arr.iter().any(|g| group_has_ours(g, dialect)) {
            continue;
        }
        let entry = match install.layout {
            Layout::Copilot => {
                json!({"type": "command", "bash": format!("{command} {event}"), "timeoutSec": timeout})
            }
            Layout::Cursor => json!({ "command": command }),
            Layout::Groups => {
                let mut handler = json!({"type": "command", "command": command});
                if let Some(name) = install.handler_name {
                    handler["name"] = json!(name);
                }
                if let Some(t) = timeout {
                    handler["timeout"] = json!(t);
                }
                let mut group = json!({"hooks": [handler]});
                if let Some(m) = matcher {
                    group["matcher"] = json!(m);
                }
                group
            }
        };
        arr.push(entry);
        if !changes.events.iter().any(|e| e == event) {
            changes.events.push(event.to_string());
        }
    }
    Ok(changes)
}

/// Removes every toolbrake handler of this dialect, and those a build from before the
/// rename installed ([`is_former`]); groups and events left empty go too.
pub fn remove(settings: &mut Value, dialect: Dialect) -> Result<Changes, String> {
    remove_where(settings, dialect, |c, d| is_ours(c, d) || is_former(c, d))
}

/// Removes the handlers of this dialect whose command `matches`; groups and events left
/// empty go too.
fn remove_where(
    settings: &mut Value,
    dialect: Dialect,
    matches: impl Fn(&str, Dialect) -> bool,
) -> Result<Changes, String> {
    let mut changes = Changes::default();
    let Some(root) = settings.as_object_mut() else {
        return Err("the settings file does not hold a JSON object".into());
    };
    let at_root = dialect.host().install().events_at_root;
    let hooks = if at_root {
        root
    } else {
        match root.get_mut("hooks").and_then(Value::as_object_mut) {
            Some(h) => h,
            None => return Ok(changes),
        }
    };
    let names: Vec<String> = hooks.keys().cloned().collect();
    for event in names {
        let Some(arr) = hooks.get_mut(&event).and_then(Value::as_array_mut) else {
            continue;
        };
        let before = arr.len();
        let mut touched = false;
        if layout(dialect) != Layout::Groups {
            arr.retain(|h| !entry_command(h).is_some_and(|c| matches(c, dialect)));
        }
        for group in arr.iter_mut().filter(|_| layout(dialect) == Layout::Groups) {
            if let Some(hs) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                let n = hs.len();
                hs.retain(|h| !entry_command(h).is_some_and(|c| matches(c, dialect)));
                touched |= hs.len() != n;
            }
        }
        arr.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|hs| !hs.is_empty())
        });
        if touched || arr.len() != before {
            changes.events.push(event.clone());
        }
        if arr.is_empty() {
            hooks.remove(&event);
        }
    }
    if let Some(root) = settings.as_object_mut().filter(|_| !at_root) {
        if root
            .get("hooks")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            root.remove("hooks");
        }
    }
    Ok(changes)
}

/// opencode and Kilo Code (an opencode fork) load toolbrake as a plugin, named in the `plugin`
/// list of their configuration (`opencode.json`, `kilo.json`): an entry is a module path or
/// package (a string), or `[spec, options]`.
pub mod plugin {
    use super::Changes;
    use serde_json::{json, Value};

    fn spec_of(entry: &Value) -> Option<&str> {
        match entry {
            Value::String(s) => Some(s),
            Value::Array(pair) => pair.first().and_then(Value::as_str),
            _ => None,
        }
    }

    fn list(settings: &mut Value) -> Result<&mut Vec<Value>, String> {
        let root = settings
            .as_object_mut()
            .ok_or("the configuration file does not hold a JSON object")?;
        root.entry("plugin")
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .ok_or_else(|| "\"plugin\" in the configuration file is not an array".to_string())
    }

    /// Adds toolbrake's plugin (`spec`, the Node package's folder) once. An entry of ours
    /// (`is_ours` of its spec) naming another path is pointed at `spec`, its options kept.
    pub fn install(
        settings: &mut Value,
        spec: &str,
        is_ours: impl Fn(&str) -> bool,
    ) -> Result<Changes, String> {
        let mut changes = Changes::default();
        let entries = list(settings)?;
        match entries
            .iter_mut()
            .find(|e| spec_of(e).is_some_and(&is_ours))
        {
            Some(e) if spec_of(e) == Some(spec) => {}
            Some(Value::Array(pair)) => {
                pair[0] = json!(spec);
                changes.events.push("plugin".into());
            }
            Some(e) => {
                *e = json!(spec);
                changes.events.push("plugin".into());
            }
            None => {
                entries.push(json!(spec));
                changes.events.push("plugin".into());
            }
        }
        Ok(changes)
    }

    /// Removes every entry of ours; a `plugin` list left empty goes too.
    pub fn remove(settings: &mut Value, is_ours: impl Fn(&str) -> bool) -> Result<Changes, String> {
        let mut changes = Changes::default();
        let Some(root) = settings.as_object_mut() else {
            return Err("the configuration file does not hold a JSON object".into());
        };
        let Some(entries) = root.get_mut("plugin") else {
            return Ok(changes);
        };
        let entries = entries
            .as_array_mut()
            .ok_or("\"plugin\" in the configuration file is not an array")?;
        let before = entries.len();
        entries.retain(|e| !spec_of(e).is_some_and(&is_ours));
        if entries.len() != before {
            changes.events.push("plugin".into());
        }
        if entries.is_empty() {
            root.remove("plugin");
        }
        Ok(changes)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn ours(spec: &str) -> bool {
            spec.trim_start_matches("file://")
                .trim_end_matches('/')
                .ends_with("bindings/node")
        }

        #[test]
        fn install_adds_once_repoints_a_moved_package_and_remove_undoes_it() {
            let original = json!({"model": "mock/m", "plugin": ["opencode-wakatime"]});
            let mut s = original.clone();
            let c = install(&mut s, "/opt/toolbrake/bindings/node", ours).unwrap();
            assert_eq!(c.events, ["plugin"]);
            assert_eq!(
                s["plugin"],
                json!(["opencode-wakatime", "/opt/toolbrake/bindings/node"])
            );
            let again = s.clone();
            assert!(install(&mut s, "/opt/toolbrake/bindings/node", ours)
                .unwrap()
                .is_empty());
            assert_eq!(s, again);
            // Options the user gave the plugin stay when the package moves.
            let mut t = json!({"plugin": [["/old/bindings/node", {"failClosed": true}]]});
            install(&mut t, "/new/bindings/node", ours).unwrap();
            assert_eq!(
                t["plugin"],
                json!([["/new/bindings/node", {"failClosed": true}]])
            );
            assert_eq!(remove(&mut s, ours).unwrap().events, ["plugin"]);
            assert_eq!(s, original);
            let mut u = json!({"plugin": ["/a/bindings/node"], "theme": "x"});
            remove(&mut u, ours).unwrap();
            assert_eq!(u, json!({"theme": "x"}), "an emptied list goes");
            assert!(remove(&mut u, ours).unwrap().is_empty());
        }

        #[test]
        fn files_that_are_not_a_configuration_are_refused() {
            assert!(install(&mut json!([]), "/x/bindings/node", ours).is_err());
            assert!(install(&mut json!({"plugin": {}}), "/x/bindings/node", ours).is_err());
            assert!(remove(&mut json!({"plugin": "x"}), ours).is_err());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_merges_is_idempotent_and_remove_undoes_it() {
        let original = json!({
            "model": "opus",
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-guard"}]}]}
        });
        let mut s = original.clone();
        let c = install(
            &mut s,
            Dialect::Claude,
            "/usr/local/bin/toolbrake hook claude",
        )
        .unwrap();
        assert_eq!(c.events.len(), 8);
        assert_eq!(
            s["hooks"]["PreToolUse"].as_array().unwrap().len(),
            2,
            "the user's own hook stays"
        );
        let again = s.clone();
        assert!(install(
            &mut s,
            Dialect::Claude,
            "/usr/local/bin/toolbrake hook claude"
        )
        .unwrap()
        .is_empty());
        assert_eq!(s, again);
        // The binary moved: every handler is re-pointed, none doubled.
        let moved = install(&mut s, Dialect::Claude, "/other/path/toolbrake hook claude").unwrap();
        assert_eq!(moved.events.len(), 8);
        let text = s.to_string();
        assert!(!text.contains("/usr/local/bin/toolbrake"), "{text}");
        assert_eq!(text.matches("/other/path/toolbrake hook claude").count(), 8);
        assert!(text.contains("my-guard"));
        let r = remove(&mut s, Dialect::Claude).unwrap();
        assert_eq!(r.events.len(), 8);
        assert_eq!(s, original);
    }

    #[test]
    fn codex_gets_its_own_events_and_bad_files_are_refused() {
        let mut s = json!({});
        let c = install(&mut s, Dialect::Codex, "toolbrake hook codex").unwrap();
        assert!(!c.events.contains(&"PostToolUseFailure".to_string()));
        assert!(install(&mut json!([]), Dialect::Codex, "x").is_err());
        assert!(install(
            &mut json!({"hooks": {"PreToolUse": {}}}),
            Dialect::Codex,
            "x"
        )
        .is_err());
        assert!(
            is_ours("\"/opt/my tools/toolbrake\" hook codex", Dialect::Codex)
                || is_ours("/opt/toolbrake hook codex", Dialect::Codex)
        );
        assert!(!is_ours("toolbrake hook claude", Dialect::Codex));
    }
}

#[cfg(test)]
mod former_tests {
    use super::*;
    use crate::former::NAME;

    /// Settings as a build from before the rename left them: its handler beside the user's.
    fn with_former(dialect: Dialect) -> Value {
        let mut s = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-guard"}]}]}});
        install(&mut s, dialect, "/usr/local/bin/toolbrake hook x").unwrap();
        let text = serde_json::to_string(&s).unwrap().replace(
            "/usr/local/bin/toolbrake hook x",
            &format!("/home/me/.cargo/bin/{NAME} hook {}", dialect.as_str()),
        );
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn remove_takes_the_hooks_a_build_from_before_the_rename_installed() {
        for dialect in [
            Dialect::Claude,
            Dialect::Codex,
            Dialect::Gemini,
            Dialect::Qwen,
            Dialect::Factory,
            Dialect::Copilot,
            Dialect::Cursor,
        ] {
            let mut s = with_former(dialect);
            assert!(serde_json::to_string(&s).unwrap().contains(NAME));
            let r = remove(&mut s, dialect).unwrap();
            assert!(!r.is_empty(), "{dialect:?}");
            let text = serde_json::to_string(&s).unwrap();
            assert!(!text.contains(NAME), "{dialect:?}: {text}");
            assert!(
                text.contains("my-guard"),
                "{dialect:?}: the user's own hook stays"
            );
        }
    }

    #[test]
    fn install_replaces_the_former_hooks_with_its_own_once() {
        for dialect in [
            Dialect::Claude,
            Dialect::Codex,
            Dialect::Gemini,
            Dialect::Copilot,
            Dialect::Cursor,
        ] {
            let mut s = with_former(dialect);
            let command = format!("/opt/bin/toolbrake hook {}", dialect.as_str());
            let c = install(&mut s, dialect, &command).unwrap();
            assert!(!c.is_empty(), "{dialect:?}");
            let unique: std::collections::BTreeSet<&String> = c.events.iter().collect();
            assert_eq!(
                unique.len(),
                c.events.len(),
                "each event named once: {:?}",
                c.events
            );
            let text = serde_json::to_string(&s).unwrap();
            assert!(!text.contains(NAME), "{dialect:?}: {text}");
            assert!(
                text.contains("/opt/bin/toolbrake hook"),
                "{dialect:?}: {text}"
            );
            assert!(text.contains("my-guard"), "{dialect:?}");
            let again = s.clone();
            assert!(install(&mut s, dialect, &command).unwrap().is_empty());
            assert_eq!(s, again);
        }
        assert!(is_former(
            &format!("\"/opt/my tools/{NAME}\" hook claude"),
            Dialect::Claude
        ));
        assert!(!is_former("toolbrake hook claude", Dialect::Claude));
        assert!(!is_ours(&format!("{NAME} hook claude"), Dialect::Claude));
    }
}

#[cfg(test)]
mod gemini_tests {
    use super::*;

    #[test]
    fn gemini_install_enables_hooks_merges_and_is_idempotent() {
        let mut s = json!({"theme": "dark", "hooksConfig": {"enabled": false, "notifications": true},
            "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "./guard.sh"}]}]}});
        let c = install(&mut s, Dialect::Gemini, "toolbrake hook gemini").unwrap();
        assert!(c.events.contains(&"hooksConfig.enabled".to_string()));
        assert_eq!(
            s["hooksConfig"],
            json!({"enabled": true, "notifications": true})
        );
        assert_eq!(s["theme"], "dark");
        let before = &s["hooks"]["BeforeTool"];
        assert_eq!(
            before.as_array().unwrap().len(),
            2,
            "the user's own hook stays"
        );
        assert_eq!(before[1]["hooks"][0]["name"], "toolbrake");
        assert_eq!(before[1]["hooks"][0]["timeout"], 10_000, "milliseconds");
        for e in ["AfterTool", "BeforeAgent", "AfterAgent", "SessionEnd"] {
            assert!(s["hooks"][e].is_array(), "{e}");
        }
        let again = s.clone();
        assert!(install(&mut s, Dialect::Gemini, "toolbrake hook gemini")
            .unwrap()
            .is_empty());
        assert_eq!(s, again);
        remove(&mut s, Dialect::Gemini).unwrap();
        assert_eq!(s["hooks"]["BeforeTool"].as_array().unwrap().len(), 1);
        assert!(s["hooks"].get("AfterTool").is_none());
    }
}

/// How a settings text wrote its objects: each object's keys in the order written, at
/// every depth.
enum Shape {
    Object(Vec<(String, Shape)>),
    Array(Vec<Shape>),
    Leaf,
}

impl<'de> serde::Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
                Ok(Shape::Leaf)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
                Ok(Shape::Leaf)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape::Leaf)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape::Leaf)
            }
            fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
                Ok(Shape::Leaf)
            }
            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape::Leaf)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Shape, A::Error> {
                let mut items = Vec::new();
                while let Some(s) = a.next_element()? {
                    items.push(s);
                }
                Ok(Shape::Array(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Shape, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, s)) = a.next_entry::<String, Shape>()? {
                    keys.push((k, s));
                }
                Ok(Shape::Object(keys))
            }
        }
        d.deserialize_any(V)
    }
}

/// `value` written with the keys of every object in the order `shape` (the file before
/// the edit) had them; keys it did not have follow, in their own order.
struct InOrder<'a>(&'a Value, Option<&'a Shape>);

impl serde::Serialize for InOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match (self.0, self.1) {
            (Value::Object(m), shape) => {
                let written: &[(String, Shape)] = match shape {
                    Some(Shape::Object(keys)) => keys,
                    _ => &[],
                };
                let mut out = s.serialize_map(Some(m.len()))?;
                let mut done: Vec<&str> = Vec::new();
                for (k, sub) in written {
                    if let Some(v) = m.get(k).filter(|_| !done.contains(&k.as_str())) {
                        out.serialize_entry(k, &InOrder(v, Some(sub)))?;
                        done.push(k);
                    }
                }
                for (k, v) in m.iter().filter(|(k, _)| !done.contains(&k.as_str())) {
                    out.serialize_entry(k, &InOrder(v, None))?;
                }
                out.end()
            }
            (Value::Array(items), shape) => {
                let shapes: &[Shape] = match shape {
                    Some(Shape::Array(items)) => items,
                    _ => &[],
                };
                let mut out = s.serialize_seq(Some(items.len()))?;
                for (i, v) in items.iter().enumerate() {
                    out.serialize_element(&InOrder(v, shapes.get(i)))?;
                }
                out.end()
            }
            (v, _) => v.serialize(s),
        }
    }
}

/// The settings text to write: `settings` pretty-printed with the keys in the order the
/// user's file (`original`) had them, so an install or removal changes only toolbrake's
/// own entries; new keys follow the existing ones.
///
/// ```
/// let original = r#"{"permissions": {"deny": [], "allow": []}, "hooks": {}}"#;
/// let mut v: serde_json::Value = serde_json::from_str(original).unwrap();
/// v["model"] = "opus".into();
/// let text = toolbrake_hooks::init::render(Some(original), &v);
/// let order: Vec<usize> = ["\"permissions\"", "\"deny\"", "\"allow\"", "\"hooks\"", "\"model\""]
///     .iter().map(|k| text.find(k).unwrap()).collect();
/// assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
/// ```
pub fn render(original: Option<&str>, settings: &Value) -> String {
    let shape: Option<Shape> = original.and_then(|t| serde_json::from_str(t).ok());
    let text = serde_json::to_string_pretty(&InOrder(settings, shape.as_ref()))
        .unwrap_or_else(|_| settings.to_string());
    text + "\n"
}
