//! In-memory sessions: for the library, `serve`, `replay`, the MCP proxy and tests.

use crate::{now_ms, SessionInfo, Store, StoreError};
use loopbrake_core::SessionState;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Sessions in a map behind a mutex; idle sessions are dropped after `idle_ttl_ms`
/// (swept on writes, no background thread).
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, (SessionState, u64)>>,
    idle_ttl_ms: Option<u64>,
    writes: Mutex<u64>,
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

    fn lock(&self) -> MutexGuard<'_, HashMap<String, (SessionState, u64)>> {
        // Every update replaces a whole value in place, so a panic while locked cannot
        // leave a half-written state behind: the map is still consistent.
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn sweep(&self, map: &mut HashMap<String, (SessionState, u64)>, now: u64) {
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
        f: &mut dyn FnMut(&mut SessionState),
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut map = self.lock();
        self.sweep(&mut map, now);
        // The key is copied only for a new session.
        if !map.contains_key(session) {
            map.insert(session.to_string(), (SessionState::default(), now));
        }
        let entry = map.get_mut(session).expect("present or just inserted");
        if self
            .idle_ttl_ms
            .is_some_and(|ttl| now.saturating_sub(entry.1) > ttl)
        {
            entry.0 = SessionState::default();
        }
        f(&mut entry.0);
        entry.1 = now;
        Ok(())
    }

    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        Ok(self.lock().get(session).map(|(s, _)| s.clone()))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        Ok(self.lock().remove(session).is_some())
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut out: Vec<SessionInfo> = self
            .lock()
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
            .lock()
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update;
    use loopbrake_core::{Call, Config, Engine, Verdict};
    use serde_json::json;

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
