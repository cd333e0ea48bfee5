//! `toolbrake init` as a real process on real home and project folders: what it installs
//! for each host and where, idempotently, with a backup, and how it removes it.

mod support;
use support::hooks::*;
use support::*;

use serde_json::{json, Value};
use std::path::Path;

#[test]
fn init_installs_idempotently_keeps_a_backup_and_removes() {
    let dir = tmpdir("hooks", "init");
    let claude_dir = dir.join(".claude");
    std::fs::create_dir_all(&claude_dir).unwrap();
    let settings = claude_dir.join("settings.json");
    let original = json!({"model": "opus", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-guard"}]}]}});
    std::fs::write(&settings, serde_json::to_string_pretty(&original).unwrap()).unwrap();
    let init = |args: &[&str]| init_in(&dir, &dir, args);
    let out = init(&["claude"]);
    assert!(out.contains("Installed toolbrake's hooks into"), "{out}");
    let installed: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let cmd = installed["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        cmd.ends_with(" hook claude") && cmd.contains("toolbrake"),
        "{cmd}"
    );
    assert_eq!(installed["model"], "opus");
    let backup: Value = serde_json::from_str(
        &std::fs::read_to_string(claude_dir.join("settings.json.toolbrake-backup")).unwrap(),
    )
    .unwrap();
    assert_eq!(backup, original);
    assert!(init(&["claude"]).contains("nothing to change"));
    init(&["claude", "--remove"]);
    let removed: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(removed, original);

    // Project settings for Codex, created from nothing.
    let out = init(&["codex", "--project"]);
    assert!(out.contains(".codex/hooks.json"));
    let codex: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".codex/hooks.json")).unwrap())
            .unwrap();
    assert!(codex["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .ends_with(" hook codex"));
    assert!(codex["hooks"].get("PostToolUseFailure").is_none());

    // A settings file that is not JSON is refused and left untouched.
    std::fs::write(&settings, "{ not json").unwrap();
    let out = bin(&dir).args(["init", "claude"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{ not json");

    // --local: Claude Code's personal project file; with `toolbrake` on PATH being this
    // program, the command is the bare name (right for every machine).
    let exe_dir = Path::new(env!("CARGO_BIN_EXE_toolbrake")).parent().unwrap();
    let out = bin(&dir)
        .env("PATH", format!("{}:/usr/bin:/bin", exe_dir.display()))
        .args(["init", "claude", "--local"])
        .output()
        .unwrap();
    assert_success(&out);
    let local: Value = serde_json::from_str(
        &std::fs::read_to_string(claude_dir.join("settings.local.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        local["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "toolbrake hook claude"
    );
    let out = bin(&dir)
        .args(["init", "codex", "--local"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--local is for Claude Code"));

    // An invalid configuration: init refuses to install (hooks would run unchecked),
    // names the problem, and changes nothing. Removing still works.
    std::fs::remove_file(claude_dir.join("settings.local.json")).unwrap();
    std::fs::write(
        dir.join("toolbrake.toml"),
        "[breaker]\nwarn_at = \"soon\"\n",
    )
    .unwrap();
    let out = bin(&dir)
        .args(["init", "claude", "--local"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not installing: the configuration is invalid.")
            && err.contains("toolbrake.toml, line 2: `breaker.warn_at = \"soon\"` is not valid"),
        "{err}"
    );
    assert!(!claude_dir.join("settings.local.json").exists());
    std::fs::write(&settings, "{}").unwrap();
    let out = bin(&dir)
        .args(["init", "claude", "--remove"])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::remove_file(dir.join("toolbrake.toml")).unwrap();
}

/// `init` changes only its own entries: the user's keys keep their order, the backup is
/// the user's file however often toolbrake installs and removes, `--project` in a
/// subfolder edits the project root's file (as the host reads it), and the path printed
/// is absolute.
#[test]
fn init_keeps_the_users_order_and_first_backup_and_finds_the_project_root() {
    let dir = tmpdir("hooks", "init-order");
    let root = dir.join("proj");
    let sub = root.join("sub/dir");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::create_dir_all(&sub).unwrap();
    let settings = root.join(".claude/settings.json");
    let original = "{\n  \"permissions\": {\"deny\": [\"Bash(rm:*)\"], \"allow\": [\"Bash(ls)\"]},\n  \"env\": {\"ZED\": \"1\", \"ALPHA\": \"2\"},\n  \"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-me\"}]}]},\n  \"model\": \"opus\"\n}\n";
    std::fs::write(&settings, original).unwrap();
    let init = |args: &[&str]| init_in(&dir, &sub, args);
    let out = init(&["claude", "--project"]);
    assert!(
        out.contains(&format!(
            "Installed toolbrake's hooks into {}",
            settings.display()
        )),
        "{out}"
    );
    assert!(
        !sub.join(".claude").exists(),
        "nothing created in the subfolder"
    );
    let text = std::fs::read_to_string(&settings).unwrap();
    let at = |k: &str| text.find(k).unwrap_or_else(|| panic!("{k} in {text}"));
    assert!(
        at("\"permissions\"") < at("\"env\"") && at("\"env\"") < at("\"hooks\""),
        "{text}"
    );
    assert!(
        at("\"deny\"") < at("\"allow\"") && at("\"ZED\"") < at("\"ALPHA\""),
        "{text}"
    );
    let backup = root.join(".claude/settings.json.toolbrake-backup");
    for _ in 0..2 {
        init(&["claude", "--project", "--remove"]);
        init(&["claude", "--project"]);
    }
    init(&["claude", "--project", "--remove"]);
    assert_eq!(
        std::fs::read_to_string(&backup).unwrap(),
        original,
        "the user's own file"
    );
    let removed: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let before: Value = serde_json::from_str(original).unwrap();
    assert_eq!(removed, before);
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(
        text.find("\"permissions\"").unwrap() < text.find("\"hooks\"").unwrap(),
        "{text}"
    );
}

/// `init` for the second round of hosts: each host's own file at user and project scope,
/// its own shape (Copilot's per-event command lines and `version`, Cursor's flat entries,
/// Factory's events at the top of `hooks.json`, Qwen's Claude-style groups in its
/// settings), the user's entries and keys kept, the first backup kept, `--remove` undoing
/// exactly toolbrake's part; Cline's hook files written beside the user's own, never over
/// them.
#[test]
fn init_installs_and_removes_for_copilot_qwen_cursor_factory_and_cline() {
    let dir = tmpdir("hooks", "init-hosts");
    let proj = dir.join("proj");
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    let init = |args: &[&str]| init_in(&dir, &proj, args);
    let read = read_json;

    // GitHub Copilot CLI: a hooks file of toolbrake's own in ~/.copilot/hooks, the event on
    // each command line; a user's file next to it is never touched.
    std::fs::create_dir_all(dir.join(".copilot/hooks")).unwrap();
    std::fs::write(
        dir.join(".copilot/hooks/mine.json"),
        "{\"version\": 1, \"hooks\": {}}",
    )
    .unwrap();
    init(&["copilot"]);
    let c = read(&dir.join(".copilot/hooks/toolbrake.json"));
    assert_eq!(c["version"], 1);
    for event in toolbrake_hooks::copilot::EVENTS {
        let e = &c["hooks"][event][0];
        assert_eq!(e["type"], "command");
        assert!(
            e["bash"]
                .as_str()
                .unwrap()
                .ends_with(&format!(" hook copilot {event}")),
            "{e}"
        );
        assert!(e["timeoutSec"].is_u64());
    }
    assert!(init(&["copilot"]).contains("nothing to change"));
    init(&["copilot", "--remove"]);
    // init made the file, and it held nothing else: it goes.
    assert!(!dir.join(".copilot/hooks/toolbrake.json").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join(".copilot/hooks/mine.json")).unwrap(),
        "{\"version\": 1, \"hooks\": {}}"
    );
    init(&["copilot", "--project"]);
    assert!(read(&proj.join(".github/hooks/toolbrake.json"))["hooks"]["preToolUse"].is_array());

    // Qwen Code: Claude-style groups in its settings, the user's settings and hooks kept.
    let qwen = proj.join(".qwen/settings.json");
    std::fs::create_dir_all(qwen.parent().unwrap()).unwrap();
    let original = "{\n  \"model\": {\"name\": \"qwen3-coder\"},\n  \"hooks\": {\"PreToolUse\": [{\"matcher\": \"run_shell_command\", \"hooks\": [{\"type\": \"command\", \"command\": \"my-guard\"}]}]},\n  \"general\": {}\n}\n";
    std::fs::write(&qwen, original).unwrap();
    init(&["qwen", "--project"]);
    let q = read(&qwen);
    assert_eq!(q["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
    assert!(q["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .ends_with(" hook qwen"));
    assert_eq!(
        q["hooks"]["PreToolUse"][1]["hooks"][0]["timeout"], 10,
        "seconds"
    );
    let text = std::fs::read_to_string(&qwen).unwrap();
    assert!(
        text.find("\"model\"").unwrap() < text.find("\"hooks\"").unwrap()
            && text.find("\"hooks\"").unwrap() < text.find("\"general\"").unwrap()
    );
    init(&["qwen", "--project", "--remove"]);
    assert_eq!(
        read(&qwen),
        serde_json::from_str::<Value>(original).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(proj.join(".qwen/settings.json.toolbrake-backup")).unwrap(),
        original
    );

    // Cursor: flat entries in hooks.json, with its version.
    let cursor = dir.join(".cursor/hooks.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(
        &cursor,
        r#"{"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}]}}"#,
    )
    .unwrap();
    init(&["cursor"]);
    let k = read(&cursor);
    for event in toolbrake_hooks::cursor::EVENTS {
        assert!(
            k["hooks"][event][0]["command"]
                .as_str()
                .unwrap()
                .ends_with(" hook cursor"),
            "{event}"
        );
    }
    assert!(
        k["hooks"].get("beforeShellExecution").is_none(),
        "one judging seam: preToolUse"
    );
    init(&["cursor", "--remove"]);
    assert_eq!(
        read(&cursor),
        json!({"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}]}})
    );

    // Factory Droid: hooks.json holds the events at its top level.
    init(&["factory", "--project"]);
    let f = read(&proj.join(".factory/hooks.json"));
    assert!(f.get("hooks").is_none(), "{f}");
    assert!(f["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .ends_with(" hook factory"));
    assert_eq!(f["PreToolUse"][0]["matcher"], "*");
    assert!(f.get("PostToolUseFailure").is_none());
    init(&["factory", "--project", "--remove"]);
    assert!(!proj.join(".factory/hooks.json").exists(), "init made it");

    // Cline: executable hook files; a user's own PreToolUse stays, toolbrake's goes beside
    // it as PreToolUse.sh; --remove deletes only toolbrake's.
    let hooks = proj.join(".clinerules/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(hooks.join("PreToolUse"), "#!/bin/sh\necho '{}'\n").unwrap();
    let out = init(&["cline", "--project"]);
    assert!(out.contains("PreToolUse.sh"), "{out}");
    assert_eq!(
        std::fs::read_to_string(hooks.join("PreToolUse")).unwrap(),
        "#!/bin/sh\necho '{}'\n"
    );
    for name in [
        "PreToolUse.sh",
        "PostToolUse",
        "UserPromptSubmit",
        "TaskComplete",
        "TaskCancel",
        "SessionShutdown",
    ] {
        let script = std::fs::read_to_string(hooks.join(name)).unwrap();
        assert!(
            script.starts_with("#!/bin/sh\n") && script.trim_end().ends_with(" hook cline"),
            "{name}: {script}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(hooks.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o111, 0o111, "{name} is executable");
        }
    }
    assert!(init(&["cline", "--project"]).contains("nothing to change"));
    init(&["cline", "--project", "--remove"]);
    let left: Vec<String> = std::fs::read_dir(&hooks)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["PreToolUse"]);
    init(&["cline"]);
    assert!(
        dir.join(".cline/hooks/PreToolUse").exists(),
        "user scope: ~/.cline/hooks"
    );

    // --local is Claude Code's alone.
    let out = bin(&dir)
        .current_dir(&proj)
        .args(["init", "cursor", "--local"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Cursor has no personal project file"));
}

/// `init opencode|kilo`: the Node package's folder in the `plugin` list of the user's or
/// the project's configuration, next to the user's plugins and settings, with a first
/// backup; `--remove` undoes it. The package must be toolbrake's, and built.
#[test]
fn init_opencode_and_kilo_name_the_node_package_as_a_plugin() {
    let dir = tmpdir("hooks", "init-plugin");
    // A built Node package, as `npm ci && npm run build` leaves it.
    let pkg = dir.join("toolbrake/bindings/node");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("package.json"), r#"{"name": "toolbrake"}"#).unwrap();
    std::fs::write(pkg.join("opencode.js"), "export default {}\n").unwrap();
    let pkg_arg = pkg.display().to_string();
    let init = |cwd: &Path, args: &[&str]| {
        bin(&dir)
            .current_dir(cwd)
            .arg("init")
            .args(args)
            .output()
            .unwrap()
    };

    // Not built yet: refused, nothing written.
    let out = init(&dir, &["opencode", "--plugin", &pkg_arg]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no native addon yet"));
    std::fs::write(pkg.join("toolbrake.linux-x64-gnu.node"), "").unwrap();
    // Without --plugin, or naming another folder: refused, saying what to pass.
    let out = init(&dir, &["opencode"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--plugin /path/to/toolbrake/bindings/node")
    );
    let out = init(&dir, &["opencode", "--plugin", dir.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not toolbrake's Node package"));
    assert!(!dir.join("xdg").exists(), "nothing written");
    let out = init(&dir, &["claude", "--plugin", &pkg_arg]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--plugin is for opencode and kilo"));
    let out = init(&dir, &["kilo", "--local", "--plugin", &pkg_arg]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("kilo has no personal project file"));

    // The user's configuration: kept, the plugin added once, a first backup, removed again.
    let user = dir.join("xdg/opencode/opencode.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    let original = "{\n  \"theme\": \"dark\",\n  \"plugin\": [\"opencode-wakatime\"],\n  \"model\": \"anthropic/claude\"\n}\n";
    std::fs::write(&user, original).unwrap();
    let out = init(&dir, &["opencode", "--plugin", &pkg_arg]);
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!(
        "Installed toolbrake's plugin into {}",
        user.display()
    )));
    let text = std::fs::read_to_string(&user).unwrap();
    assert!(
        text.find("\"theme\"").unwrap() < text.find("\"plugin\"").unwrap()
            && text.find("\"plugin\"").unwrap() < text.find("\"model\"").unwrap(),
        "{text}"
    );
    let installed: Value = serde_json::from_str(&text).unwrap();
    let real = std::fs::canonicalize(&pkg).unwrap().display().to_string();
    assert_eq!(installed["plugin"], json!(["opencode-wakatime", real]));
    assert!(String::from_utf8_lossy(
        &init(
            &dir,
            &["opencode", "--plugin", &format!("{pkg_arg}/opencode.js")]
        )
        .stdout
    )
    .contains("nothing to change"));
    assert_success(&init(&dir, &["opencode", "--remove"]));
    assert_eq!(
        serde_json::from_str::<Value>(&std::fs::read_to_string(&user).unwrap()).unwrap(),
        serde_json::from_str::<Value>(original).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("xdg/opencode/opencode.json.toolbrake-backup")).unwrap(),
        original
    );

    // Kilo: its own user file, created from nothing.
    assert_success(&init(&dir, &["kilo", "--plugin", &pkg_arg]));
    let kilo: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("xdg/kilo/kilo.json")).unwrap())
            .unwrap();
    assert_eq!(kilo, json!({"plugin": [real]}));

    // The project's file, at its root, from a subfolder.
    let root = dir.join("proj");
    let sub = root.join("src/deep");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(&sub).unwrap();
    for host in ["opencode", "kilo"] {
        let out = init(&sub, &[host, "--project", "--plugin", &pkg_arg]);
        assert_success(&out);
        let file = root.join(format!("{host}.json"));
        assert!(String::from_utf8_lossy(&out.stdout).contains(&file.display().to_string()));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        // The file a team commits names the package relative to itself (tests/init_plugin.rs).
        assert_eq!(v["plugin"], json!(["../toolbrake/bindings/node"]));
        assert_success(&init(&sub, &[host, "--project", "--remove"]));
        assert!(!file.exists(), "init made {host}.json and removes it");
    }
    assert!(!sub.join("opencode.json").exists());
}

/// `init` keeps a private settings file private (and its backup), never writes through a
/// symlink planted at the backup's name, and updates a symlinked settings file where it
/// points instead of replacing the link.
#[cfg(unix)]
#[test]
fn init_keeps_modes_and_never_follows_a_planted_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmpdir("hooks", "init-modes");
    let claude_dir = dir.join(".claude");
    std::fs::create_dir_all(&claude_dir).unwrap();
    let settings = claude_dir.join("settings.json");
    std::fs::write(&settings, "{\"model\": \"opus\"}\n").unwrap();
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Someone planted a symlink where the backup goes, pointing outside the config dir.
    let outside = dir.join("outside.txt");
    std::fs::write(&outside, "precious").unwrap();
    std::os::unix::fs::symlink(&outside, claude_dir.join("settings.json.toolbrake-backup"))
        .unwrap();
    let out = bin(&dir).args(["init", "claude"]).output().unwrap();
    assert_success(&out);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
    let backup = claude_dir.join("settings.json.toolbrake-backup");
    assert!(!std::fs::symlink_metadata(&backup)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(&backup).unwrap(),
        "{\"model\": \"opus\"}\n"
    );
    for f in [&settings, &backup] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
    // A symlinked settings file (a dotfiles repository) is updated where it points.
    let dotfiles = dir.join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    let real = dotfiles.join("claude-settings.json");
    std::fs::write(&real, "{}").unwrap();
    std::fs::remove_file(&settings).unwrap();
    std::os::unix::fs::symlink(&real, &settings).unwrap();
    let out = bin(&dir).args(["init", "claude"]).output().unwrap();
    assert_success(&out);
    assert!(std::fs::symlink_metadata(&settings)
        .unwrap()
        .file_type()
        .is_symlink());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert!(v["hooks"]["PreToolUse"].is_array(), "{v}");
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&claude_dir)
        .unwrap()
        .chain(std::fs::read_dir(&dotfiles).unwrap())
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with('.') && n.contains(".toolbrake-")
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
