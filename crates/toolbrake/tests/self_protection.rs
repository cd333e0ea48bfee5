//! Self-protection through the `toolbrake hook claude` process (issue 53): the agent being
//! braked cannot lift its own brake through its own tools (toolbrake's state-changing
//! commands, its state file, its configuration, its Redis keys), reading stays allowed,
//! the switch and the project's limits on it hold, the stop is counted, and a reset or
//! feedback run inside an agent's environment shows on the dashboard's history.

mod support;
use support::hooks::*;
use support::listener::{exchange, request, ui_at};
use support::*;

use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use toolbrake_store::testing::RedisServer;

/// One hook call: the decision (`allow` when the hook printed nothing) and its reason.
fn decide(dir: &Path, config: Option<&Path>, payload: &Value) -> (String, String) {
    let out = spawn_hook(dir, payload, config).wait_with_output().unwrap();
    assert!(out.status.success(), "a hook always exits 0");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.trim()).unwrap_or(json!({}));
    let o = &v["hookSpecificOutput"];
    (
        o["permissionDecision"]
            .as_str()
            .unwrap_or("allow")
            .to_string(),
        o["permissionDecisionReason"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

fn bash(dir: &Path, config: Option<&Path>, session: &str, id: &str, cmd: &str) -> String {
    decide(dir, config, &pre(session, id, cmd)).0
}

/// Runs a command as the agent's shell would: `sh -c` in the test's home, with Claude
/// Code's variables set.
fn run_as_agent(dir: &Path, cmd: &str) {
    let mut c = bin(dir);
    let exe = env!("CARGO_BIN_EXE_toolbrake");
    let bin_dir = Path::new(exe).parent().unwrap();
    c.env(
        "PATH",
        format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
    )
    .env("CLAUDECODE", "1");
    std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(dir)
        .output()
        .unwrap();
}

#[test]
fn thirty_identical_calls_interleaved_with_resets_are_still_stopped() {
    let dir = tmpdir("self-protection", "attack");
    let mut denied = 0;
    let mut resets_denied = 0;
    for i in 0..30 {
        if bash(&dir, None, "victim", &format!("t{i}"), "npm test") == "deny" {
            denied += 1;
        }
        // The attack: the agent resets its own session through its shell tool. The host
        // runs what the hook allows.
        let reset = "toolbrake sessions reset victim";
        if bash(&dir, None, "victim", &format!("r{i}"), reset) == "deny" {
            resets_denied += 1;
        } else {
            run_as_agent(&dir, reset);
        }
    }
    assert_eq!(
        resets_denied, 30,
        "every reset through the agent's shell is denied"
    );
    assert_eq!(
        denied, 28,
        "the identical calls are stopped from the third on"
    );
    let (verdict, reason) = decide(
        &dir,
        None,
        &pre("victim", "last", "toolbrake sessions reset victim"),
    );
    assert_eq!(verdict, "deny");
    assert!(reason.starts_with("TOOLBRAKE_SELF_PROTECTED"), "{reason}");
    assert!(
        reason.contains("toolbrake sessions reset victim") && reason.contains("own terminal"),
        "the message says who can lift the brake, and how: {reason}"
    );
}

#[test]
fn the_state_file_the_configuration_and_toolbrakes_commands_are_out_of_reach() {
    let dir = tmpdir("self-protection", "variants");
    let state = dir.join("state/state.db");
    let user_cfg = dir.join("xdg/toolbrake/config.toml");
    std::fs::create_dir_all(user_cfg.parent().unwrap()).unwrap();
    std::fs::write(&user_cfg, "[streak]\nmax_repeats = 5\n").unwrap();
    let home = dir.display().to_string();
    let state_s = state.display().to_string();
    let denied = [
        format!("rm -f {state_s}"),
        format!("rm -rf {home}/state"),
        "rm ~/state/state.db-wal ~/state/state.db-shm".to_string(),
        format!("sqlite3 {state_s} 'DELETE FROM sessions'"),
        "sqlite3 ~/state/state.db < wipe.sql".to_string(),
        "truncate -s 0 $TOOLBRAKE_STATE".to_string(),
        format!("mv {state_s} /tmp/gone.db"),
        format!("cp /dev/null {state_s}"),
        format!(": > {state_s}"),
        "echo 'max_repeats = 1000' >> ~/xdg/toolbrake/config.toml".to_string(),
        "sed -i s/5/500/ $XDG_CONFIG_HOME/toolbrake/config.toml".to_string(),
        "printf '[breaker]\\nenabled = false\\n' > toolbrake.toml".to_string(),
        format!("python3 -c \"import os; os.remove('{state_s}')\""),
        "sh -c 'toolbrake sessions reset me'".to_string(),
        "sudo env A=1 /usr/local/bin/toolbrake feedback me --mistaken".to_string(),
        "cd /tmp && npx toolbrake init claude --remove".to_string(),
        "toolbrake --config /tmp/x.toml sessions reset me".to_string(),
        "echo '{\"hook_event_name\":\"UserPromptSubmit\"}' | toolbrake hook claude".to_string(),
    ];
    for (i, cmd) in denied.iter().enumerate() {
        let (v, reason) = decide(&dir, None, &pre(&format!("d{i}"), "1", cmd));
        assert_eq!(v, "deny", "{cmd}");
        assert!(
            reason.starts_with("TOOLBRAKE_SELF_PROTECTED"),
            "{cmd}: {reason}"
        );
    }
    // A file tool writing the configuration or the state.
    for (i, path) in [user_cfg.display().to_string(), state_s.clone()]
        .iter()
        .enumerate()
    {
        let payload = json!({"session_id": format!("w{i}"), "hook_event_name": "PreToolUse",
            "tool_name": "Write", "tool_input": {"file_path": path, "content": "x"}, "tool_use_id": "1"});
        assert_eq!(decide(&dir, None, &payload).0, "deny", "Write {path}");
    }
    let allowed = [
        "toolbrake sessions",
        "toolbrake sessions --json",
        "toolbrake explain --session me",
        "toolbrake sessions reset --help",
        "toolbrake --version",
        "cat ~/xdg/toolbrake/config.toml",
        "which toolbrake",
        "ls -la ~/state",
        "sqlite3 -readonly ~/state/state.db .tables",
        "sqlite3 ~/state/state.db 'SELECT count(*) FROM sessions'",
        "cp ~/state/state.db /tmp/backup.db",
        "rm -rf build target/tmp",
        "git commit -m 'rm state.db from the docs'",
    ];
    for (i, cmd) in allowed.iter().enumerate() {
        assert_eq!(
            bash(&dir, None, &format!("a{i}"), "1", cmd),
            "allow",
            "{cmd}"
        );
    }
}

#[test]
fn redis_keys_under_the_prefix_and_flushes_are_out_of_reach_on_a_redis_store() {
    let server = RedisServer::start();
    let dir = tmpdir("self-protection", "redis");
    let cfg = dir.join("redis.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\nkind = \"redis\"\nurl = \"{}\"\nkey_prefix = \"tb:\"\n",
            server.url()
        ),
    )
    .unwrap();
    for (i, cmd) in [
        "redis-cli DEL 'tb:{me}'",
        "redis-cli -p 6390 -n 0 unlink tb:{me} tb:lock:{me}",
        "redis-cli FLUSHALL",
        "redis-cli flushdb async",
        "redis-cli --scan --pattern 'tb:*' | xargs redis-cli del",
        "redis-cli SET 'tb:{me}' '{}'",
        "redis-cli EVAL \"return redis.call('del', KEYS[1])\" 1 x",
    ]
    .iter()
    .enumerate()
    {
        let (v, reason) = decide(&dir, Some(&cfg), &pre(&format!("r{i}"), "1", cmd));
        assert_eq!(v, "deny", "{cmd}: {reason}");
        assert!(reason.starts_with("TOOLBRAKE_SELF_PROTECTED"), "{cmd}");
    }
    for (i, cmd) in [
        "redis-cli GET 'tb:{me}'",
        "redis-cli --scan --pattern 'tb:*'",
        "redis-cli DEL myapp:cache",
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(
            bash(&dir, Some(&cfg), &format!("k{i}"), "1", cmd),
            "allow",
            "{cmd}"
        );
    }
}

#[test]
fn the_switch_turns_it_off_but_a_projects_file_cannot() {
    let dir = tmpdir("self-protection", "switch");
    let off = dir.join("off.toml");
    std::fs::write(&off, "[breaker]\nself_protection = \"off\"\n").unwrap();
    let reset = "toolbrake sessions reset me";
    assert_eq!(bash(&dir, Some(&off), "s1", "1", reset), "allow");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[breaker]\nself_protection = \"maybe\"\n").unwrap();
    let out = bin(&dir)
        .args(["config", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("breaker.self_protection")
            && err.contains("\"maybe\"")
            && err.contains("must be \"deny\" or \"off\""),
        "{err}"
    );
    // A project's own file (the agent can write it) may not loosen it: still denied, and
    // the user is told once.
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("toolbrake.toml"),
        "[breaker]\nself_protection = \"off\"\n",
    )
    .unwrap();
    let mut c = bin(&dir);
    c.current_dir(&project).args(["hook", "claude"]);
    let out = run_with_stdin(&mut c, pre("p1", "1", reset).to_string().as_bytes());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    assert!(
        v["systemMessage"]
            .as_str()
            .is_some_and(|m| m.contains("breaker.self_protection")),
        "{v}"
    );
}

/// `GET path` on the dashboard: its body.
fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let host = addr.to_string();
    let raw = request("GET", path, Some(&host), &[], "");
    exchange(addr, &raw, true, Duration::from_secs(10))
        .unwrap()
        .body
}

#[test]
fn the_stop_is_counted_and_a_reset_from_an_agents_environment_shows_on_the_dashboard() {
    let dir = tmpdir("self-protection", "dashboard");
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\nkind = \"sqlite\"\npath = \"{}\"\n",
            dir.join("state/state.db").display()
        ),
    )
    .unwrap();
    for id in ["1", "2", "3"] {
        bash(&dir, Some(&cfg), "seen", id, "npm test");
    }
    assert_eq!(
        bash(
            &dir,
            Some(&cfg),
            "seen",
            "4",
            "toolbrake sessions reset seen"
        ),
        "deny"
    );
    // The same command run another way (a script the hook cannot read) inside the agent's
    // environment: it works, but the dashboard's history says so.
    let mut c = bin(&dir);
    c.arg("--config")
        .arg(&cfg)
        .env("CLAUDECODE", "1")
        .args(["sessions", "reset", "seen"]);
    let out = c.output().unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("CLAUDECODE"));
    let mut c = bin(&dir);
    c.arg("--config")
        .arg(&cfg)
        .env("CLAUDECODE", "1")
        .args(["feedback", "seen", "--mistaken"]);
    assert_success(&c.output().unwrap());

    let ui = ui_at(&cfg, &[]);
    let metrics = get(ui.addr, "/metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("toolbrake_calls_judged_total{")
                && l.contains("track=\"self_protection\"")
                && l.contains("verdict=\"deny\"")
                && l.trim_end().ends_with(" 1")),
        "{metrics}"
    );
    let session: Value = serde_json::from_str(&get(ui.addr, "/api/sessions/seen")).unwrap();
    let log = session["log"].as_array().expect("the session's history");
    let said: Vec<(&str, &str)> = log
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or(""),
                e["code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        said.contains(&("toolbrake sessions reset", "FROM_AGENT_ENVIRONMENT"))
            && said.contains(&("toolbrake feedback", "FROM_AGENT_ENVIRONMENT")),
        "{said:?}"
    );
    assert_eq!(session["streak"]["count"], 0, "the reset was done");
    let page = get(ui.addr, "/sessions/seen");
    assert!(
        page.contains("toolbrake sessions reset"),
        "the session page shows it"
    );
    assert!(page.contains("agent"), "and from where");
}
