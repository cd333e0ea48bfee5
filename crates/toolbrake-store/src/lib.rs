//! Where session state lives. One job: keep each session's [`SessionState`] and apply
//! updates to it atomically.
//!
//! The engines are pure functions over a session's state; a [`Store`] decides where that
//! state is kept and how an update is made atomic (a mutex in memory, a transaction in
//! SQLite, a compare-and-set script in Redis). The contract is one closure-based
//! read-modify-write per session, after governor's `StateStore`: the algorithm never sees
//! the storage, and the storage never sees the algorithm.
#![deny(missing_docs)]

mod counters;
mod memory;
mod redis_store;
pub mod settings;
mod sqlite;
#[cfg(feature = "testing")]
pub mod testing;

pub use counters::{Counters, Series, Tally, MAX_TOOLS, OTHER_TOOL, TOOL_LABEL};
pub use memory::MemoryStore;
pub use redis_store::{RedisOptions, RedisStore};
pub use sqlite::{SqliteOptions, SqliteStore};

use serde::Serialize;
use toolbrake_core::SessionState;

/// The error underneath a store failure (SQLite's, Redis's, the operating system's).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A store that cannot do what was asked. Messages name the store, never argument values
/// or credentials; the underlying error stays reachable through `source()`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached or refused the operation (locked, down, disk full…).
    #[error("{store}: {message}")]
    Unavailable {
        /// Which store (kind and location).
        store: String,
        /// What went wrong.
        message: String,
        /// The error underneath, when there is one.
        #[source]
        source: Option<Cause>,
    },
    /// Stored state could not be decoded; the session is treated as corrupt.
    #[error("{store}: session state is corrupt: {message}")]
    Corrupt {
        /// Which store.
        store: String,
        /// What went wrong.
        message: String,
    },
}

impl StoreError {
    /// A store failure described by a message alone.
    pub fn unavailable(store: impl Into<String>, message: impl Into<String>) -> Self {
        StoreError::Unavailable {
            store: store.into(),
            message: message.into(),
            source: None,
        }
    }

    /// A store failure caused by `e` (its text is the message; it stays the `source()`).
    pub fn caused(
        store: impl Into<String>,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Unavailable {
            store: store.into(),
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

/// One stored session, for operators.
#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    /// The session key.
    pub key: String,
    /// Last update, milliseconds since the Unix epoch.
    pub last_activity_ms: u64,
    /// The state.
    #[serde(skip)]
    pub state: SessionState,
}

/// Keeps session state and applies updates atomically.
pub trait Store: Send + Sync {
    /// Applies `f` to the session's state (a default state when the session is new) and
    /// keeps the result, atomically with respect to every other update of that session,
    /// in this process and in every other process sharing the store. `f` may run more
    /// than once (an optimistic store retries after a conflict); only the run whose
    /// result was kept counts.
    ///
    /// `f` may also add counter increments to the [`Tally`] it is handed (empty at the
    /// start of every run): the store adds the kept run's tally to its counters in the
    /// same atomic write as the state, never in a second one, so a counter cannot miss
    /// an update that was kept nor count one that was not.
    fn update(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError>;

    /// Adds `tally` to the counters alone, for an event that changes no session (a call
    /// whose payload could not be read). One atomic write.
    fn add_counts(&self, tally: &Tally) -> Result<(), StoreError>;

    /// Every counter the store keeps, summed over whatever the store spreads them across
    /// (a Redis Cluster's slots). Counters never expire and survive restarts.
    fn counters(&self) -> Result<Counters, StoreError>;

    /// The session's state, if stored.
    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError>;

    /// Forgets a session; `true` if it existed.
    fn remove(&self, session: &str) -> Result<bool, StoreError>;

    /// Forgets a session and hands back its state, if stored (ending a session reads it a
    /// last time). The default reads it, then removes it; a store holding states in memory
    /// hands its own over instead of a copy.
    fn take(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        let state = self.get(session)?;
        self.remove(session)?;
        Ok(state)
    }

    /// Every stored session.
    fn list(&self) -> Result<Vec<SessionInfo>, StoreError>;

    /// The store's kind and location, for messages (`memory`, `sqlite /path`, …).
    fn describe(&self) -> String;

    /// Keys of stored sessions starting with `prefix` (sub-agent sessions of a session).
    fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self
            .list()?
            .into_iter()
            .map(|s| s.key)
            .filter(|k| k.starts_with(prefix))
            .collect())
    }

    /// Whether an update may wait on I/O (a file lock, the network): async callers then
    /// run it where blocking is allowed. An in-memory store answers in microseconds.
    fn may_block(&self) -> bool {
        true
    }

    /// Whether other processes may read and write the same sessions (a file, a server):
    /// then a step must be stored before anything that lets another process act on it
    /// (an answer that reaches the client). Only this process sees an in-memory store.
    fn shared(&self) -> bool {
        true
    }

    /// Updates (and counts) since this store was opened whose counter increments could not
    /// be kept (a shared store's counters key holds a value of the wrong type, or a counter
    /// cannot grow): the update itself was kept, and its decision stands. Always 0 for a
    /// store whose counters nothing else writes.
    fn uncounted(&self) -> u64 {
        0
    }

    /// Problems the store recovered from since the last call (a session whose stored
    /// state could not be decoded and started afresh), for the adapter to report.
    fn take_warnings(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Milliseconds since the Unix epoch (stores keep activity times; the core has no clock).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Decodes a stored session state. Undecodable bytes (a corrupt row, a value written by
/// something else) start the session afresh and leave a warning in `warnings` naming the
/// store, for [`Store::take_warnings`].
pub(crate) fn decode_or_warn(
    bytes: &[u8],
    store: &str,
    warnings: &std::sync::Mutex<Vec<String>>,
) -> SessionState {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!(
            "{store}: the stored state of one session could not be decoded ({e}); it starts afresh"
        ));
        SessionState::default()
    })
}

/// A listed session's state, or `None` (with a warning saying how to reset it) when its
/// stored bytes cannot be read: one bad row never hides the others.
pub(crate) fn decode_listed(
    key: &str,
    bytes: &[u8],
    store: &str,
    warnings: &std::sync::Mutex<Vec<String>>,
) -> Option<SessionState> {
    match serde_json::from_slice(bytes) {
        Ok(s) => Some(s),
        Err(e) => {
            warnings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!(
                    "{store}: session {key:?} has a stored state that cannot be read ({e}); it is left out of the list. `toolbrake sessions reset {key}` forgets it."
                ));
            None
        }
    }
}

/// A session's key followed by the keys of its stored sub-agent sessions (a sub-agent's
/// key has no sub-agents of its own).
pub fn with_sub_agents<S: Store + ?Sized>(store: &S, key: &str) -> Result<Vec<String>, StoreError> {
    let mut keys = vec![key.to_string()];
    if !toolbrake_core::engine::is_agent_key(key) {
        keys.extend(store.keys_with_prefix(&toolbrake_core::engine::agent_key_prefix(key))?);
    }
    Ok(keys)
}

/// [`Store::update`] with a result: runs `f` under the store's atomicity and returns what
/// the kept run of `f` returned. Counts nothing.
pub fn update<R, S: Store + ?Sized>(
    store: &S,
    session: &str,
    mut f: impl FnMut(&mut SessionState) -> R,
) -> Result<R, StoreError> {
    update_counted(store, session, |st, _| f(st))
}

/// [`Store::update`] with a result and a tally: runs `f` under the store's atomicity,
/// keeps the kept run's counter increments in the same write, and returns what that run
/// of `f` returned.
pub fn update_counted<R, S: Store + ?Sized>(
    store: &S,
    session: &str,
    mut f: impl FnMut(&mut SessionState, &mut Tally) -> R,
) -> Result<R, StoreError> {
    let mut out = None;
    store.update(session, &mut |st, tally| out = Some(f(st, tally)))?;
    Ok(out.expect("Store::update runs the closure at least once on success"))
}
