//! When the proxy records a call's outcome against its answer to the client: before it
//! with a store other processes share (another proxy may judge the client's next call),
//! and in any case before the client's next call is judged.

mod support;

use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use toolbrake_core::config::Config;
use toolbrake_core::engine::SessionState;
use toolbrake_core::Engine;
use toolbrake_mcp::Options;
use toolbrake_session::{Observed, ObservedKind, Observer};
use toolbrake_store::{Counters, MemoryStore, SessionInfo, Store, StoreError, Tally};

/// A memory store that says whether it is shared, and takes its time over its second
/// update (the first call's record), so that whatever is not held back for the record
/// (the answer, the next judgement) comes first.
struct Store2 {
    inner: MemoryStore,
    shared: bool,
    updates: AtomicUsize,
}

impl Store for Store2 {
    fn update(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError> {
        if self.updates.fetch_add(1, Ordering::SeqCst) == 1 {
            std::thread::sleep(Duration::from_millis(200));
        }
        self.inner.update(session, f)
    }
    fn add_counts(&self, tally: &Tally) -> Result<(), StoreError> {
        self.inner.add_counts(tally)
    }
    fn counters(&self) -> Result<Counters, StoreError> {
        self.inner.counters()
    }
    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        self.inner.get(session)
    }
    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        self.inner.remove(session)
    }
    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.inner.list()
    }
    fn describe(&self) -> String {
        "test".into()
    }
    fn may_block(&self) -> bool {
        false
    }
    fn shared(&self) -> bool {
        self.shared
    }
}

/// The session steps, in the order they were taken.
#[derive(Default)]
struct Steps(Mutex<Vec<String>>);

impl Observer for Steps {
    fn observe(&self, e: &Observed<'_>) {
        let step = match &e.kind {
            ObservedKind::Judged { call, .. } => format!("judged {}", call.id),
            ObservedKind::Recorded { call_id, .. } => format!("recorded {call_id}"),
            _ => return,
        };
        self.0.lock().unwrap().push(step);
    }
}

impl Steps {
    fn taken(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Two calls, each answered by the server; the client sends the second the moment it
/// reads the first answer. Returns the steps taken when the first answer was read, and
/// all of them at the end.
async fn two_calls(shared: bool) -> (Vec<String>, Vec<String>) {
    let steps = Arc::new(Steps::default());
    // The proxy on a runtime of its own: a worker busy with a record never holds up the
    // client's tasks (on one runtime, the answer's reader would wait for that worker).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let entered = rt.enter();
    let support::Wired {
        proxy,
        mut client_w,
        mut at_client,
        mut server_w,
        mut at_server,
    } = support::wire(Options {
        store: Arc::new(Store2 {
            inner: MemoryStore::new(),
            shared,
            updates: AtomicUsize::new(0),
        }),
        observer: Some(steps.clone()),
        ..support::options(Engine::new(Config::default()), "ordered")
    });
    drop(entered);
    let mut at_first_answer = Vec::new();
    for id in 1..=2 {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": format!("m{id}")}}});
        support::send(&mut client_w, &call).await;
        let forwarded = support::next_line(&mut at_server).await;
        assert!(forwarded.contains("tools/call"), "{forwarded}");
        // A plain success: no advice can ride on it.
        let answer = json!({"jsonrpc": "2.0", "id": id,
            "result": {"content": [{"type": "text", "text": format!("m{id}")}]}});
        support::send(&mut server_w, &answer).await;
        let read = support::next_line(&mut at_client).await;
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&read).unwrap(),
            answer
        );
        if id == 1 {
            at_first_answer = steps.taken();
        }
    }
    // The second record, after its answer, is awaited here.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while steps.taken().len() < 4 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.abort();
    rt.shutdown_background();
    (at_first_answer, steps.taken())
}

/// Each call judged, then recorded, before the next is judged.
const IN_ORDER: [&str; 4] = [
    "judged mcp-1",
    "recorded mcp-1",
    "judged mcp-2",
    "recorded mcp-2",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_store_has_the_outcome_before_the_client_has_the_answer() {
    let (at_answer, all) = two_calls(true).await;
    assert_eq!(at_answer, ["judged mcp-1", "recorded mcp-1"]);
    assert_eq!(all, IN_ORDER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_store_records_after_the_answer_and_before_the_next_judgement() {
    // The answer reaches the client while its record takes its time; the next call is
    // judged after the record.
    let (at_answer, all) = two_calls(false).await;
    assert_eq!(at_answer, ["judged mcp-1"]);
    assert_eq!(all, IN_ORDER);
}
