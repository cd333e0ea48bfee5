//! In-memory sessions: for the library, `serve`, `replay`, the MCP proxy and tests.

use crate::{now_ms, Counters, SessionInfo, Store, StoreError, Tally, MAX_TOOLS};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use toolbrake_core::SessionState;

/// Sessions in a map behind a mutex; idle sessions are dropped after `idle_ttl_ms`
/// (swept on writes, no background thread). The counters live under the same mutex.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    idle_ttl_ms: Option<u64>,
    writes: Mutex<u64>,
}

/// Session key → its state and when it was last written. Looked up on every event, under
/// the lock: foldhash, with a seed of its own per process, instead of SipHash.
type Sessions = HashMap<String, (SessionState, u64), foldhash::fast::RandomState>;

#[derive(Debug, Default)]
struct Inner {
    sessions: Sessions,
    /// Stored series key → value.
    counters: HashMap<String, u64, foldhash::fast::RandomState>,
    /// Tools counted under their own name (at most [`MAX_TOOLS`]).
    tools: BTreeSet<String>,
}

impl Inner {
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

    fn sweep(&self, map: &mut Sessions, now: u64) {
        let Some(ttl) = self.idle_ttl_ms else { return };
        let mut w = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        *w += 1;
        // Sweeping is O(sessions); do it every 1024 writes.
        if *w % 1024 == 0 {
            map.retain(|_, (_, seen)| now.saturating_sub(*seen) <= ttl);
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
        let mut inner = self.inner();
        self.sweep(&mut inner.sessions, now);
        // The key is copied only for a new session.
        if !inner.sessions.contains_key(session) {
            inner
                .sessions
                .insert(session.to_string(), (SessionState::default(), now));
        }
        let entry = inner
            .sessions
            .get_mut(session)
            .expect("present or just inserted");
        if self
            .idle_ttl_ms
            .is_some_and(|ttl| now.saturating_sub(entry.1) > ttl)
        {
            entry.0 = SessionState::default();
        }
        let mut tally = Tally::new();
        f(&mut entry.0, &mut tally);
        entry.1 = now;
        inner.count(&tally);
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
        Ok(self.inner().sessions.get(session).map(|(s, _)| s.clone()))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        Ok(self.inner().sessions.remove(session).is_some())
    }

    fn take(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        Ok(self.inner().sessions.remove(session).map(|(s, _)| s))
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut out: Vec<SessionInfo> = self
            .inner()
            .sessions
            .iter()
            .map(|(k, (s, t))| SessionInfo {
                key: k.clone(),
                last_activity_ms: *t,
                state: s.clone(),
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
