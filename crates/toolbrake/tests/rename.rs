//! The project's name is toolbrake (issue 38: the former name belongs to another project on
//! PyPI). Two things a user would notice if the rename came undone: the former name coming
//! back into what the repository ships, and a hook an earlier build installed under it left
//! behind, running a program that is gone.

mod support;
use support::*;

use serde_json::json;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;
use toolbrake_hooks::former::NAME as FORMER;

/// The seeds' own names, which stay (the "What stays"), each with where it may
/// appear (a path prefix; "" is anywhere) and what may follow it (the rest of the
/// identifier; "*" is anything).
/// Every other spelling of "loop" + "brake", in any case and with or without a separator,
/// is the former product name.
const ALLOWED: &[(&str, &[&str], &[&str])] = &[
    // The seed's refusal text (`loop brake: tool "…" called 3 times in a row…`) and the
    // streak brake's library errors, as the seed words them.
    ("loop brake", &[""], &["*"]),
    // `dsh-loop-brake`, the npm subpath `toolbrake/loop-brake`, its files and ids.
    ("loop-brake", &[""], &["*"]),
    // The refusal code `LOOP_BRAKE` and the seed's `DSH_LOOP_BRAKE_MAX_REPEATS`.
    ("LOOP_BRAKE", &[""], &["", "_MAX_REPEATS"]),
    // The seed's JavaScript API: the class, its error, its options and plugin config; in
    // the Node package and the pages that show it, never in the Python package.
    (
        "LoopBrake",
        &["bindings/node/", "docs/node.md"],
        &["", "Error", "Options", "Config"],
    ),
    // The Node package's root re-export of the `loop-brake` subpath.
    ("loopBrake", &["bindings/node/", "docs/node.md"], &[""]),
    // The former name itself, in the one module that lets `init` clean up after it.
    (FORMER, &["crates/toolbrake-hooks/src/former.rs"], &[""]),
];

/// Every spelling of "loop", one separator or none, and "brake" in `text`, any case:
/// (offset, the spelling, the identifier characters after it).
fn spellings(text: &str) -> Vec<(usize, &str, &str)> {
    let lower = text.to_ascii_lowercase();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find("loop").map(|i| i + from) {
        let after = &lower[i + 4..];
        let sep = usize::from(after.starts_with([' ', '-', '_', '.']));
        if after[sep..].starts_with("brake") {
            let end = i + 4 + sep + 5;
            let rest = text[end..]
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
                .count();
            found.push((i, &text[i..end], &text[end..end + rest]));
        }
        from = i + 4;
    }
    found
}

fn allowed(path: &str, spelling: &str, rest: &str) -> bool {
    ALLOWED.iter().any(|(s, places, rests)| {
        *s == spelling
            && places.iter().any(|p| path.starts_with(p))
            && (rests.contains(&rest) || rests.contains(&"*"))
    })
}

/// The files git tracks (what a clone gets), or, without git, every file of the tree but
/// build output.
fn tracked_files(root: &Path) -> Vec<String> {
    if let Ok(out) = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
    {
        if out.status.success() && !out.stdout.is_empty() {
            return out
                .stdout
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
        }
    }
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if [
                ".git",
                "target",
                "node_modules",
                "__pycache__",
                ".pytest_cache",
            ]
            .contains(&name.as_str())
            {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            } else {
                out.push(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn the_former_name_is_nowhere_in_the_repository_but_the_seeds_names() {
    let root = std::fs::canonicalize(repo()).unwrap();
    let files = tracked_files(&root);
    assert!(files.len() > 100, "found only {} files", files.len());
    let mut offences = Vec::new();
    // This file spells the former name in every way it looks for, to test the looking.
    let this_file = "crates/toolbrake/tests/rename.rs";
    for path in files.iter().filter(|p| *p != this_file) {
        for (_, s, rest) in spellings(path) {
            if !allowed(path, s, rest) {
                offences.push(format!("{path}: in its name: {s}{rest}"));
            }
        }
        let Ok(bytes) = std::fs::read(root.join(path)) else {
            continue; // deleted in the work tree, not yet in git
        };
        // Compressed goldens and recorded runs are read as what they hold.
        let bytes = if path.ends_with(".gz") {
            let mut text = Vec::new();
            flate2::read::MultiGzDecoder::new(&bytes[..])
                .read_to_end(&mut text)
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            text
        } else {
            bytes
        };
        let text = String::from_utf8_lossy(&bytes);
        for (at, s, rest) in spellings(&text) {
            if !allowed(path, s, rest) {
                let line = text[..at].matches('\n').count() + 1;
                offences.push(format!("{path}:{line}: {s}{rest}"));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "the former product name is back ({} places); write toolbrake (the seeds' own names \
         that stay are listed in ALLOWED):\n{}",
        offences.len(),
        offences.join("\n")
    );
}

#[test]
fn the_name_check_catches_every_spelling_and_spares_the_seeds_names() {
    let caught = |path: &str, text: &str| {
        spellings(text)
            .iter()
            .any(|(_, s, rest)| !allowed(path, s, rest))
    };
    for text in [
        FORMER.to_string(),
        FORMER.to_uppercase(),
        format!("pip install {FORMER}[langchain]"),
        "Loopbrake".into(),
        "loop_brake".into(),
        "Loop.Brake".into(),
        "LoopBrakeDenied".into(),
        "LoopBrakeMiddleware".into(),
    ] {
        assert!(caught("README.md", &text), "{text}");
    }
    assert!(caught("bindings/python/toolbrake/__init__.py", "LoopBrake"));
    assert!(caught("bindings/python/README.md", "LoopBrakeError"));
    assert!(caught("crates/toolbrake/src/lib.rs", "loopBrake"));
    assert!(caught("crates/toolbrake-hooks/src/init.rs", FORMER));
    for (path, text) in [
        (
            "crates/toolbrake-core/src/streak.rs",
            "loop brake: tool \"x\"",
        ),
        ("README.md", "toolbrake/loop-brake"),
        ("bindings/node/test/loop-brake-plugin.test.mjs", "x"),
        ("README.md", "code: 'LOOP_BRAKE'"),
        ("README.md", "DSH_LOOP_BRAKE_MAX_REPEATS"),
        (
            "bindings/node/loop-brake.d.ts",
            "new LoopBrake(); LoopBrakeError",
        ),
        ("bindings/node/index.js", "export * as loopBrake"),
        ("crates/toolbrake-hooks/src/former.rs", FORMER),
    ] {
        assert!(!caught(path, text), "{path}: {text}");
        assert!(!caught(path, path), "{path}");
    }
}

/// Hooks a build from before the rename installed run a program that is gone: `init`
/// replaces them with its own, and `init --remove` removes them, for every kind of file
/// `init` writes (a settings file's handlers, Copilot's hooks file, Cline's hook files,
/// opencode's plugin entry). The user's own hooks stay.
#[test]
fn init_replaces_and_removes_what_a_build_under_the_former_name_installed() {
    let dir = tmpdir("rename", "init");
    let proj = dir.join("proj");
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    let init = |args: &[&str]| init_in(&dir, &proj, args);
    let former_command = format!("/home/me/.cargo/bin/{FORMER} hook claude");

    // Claude Code's settings, as a former build left them: its handlers beside the user's.
    let settings = dir.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let user_hook =
        json!({"matcher": "Bash", "hooks": [{"type": "command", "command": "my-guard"}]});
    let former = json!({"model": "opus", "hooks": {
        "PreToolUse": [user_hook, {"matcher": "*", "hooks": [{"type": "command", "command": former_command, "timeout": 10}]}],
        "Stop": [{"hooks": [{"type": "command", "command": former_command}]}]
    }});
    std::fs::write(&settings, serde_json::to_string_pretty(&former).unwrap()).unwrap();
    init(&["claude", "--remove"]);
    assert_eq!(
        read_json(&settings),
        json!({"model": "opus", "hooks": {"PreToolUse": [user_hook]}}),
        "--remove takes the former hooks and leaves the user's"
    );
    std::fs::write(&settings, serde_json::to_string_pretty(&former).unwrap()).unwrap();
    init(&["claude"]);
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(
        !text.contains(FORMER),
        "install replaces the former hooks: {text}"
    );
    let now = read_json(&settings);
    assert_eq!(now["hooks"]["PreToolUse"][0], user_hook);
    assert_eq!(now["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
    assert!(now["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .ends_with("toolbrake hook claude"));
    assert!(init(&["claude"]).contains("nothing to change"));

    // GitHub Copilot CLI: the former build's own hooks file beside ours goes when nothing
    // else is in it; a user's entries in it would stay.
    let hooks = dir.join(".copilot/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let former_file = hooks.join(format!("{FORMER}.json"));
    let copilot_former = json!({"version": 1, "hooks": {"preToolUse": [
        {"type": "command", "bash": format!("{FORMER} hook copilot preToolUse"), "timeoutSec": 10}]}});
    std::fs::write(&former_file, copilot_former.to_string()).unwrap();
    init(&["copilot"]);
    assert!(!former_file.exists());
    assert!(read_json(&hooks.join("toolbrake.json"))["hooks"]["preToolUse"].is_array());
    let mut mixed = copilot_former.clone();
    mixed["hooks"]["postToolUse"] = json!([{"type": "command", "bash": "./audit.sh"}]);
    std::fs::write(&former_file, mixed.to_string()).unwrap();
    init(&["copilot", "--remove"]);
    assert_eq!(
        read_json(&former_file),
        json!({"version": 1, "hooks": {"postToolUse": [{"type": "command", "bash": "./audit.sh"}]}})
    );

    // A FIFO a cloned repository planted at the former file's name in the project is left
    // alone, and init does not wait on it.
    let project_hooks = proj.join(".github/hooks");
    std::fs::create_dir_all(&project_hooks).unwrap();
    let fifo = project_hooks.join(format!("{FORMER}.json"));
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    cmd.env_remove("TOOLBRAKE_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .env("HOME", &dir)
        .current_dir(&proj)
        .args(["init", "copilot", "--project"]);
    assert_success(&output_with_deadline(cmd, 20));
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(read_json(&project_hooks.join("toolbrake.json"))["hooks"]["preToolUse"].is_array());

    // Cline: a former hook file is rewritten as ours, and --remove deletes it; the user's
    // own file of the same event is never touched.
    let cline = proj.join(".clinerules/hooks");
    std::fs::create_dir_all(&cline).unwrap();
    let former_script = format!(
        "#!/bin/sh\n{}: Cline runs this file for its PostToolUse hook.\nexec {FORMER} hook cline\n",
        toolbrake_hooks::former::cline_mark()
    );
    std::fs::write(cline.join("PostToolUse"), &former_script).unwrap();
    std::fs::write(cline.join("PreToolUse"), "#!/bin/sh\necho mine\n").unwrap();
    init(&["cline", "--project"]);
    let rewritten = std::fs::read_to_string(cline.join("PostToolUse")).unwrap();
    assert!(
        !rewritten.contains(FORMER) && rewritten.trim_end().ends_with(" hook cline"),
        "{rewritten}"
    );
    assert!(
        !cline.join("PostToolUse.sh").exists(),
        "rewritten in place, not beside"
    );
    init(&["cline", "--project", "--remove"]);
    std::fs::write(cline.join("TaskComplete"), &former_script).unwrap();
    init(&["cline", "--project", "--remove"]);
    let left: Vec<String> = std::fs::read_dir(&cline)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["PreToolUse"]);

    // opencode: a plugin entry naming the former package is removed.
    let oc = dir.join("xdg/opencode/opencode.json");
    std::fs::create_dir_all(oc.parent().unwrap()).unwrap();
    std::fs::write(
        &oc,
        json!({"plugin": ["opencode-wakatime", format!("/srv/app/node_modules/{FORMER}")]})
            .to_string(),
    )
    .unwrap();
    init(&["opencode", "--remove"]);
    assert_eq!(read_json(&oc), json!({"plugin": ["opencode-wakatime"]}));
}
