//! `init opencode|kilo --project` writes into the file a team commits: the plugin is named by
//! a path relative to that file, which opencode resolves against the file's folder, so it
//! resolves on every teammate's checkout, wherever it lies; the user's own file keeps the
//! absolute path. An entry of ours written relative is recognised from any folder.

mod support;
use support::*;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn init(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .env_remove("TOOLBRAKE_CONFIG")
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .env("HOME", home)
        .env("TOOLBRAKE_STATE", home.join("state/state.db"))
        .current_dir(cwd)
        .arg("init")
        .args(args)
        .output()
        .unwrap()
}

/// A built Node package of toolbrake's at `dir`, as `npm ci && npm run build` leaves it.
fn package(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("package.json"), r#"{"name": "toolbrake"}"#).unwrap();
    std::fs::write(dir.join("opencode.js"), "export default {}\n").unwrap();
    std::fs::write(dir.join("toolbrake.linux-x64-gnu.node"), "").unwrap();
    dir.display().to_string()
}

fn plugins(file: &Path) -> Value {
    serde_json::from_str::<Value>(&std::fs::read_to_string(file).unwrap()).unwrap()["plugin"]
        .clone()
}

/// What opencode loads for a spec in `file`: `path.resolve(dirname(file), spec)`.
fn resolved(file: &Path, spec: &Value) -> PathBuf {
    let spec = spec.as_str().or_else(|| spec[0].as_str()).unwrap();
    std::fs::canonicalize(file.parent().unwrap().join(spec)).unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_project_file_names_the_plugin_relative_to_itself() {
    let dir = tmpdir("init-plugin", "relative");
    let proj = dir.join("alice/proj");
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    std::fs::create_dir_all(proj.join("src")).unwrap();
    let inside = package(&proj.join("node_modules/toolbrake"));

    // Installed from a subfolder, the package inside the project.
    let said = stdout(&init(
        &dir,
        &proj.join("src"),
        &["opencode", "--project", "--plugin", &inside],
    ));
    let file = proj.join("opencode.json");
    assert_eq!(plugins(&file), json!(["./node_modules/toolbrake"]));
    assert!(
        said.contains(
            "opencode.json names the plugin relative to the project: every teammate who runs \
             opencode here needs toolbrake's Node package, built, at ./node_modules/toolbrake"
        ) && !said.contains("outside the project"),
        "{said}"
    );

    // A teammate's checkout, somewhere else: the committed file resolves there, to their
    // copy, and `init` there finds nothing to change.
    let theirs = dir.join("bob/work/proj");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    std::fs::rename(&proj, &theirs).unwrap();
    let file = theirs.join("opencode.json");
    assert_eq!(
        resolved(&file, &plugins(&file)[0]),
        std::fs::canonicalize(theirs.join("node_modules/toolbrake")).unwrap()
    );
    let again = theirs.join("node_modules/toolbrake").display().to_string();
    let said = stdout(&init(
        &dir,
        &theirs,
        &["opencode", "--project", "--plugin", &again],
    ));
    assert!(said.contains("nothing to change"), "{said}");
    // Removed from there too.
    stdout(&init(&dir, &theirs, &["opencode", "--project", "--remove"]));
    assert!(!file.exists(), "init made opencode.json and removes it");
}

#[test]
fn an_absolute_entry_is_made_relative_and_a_folder_outside_is_said() {
    let dir = tmpdir("init-plugin", "outside");
    let proj = dir.join("proj");
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    // Any folder name: recognised by its package.json, not by where it lies.
    let outside = package(&dir.join("vendor/tb"));
    let real = std::fs::canonicalize(&outside)
        .unwrap()
        .display()
        .to_string();
    // What an earlier build wrote: the absolute path, with options of the user's.
    let file = proj.join("kilo.json");
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&json!({
            "model": "local/m",
            "plugin": ["opencode-wakatime", [real, {"failClosed": true}]]
        }))
        .unwrap(),
    )
    .unwrap();
    let said = stdout(&init(
        &dir,
        &proj,
        &["kilo", "--project", "--plugin", &outside],
    ));
    assert_eq!(
        plugins(&file),
        json!(["opencode-wakatime", ["../vendor/tb", {"failClosed": true}]])
    );
    assert_eq!(
        resolved(&file, &plugins(&file)[1]),
        std::fs::canonicalize(&outside).unwrap()
    );
    assert!(
        said.contains("needs toolbrake's Node package, built, at ../vendor/tb")
            && said.contains("That folder is outside the project"),
        "{said}"
    );
    // The relative entry is toolbrake's wherever init runs from: removed, the rest kept.
    std::fs::create_dir_all(proj.join("a/b")).unwrap();
    stdout(&init(
        &dir,
        &proj.join("a/b"),
        &["kilo", "--project", "--remove"],
    ));
    assert_eq!(plugins(&file), json!(["opencode-wakatime"]));

    // The user's own file is read on this machine only: the absolute path.
    stdout(&init(&dir, &proj, &["opencode", "--plugin", &outside]));
    assert_eq!(
        plugins(&dir.join("xdg/opencode/opencode.json")),
        json!([real])
    );
}
