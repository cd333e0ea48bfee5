//! A hook on a Redis that stops answering, or trickles its replies: the host waits for one
//! store deadline at most, then the failure policy applies. (A stopped `redis-server` is
//! the hardest case of the first: the kernel still accepts its connections, so only the
//! replies are missing.) And a hook on a Redis whose shared keys hold hostile values: they
//! never decide a call.

mod support;
use support::*;

use serde_json::json;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use toolbrake_store::testing::{RedisServer, TricklingServer};

/// `toolbrake hook claude` with a PreToolUse payload: its stdout, stderr and duration.
fn pre(cfg: &Path, dir: &Path, id: &str) -> (String, String, Duration) {
    let payload = json!({"session_id": "h", "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "make test"}, "tool_use_id": id});
    let mut c = isolated_bin();
    c.arg("--config")
        .arg(cfg)
        .env("TOOLBRAKE_STATE", dir.join("state.db"))
        .args(["hook", "claude"]);
    let start = Instant::now();
    let out = run_with_stdin(&mut c, payload.to_string().as_bytes());
    let took = start.elapsed();
    assert!(out.status.success(), "a hook always exits 0");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        took,
    )
}

#[test]
fn a_hung_redis_holds_a_hook_for_one_deadline_then_the_failure_policy_applies() {
    let server = RedisServer::start();
    let dir = tmpdir("redis-deadline", "hung");
    let config = |name: &str, extra: &str| {
        let p = dir.join(name);
        // connect_timeout 1 s; command_timeout stays at its default (2 s).
        std::fs::write(
            &p,
            format!(
                "[store]\nkind = \"redis\"\nurl = \"{}\"\nconnect_timeout = \"1s\"\n{extra}",
                server.url()
            ),
        )
        .unwrap();
        p
    };
    let open = config("open.toml", "");
    let closed = config("closed.toml", "fail_closed = true\n");
    // While it answers, the hooks judge through it (and answer nothing: the call runs).
    let (out, err, _) = pre(&open, &dir, "t0");
    assert!(out.is_empty() && err.is_empty(), "{out}{err}");

    server.freeze();
    let (open_out, open_err, open_took) = pre(&open, &dir, "t1");
    let (closed_out, _, closed_took) = pre(&closed, &dir, "t2");
    server.thaw();

    // One deadline (connect_timeout, 1 s) and the hook's own start-up: not 2 s or more
    // (each reply of the connection's setup awaited for 1 s, then the commands').
    for took in [open_took, closed_took] {
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_millis(1800),
            "{took:?}"
        );
    }
    // Fail open: no decision printed, the call runs; the warning names the store.
    assert!(open_out.is_empty(), "{open_out}");
    assert!(
        open_err.contains(&format!("redis 127.0.0.1:{}", server.port)),
        "{open_err}"
    );
    // Fail closed: refused.
    assert!(
        closed_out.contains("\"permissionDecision\":\"deny\""),
        "{closed_out}"
    );
    // Answering again: the next hook judges through it.
    let (out, err, _) = pre(&open, &dir, "t3");
    assert!(out.is_empty() && err.is_empty(), "{out}{err}");
}

/// A Redis that trickles its reply (a 100,000-byte string, a byte every half second) holds
/// a hook for the store's one deadline (the larger timeout, 2 s), not as long as it
/// trickles; then the failure policy applies.
#[test]
fn a_trickling_redis_holds_a_hook_for_one_deadline_then_the_failure_policy_applies() {
    let trickler = TricklingServer::start(Duration::from_secs(20));
    let dir = tmpdir("redis-deadline", "trickle");
    let cfg = dir.join("closed.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\nkind = \"redis\"\nurl = \"{}\"\nconnect_timeout = \"1s\"\nfail_closed = true\n",
            trickler.url()
        ),
    )
    .unwrap();
    let (out, err, took) = pre(&cfg, &dir, "t1");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(3),
        "{took:?} {err}"
    );
    assert!(out.contains("\"permissionDecision\":\"deny\""), "{out}");
    assert!(err.contains("no answer in time"), "{err}");
}

/// A counters key of the wrong type on the fleet's Redis (`SET toolbrake:counters x`): the
/// counters are telemetry, so the hooks still judge every call from the session's state
/// (two identical calls run, the third is stopped by the streak brake, not by the
/// failure policy, with `fail_closed = true`), and the hook says which key it could not
/// count in.
#[test]
fn a_wrong_typed_counters_key_never_decides_a_hooked_call() {
    let server = RedisServer::start();
    let dir = tmpdir("redis-deadline", "counters");
    let cfg = dir.join("closed.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\nkind = \"redis\"\nurl = \"{}\"\nfail_closed = true\n",
            server.url()
        ),
    )
    .unwrap();
    // `SET toolbrake:counters x`, as another client would send it.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    c.write_all(b"*3\r\n$3\r\nSET\r\n$18\r\ntoolbrake:counters\r\n$1\r\nx\r\n")
        .unwrap();
    let mut ok = [0u8; 5];
    c.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    let (first, first_err, _) = pre(&cfg, &dir, "k1");
    let (second, _, _) = pre(&cfg, &dir, "k2");
    let (third, _, _) = pre(&cfg, &dir, "k3");
    assert!(first.is_empty() && second.is_empty(), "{first}{second}");
    assert!(
        third.contains("\"permissionDecision\":\"deny\"") && !third.contains("fail_closed"),
        "{third}"
    );
    assert!(
        first_err.contains("toolbrake:counters") && first_err.contains("decisions are unaffected"),
        "{first_err}"
    );
}
