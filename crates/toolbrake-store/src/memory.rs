//! In-memory sessions: for the library, `serve`, `replay`, the MCP proxy and tests.

use crate::{now_ms, Counters, SessionInfo, Store, StoreError, Tally, MAX_TOOLS};
use std::collections::{BTreeSet, HashMap};
use std::io::Read;
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
///
/// Compact (`with_compact_after`, `[store] compact_after`): a session idle that long is
/// kept as its state's JSON, deflated (about a fifth of its JSON, a tenth of the decoded
/// state), until its next call decodes it again; its size is then the compressed
/// length. Idle sessions are found by the same sweep as expired ones, every 1,024 writes.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    idle_ttl_ms: Option<u64>,
    /// Sessions idle longer than this are kept compressed (`None`: never).
    compact_after_ms: Option<u64>,
    writes: Mutex<u64>,
    /// At most this many sessions (0: no bound).
    max_sessions: usize,
    /// At most about this many bytes of session state (0: no bound).
    max_bytes: u64,
    warnings: Mutex<Vec<String>>,
}

/// One session: its state, when it was last written, its measured size and its writes.
#[derive(Debug)]
struct Entry {
    held: Held,
    seen: u64,
    bytes: u64,
    writes: u64,
}

/// A session's state as the store holds it.
#[derive(Debug)]
enum Held {
    /// Decoded, as the engine uses it (boxed: a compact entry stays small in the map).
    Live(Box<SessionState>),
    /// Its JSON, deflated: an idle session.
    Compact(Box<[u8]>),
}

/// A state's JSON, deflated by `deflate` (one compressor for a whole sweep), and the
/// JSON's length.
fn compress(
    deflate: &mut flate2::Compress,
    state: &SessionState,
) -> std::io::Result<(Box<[u8]>, usize)> {
    let json = serde_json::to_vec(state)?;
    deflate.reset();
    let mut out = Vec::with_capacity(json.len() / 3 + 64);
    loop {
        let done = usize::try_from(deflate.total_in()).unwrap_or(json.len());
        let rest = json.get(done..).unwrap_or_default();
        match deflate.compress_vec(rest, &mut out, flate2::FlushCompress::Finish)? {
            flate2::Status::StreamEnd => break,
            _ => out.reserve(out.capacity().max(1024)),
        }
    }
    // A copy of its exact size: the buffer is freed for the next state's.
    Ok((Box::from(out.as_slice()), json.len()))
}

/// The state [`compress`] kept, and its JSON's length.
fn decompress(bytes: &[u8]) -> Result<(SessionState, u64), String> {
    let mut json = Vec::with_capacity(bytes.len() * 5);
    flate2::read::DeflateDecoder::new(bytes)
        .read_to_end(&mut json)
        .map_err(|e| e.to_string())?;
    let state = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
    Ok((state, json.len() as u64))
}

/// JSON compressed by one sweep at most (a state of 7.6 KB costs 0.1–0.3 ms of encoding
/// and deflate, under the store's lock): a burst of sessions going idle at once is
/// compressed over several sweeps rather than in one pause, many small ones a sweep or
/// a few large ones.
const COMPACT_BYTES_PER_SWEEP: usize = 256 << 10;

/// Session key → its entry. Looked up on every event, under the lock: foldhash, with a
/// seed of its own per process, instead of SipHash.
type Sessions = HashMap<String, Entry, foldhash::fast::RandomState>;

/// About the JSON length of a state, without building the text or redacting it
/// ([`toolbrake_core::redact::json_len`]).
fn measure(state: &SessionState) -> u64 {
    toolbrake_core::redact::json_len(state)
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

    /// This store, keeping a session idle for `after` (0: at the next sweep) compressed
    /// until its next call.
    pub fn with_compact_after(mut self, after: std::time::Duration) -> Self {
        self.compact_after_ms = Some(after.as_millis().min(u64::MAX as u128) as u64);
        self
    }

    /// The measured size of the sessions held, in bytes (their states' JSON length, or
    /// the compressed length of those kept compact).
    pub fn bytes(&self) -> u64 {
        self.inner().bytes
    }

    /// Number of sessions held compact.
    pub fn compact(&self) -> usize {
        self.inner()
            .sessions
            .values()
            .filter(|e| matches!(e.held, Held::Compact(_)))
            .count()
    }

    /// A held session's state (a copy). A compact one that cannot be decoded (which a
    /// store that wrote it itself should never meet) is a fresh state and a warning.
    fn state_of(&self, held: &Held) -> SessionState {
        match held {
            Held::Live(s) => (**s).clone(),
            Held::Compact(b) => self.decompressed(b).0,
        }
    }

    /// The state a compact entry holds, and its JSON length (0: undecodable, fresh).
    fn decompressed(&self, bytes: &[u8]) -> (SessionState, u64) {
        decompress(bytes).unwrap_or_else(|e| {
            self.warnings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!(
                    "memory: the compressed state of one idle session could not be decoded ({e}); it starts afresh"
                ));
            (SessionState::default(), 0)
        })
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

    /// Every 1024 writes (sweeping is O(sessions)): forgets the sessions idle past
    /// `idle_ttl`, and compresses those idle past `compact_after`, at most
    /// [`COMPACT_BYTES_PER_SWEEP`] of JSON (never `writing`, the session being written).
    fn sweep(&self, inner: &mut Inner, now: u64, writing: &str) {
        if self.idle_ttl_ms.is_none() && self.compact_after_ms.is_none() {
            return;
        }
        {
            let mut w = self.writes.lock().unwrap_or_else(|e| e.into_inner());
            *w += 1;
            if !(*w).is_multiple_of(1024) {
                return;
            }
        }
        let Inner {
            sessions, bytes, ..
        } = inner;
        // One pass over the sessions for both.
        let (ttl, after) = (self.idle_ttl_ms, self.compact_after_ms);
        let mut freed = 0;
        let mut budget = COMPACT_BYTES_PER_SWEEP;
        let mut deflate = None;
        sessions.retain(|key, e| {
            let idle = now.saturating_sub(e.seen);
            if ttl.is_some_and(|ttl| idle > ttl) {
                freed += e.bytes;
                return false;
            }
            let Held::Live(state) = &e.held else {
                return true;
            };
            if budget == 0 || after.is_none_or(|after| idle < after) || key == writing {
                return true;
            }
            let deflate = deflate
                .get_or_insert_with(|| flate2::Compress::new(flate2::Compression::fast(), false));
            // A state that cannot be encoded stays as it is.
            if let Ok((packed, json)) = compress(deflate, state) {
                let size = packed.len() as u64 + key.len() as u64;
                *bytes = bytes.saturating_sub(e.bytes) + size;
                e.bytes = size;
                e.held = Held::Compact(packed);
                budget = budget.saturating_sub(json);
            }
            true
        });
        *bytes = bytes.saturating_sub(freed);
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
        self.sweep(inner, now, session);
        // The key is copied only for a new session.
        if !inner.sessions.contains_key(session) {
            inner.sessions.insert(
                session.to_string(),
                Entry {
                    held: Held::Live(Box::default()),
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
        if let Held::Compact(packed) = &entry.held {
            // Its next call: decoded again, and measured by its JSON.
            let (state, json) = self.decompressed(packed);
            let size = json + session.len() as u64;
            inner.bytes = inner.bytes.saturating_sub(entry.bytes) + size;
            entry.bytes = size;
            entry.held = Held::Live(Box::new(state));
        }
        let Held::Live(state) = &mut entry.held else {
            return Err(StoreError::unavailable("memory", "a session left compact"));
        };
        if self
            .idle_ttl_ms
            .is_some_and(|ttl| now.saturating_sub(entry.seen) > ttl)
        {
            **state = SessionState::default();
        }
        let mut tally = Tally::new();
        f(state, &mut tally);
        entry.seen = now;
        entry.writes += 1;
        let bounded = self.max_sessions > 0 || self.max_bytes > 0;
        if bounded
            && (entry.writes.is_power_of_two() && entry.writes <= 16
                || entry.writes.is_multiple_of(32))
        {
            let size = measure(state) + session.len() as u64;
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
        let inner = self.inner();
        Ok(inner.sessions.get(session).map(|e| self.state_of(&e.held)))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        Ok(self.inner().forget(session).is_some())
    }

    fn take(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        let entry = self.inner().forget(session);
        Ok(entry.map(|e| match e.held {
            Held::Live(s) => *s,
            Held::Compact(b) => self.decompressed(&b).0,
        }))
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut out: Vec<SessionInfo> = self
            .inner()
            .sessions
            .iter()
            .map(|(k, e)| SessionInfo {
                key: k.clone(),
                last_activity_ms: e.seen,
                state: self.state_of(&e.held),
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

    fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
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
    fn an_idle_session_is_kept_compressed_and_goes_on_where_it_stopped() {
        let engine = Engine::new(Config::default());
        let args = json!({"command": "cargo test"});
        let call = |store: &MemoryStore, s: &str, id: &str| {
            update(store, s, |st| {
                engine.pre(
                    st,
                    &Call {
                        session: s,
                        id,
                        tool: "Bash",
                        args: &args,
                    },
                )
            })
            .unwrap()
            .unwrap()
            .verdict
        };
        // One store compacts every session idle at a sweep; the other never does.
        let compacting = MemoryStore::new()
            .with_limits(1_000_000, 1 << 40)
            .with_compact_after(std::time::Duration::ZERO);
        let plain = MemoryStore::new().with_limits(1_000_000, 1 << 40);
        for store in [&compacting, &plain] {
            assert_eq!(call(store, "a", "1"), Verdict::Allow);
            assert_eq!(call(store, "a", "2"), Verdict::Allow);
        }
        // Other sessions' writes past a sweep (every 1024 writes).
        for i in 0..1100 {
            let s = format!("other-{}", i % 50);
            let _ = call(&compacting, &s, &i.to_string());
        }
        assert!(compacting.compact() >= 1, "nothing was compacted");
        let a = compacting.list().unwrap();
        let a = a.iter().find(|s| s.key == "a").expect("listed");
        assert_eq!(Some(&a.state), plain.get("a").unwrap().as_ref());
        assert_eq!(compacting.get("a").unwrap(), plain.get("a").unwrap());
        // Its next call decides as if it had never been compressed: the third identical
        // call is refused in both.
        assert_eq!(call(&compacting, "a", "3"), Verdict::Deny);
        assert_eq!(call(&plain, "a", "3"), Verdict::Deny);
        assert_eq!(compacting.take("a").unwrap(), plain.take("a").unwrap());
        assert!(compacting.take_warnings().is_empty());
    }

    #[test]
    fn a_compact_session_counts_its_compressed_bytes() {
        let engine = Engine::new(Config::default());
        let store = MemoryStore::new()
            .with_limits(1_000_000, 1 << 40)
            .with_compact_after(std::time::Duration::ZERO);
        // A session with many different calls: a state of a few KB of JSON.
        for i in 0..40 {
            let args = json!({"file_path": format!("/repo/src/module_{i}/file_{i}.rs")});
            let id = i.to_string();
            let _ = update(&store, "big", |st| {
                engine.pre(
                    st,
                    &Call {
                        session: "big",
                        id: &id,
                        tool: "Read",
                        args: &args,
                    },
                )
            })
            .unwrap();
        }
        let json = store.bytes();
        assert!(json > 2000, "{json} bytes");
        // Another session's writes past a sweep (every 1024 writes); the session being
        // written is never the one compressed.
        for _ in 0..1100 {
            update(&store, "tiny", |_| ()).unwrap();
        }
        assert_eq!(store.compact(), 1, "the big session is compact");
        let alone = MemoryStore::new().with_limits(1_000_000, 1 << 40);
        update(&alone, "tiny", |_| ()).unwrap();
        let big = store.bytes() - alone.bytes();
        assert!(big < json / 2, "{big} bytes held, its JSON {json}");
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
