//! `toolbrake init` under hostile or unlucky conditions: a binary under a path the shell
//! reads (quotes, `$(…)`, backticks, spaces, non-ASCII), user hooks that mention
//! toolbrake, a binary that moved, and settings files that are not files.

mod support;
use support::*;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// This build's binary, linked (or copied) into `dir` under the name `toolbrake`.
fn binary_in(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let to = dir.join("toolbrake");
    let from = env!("CARGO_BIN_EXE_toolbrake");
    if std::fs::hard_link(from, &to).is_err() {
        std::fs::copy(from, &to).unwrap();
    }
    to
}

/// `BIN init ARGS` as a user whose home is `home`, in `cwd`, with no `toolbrake` on
/// `PATH` (so the command names the binary by its path).
fn init_with(bin: &Path, home: &Path, cwd: &Path, args: &[&str]) -> Output {
    std::fs::create_dir_all(home).unwrap();
    init_command(bin, home, cwd)
        .env("PATH", "/usr/bin:/bin")
        .args(args)
        .output()
        .unwrap()
}

fn pre(id: &str) -> Value {
    json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
           "tool_input": {"command": "ls"}, "tool_use_id": id, "cwd": "/tmp"})
}

/// Runs an installed hook command as the host does (`shell -c COMMAND`, the payload on
/// stdin) in `cwd`, keeping its state in `state`.
fn run_as_host(
    shell: &str,
    command: &str,
    home: &Path,
    cwd: &Path,
    state: &Path,
    payload: &Value,
) -> Output {
    run_with_stdin(
        Command::new(shell)
            .arg("-c")
            .arg(command)
            .env("TOOLBRAKE_STATE", state)
            .env("XDG_CONFIG_HOME", home.join("xdg"))
            .env("HOME", home)
            .current_dir(cwd),
        payload.to_string().as_bytes(),
    )
}

fn commands(settings: &Value, event: &str) -> Vec<String> {
    settings["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .filter_map(|h| h["command"].as_str().map(str::to_string))
        .collect()
}

#[cfg(unix)]
#[test]
fn hook_commands_are_one_shell_word_whatever_the_path() {
    for (n, name) in [
        "o'brien",
        "x $(touch PWNED)",
        "tick `touch PWNED` tock",
        "spaces and ünïcödé",
        "quote\" and \\ back",
    ]
    .into_iter()
    .enumerate()
    {
        let dir = tmpdir("init-hardening", &format!("quote-{n}"));
        let home = dir.join("home");
        let work = dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let bin = binary_in(&dir.join(name).join("bin"));

        // Claude Code (settings JSON, run through sh -c).
        let out = init_with(&bin, &home, &home, &["claude"]);
        assert_success(&out);
        let settings = read_json(&home.join(".claude/settings.json"));
        let command = &commands(&settings, "PreToolUse")[0];
        let state = dir.join("claude-state.db");
        let ran = run_as_host("sh", command, &home, &work, &state, &pre("t1"));
        assert_eq!(ran.status.code(), Some(0), "{name}: {command}: {ran:?}");
        assert!(ran.stderr.is_empty(), "{name}: {command}: {ran:?}");
        assert!(state.is_file(), "{name}: the hook did not run: {ran:?}");
        assert!(!work.join("PWNED").exists(), "{name}: the path ran as code");
        // A second init recognises its own quoted command.
        let again = init_with(&bin, &home, &home, &["claude"]);
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("nothing to change"),
            "{name}: {again:?}"
        );

        // GitHub Copilot CLI (its `bash` key, run through bash -c).
        assert_success(&init_with(&bin, &home, &home, &["copilot"]));
        let copilot = read_json(&home.join(".copilot/hooks/toolbrake.json"));
        let command = copilot["hooks"]["preToolUse"][0]["bash"].as_str().unwrap();
        let payload = json!({"sessionId": "s", "toolName": "bash",
                             "toolArgs": "{\"command\":\"ls\"}", "cwd": "/tmp"});
        let state = dir.join("copilot-state.db");
        let ran = run_as_host("bash", command, &home, &work, &state, &payload);
        assert_eq!(ran.status.code(), Some(0), "{name}: {command}: {ran:?}");
        assert!(state.is_file(), "{name}: the hook did not run: {ran:?}");
        assert!(!work.join("PWNED").exists(), "{name}: the path ran as code");

        // Cline (an executable shell script per event).
        assert_success(&init_with(&bin, &home, &home, &["cline"]));
        let script = home.join(".cline/hooks/PreToolUse");
        let payload = json!({"hookName": "tool_call", "taskId": "t", "workspaceRoots": ["/tmp"],
                             "tool_call": {"id": "c1", "name": "run_commands",
                                           "input": {"commands": ["ls"]}}});
        let state = dir.join("cline-state.db");
        let ran = run_with_stdin(
            Command::new(&script)
                .env("TOOLBRAKE_STATE", &state)
                .env("HOME", &home)
                .current_dir(&work),
            payload.to_string().as_bytes(),
        );
        assert_eq!(ran.status.code(), Some(0), "{name}: {ran:?}");
        assert!(state.is_file(), "{name}: the hook did not run: {ran:?}");
        assert!(!work.join("PWNED").exists(), "{name}: the path ran as code");
    }
}

#[test]
fn init_owns_only_the_commands_it_writes() {
    let dir = tmpdir("init-hardening", "ownership");
    let home = dir.join("home");
    let bin = binary_in(&dir.join("bin"));
    let claude = home.join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    let note = "echo 'remember: toolbrake hook claude is installed' >> ~/notes";
    let chained = "audit.sh && toolbrake hook claude";
    std::fs::write(
        claude.join("settings.json"),
        json!({"hooks": {"PreToolUse": [
            {"matcher": "*", "hooks": [{"type": "command", "command": note}]},
            {"matcher": "Bash", "hooks": [{"type": "command", "command": chained}]}
        ]}})
        .to_string(),
    )
    .unwrap();
    let out = init_with(&bin, &home, &home, &["claude"]);
    assert_success(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Installed"),
        "{out:?}"
    );
    let settings = read_json(&claude.join("settings.json"));
    let pre = commands(&settings, "PreToolUse");
    let ours = format!("{} hook claude", bin.display());
    assert_eq!(pre, vec![note.to_string(), chained.to_string(), ours]);

    let out = init_with(&bin, &home, &home, &["claude", "--remove"]);
    assert_success(&out);
    let settings = read_json(&claude.join("settings.json"));
    assert_eq!(
        commands(&settings, "PreToolUse"),
        vec![note.to_string(), chained.to_string()]
    );
    assert!(commands(&settings, "PostToolUse").is_empty());
}

#[test]
fn init_re_points_hooks_when_the_binary_moved() {
    let dir = tmpdir("init-hardening", "moved");
    let home = dir.join("home");
    let old = binary_in(&dir.join("old"));
    assert_success(&init_with(&old, &home, &home, &["claude"]));
    assert_success(&init_with(&old, &home, &home, &["cline"]));
    std::fs::remove_file(&old).unwrap();
    let new = binary_in(&dir.join("new"));

    let out = init_with(&new, &home, &home, &["claude"]);
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("nothing to change"), "{said}");
    let settings = read_json(&home.join(".claude/settings.json"));
    for event in ["PreToolUse", "PostToolUse"] {
        assert_eq!(
            commands(&settings, event),
            vec![format!("{} hook claude", new.display())],
            "{event}"
        );
    }

    let out = init_with(&new, &home, &home, &["cline"]);
    assert_success(&out);
    let script = std::fs::read_to_string(home.join(".cline/hooks/PreToolUse")).unwrap();
    assert!(
        script.contains(&format!("exec {} hook cline", new.display())),
        "{script}"
    );
    assert!(!home.join(".cline/hooks/PreToolUse.sh").exists());
}

#[cfg(unix)]
#[test]
fn init_refuses_settings_that_are_not_files_and_read_only_ones() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmpdir("init-hardening", "special");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bin = binary_in(&dir.join("bin"));
    let project = dir.join("cloned");
    let claude = project.join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let settings = claude.join("settings.json");

    std::os::unix::fs::symlink("/dev/zero", &settings).unwrap();
    let mut cmd = Command::new(&bin);
    cmd.env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .current_dir(&project)
        .args(["init", "claude", "--project"]);
    let out = output_with_deadline(cmd, 20);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a regular file"), "{err}");
    std::fs::remove_file(&settings).unwrap();

    let made = Command::new("mkfifo").arg(&settings).status().unwrap();
    assert!(made.success());
    let mut cmd = Command::new(&bin);
    cmd.env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .current_dir(&project)
        .args(["init", "claude", "--project"]);
    let out = output_with_deadline(cmd, 20);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a regular file"),
        "{out:?}"
    );
    std::fs::remove_file(&settings).unwrap();

    // A file the user made read-only is left as it is, and init says why.
    let mine = json!({"env": {"ANTHROPIC_API_KEY": "sk-ant-api03-secretsecretsecret"}}).to_string();
    std::fs::write(&settings, &mine).unwrap();
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = init_with(&bin, &home, &project, &["claude", "--project"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("read-only"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), mine);

    // Made writable, it is changed, and what init prints is only its own part: never the
    // rest of the user's file.
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = init_with(&bin, &home, &project, &["claude", "--project"]);
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("hook claude"), "{said}");
    assert!(!said.contains("sk-ant-api03"), "{said}");
    assert!(read_json(&settings)["env"]["ANTHROPIC_API_KEY"].is_string());
}

#[test]
fn a_file_init_made_goes_with_remove_and_is_never_backed_up() {
    let dir = tmpdir("init-hardening", "made");
    let home = dir.join("home");
    let bin = binary_in(&dir.join("bin"));
    let project = dir.join("repo");
    std::fs::create_dir_all(&project).unwrap();
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&project)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let has_git = git(&["init", "-q"]);
    let settings = project.join(".claude/settings.json");
    let backup = project.join(".claude/settings.json.toolbrake-backup");

    assert_success(&init_with(&bin, &home, &project, &["claude", "--project"]));
    assert!(settings.is_file() && !backup.exists());
    // Re-pointed after a move: still nothing of the user's to back up.
    let moved = binary_in(&dir.join("moved"));
    assert_success(&init_with(
        &moved,
        &home,
        &project,
        &["claude", "--project"],
    ));
    assert!(!backup.exists());
    let out = init_with(
        &moved,
        &home,
        &project,
        &["claude", "--project", "--remove"],
    );
    assert_success(&out);
    assert!(
        !settings.exists(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!backup.exists());

    // A file with the user's own keys keeps them, and its backup is the user's file.
    std::fs::write(&settings, "{\"model\": \"opus\"}\n").unwrap();
    assert_success(&init_with(&bin, &home, &project, &["claude", "--project"]));
    assert_eq!(
        std::fs::read_to_string(&backup).unwrap(),
        "{\"model\": \"opus\"}\n"
    );
    assert_success(&init_with(
        &bin,
        &home,
        &project,
        &["claude", "--project", "--remove"],
    ));
    assert_eq!(read_json(&settings), json!({"model": "opus"}));

    // A personal file git would commit is named as such.
    if has_git {
        let out = init_with(&bin, &home, &project, &["claude", "--local"]);
        assert_success(&out);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("git does not ignore"), "{said}");
        std::fs::write(project.join(".gitignore"), ".claude/settings.local.json\n").unwrap();
        let out = init_with(&moved, &home, &project, &["claude", "--local"]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(!said.contains("git does not ignore"), "{said}");
    }
}
