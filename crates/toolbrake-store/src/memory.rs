//! In-memory sessions: for the library, `serve`, `replay`, the MCP proxy and tests.

use crate::{now_ms, Counters, SessionInfo, Store, StoreError, Tally, MAX_TOOLS};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use toolbrake_core::SessionState;

/// Sessions in a map behind a mutex; idle sessions are dropped after `idle_ttl_ms`
/// (swept on writes, no background thread). The counters live under the same mutex.
///
/// Bounded (`with_limits`, `[store] max_sessions` / `max_bytes`): past either bound, the
/// sessions idle longest are forgotten, down to nine tenths of it, so that a process
/// making a session per run (and never ending them) holds a fixed amount of memory. A
/// session's size is its state's JSON length, measured at its 1st, 2nd, 4th, 8th, 16th
/// and then every 32nd write (not on every write: that would cost more than the write).
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    idle_ttl_ms: Option<u64>,
    writes: Mutex<u64>,
    /// At most this many sessions (0: no bound).
    max_sessions: usize,
    /// At most about this many bytes of session state (0: no bound).
    max_bytes: u64,
}

/// One session: its state, when it was last written, its measured size and its writes.
#[derive(Debug)]
struct Entry {
    state: SessionState,
    seen: u64,
    bytes: u64,
    writes: u64,
}

/// Session key → its entry. Looked up on every event, under the lock: foldhash, with a
/// seed of its own per process, instead of SipHash.
type Sessions = HashMap<String, Entry, foldhash::fast::RandomState>;

/// The JSON length of a state, without building the text.
fn measure(state: &SessionState) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, state);
    c.0
}

#[derive(Debug, Default)]
struct Inner {
    sessions: Sessions,
    /// The measured sizes of the sessions held, summed.
    bytes: u64,
    /// Stored series key → value.
    counters: HashMap<String, u64, foldhash::fast::RandomState>,
    /// Tools counted under their own name (at most [`MAX_TOOLS`]).
    tools: BTreeSet<String>,
}

impl Inner {
    fn forget(&mut self, session: &str) -> Option<Entry> {
        let e = self.sessions.remove(session)?;
        self.bytes = self.bytes.saturating_sub(e.bytes);
        Some(e)
    }

    fn count(&mut self, tally: &Tally) {
        for inc in tally.incs() {
            let key = match &inc.tool {
                Some((tool, other)) if !self.tools.contains(tool) => {
                    if self.tools.len() < MAX_TOOLS {
                        self.tools.insert(tool.clone());
                        &inc.key
                    } else {
                        other
                    }
                }
                _ => &inc.key,
            };
            match self.counters.get_mut(key) {
                Some(v) => *v = v.saturating_add(inc.n),
                None => {
                    self.counters.insert(key.clone(), inc.n);
                }
            }
        }
    }
}

impl MemoryStore {
    /// An empty store with no expiry.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// An empty store forgetting sessions idle for longer than `idle_ttl_ms`.
    pub fn with_idle_ttl(idle_ttl_ms: u64) -> Self {
        MemoryStore {
            idle_ttl_ms: Some(idle_ttl_ms),
            ..MemoryStore::default()
        }
    }

    /// This store, holding at most `max_sessions` sessions and about `max_bytes` bytes of
    /// session state (0: no bound): past either, the sessions idle longest are forgotten.
    pub fn with_limits(mut self, max_sessions: usize, max_bytes: u64) -> Self {
        self.max_sessions = max_sessions;
        self.max_bytes = max_bytes;
        self
    }

    /// The measured size of the sessions held, in bytes (their states' JSON length).
    pub fn bytes(&self) -> u64 {
        self.inner().bytes
    }

    /// Past a bound: forgets the sessions idle longest (never `keep`, the one just
    /// written) until nine tenths of each bound is left. O(sessions), once per tenth of
    /// the bound's worth of new sessions.
    fn evict(&self, inner: &mut Inner, keep: &str) {
        let over_count = self.max_sessions > 0 && inner.sessions.len() > self.max_sessions;
        let over_bytes = self.max_bytes > 0 && inner.bytes > self.max_bytes;
        if !over_count && !over_bytes {
            return;
        }
        let count_goal = if self.max_sessions > 0 {
            self.max_sessions - self.max_sessions / 10
        } else {
            usize::MAX
        };
        let bytes_goal = if self.max_bytes > 0 {
            self.max_bytes - self.max_bytes / 10
        } else {
            u64::MAX
        };
        let mut oldest: Vec<(u64, String)> = inner
            .sessions
            .iter()
            .filter(|(k, _)| k.as_str() != keep)
            .map(|(k, e)| (e.seen, k.clone()))
            .collect();
        oldest.sort_unstable();
        for (_, key) in oldest {
            if inner.sessions.len() <= count_goal && inner.bytes <= bytes_goal {
                break;
            }
            inner.forget(&key);
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every update replaces a whole value in place, and counts only after its closure
        // returned, so a panic while locked cannot leave a half-written state behind.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.inner().sessions.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.inner().sessions.is_empty()
    }

    fn sweep(&self, map: &mut Sessions, bytes: &mut u64, now: u64) {
        let Some(ttl) = self.idle_ttl_ms else { return };
        let mut w = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        *w += 1;
        // Sweeping is O(sessions); do it every 1024 writes.
        if (*w).is_multiple_of(1024) {
            let before: u64 = map.values().map(|e| e.bytes).sum();
            map.retain(|_, e| now.saturating_sub(e.seen) <= ttl);
            let after: u64 = map.values().map(|e| e.bytes).sum();
            *bytes = bytes.saturating_sub(before - after);
        }
    }
}

impl Store for MemoryStore {
    fn update(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut guard = self.inner();
        let inner = &mut *guard;
        self.sweep(&mut inner.sessions, &mut inner.bytes, now);
        // The key is copied only for a new session.
        if !inner.sessions.contains_key(session) {
            inner.sessions.insert(
                session.to_string(),
                Entry {
                    state: SessionState::default(),
                    seen: now,
                    bytes: 0,
                    writes: 0,
                },
            );
        }
        let entry = inner
            .sessions
            .get_mut(session)
            .expect("present or just inserted");
        if self
            .idle_ttl_ms
            .is_some_and(|ttl| now.saturating_sub(entry.seen) > ttl)
        {
            entry.state = SessionState::default();
        }
        let mut tally = Tally::new();
        f(&mut entry.state, &mut tally);
        entry.seen = now;
        entry.writes += 1;
        let bounded = self.max_sessions > 0 || self.max_bytes > 0;
        if bounded
            && (entry.writes.is_power_of_two() && entry.writes <= 16
                || entry.writes.is_multiple_of(32))
        {
            let size = measure(&entry.state) + session.len() as u64;
            inner.bytes = inner.bytes.saturating_sub(entry.bytes) + size;
            entry.bytes = size;
        }
        inner.count(&tally);
        if bounded {
            self.evict(inner, session);
        }
        Ok(())
    }

    fn add_counts(&self, tally: &Tally) -> Result<(), StoreError> {
        self.inner().count(tally);
        Ok(())
    }

    fn counters(&self) -> Result<Counters, StoreError> {
        let mut out = Counters::default();
        for (k, v) in &self.inner().counters {
            out.add_stored(k.as_bytes(), *v);
        }
        Ok(out)
    }

    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        Ok(self.inner().sessions.get(session).map(|e| e.state.clone()))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        Ok(self.inner().forget(session).is_some())
    }

    fn take(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        Ok(self.inner().forget(session).map(|e| e.state))
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut out: Vec<SessionInfo> = self
            .inner()
            .sessions
            .iter()
            .map(|(k, e)| SessionInfo {
                key: k.clone(),
                last_activity_ms: e.seen,
                state: e.state.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self
            .inner()
            .sessions
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect())
    }

    fn describe(&self) -> String {
        "memory".to_string()
    }

    fn may_block(&self) -> bool {
        false
    }

    fn shared(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update;
    use serde_json::json;
    use toolbrake_core::{Call, Config, Engine, Verdict};

    #[test]
    fn take_hands_back_the_state_and_forgets_the_session() {
        let store = MemoryStore::new();
        let engine = Engine::new(Config::default());
        let args = json!({"q": "x"});
        let call = Call {
            session: "a",
            id: "1",
            tool: "t",
            args: &args,
        };
        let d = update(&store, "a", |st| engine.pre(st, &call))
            .unwrap()
            .unwrap();
        assert_eq!(d.verdict, Verdict::Allow);
        let kept = store.get("a").unwrap().expect("stored");
        assert_eq!(store.take("a").unwrap(), Some(kept));
        assert_eq!(store.get("a").unwrap(), None);
        assert_eq!(store.take("a").unwrap(), None);
        assert!(!store.remove("a").unwrap());
    }

    #[test]
    fn updates_are_kept_per_session() {
        let store = MemoryStore::new();
        let engine = Engine::new(Config::default());
        let args = json!({"q": "x"});
        let mut verdicts = Vec::new();
        for (i, s) in ["a", "a", "b", "a"].iter().enumerate() {
            let id = i.to_string();
            let d = update(&store, s, |st| {
                engine.pre(
                    st,
                    &Call {
                        session: s,
                        id: &id,
                        tool: "t",
                        args: &args,
                    },
                )
            })
            .unwrap()
            .unwrap();
            verdicts.push(d.verdict);
        }
        assert_eq!(
            verdicts,
            [
                Verdict::Allow,
                Verdict::Allow,
                Verdict::Allow,
                Verdict::Deny
            ]
        );
        assert_eq!(store.list().unwrap().len(), 2);
        assert!(store.remove("a").unwrap());
        assert!(store.get("a").unwrap().is_none());
    }

    #[test]
    fn a_bounded_store_forgets_the_sessions_idle_longest() {
        let engine = Engine::new(Config::default());
        let args = json!({"q": "x"});
        let call = |st: &mut SessionState, s: &str, id: &str| {
            engine
                .pre(
                    st,
                    &Call {
                        session: s,
                        id,
                        tool: "t",
                        args: &args,
                    },
                )
                .unwrap()
        };
        // A count bound: 100 sessions, one call each, at most 10 held.
        let store = MemoryStore::new().with_limits(10, 0);
        for i in 0..100 {
            let s = format!("run-{i}");
            let _ = update(&store, &s, |st| call(st, &s, "1")).unwrap();
            assert!(store.len() <= 10);
        }
        assert!(store.get("run-99").unwrap().is_some(), "the newest stays");
        assert!(store.get("run-0").unwrap().is_none(), "the oldest went");
        // A byte bound: sessions of a few hundred bytes each, 4 KB held at most.
        let store = MemoryStore::new().with_limits(0, 4096);
        for i in 0..200 {
            let s = format!("run-{i}");
            for n in 0..3 {
                let _ = update(&store, &s, |st| call(st, &s, &n.to_string())).unwrap();
            }
            assert!(store.bytes() <= 4096, "{} bytes", store.bytes());
        }
        assert!(store.len() > 1 && store.get("run-199").unwrap().is_some());
        // Forgetting a session gives its bytes back.
        let held = store.bytes();
        assert!(store.remove("run-199").unwrap());
        assert!(store.bytes() < held);
        // Unbounded by default.
        let store = MemoryStore::new();
        for i in 0..50 {
            let s = format!("run-{i}");
            let _ = update(&store, &s, |st| call(st, &s, "1")).unwrap();
        }
        assert_eq!(store.len(), 50);
    }

    #[test]
    fn idle_sessions_start_afresh() {
        let store = MemoryStore::with_idle_ttl(0);
        update(&store, "s", |st| st.streak = Default::default()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let engine = Engine::new(Config::default());
        let args = json!({});
        for i in 0..3 {
            let id = i.to_string();
            std::thread::sleep(std::time::Duration::from_millis(2));
            let d = update(&store, "s", |st| {
                engine.pre(
                    st,
                    &Call {
                        session: "s",
                        id: &id,
                        tool: "t",
                        args: &args,
                    },
                )
            })
            .unwrap()
            .unwrap();
            assert_eq!(
                d.verdict,
                Verdict::Allow,
                "an expired session forgets its streak"
            );
        }
    }
}
