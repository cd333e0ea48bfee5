//! The Redis store against a real `redis-server` started on loopback by the test
//! (Debian's `redis-server`; `scripts/test` installs it when missing).

use serde_json::json;
use std::time::{Duration, Instant};
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::{Call, Engine, Outcome, Verdict};
use toolbrake_store::testing::{free_port, RedisServer};
use toolbrake_store::{update, RedisOptions, RedisStore, Store};

type Server = RedisServer;

fn store(server: &Server, prefix: &str) -> RedisStore {
    RedisStore::new(RedisOptions {
        url: server.url(),
        key_prefix: prefix.to_string(),
        ..RedisOptions::default()
    })
    .unwrap()
}

#[test]
fn the_engine_scenarios_hold_on_redis() {
    let server = Server::start();
    let s = store(&server, "t1:");
    let engine =
        Engine::new(Config::from_toml_str("[breaker]\non_limit = \"deny\"", &no_env).unwrap());
    // The streak brake.
    let args = json!({"q": "weather"});
    let mut verdicts = Vec::new();
    for i in 0..3 {
        let id = i.to_string();
        let d = update(&s, "s1", |st| {
            engine.pre(
                st,
                &Call {
                    session: "s1",
                    id: &id,
                    tool: "search",
                    args: &args,
                },
            )
        })
        .unwrap()
        .unwrap();
        verdicts.push(d.verdict);
    }
    assert_eq!(verdicts, [Verdict::Allow, Verdict::Allow, Verdict::Deny]);
    // The breaker's cosmetic loop, gated on the 12th call.
    let mut last = Verdict::Allow;
    for i in 0..12 {
        let args = json!({"command": format!("curl -s --max-time {i} https://open-data.canada.ca/x"), "description": i.to_string()});
        let id = format!("b{i}");
        let d = update(&s, "s2", |st| {
            engine.pre(
                st,
                &Call {
                    session: "s2",
                    id: &id,
                    tool: "bash",
                    args: &args,
                },
            )
        })
        .unwrap()
        .unwrap();
        if d.runs() {
            update(&s, "s2", |st| engine.post(st, &id, &Outcome::success("ok")))
                .unwrap()
                .unwrap();
        }
        last = d.verdict;
        if i < 11 {
            assert!(d.runs(), "call {} ran", i + 1);
        }
    }
    assert_eq!(last, Verdict::Deny);
    // The key layout keeps each session on one Cluster slot.
    let keys: Vec<String> = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
        .keys("t1:*")
        .unwrap();
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, ["t1:{s1}", "t1:{s2}"]);
    let listed: Vec<String> = s.list().unwrap().into_iter().map(|i| i.key).collect();
    assert_eq!(listed, ["s1", "s2"]);
    assert!(s.remove("s1").unwrap());
    assert!(s.get("s1").unwrap().is_none());
}

use redis::Commands;

/// An engine that judges every call and never stops one: each decision is one update of
/// the session's count, so a lost update shows in the count.
fn counting_engine() -> Engine {
    Engine::new(
        Config::from_toml_str(
            "[streak]\nmax_repeats = 1000000\n[breaker]\nenabled = false",
            &no_env,
        )
        .unwrap(),
    )
}

#[test]
fn eight_writers_times_a_thousand_decisions_lose_no_update() {
    let server = Server::start();
    let engine = counting_engine();
    let args = json!({"command": "echo same"});
    std::thread::scope(|scope| {
        for w in 0..8 {
            let (server, engine, args) = (&server, &engine, &args);
            scope.spawn(move || {
                let s = store(server, "t2:");
                for i in 0..1000 {
                    let id = format!("w{w}-{i}");
                    let d = update(&s, "shared", |st| {
                        engine.pre(
                            st,
                            &Call {
                                session: "shared",
                                id: &id,
                                tool: "Bash",
                                args,
                            },
                        )
                    })
                    .unwrap()
                    .unwrap();
                    assert_eq!(d.verdict, Verdict::Allow);
                }
            });
        }
    });
    let s = store(&server, "t2:");
    assert_eq!(
        s.get("shared").unwrap().unwrap().streak.count(),
        8000,
        "every decision counted exactly once"
    );
}

/// A writer that died holding a contended session's lock (its lease is left on the
/// server) delays the next update by at most that lease, and an update written by another
/// process meanwhile is not lost: the write compares the stored state, not the lock.
#[test]
fn a_writer_that_died_holding_the_lock_delays_by_its_lease_and_loses_nothing() {
    let server = Server::start();
    let a = store(&server, "t9:");
    let b = store(&server, "t9:");
    update(&a, "s", |st| st.streak = Default::default()).unwrap();
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    // b writes behind a's back: a's remembered state is stale.
    let args = json!({"command": "echo"});
    let engine = Engine::new(Config::default());
    let _ = update(&b, "s", |st| {
        engine.pre(
            st,
            &Call {
                session: "s",
                id: "b1",
                tool: "Bash",
                args: &args,
            },
        )
    })
    .unwrap();
    // A holder that died: its lock stays for 300 ms.
    let _: () = redis::cmd("SET")
        .arg("t9:lock:{s}")
        .arg("gone")
        .arg("PX")
        .arg(300)
        .query(&mut c)
        .unwrap();
    let start = Instant::now();
    let _ = update(&a, "s", |st| {
        engine.pre(
            st,
            &Call {
                session: "s",
                id: "a1",
                tool: "Bash",
                args: &args,
            },
        )
    })
    .unwrap();
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(200), "waited {waited:?}");
    assert!(waited < Duration::from_millis(1500), "waited {waited:?}");
    assert_eq!(
        a.get("s").unwrap().unwrap().streak.count(),
        2,
        "b's update and a's both kept"
    );
}

/// Threads of one process sharing one store update one session at once (parallel tool
/// calls through `serve` or `mcp --listen`): every update kept, and none waits for a lock
/// another thread of the same store holds (a waiter on the server would hold the store's
/// connection, which that thread needs for its write: each such update would stall for
/// the lock's whole lease).
#[test]
fn threads_sharing_one_store_update_one_session_without_stalling() {
    let server = Server::start();
    let s = store(&server, "t10:");
    let engine = counting_engine();
    let args = json!({"command": "echo same"});
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (s, engine, args) = (&s, &engine, &args);
            scope.spawn(move || {
                for i in 0..200 {
                    let id = format!("t{t}-{i}");
                    let _ = update(s, "shared", |st| {
                        engine.pre(
                            st,
                            &Call {
                                session: "shared",
                                id: &id,
                                tool: "Bash",
                                args,
                            },
                        )
                    })
                    .unwrap();
                }
            });
        }
    });
    let took = start.elapsed();
    assert_eq!(s.get("shared").unwrap().unwrap().streak.count(), 800);
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn a_redis_restart_is_survived_and_the_outage_is_a_clear_error() {
    let server = Server::start();
    let port = server.port;
    let s = RedisStore::new(RedisOptions {
        url: server.url(),
        key_prefix: "t3:".into(),
        connect_timeout: Duration::from_millis(300),
        command_timeout: Duration::from_millis(300),
        ..RedisOptions::default()
    })
    .unwrap();
    update(&s, "s", |st| st.streak = Default::default()).unwrap();
    drop(server); // killed
    let e = s.update("s", &mut |_, _| ()).unwrap_err().to_string();
    assert!(e.starts_with(&format!("redis 127.0.0.1:{port}: ")), "{e}");
    let e2 = s.get("s").unwrap_err().to_string();
    assert!(e2.contains("redis 127.0.0.1"), "{e2}");
    let _server = Server::start_on(port, &[]);
    // Same store object, no restart of this process: it reconnects.
    update(&s, "s", |st| st.streak = Default::default()).unwrap();
    assert!(s.get("s").unwrap().is_some());
}

#[test]
fn idle_sessions_expire_through_redis_ttls() {
    let server = Server::start();
    let s = RedisStore::new(RedisOptions {
        url: server.url(),
        key_prefix: "t4:".into(),
        idle_ttl: Duration::from_millis(300),
        ..RedisOptions::default()
    })
    .unwrap();
    update(&s, "s", |st| st.streak = Default::default()).unwrap();
    assert!(s.get("s").unwrap().is_some());
    std::thread::sleep(Duration::from_millis(600));
    assert!(s.get("s").unwrap().is_none(), "the key expired");
}

#[test]
fn credentials_come_from_the_url_or_the_options_and_are_never_shown() {
    let server = Server::start_on(free_port(), &["--requirepass", "s3cret-pw"]);
    let port = server.port;
    let with_url = RedisStore::new(RedisOptions {
        url: format!("redis://:s3cret-pw@127.0.0.1:{port}"),
        ..RedisOptions::default()
    })
    .unwrap();
    update(&with_url, "s", |_| ()).unwrap();
    let with_env = RedisStore::new(RedisOptions {
        url: server.url(),
        password: Some("s3cret-pw".into()),
        ..RedisOptions::default()
    })
    .unwrap();
    update(&with_env, "s", |_| ()).unwrap();
    let wrong = RedisStore::new(RedisOptions {
        url: format!("redis://:wrong-pw@127.0.0.1:{port}"),
        ..RedisOptions::default()
    })
    .unwrap();
    let e = wrong.update("s", &mut |_, _| ()).unwrap_err().to_string();
    assert!(
        !e.contains("wrong-pw") && !format!("{wrong:?}").contains("wrong-pw"),
        "{e}"
    );
}

/// Redis Cluster keeps a session on one slot: checked on a real server in cluster mode (a
/// one-node cluster owning every slot, so the plain client needs no redirections).
#[test]
fn the_key_layout_keeps_a_session_on_one_cluster_slot() {
    let dir = std::env::temp_dir().join(format!("lb-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("nodes.conf");
    let server = Server::start_on(
        free_port(),
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            conf.to_str().unwrap(),
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut c)
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap();
        if info.contains("cluster_state:ok") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = store(&server, "toolbrake:");
    let engine = Engine::new(Config::default());
    for session in ["s1", "session-with-{braces}", "ünïcode"] {
        let args = json!({});
        let d = update(&s, session, |st| {
            engine.pre(
                st,
                &Call {
                    session,
                    id: "1",
                    tool: "t",
                    args: &args,
                },
            )
        })
        .unwrap()
        .unwrap();
        assert_eq!(d.verdict, Verdict::Allow);
        let key = format!("toolbrake:{{{session}}}");
        let exists: bool = c.exists(&key).unwrap();
        assert!(exists, "{key}");
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&key)
            .query(&mut c)
            .unwrap();
        let tag = session.split('}').next().unwrap();
        let tag_slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(tag)
            .query(&mut c)
            .unwrap();
        assert_eq!(slot, tag_slot, "{key} hashes by its session");
    }
}

/// A store failure keeps what caused it: the Redis client's error is the `source()`, and
/// the message names the store, never the URL's credentials.
#[test]
fn a_store_failure_keeps_its_cause() {
    let port = free_port();
    let s = RedisStore::new(RedisOptions {
        url: format!("redis://bob:s3cret@127.0.0.1:{port}"),
        connect_timeout: Duration::from_millis(200),
        ..RedisOptions::default()
    })
    .unwrap();
    let e = s.get("x").unwrap_err();
    let cause = std::error::Error::source(&e).expect("a source");
    assert!(
        cause.downcast_ref::<redis::RedisError>().is_some(),
        "{cause:?}"
    );
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("redis 127.0.0.1:{port}: cannot connect")),
        "{shown}"
    );
    assert!(!shown.contains("s3cret"));
}

/// A server that stops answering (its process stopped: the kernel still accepts
/// connections, nothing answers them) fails a store operation when the operation's one
/// deadline passes, not once per reply it awaits: on an open connection (`WATCH` and `GET`
/// are two replies) and on a new one (the connection's setup is two more).
#[test]
fn a_hung_server_fails_an_operation_at_its_one_deadline() {
    let server = Server::start();
    let opts = RedisOptions {
        url: server.url(),
        key_prefix: "t6:".into(),
        connect_timeout: Duration::from_millis(500),
        command_timeout: Duration::from_millis(500),
        ..RedisOptions::default()
    };
    let open = RedisStore::new(opts.clone()).unwrap();
    update(&open, "s", |st| st.streak = Default::default()).unwrap();
    let fresh = RedisStore::new(opts).unwrap();
    server.freeze();
    let timed = |what: &dyn Fn() -> String| {
        let start = Instant::now();
        let e = what();
        (e, start.elapsed())
    };
    let (on_open, open_took) = timed(&|| open.update("s", &mut |_, _| ()).unwrap_err().to_string());
    let (on_fresh, fresh_took) = timed(&|| fresh.get("s").unwrap_err().to_string());
    server.thaw();
    assert!(
        open_took >= Duration::from_millis(450) && open_took < Duration::from_millis(800),
        "an open connection: {open_took:?} ({on_open})"
    );
    assert!(
        fresh_took >= Duration::from_millis(450) && fresh_took < Duration::from_millis(800),
        "a new connection: {fresh_took:?} ({on_fresh})"
    );
    assert!(on_fresh.contains("cannot connect"), "{on_fresh}");
    assert!(
        on_open.contains("500ms") && on_fresh.contains("500ms"),
        "{on_open} / {on_fresh}"
    );
    // Answering again: both stores carry on, without a restart.
    update(&open, "s", |st| st.streak = Default::default()).unwrap();
    assert!(fresh.get("s").unwrap().is_some());
}

/// Connecting authenticates as the URL's user (or the options') and selects its
/// database: the state lands there and nowhere else.
#[test]
fn a_user_and_a_database_are_set_up_on_connecting() {
    let server = Server::start_on(
        free_port(),
        &[
            "--requirepass",
            "s3cret-pw",
            "--user",
            "alice",
            "on",
            ">alice-pw",
            "~*",
            "+@all",
        ],
    );
    let port = server.port;
    let in_url = RedisStore::new(RedisOptions {
        url: format!("redis://alice:alice-pw@127.0.0.1:{port}/3"),
        key_prefix: "t7:".into(),
        ..RedisOptions::default()
    })
    .unwrap();
    update(&in_url, "a", |st| st.streak = Default::default()).unwrap();
    let in_options = RedisStore::new(RedisOptions {
        url: format!("redis://127.0.0.1:{port}/4"),
        key_prefix: "t7:".into(),
        username: Some("alice".into()),
        password: Some("alice-pw".into()),
        ..RedisOptions::default()
    })
    .unwrap();
    update(&in_options, "b", |st| st.streak = Default::default()).unwrap();
    let keys = |db: u8| -> Vec<String> {
        let mut c = redis::Client::open(format!("redis://:s3cret-pw@127.0.0.1:{port}/{db}"))
            .unwrap()
            .get_connection()
            .unwrap();
        let mut k: Vec<String> = c.keys("t7:*").unwrap();
        k.sort();
        k
    };
    assert_eq!(keys(3), ["t7:{a}"]);
    assert_eq!(keys(4), ["t7:{b}"]);
    assert!(keys(0).is_empty());
    let wrong_user = RedisStore::new(RedisOptions {
        url: format!("redis://alice:s3cret-pw@127.0.0.1:{port}"),
        ..RedisOptions::default()
    })
    .unwrap();
    let e = wrong_user.get("a").unwrap_err().to_string();
    assert!(e.contains("cannot connect") && !e.contains("s3cret"), "{e}");
}
