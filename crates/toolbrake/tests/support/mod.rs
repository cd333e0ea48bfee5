//! Helpers shared by this crate's integration tests.
// Each test binary uses a different subset.
#![allow(dead_code)]

pub mod agents;
// Chromium over a pipe pair: Unix file descriptors.
#[cfg(unix)]
pub mod browser;
pub mod hooks;
pub mod listener;
pub mod prometheus;
pub mod ui;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The variables hosts set for their agents' commands: a test run from inside an agent
/// (its shell tool) must not make `sessions reset` or `feedback` act as if the agent ran
/// them.
pub use toolbrake::settings::AGENT_VARIABLES as AGENT_VARS;

/// The `toolbrake` command under test, isolated from the developer's own configuration
/// (no config file, no environment overrides, run in the temporary folder).
pub fn isolated_bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolbrake"));
    c.env_remove("TOOLBRAKE_CONFIG")
        .env_remove("TOOLBRAKE_MAX_REPEATS")
        .env_remove("DSH_LOOP_BRAKE_MAX_REPEATS")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .env("HOME", "/nonexistent")
        .current_dir(std::env::temp_dir());
    for v in AGENT_VARS {
        c.env_remove(v);
    }
    c
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh, empty directory for one test.
pub fn tmpdir(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("toolbrake-{suite}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs a command to completion with a deadline: a hung peer fails the test instead of
/// hanging CI.
pub fn output_with_deadline(mut cmd: Command, secs: u64) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "did not finish in {secs} s; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fails the test unless the command succeeded, showing its stderr.
#[track_caller]
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `toolbrake init ARGS` as a user whose home folder is `home` runs it from `cwd`: no
/// configuration or host folders from the developer's environment, the state under
/// `home`. Fails the test unless it succeeded; returns what it printed.
pub fn init_in(home: &Path, cwd: &Path, args: &[&str]) -> String {
    let out = init_command(Path::new(env!("CARGO_BIN_EXE_toolbrake")), home, cwd)
        .args(args)
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

/// `BIN init` as a user whose home folder is `home` runs it from `cwd` (see [`init_in`]),
/// to be given its arguments.
pub fn init_command(bin: &Path, home: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env_remove("TOOLBRAKE_CONFIG")
        .env_remove("TOOLBRAKE_MAX_REPEATS")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("COPILOT_HOME")
        .env_remove("CLINE_DIR")
        .env("TOOLBRAKE_STATE", home.join("state/state.db"))
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .env("HOME", home)
        .current_dir(cwd)
        .arg("init");
    c
}

/// The bundled runs' HTML replay report, written to `page` (owner-only) and read back.
pub fn bundled_html_report(page: &Path) -> String {
    let out = isolated_bin()
        .args(["replay", "--from", "trajectory", "--html"])
        .arg(page)
        .arg(repo().join("examples/trajectories/calls.jsonl.gz"))
        .output()
        .unwrap();
    assert_success(&out);
    std::fs::read_to_string(page).unwrap()
}

/// The JSON a file holds.
#[track_caller]
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs a command with `input` on its stdin (written from another thread, so a command
/// that answers while it reads never deadlocks) and returns its output.
pub fn run_with_stdin(cmd: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // A command may exit before reading everything (a payload past its limit): fine.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// Debian's Chromium (scripts/test installs it).
pub fn chromium() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chromium must be installed (scripts/test installs Debian's chromium)")
}

/// Runs headless Chromium with a fresh profile `dir/profile` and these arguments (a
/// `--screenshot=…` or `--dump-dom` and a URL).
pub fn headless(dir: &Path, profile: &str, args: &[String]) -> Output {
    let mut c = Command::new(chromium());
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,800",
    ])
    .arg(format!("--user-data-dir={}", dir.join(profile).display()))
    .args(args);
    output_with_deadline(c, 120)
}

/// Asserts `shot` is a PNG of a drawn page (a blank page compresses far smaller).
pub fn assert_drawn_png(shot: &Path) {
    let png = std::fs::read(shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > 10_000,
        "a blank page compresses far smaller: {} bytes",
        png.len()
    );
}

/// The last line of a process's stdout that is a JSON object (what the Node test scripts
/// print), parsed.
pub fn last_json_line(out: &Output) -> serde_json::Value {
    serde_json::from_slice(
        out.stdout
            .split(|b| *b == b'\n')
            .rfind(|l| l.starts_with(b"{"))
            .expect("a JSON line on stdout"),
    )
    .unwrap()
}
