//! Values in a shared Redis that toolbrake did not write the way it writes them (issue 53),
//! against a real `redis-server` started by the test, and a server that trickles its
//! replies: none of them decides a call or holds one past the store's deadline.

use redis::Commands;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::{Call, Engine, Verdict};
use toolbrake_store::testing::{RedisServer, TricklingServer};
use toolbrake_store::{update_counted, RedisOptions, RedisStore, Store, Tally};

fn store(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::new(RedisOptions {
        url: server.url(),
        key_prefix: prefix.to_string(),
        ..RedisOptions::default()
    })
    .unwrap()
}

fn redis(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// The counter every call of [`calls`] adds to, as the store keeps its name.
const SERIES: &str = r#"["hostile_total"]"#;

/// `n` identical calls in session `s`, each counted as the session service counts (a
/// series, and a series with a tool): their verdicts.
fn calls(s: &RedisStore, n: usize) -> Vec<Verdict> {
    let engine =
        Engine::new(Config::from_toml_str("[breaker]\non_limit = \"deny\"", &no_env).unwrap());
    let args = json!({"command": "make test"});
    (0..n)
        .map(|_| {
            // Ids never reused, whichever store makes the call.
            static IDS: AtomicUsize = AtomicUsize::new(0);
            let id = format!("c{}", IDS.fetch_add(1, Ordering::Relaxed));
            let d = update_counted(s, "s", |st, t: &mut Tally| {
                t.add("hostile_total", &[], 1);
                t.add_for_tool("hostile_tools_total", &[], "Bash", 1);
                engine.pre(
                    st,
                    &Call {
                        session: "s",
                        id: &id,
                        tool: "Bash",
                        args: &args,
                    },
                )
            })
            .expect("the store kept the update")
            .unwrap();
            d.verdict
        })
        .collect()
}

const STREAK: [Verdict; 3] = [Verdict::Allow, Verdict::Allow, Verdict::Deny];

/// A counters hash that is a string, a tool set that is a string, a counter at i64::MAX, a
/// counter that is not a number: the counters are telemetry, so every update is kept and
/// every decision stands (the third identical call is denied, as without them); the store
/// says so once per process, naming the key and never its content, and counts the updates
/// it could not count.
#[test]
fn a_wrong_typed_or_full_counter_never_decides_a_call() {
    let server = RedisServer::start();
    let mut c = redis(&server);
    type Plant = fn(&mut redis::Connection, &str);
    let cases: [(&str, Plant, &str); 4] = [
        (
            "string-hash",
            |c, p| c.set(format!("{p}counters"), "s3cret-x").unwrap(),
            "counters`",
        ),
        (
            "string-set",
            |c, p| c.set(format!("{p}counter-tools"), "s3cret-x").unwrap(),
            "counter-tools`",
        ),
        (
            "max",
            |c, p| c.hset(format!("{p}counters"), SERIES, i64::MAX).unwrap(),
            "cannot be incremented",
        ),
        (
            "abc",
            |c, p| c.hset(format!("{p}counters"), SERIES, "abc").unwrap(),
            "cannot be incremented",
        ),
    ];
    for (name, plant, said) in cases {
        let prefix = format!("h-{name}:");
        plant(&mut c, &prefix);
        let s = store(&server, &prefix);
        let start = Instant::now();
        assert_eq!(calls(&s, 3), STREAK, "{name}");
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{name}: {:?}",
            start.elapsed()
        );
        assert_eq!(s.get("s").unwrap().unwrap().streak.count(), 3, "{name}");
        let warnings = s.take_warnings();
        assert_eq!(warnings.len(), 1, "{name}: once per process: {warnings:?}");
        assert!(
            warnings[0].contains(said) && warnings[0].contains("decisions are unaffected"),
            "{name}: {warnings:?}"
        );
        assert!(!warnings[0].contains("s3cret"), "{name}: {warnings:?}");
        assert_eq!(s.uncounted(), 3, "{name}");
        // More calls: counted as uncounted, not said again.
        let _ = calls(&s, 2);
        assert!(s.take_warnings().is_empty(), "{name}");
        assert_eq!(s.uncounted(), 5, "{name}");
        // Reading the counters works all the same; what cannot be read is said.
        let _ = s.counters().unwrap();
        // Counts alone (an event that changes no session) are kept the same way.
        let mut t = Tally::new();
        t.add("hostile_total", &[], 1);
        s.add_counts(&t).unwrap();
        assert_eq!(s.uncounted(), 6, "{name}");
    }
    // Nothing was repaired: a key toolbrake cannot read is left for a person to remove.
    let v: String = c.get("h-string-hash:counters").unwrap();
    assert_eq!(v, "s3cret-x");
    let v: i64 = c.hget("h-max:counters", SERIES).unwrap();
    assert_eq!(v, i64::MAX);
    // A counter that cannot be read is left out of the counters, the others kept.
    let s = store(&server, "h-abc:");
    let counters = s.counters().unwrap();
    assert_eq!(counters.sum("hostile_tools_total", &[]), 5);
    assert!(s
        .take_warnings()
        .iter()
        .any(|w| w.contains("could not be read")));
    let s = store(&server, "h-string-hash:");
    assert!(s.counters().unwrap().values.is_empty());
    assert!(s
        .take_warnings()
        .iter()
        .any(|w| w.contains("h-string-hash:counters") && w.contains("wrong type")));
}

/// A session's lock that can never expire (no TTL: set by hand or `PERSIST`ed) is stale,
/// and a lock of the wrong type is not toolbrake's: the next update removes it, says so,
/// and decides at once (it waited for the whole deadline, then failed, on every call).
#[test]
fn a_lock_without_expiry_or_of_the_wrong_type_is_stale() {
    let server = RedisServer::start();
    let mut c = redis(&server);
    for (name, wrong_type) in [("persist", false), ("hash", true)] {
        let prefix = format!("l-{name}:");
        let s = store(&server, &prefix);
        // A process that wrote the session before (the uncontended write), and one that
        // has not (it reads the state first).
        let fresh = store(&server, &prefix);
        assert_eq!(calls(&s, 1), [Verdict::Allow]);
        let lock = format!("{prefix}lock:{{s}}");
        if wrong_type {
            let _: () = c.hset(&lock, "holder", "x").unwrap();
        } else {
            let _: () = c.set(&lock, "gone").unwrap();
        }
        let start = Instant::now();
        assert_eq!(calls(&s, 1), [Verdict::Allow], "{name}");
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "{name}: {:?}",
            start.elapsed()
        );
        let warnings = s.take_warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&lock) && w.contains("stale")),
            "{name}: {warnings:?}"
        );
        assert!(!c.exists::<_, bool>(&lock).unwrap(), "{name}");
        // Again, for the process that reads first.
        if wrong_type {
            let _: () = c.hset(&lock, "holder", "x").unwrap();
        } else {
            let _: () = c.set(&lock, "gone").unwrap();
        }
        let start = Instant::now();
        assert_eq!(calls(&fresh, 1), [Verdict::Deny], "{name}");
        assert!(start.elapsed() < Duration::from_millis(500), "{name}");
        assert_eq!(s.get("s").unwrap().unwrap().streak.count(), 3, "{name}");
    }
}

/// A session's key that holds something other than a string (a hash): the session starts
/// afresh, said with the key's name, and is judged from then on; listing and reading
/// never fail on it.
#[test]
fn a_state_key_of_the_wrong_type_starts_the_session_afresh_and_says_so() {
    let server = RedisServer::start();
    let mut c = redis(&server);
    let s = store(&server, "w:");
    let _: () = c.hset("w:{s}", "f", "s3cret-v").unwrap();
    let _: () = c.hset("w:{other}", "f", "v").unwrap();
    assert!(s.list().unwrap().is_empty(), "nothing readable to list");
    assert!(s.get("other").unwrap().is_some());
    let _ = s.take_warnings();
    let start = Instant::now();
    assert_eq!(calls(&s, 3), STREAK);
    assert!(start.elapsed() < Duration::from_secs(1));
    let warnings = s.take_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("`w:{s}`") && w.contains("afresh")),
        "{warnings:?}"
    );
    assert!(!warnings.iter().any(|w| w.contains("s3cret")));
    assert_eq!(s.get("s").unwrap().unwrap().streak.count(), 3);
    // A contended writer (it holds the session's lock) meets it too.
    let _: () = c.del("w:{s}").unwrap();
    let _: () = c.hset("w:{s}", "f", "v").unwrap();
    let _: () = c.set("w:lock:{s}", "other").unwrap();
    let _: () = c.pexpire("w:lock:{s}", 100).unwrap();
    assert_eq!(calls(&s, 1), [Verdict::Allow]);
    assert_eq!(s.get("s").unwrap().unwrap().streak.count(), 1);
    let listed: Vec<String> = s.list().unwrap().into_iter().map(|i| i.key).collect();
    assert_eq!(listed, ["s"]);
}

/// A server that trickles its reply (a 100,000-byte string, one byte every half second)
/// fails an operation at its one deadline, whether the reply is a command's or the
/// connection's setup's: the deadline covers the whole reply, not each read.
#[test]
fn a_trickling_reply_fails_an_operation_at_its_one_deadline() {
    let trickler = TricklingServer::start(Duration::from_secs(20));
    let s = RedisStore::new(RedisOptions {
        url: trickler.url(),
        connect_timeout: Duration::from_secs(1),
        command_timeout: Duration::from_secs(1),
        ..RedisOptions::default()
    })
    .unwrap();
    for what in ["get", "update", "get again"] {
        let start = Instant::now();
        let e = if what == "update" {
            s.update("s", &mut |_, _| ()).unwrap_err()
        } else {
            s.get("s").unwrap_err()
        };
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_millis(1500),
            "{what}: {took:?} ({e})"
        );
        assert!(e.to_string().contains("no answer in time"), "{what}: {e}");
    }
}
