//! The SQLite store's listing survives rows it cannot read: each is skipped with a warning
//! that says how to reset it, and the other sessions are listed.

use serde_json::json;
use toolbrake_core::{Call, Engine};
use toolbrake_store::{update, SqliteOptions, SqliteStore, Store};

#[test]
fn a_corrupt_session_row_is_skipped_with_a_warning_not_fatal() {
    let dir = std::env::temp_dir().join(format!("lb-rows-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("state.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    let engine = Engine::default();
    for key in ["a", "b"] {
        let args = json!({"command": "ls"});
        let _ = update(&store, key, |st| {
            engine.pre(
                st,
                &Call {
                    session: key,
                    id: "1",
                    tool: "Bash",
                    args: &args,
                },
            )
        })
        .unwrap();
    }
    let raw = rusqlite::Connection::open(&path).unwrap();
    let now = 4_102_444_800_000i64; // far in the future: never swept as idle
    raw.execute(
        "INSERT INTO sessions (key, state, updated_ms) VALUES ('bad-json', X'7b6e6f74', ?1), ('text-state', 'garbage', ?1)",
        [now],
    )
    .unwrap();
    drop(raw);
    let listed = store.list().unwrap();
    let keys: Vec<&str> = listed.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["a", "b"]);
    let warnings = store.take_warnings().join("\n");
    for key in ["bad-json", "text-state"] {
        assert!(
            warnings.contains(&format!(
                "session {key:?} has a stored state that cannot be read"
            )) && warnings.contains(&format!("`toolbrake sessions reset {key}` forgets it")),
            "{warnings}"
        );
    }
    // And the reset it suggests works.
    assert!(store.remove("bad-json").unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Openers racing each other (hook processes of one batch: the very first time, or while
/// others write) all get a working store: a lock met while making sure the file is ours is
/// waited for up to `lock_timeout`, never reported as "database is locked".
#[test]
fn concurrent_opens_all_succeed() {
    let dir = std::env::temp_dir().join(format!("lb-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("state.db");
    std::thread::scope(|scope| {
        for w in 0..4 {
            let path = &path;
            scope.spawn(move || {
                for i in 0..300 {
                    let s = SqliteStore::open(path, SqliteOptions::default())
                        .unwrap_or_else(|e| panic!("open {w}/{i}: {e}"));
                    s.update(&format!("s{}", i % 3), &mut |st, _| {
                        st.streak = Default::default();
                    })
                    .unwrap();
                    s.update(&format!("s{}", i % 3), &mut |_, _| {}).unwrap();
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}
