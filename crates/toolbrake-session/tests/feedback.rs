//! Feedback on a run (a mistaken stop, a stuck run) is kept with the session's state in
//! every store: in memory, in SQLite, and in a real `redis-server` started on loopback.

use serde_json::json;
use toolbrake_core::{Call, Config, Engine, Feedback, Verdict};
use toolbrake_session::{feedback, record_feedback, Sessions};
use toolbrake_store::testing::RedisServer;
use toolbrake_store::{MemoryStore, RedisOptions, RedisStore, SqliteOptions, SqliteStore, Store};

/// A run the streak brake stopped (its 3rd identical call), marked by a person afterwards;
/// the marks survive the store and later events, and an unknown session gets none.
fn feedback_is_kept(store: &dyn Store) {
    let engine = Engine::new(Config::default());
    let sessions = Sessions::new(&engine, store);
    let args = json!({"q": "weather"});
    let mut last = Verdict::Allow;
    for id in ["1", "2", "3"] {
        let call = Call {
            session: "run-1",
            id,
            tool: "search",
            args: &args,
        };
        last = sessions.pre("run-1", &call).unwrap().verdict;
    }
    assert_eq!(last, Verdict::Deny);
    assert_eq!(feedback(store, "run-1").unwrap(), None);

    assert!(record_feedback(store, "run-1", Feedback::Mistaken).unwrap());
    let st = store.get("run-1").unwrap().unwrap();
    assert_eq!(st.feedback, Some(Feedback::Mistaken));
    assert_eq!(st.stopped(), 1, "the run's own state is untouched");

    // A later event of the run keeps the mark; a second mark replaces the first.
    sessions.user_message("run-1").unwrap();
    assert_eq!(feedback(store, "run-1").unwrap(), Some(Feedback::Mistaken));
    assert!(record_feedback(store, "run-1", Feedback::Stuck).unwrap());
    assert_eq!(feedback(store, "run-1").unwrap(), Some(Feedback::Stuck));
    let listed = store.list().unwrap();
    let info = listed.iter().find(|i| i.key == "run-1").unwrap();
    assert_eq!(info.state.feedback, Some(Feedback::Stuck));

    // No such session: nothing is created.
    assert!(!record_feedback(store, "never-seen", Feedback::Stuck).unwrap());
    assert!(store.get("never-seen").unwrap().is_none());
    // An ended session is forgotten with its mark.
    sessions.end("run-1").unwrap();
    assert!(!record_feedback(store, "run-1", Feedback::Mistaken).unwrap());
}

#[test]
fn feedback_is_kept_in_memory() {
    feedback_is_kept(&MemoryStore::new());
}

#[test]
fn feedback_is_kept_in_sqlite_across_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    feedback_is_kept(&SqliteStore::open(&path, SqliteOptions::default()).unwrap());
    // Another process's view: a mark written by one open is read by the next.
    let first = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    first.update("run-2", &mut |_, _| {}).unwrap();
    assert!(record_feedback(&first, "run-2", Feedback::Stuck).unwrap());
    drop(first);
    let second = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(feedback(&second, "run-2").unwrap(), Some(Feedback::Stuck));
}

#[test]
fn feedback_is_kept_in_redis() {
    let server = RedisServer::start();
    let store = RedisStore::new(RedisOptions {
        url: server.url(),
        key_prefix: "fb:".to_string(),
        ..RedisOptions::default()
    })
    .unwrap();
    feedback_is_kept(&store);
}
