//! The Redis store on a real Redis Cluster: three primaries started on loopback by the test
//! (`redis-cli --cluster create`), sessions spread over them, and a session's slot moved
//! to another primary in the middle of a run (`CLUSTER SETSLOT` + `MIGRATE`, as a
//! resharding does) while writers keep deciding: no update is lost.

use serde_json::json;
use std::time::Duration;
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::{Call, Engine, Verdict};
use toolbrake_store::testing::RedisCluster;
use toolbrake_store::{update, RedisOptions, RedisStore, Store};

type Cluster = RedisCluster;

fn cluster() -> Cluster {
    RedisCluster::start(3)
}

fn conn(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_connection()
        .unwrap()
}

fn store(c: &Cluster, prefix: &str) -> RedisStore {
    RedisStore::new(RedisOptions {
        url: format!("redis://127.0.0.1:{}", c.nodes[0].port),
        key_prefix: prefix.into(),
        cluster: Some(c.urls()),
        ..RedisOptions::default()
    })
    .unwrap()
}

fn node_id(port: u16) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut conn(port))
        .unwrap()
}

/// Moves `slot` from the node on `from` to the node on `to`, keys included, the way
/// `redis-cli --cluster reshard` does.
fn move_slot(c: &Cluster, slot: u16, from: u16, to: u16) {
    let (from_id, to_id) = (node_id(from), node_id(to));
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("IMPORTING")
        .arg(&from_id)
        .query(&mut conn(to))
        .unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("MIGRATING")
        .arg(&to_id)
        .query(&mut conn(from))
        .unwrap();
    loop {
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut conn(from))
            .unwrap();
        if keys.is_empty() {
            break;
        }
        let _: () = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(to)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(&keys)
            .query(&mut conn(from))
            .unwrap();
    }
    for n in &c.nodes {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("NODE")
            .arg(&to_id)
            .query(&mut conn(n.port))
            .unwrap();
    }
}

#[test]
fn a_cluster_keeps_every_update_through_a_resharding() {
    let c = cluster();
    let s = store(&c, "rc:");
    // The engines work as on one server.
    let engine = Engine::default();
    let args = json!({"q": "weather"});
    let verdicts: Vec<Verdict> = (0..3)
        .map(|i| {
            let id = i.to_string();
            update(&s, "alone", |st| {
                engine.pre(
                    st,
                    &Call {
                        session: "alone",
                        id: &id,
                        tool: "search",
                        args: &args,
                    },
                )
            })
            .unwrap()
            .unwrap()
            .verdict
        })
        .collect();
    assert_eq!(verdicts, [Verdict::Allow, Verdict::Allow, Verdict::Deny]);
    // Sessions spread over the primaries, and all of them are listed.
    for k in 0..12 {
        let key = format!("spread-{k}");
        update(&s, &key, |st| {
            let _ = engine.pre(
                st,
                &Call {
                    session: &key,
                    id: "1",
                    tool: "t",
                    args: &args,
                },
            );
        })
        .unwrap();
    }
    let listed = s.list().unwrap();
    assert_eq!(
        listed
            .iter()
            .filter(|i| i.key.starts_with("spread-"))
            .count(),
        12
    );
    let owners: std::collections::BTreeSet<u16> = (0..12)
        .map(|k| {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(format!("rc:{{spread-{k}}}"))
                .query(&mut conn(c.nodes[0].port))
                .unwrap();
            owner(&c, slot)
        })
        .collect();
    assert!(owners.len() > 1, "the sessions landed on one primary only");

    // Writers on one session while its slot moves to another primary.
    let counting = Engine::new(
        Config::from_toml_str(
            "[streak]\nmax_repeats = 1000000\nprogress = false\n[breaker]\nenabled = false",
            &no_env,
        )
        .unwrap(),
    );
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg("rc:{shared}")
        .query(&mut conn(c.nodes[0].port))
        .unwrap();
    let from = owner(&c, slot);
    let to = c.nodes.iter().map(|n| n.port).find(|p| *p != from).unwrap();
    let done = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for w in 0..4 {
            let (c, counting, args, done) = (&c, &counting, &args, &done);
            scope.spawn(move || {
                let s = store(c, "rc:");
                for i in 0..300 {
                    let id = format!("w{w}-{i}");
                    let d = update(&s, "shared", |st| {
                        counting.pre(
                            st,
                            &Call {
                                session: "shared",
                                id: &id,
                                tool: "t",
                                args,
                            },
                        )
                    })
                    .unwrap()
                    .unwrap();
                    assert_eq!(d.verdict, Verdict::Allow);
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        scope.spawn(|| {
            while done.load(std::sync::atomic::Ordering::Relaxed) < 300 {
                std::thread::sleep(Duration::from_millis(2));
            }
            move_slot(&c, slot, from, to);
        });
    });
    assert_eq!(owner(&c, slot), to, "the slot moved");
    let st = s.get("shared").unwrap().unwrap();
    assert_eq!(
        st.streak.count(),
        1200,
        "every decision counted exactly once"
    );
}

/// The port of the primary serving `slot`.
fn owner(c: &Cluster, slot: u16) -> u16 {
    let slots: redis::Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut conn(c.nodes[0].port))
        .unwrap();
    let redis::Value::Array(ranges) = slots else {
        panic!("CLUSTER SLOTS")
    };
    for r in ranges {
        let redis::Value::Array(parts) = r else {
            continue;
        };
        let (
            Some(redis::Value::Int(lo)),
            Some(redis::Value::Int(hi)),
            Some(redis::Value::Array(primary)),
        ) = (parts.first(), parts.get(1), parts.get(2))
        else {
            continue;
        };
        if (*lo..=*hi).contains(&(slot as i64)) {
            if let Some(redis::Value::Int(port)) = primary.get(1) {
                return *port as u16;
            }
        }
    }
    panic!("no owner for slot {slot}");
}
