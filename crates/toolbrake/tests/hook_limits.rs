//! What a hook holds and leaves behind with a very large payload: the call is still judged
//! whole (identical ones refused, ones that differ anywhere not), memory stays a small
//! multiple of the payload, and its log is owner-only. One test per binary: the memory
//! reading is of this process's children.

mod support;
use support::*;

use serde_json::json;
use std::path::Path;
use std::process::Command;

/// The hook with the payload in `file` on its stdin.
fn hook(dir: &Path, file: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .env_remove("TOOLBRAKE_CONFIG")
        .env("TOOLBRAKE_STATE", dir.join("state/state.db"))
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .env("HOME", dir)
        .current_dir(dir)
        .args(["hook", "claude"])
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .unwrap()
}

/// Writes a PreToolUse payload whose command is `echo ` and `size` times `x`, then `last`,
/// without holding it in memory (a child's memory reading starts at this process's).
fn huge_payload(file: &Path, id: &str, size: usize, last: &str) {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(file).unwrap());
    write!(w, "{{\"session_id\":\"s\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_use_id\":\"{id}\",\"tool_input\":{{\"command\":\"echo ").unwrap();
    let chunk = [b'x'; 1 << 16];
    for _ in 0..size / chunk.len() {
        w.write_all(&chunk).unwrap();
    }
    write!(w, "{last}\"}}}}").unwrap();
    w.flush().unwrap();
}

/// The largest resident set of any child waited for so far, in bytes.
#[cfg(target_os = "linux")]
fn children_max_rss() -> u64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    usage.ru_maxrss as u64 * 1024
}

#[cfg(target_os = "linux")]
#[test]
fn a_huge_call_is_judged_whole_in_bounded_memory_and_the_log_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmpdir("hook-limits", "huge");
    const SIZE: usize = 40 << 20;
    // A loose log from before is tightened as the hook opens it.
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let log = dir.join("state/hook.log");
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mut answers = Vec::new();
    let file = dir.join("payload.json");
    for n in 1..=3 {
        huge_payload(&file, &format!("t{n}"), SIZE, "x");
        let out = hook(&dir, &file);
        assert_eq!(out.status.code(), Some(0));
        answers.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    assert!(
        answers[0].is_empty() && answers[1].is_empty(),
        "{answers:?}"
    );
    assert!(
        answers[2].contains("\"deny\""),
        "{}",
        &answers[2][..answers[2].len().min(500)]
    );
    assert!(
        answers[2].len() < 64 << 10,
        "the refusal quotes the whole command"
    );
    // One byte different at the very end is another call.
    huge_payload(&file, "t4", SIZE, "y");
    let out = hook(&dir, &file);
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let rss = children_max_rss();
    assert!(
        rss < 3 * SIZE as u64,
        "a hook held {} MB for a {} MB payload",
        rss >> 20,
        SIZE >> 20
    );

    // Something to log: a store that cannot open (a folder where the state file goes).
    let broken = dir.join("broken");
    std::fs::create_dir_all(broken.join("state.db")).unwrap();
    let blog = broken.join("hook.log");
    std::fs::write(&blog, "old line\n").unwrap();
    std::fs::set_permissions(&blog, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run_with_stdin(
        Command::new(env!("CARGO_BIN_EXE_toolbrake"))
            .env_remove("TOOLBRAKE_CONFIG")
            .env("TOOLBRAKE_STATE", broken.join("state.db"))
            .env("HOME", &dir)
            .current_dir(&dir)
            .args(["hook", "claude"]),
        json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "ls"}, "tool_use_id": "t9"})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(&blog).unwrap();
    assert!(
        text.starts_with("old line\n") && text.lines().count() > 1,
        "{text}"
    );
    let mode = std::fs::metadata(&blog).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}
