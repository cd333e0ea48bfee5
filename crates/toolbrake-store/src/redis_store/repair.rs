//! Values in the shared store that toolbrake did not write the way it writes them (a key
//! of the wrong type, a lock without expiry, a counter that cannot grow): none of them
//! decides a call. The scripts repair what is toolbrake's own and short-lived (a stale
//! lock, a wake list), start a session whose key holds something else afresh, and count
//! nothing rather than fail when the counters cannot be kept; this module tells the
//! operator what they found ([`RedisStore::noted`]).
//!
//! The counters are never repaired: they may be someone else's key under the same prefix,
//! or the trace of whoever wrote them, and toolbrake never deletes what it cannot read as
//! its own. Decisions go on without them; every process says so once, with the command
//! that clears the key, and counts each update it could not count
//! ([`crate::Store::uncounted`]).

use super::conn::Deadline;
use super::update::{is_wrong_type, notes, Keys, Stored};
use super::RedisStore;
use crate::StoreError;
use std::sync::atomic::Ordering;

impl RedisStore {
    /// What the session's key holds, read with `GET`.
    pub(super) fn read_stored(&self, key: &str, deadline: &Deadline) -> Result<Stored, StoreError> {
        self.with_conn_by(deadline, |c| {
            match redis::cmd("GET").arg(key).query::<Option<Vec<u8>>>(c) {
                Ok(None) => Ok(Stored::Absent),
                Ok(Some(b)) => Ok(Stored::Bytes(b)),
                Err(e) if is_wrong_type(&e) => {
                    self.wrong_typed_state(key);
                    Ok(Stored::WrongType)
                }
                Err(e) => Err(e),
            }
        })
    }

    /// A session's key that holds something other than a string: said, for
    /// [`crate::Store::take_warnings`].
    pub(super) fn wrong_typed_state(&self, key: &str) {
        self.warn(format!(
            "{}: the key `{key}` holds a value of the wrong type (not a string, so not a \
             session's state): the session starts afresh and its next write replaces it",
            self.name
        ));
    }

    /// Tells what a script found (its [`notes`]): repairs each time, a failure to count
    /// once per process (it repeats on every update until someone removes the key), and
    /// counts each update whose counters were not kept.
    pub(super) fn noted(&self, found: i64, keys: &Keys) {
        if found == 0 {
            return;
        }
        if found & notes::STATE_TYPE != 0 {
            self.wrong_typed_state(&keys.value);
        }
        if found & notes::STALE_LOCK != 0 {
            self.warn(format!(
                "{}: the lock `{}` could never expire (no TTL) or was not a string: removed as \
                 stale (toolbrake's locks expire within {} ms)",
                self.name,
                keys.lock,
                self.lease_ms()
            ));
        }
        if found & notes::WAKE_TYPE != 0 {
            self.warn(format!(
                "{}: the key `{}` held a value of the wrong type (not a list): removed",
                self.name, keys.wake
            ));
        }
        if found & notes::COUNTING == 0 {
            return;
        }
        self.scripts.uncounted.fetch_add(1, Ordering::Relaxed);
        let told = self
            .scripts
            .told
            .fetch_or(found & notes::COUNTING, Ordering::Relaxed);
        let new = found & notes::COUNTING & !told;
        let after = "decisions are unaffected (the counters are telemetry), but this \
                     process counts nothing there until it is fixed";
        if new & notes::COUNTERS_TYPE != 0 {
            self.warn(format!(
                "{}: the counters key `{}` holds a value of the wrong type (not a hash): {after}; \
                 `redis-cli DEL {}` clears it (toolbrake never deletes a key it cannot read)",
                self.name, keys.counters, keys.counters
            ));
        }
        if new & notes::TOOLS_TYPE != 0 {
            self.warn(format!(
                "{}: the counters' tool set `{}` holds a value of the wrong type (not a set): \
                 {after}; `redis-cli DEL {}` clears it",
                self.name, keys.tools, keys.tools
            ));
        }
        if new & notes::COUNTER_VALUE != 0 {
            self.warn(format!(
                "{}: a counter in `{}` holds a value that cannot be incremented (not an \
                 integer, or at its largest): that counter is not counted; decisions are \
                 unaffected (the counters are telemetry)",
                self.name, keys.counters
            ));
        }
    }

    /// `message`, unless this process told `what` (one of [`notes`]) already.
    pub(super) fn warn_once(&self, what: i64, message: String) {
        if self.scripts.told.fetch_or(what, Ordering::Relaxed) & what == 0 {
            self.warn(message);
        }
    }

    fn warn(&self, message: String) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message);
    }
}
