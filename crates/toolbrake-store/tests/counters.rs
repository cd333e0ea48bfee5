//! The counters every store keeps in the same atomic write as a session's state: for the
//! memory store, SQLite (one connection per writer, as hook processes have), Redis on one
//! server and on a real three-primary Redis Cluster. Counters equal what the kept updates
//! tallied, under concurrent writers (no lost and no doubled increment, retries included),
//! survive reopening the store, and keep at most `MAX_TOOLS` tool names.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use toolbrake_store::testing::{RedisCluster, RedisServer};
use toolbrake_store::{
    update_counted, Counters, MemoryStore, RedisOptions, RedisStore, SqliteOptions, SqliteStore,
    Store, Tally, MAX_TOOLS, OTHER_TOOL,
};

const WRITERS: usize = 6;
const UPDATES: usize = 150;

/// `WRITERS` writers, each with its own store from `open`, each making `UPDATES` updates
/// of one shared session and of one session of its own, every run of the closure tallying
/// one call and one call of its tool. Returns how many times closures ran.
fn hammer(open: &(dyn Fn() -> Arc<dyn Store> + Sync)) -> u64 {
    let runs = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for w in 0..WRITERS {
            let runs = &runs;
            scope.spawn(move || {
                let store = open();
                for i in 0..UPDATES {
                    let session = if i % 2 == 0 {
                        "shared".to_string()
                    } else {
                        format!("own-{w}")
                    };
                    update_counted(&*store, &session, |st, tally: &mut Tally| {
                        runs.fetch_add(1, Ordering::Relaxed);
                        // A change to the state, so concurrent writers really conflict.
                        st.streak = Default::default();
                        tally.add("calls_total", &[("kind", "test")], 1);
                        tally.add_for_tool("tool_calls_total", &[], &format!("tool-{w}"), 2);
                    })
                    .unwrap_or_else(|e| panic!("writer {w}, update {i}: {e}"));
                }
            });
        }
    });
    runs.into_inner()
}

fn check_hammered(c: &Counters) {
    let kept = (WRITERS * UPDATES) as u64;
    assert_eq!(c.get("calls_total", &[("kind", "test")]), kept, "{c:?}");
    assert_eq!(c.sum("tool_calls_total", &[]), 2 * kept);
    for w in 0..WRITERS {
        assert_eq!(
            c.get("tool_calls_total", &[("tool", &format!("tool-{w}"))]),
            2 * UPDATES as u64,
            "writer {w}"
        );
    }
}

/// Tools past the bound are counted as `other`, never lost. `per_slot`: a cluster keeps
/// the bound per slot, and the session `tools` has a slot of its own.
fn check_tool_bound(store: &dyn Store, per_slot: bool) {
    // Tools the store keeps already (another metric's) count toward the bound.
    let before: std::collections::BTreeSet<String> = store
        .counters()
        .unwrap()
        .values
        .keys()
        .filter_map(|s| s.label("tool").map(str::to_string))
        .filter(|_| !per_slot)
        .collect();
    let named = MAX_TOOLS - before.len();
    let n = MAX_TOOLS + 20;
    for i in 0..n {
        update_counted(store, "tools", |_, t| {
            t.add_for_tool("bound_total", &[("v", "x")], &format!("t{i:04}"), 1)
        })
        .unwrap();
    }
    let c = store.counters().unwrap();
    let series: Vec<_> = c
        .values
        .keys()
        .filter(|s| s.metric == "bound_total")
        .collect();
    assert_eq!(series.len(), named + 1, "the named tools and `other`");
    assert_eq!(
        c.get("bound_total", &[("v", "x"), ("tool", OTHER_TOOL)]),
        (n - named) as u64
    );
    assert_eq!(c.get("bound_total", &[("v", "x"), ("tool", "t0000")]), 1);
    assert_eq!(c.sum("bound_total", &[]), n as u64);
    // A tool already kept is still counted under its name.
    update_counted(store, "tools", |_, t| {
        t.add_for_tool("bound_total", &[("v", "x")], "t0001", 5)
    })
    .unwrap();
    let c = store.counters().unwrap();
    assert_eq!(c.get("bound_total", &[("v", "x"), ("tool", "t0001")]), 6);
}

/// A tally alone (a call that changes no session) is counted too.
fn check_add_counts(store: &dyn Store) {
    let mut t = Tally::new();
    t.add("alone_total", &[("policy", "fail_open")], 1);
    store.add_counts(&t).unwrap();
    store.add_counts(&t).unwrap();
    assert_eq!(
        store
            .counters()
            .unwrap()
            .get("alone_total", &[("policy", "fail_open")]),
        2
    );
}

#[test]
fn memory_counts_what_kept_updates_tallied() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    hammer(&|| store.clone());
    check_hammered(&store.counters().unwrap());
    check_tool_bound(&*store, false);
    check_add_counts(&*store);
}

#[test]
fn sqlite_counts_across_connections_and_keeps_counters_when_reopened() {
    let dir = std::env::temp_dir().join(format!("lb-counters-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("state.db");
    let open = || -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(&path, SqliteOptions::default()).unwrap())
    };
    hammer(&open);
    check_hammered(&open().counters().unwrap());
    check_tool_bound(&*open(), false);
    check_add_counts(&*open());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file made before the counters existed gets them when opened.
#[test]
fn sqlite_gives_an_older_file_its_counters() {
    let dir = std::env::temp_dir().join(format!("lb-counters-old-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("state.db");
    drop(SqliteStore::open(&path, SqliteOptions::default()).unwrap());
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "DROP TABLE counters; DROP TABLE counter_tools; DELETE FROM meta WHERE k = 'counters';",
        )
        .unwrap();
    }
    let s = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    update_counted(&s, "s", |_, t| t.add("after_total", &[], 1)).unwrap();
    assert_eq!(s.counters().unwrap().get("after_total", &[]), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

fn redis_store(url: String, cluster: Option<Vec<String>>) -> RedisStore {
    RedisStore::new(RedisOptions {
        url,
        key_prefix: "lbc:".into(),
        cluster,
        ..RedisOptions::default()
    })
    .unwrap()
}

#[test]
fn redis_counts_in_the_same_transaction_as_the_state_and_keeps_counters() {
    let server = RedisServer::start();
    let runs = hammer(&|| Arc::new(redis_store(server.url(), None)));
    let c = redis_store(server.url(), None).counters().unwrap();
    check_hammered(&c);
    // Conflicting writers re-ran closures; only the kept runs were counted.
    assert!(runs >= (WRITERS * UPDATES) as u64);
    check_tool_bound(&redis_store(server.url(), None), false);
    check_add_counts(&redis_store(server.url(), None));
    // Counters never expire with the sessions.
    let ttl: i64 = redis::cmd("PTTL")
        .arg("lbc:counters")
        .query(
            &mut redis::Client::open(server.url())
                .unwrap()
                .get_connection()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(ttl, -1);
}

#[test]
fn a_redis_cluster_counts_per_slot_and_sums_every_slot() {
    let cluster = RedisCluster::start(3);
    let seed = cluster.urls()[0].clone();
    let open = || -> Arc<dyn Store> { Arc::new(redis_store(seed.clone(), Some(cluster.urls()))) };
    hammer(&open);
    let store = open();
    check_hammered(&store.counters().unwrap());
    // The writers' own sessions landed on several slots: one counters hash each, on the
    // session's own slot.
    let mut buckets = 0;
    for n in &cluster.nodes {
        let mut c = redis::Client::open(n.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("lbc:counters:*")
            .query(&mut c)
            .unwrap();
        buckets += keys.len();
    }
    assert!(buckets >= 3, "{buckets} counters hashes");
    check_tool_bound(&*store, true);
    check_add_counts(&*store);
}
