//! Self-protection's recognizer (issue 53): which shell commands and file writes would lift
//! or edit toolbrake itself, and which only read.

use toolbrake_core::breaker::self_guard::{file_target, shell_target, Protected};

fn protected(redis: bool) -> Protected {
    Protected {
        files: vec![
            "/home/u/.local/state/toolbrake/state.db".into(),
            "/home/u/.config/toolbrake/config.toml".into(),
            "/work/app/toolbrake.toml".into(),
        ],
        redis_prefix: redis.then(|| "toolbrake:".into()),
        binaries: vec!["/opt/tb/bin/tbk".into(), "tbk".into()],
        vars: vec![
            ("HOME".into(), "/home/u".into()),
            ("XDG_STATE_HOME".into(), "/home/u/.local/state".into()),
            (
                "TOOLBRAKE_STATE".into(),
                "/home/u/.local/state/toolbrake/state.db".into(),
            ),
        ],
    }
}

#[test]
fn what_lifts_the_brake_is_recognised() {
    let p = protected(true);
    for cmd in [
        "toolbrake sessions reset abc",
        "toolbrake sessions reset 'abc def'",
        "/usr/local/bin/toolbrake feedback abc --stuck",
        "./target/release/toolbrake init claude --remove",
        "toolbrake init claude",
        "toolbrake ui --listen 127.0.0.1:0 &",
        "toolbrake hook claude < fake.json",
        "toolbrake serve --stdin",
        "toolbrake replay --config evil.toml run.jsonl",
        "toolbrake tune --calibrate --write crafted.jsonl",
        "toolbrake tune --calibrate --write=~/.config/toolbrake/toolbrake.toml crafted.jsonl",
        "tbk sessions reset abc",
        "/opt/tb/bin/tbk sessions reset abc",
        "npx toolbrake sessions reset abc",
        "uvx toolbrake@1.2 feedback abc --mistaken",
        "sudo -u root toolbrake sessions reset abc",
        "env -i PATH=/bin toolbrake sessions reset abc",
        "bash -c \"toolbrake sessions reset abc\"",
        "echo ok; toolbrake sessions reset abc",
        "x=$(toolbrake sessions reset abc)",
        "timeout 5 toolbrake sessions reset abc",
        "echo abc | xargs toolbrake sessions reset",
        "rm -f /home/u/.local/state/toolbrake/state.db",
        "rm -rf ~/.local/state/toolbrake",
        "rm -rf $XDG_STATE_HOME/toolbrake/",
        "rm ~/.local/state/toolbrake/*",
        "cd ~/.local/state/toolbrake && rm state.db*",
        "unlink ${TOOLBRAKE_STATE}-wal",
        "shred -u ~/.local/state/toolbrake/state.db-shm",
        "truncate -s0 ~/.local/state/toolbrake/state.db",
        "mv ~/.config/toolbrake/config.toml /tmp/",
        "chmod 000 ~/.local/state/toolbrake/state.db",
        "cp /tmp/empty.db ~/.local/state/toolbrake/state.db",
        "cp /tmp/empty.db ~/.local/state/toolbrake/",
        "ln -sf /dev/null ~/.local/state/toolbrake/state.db",
        "dd if=/dev/zero of=/home/u/.local/state/toolbrake/state.db bs=1 count=1",
        "echo x > ~/.local/state/toolbrake/state.db",
        "cat /dev/null >| ~/.config/toolbrake/config.toml",
        "printf 'enabled = false' >> toolbrake.toml",
        "tee toolbrake.toml < /tmp/loose.toml",
        "sed -i 's/deny/off/' ~/.config/toolbrake/config.toml",
        "perl -pi -e 's/3/300/' /work/app/toolbrake.toml",
        "git checkout HEAD~3 -- toolbrake.toml",
        "find ~/.local/state -name '*.db' -delete",
        "sqlite3 ~/.local/state/toolbrake/state.db 'DELETE FROM sessions'",
        "sqlite3 $TOOLBRAKE_STATE 'drop table sessions'",
        "sqlite3 ~/.local/state/toolbrake/state.db",
        "cat wipe.sql | sqlite3 ~/.local/state/toolbrake/state.db",
        "python3 -c \"import os; os.remove('/home/u/.local/state/toolbrake/state.db')\"",
        "node -e \"require('fs').unlinkSync(require('os').homedir()+'/x') || fs.rmSync('~/.local/state/toolbrake/state.db')\"",
        "redis-cli DEL 'toolbrake:{abc}'",
        "redis-cli -h 10.0.0.1 -p 6380 -a secret unlink toolbrake:{abc}",
        "redis-cli FLUSHALL",
        "redis-cli -n 0 flushdb",
        "redis-cli --scan --pattern 'toolbrake:*' | xargs redis-cli DEL",
        "redis-cli SET toolbrake:{abc} x",
        "redis-cli EXPIRE toolbrake:{abc} 1",
        "redis-cli EVAL \"return redis.call('del', KEYS[1])\" 1 k",
        "echo 'DEL toolbrake:{abc}' | redis-cli",
        "redis-cli -x SET k < /tmp/state.json",
        "python3 -c \"import redis; redis.Redis().delete('toolbrake:{abc}')\"",
        "python3 -c \"import os; os.system('toolbrake sessions reset abc')\"",
    ] {
        assert!(shell_target(cmd, &p).is_some(), "{cmd}");
    }
}

#[test]
fn reading_and_unrelated_work_is_not() {
    let p = protected(true);
    for cmd in [
        "toolbrake sessions",
        "toolbrake sessions --json",
        "toolbrake sessions reset --help",
        "toolbrake --help",
        "toolbrake help sessions",
        "toolbrake --version",
        "toolbrake explain --session abc",
        "toolbrake config check",
        "toolbrake config default",
        "toolbrake tune history.jsonl",
        "which toolbrake",
        "command -v toolbrake",
        "man toolbrake",
        "grep -r 'toolbrake sessions reset' docs/",
        "git commit -m 'toolbrake sessions reset in docs'",
        "cat ~/.config/toolbrake/config.toml",
        "cat toolbrake.toml",
        "less ~/.local/state/toolbrake/state.db",
        "ls -la ~/.local/state/toolbrake",
        "cp ~/.local/state/toolbrake/state.db /tmp/backup.db",
        "sqlite3 -readonly ~/.local/state/toolbrake/state.db 'DELETE FROM x'",
        "sqlite3 ~/.local/state/toolbrake/state.db 'SELECT count(*) FROM sessions'",
        "sqlite3 /work/app/other.db 'DELETE FROM t'",
        "rm -rf build node_modules",
        "rm -rf ~/.cache/pip",
        "rm -rf state",
        "rm app.toml",
        "echo hi > out.txt",
        "cargo build 2>&1 | tail",
        "python3 -c 'print(1)'",
        "redis-cli GET toolbrake:{abc}",
        "redis-cli TTL 'toolbrake:{abc}'",
        "redis-cli --scan --pattern 'toolbrake:*'",
        "redis-cli DEL myapp:cache",
        "redis-cli -n 2 SET session:1 x",
        "npx prettier --write .",
        "npm test",
    ] {
        assert_eq!(shell_target(cmd, &p), None, "{cmd}");
    }
    // Without a Redis store, Redis is someone else's.
    assert_eq!(shell_target("redis-cli FLUSHALL", &protected(false)), None);
    // Without any data, toolbrake's own command is still recognised.
    assert!(shell_target("toolbrake sessions reset k", &Protected::default()).is_some());
}

#[test]
fn a_file_tools_write_to_a_protected_file_is_recognised() {
    let p = protected(false);
    for path in [
        "/home/u/.config/toolbrake/config.toml",
        "~/.config/toolbrake/config.toml",
        "/work/app/toolbrake.toml",
        "/home/u/.local/state/toolbrake/state.db-wal",
    ] {
        assert!(file_target(path, &p).is_some(), "{path}");
    }
    for path in [
        "/work/app/src/main.rs",
        "/work/app/toolbrake.toml.bak",
        "/tmp/state.db2",
    ] {
        assert_eq!(file_target(path, &p), None, "{path}");
    }
}

use proptest::sample::select;

const FILES: [&str; 5] = [
    "~/.local/state/toolbrake/state.db",
    "~/.config/toolbrake/config.toml",
    "toolbrake.toml",
    "$TOOLBRAKE_STATE",
    "/home/u/.local/state/toolbrake/state.db-wal",
];

proptest::proptest! {
    /// Never panics, whatever the command.
    #[test]
    fn total(c in "([a-z~/.$*{}:-]{1,6}|[ ;&|<>'\"\\\\()`]|toolbrake|rm|redis-cli|sqlite3|\n){0,24}") {
        let _ = shell_target(&c, &protected(true));
        let _ = file_target(&c, &protected(true));
    }

    /// Reading a protected file with any reader, under any wrapper, is never a hit.
    #[test]
    fn readers_never_hit(
        reader in select(&["cat", "less", "head -n 5", "tail -f", "wc -l", "ls -l", "stat", "grep -c x", "md5sum", "file"][..]),
        wrap in select(&["", "sudo ", "env A=1 ", "timeout 3 ", "nice "][..]),
        file in select(&FILES[..4]),
    ) {
        let cmd = format!("{wrap}{reader} {file}");
        proptest::prop_assert_eq!(shell_target(&cmd, &protected(true)), None, "{}", cmd);
    }

    /// Removing one, under any wrapper, always is.
    #[test]
    fn removers_always_hit(
        remover in select(&["rm", "rm -f", "rm -rf", "unlink", "shred -u", "truncate -s 0", "mv -f", "chmod 0"][..]),
        wrap in select(&["", "sudo ", "env A=1 ", "timeout 3 ", "nice ", "sh -c "][..]),
        file in select(&FILES[..]),
    ) {
        let inner = format!("{remover} {file}");
        let cmd = if wrap == "sh -c " { format!("sh -c '{inner}'") } else { format!("{wrap}{inner}") };
        let cmd = if remover.starts_with("mv") { format!("{cmd} /tmp/x") } else { cmd };
        proptest::prop_assert!(shell_target(&cmd, &protected(true)).is_some(), "{}", cmd);
    }
}
