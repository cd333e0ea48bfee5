//! An update of one session on Redis: the engine's read-modify-write runs here, in Rust,
//! and every write is one server-side compare-and-set script.
//!
//! - **The write** ([`WRITE`]) stores the new state (with its TTL) and adds the update's
//!   tally to the counters only if the key still holds the bytes the update started from
//!   (sent back beside the new ones: a second copy of a few KiB costs less than hashing
//!   them on both sides, and Lua compares its interned strings by identity) and no other
//!   client holds the session's lock. One script,
//!   one round trip, all or nothing: no `WATCH`/`MULTI`/`EXEC`, on one server and on a
//!   cluster alike (every key it touches carries the session's hash tag).
//! - **Uncontended**, a store remembers the last state it wrote for a session and its
//!   bytes (a few sessions, [`CACHED_SESSIONS`]): the next update of that session starts
//!   from it and costs that one script. A process that has not written the session yet
//!   reads it first (`GET`, one more round trip).
//! - **Contended** (the write found the lock held or the bytes changed), the update queues
//!   on the server instead of retrying blindly: [`ACQUIRE`] takes the session's lock (a key
//!   with a short lease) and returns the state in the same round trip; a client that finds
//!   the lock held blocks in `BLPOP` on the session's wake list, pipelined with its next
//!   [`ACQUIRE`] (one round trip on one server), and the holder's write releases the lock
//!   and pushes one wake token, which Redis hands to the longest waiter. Each decision then
//!   costs a fixed handful of commands however many clients share the session, and the
//!   session's critical section is one round trip plus the engine's own time.
//! - **Safety never rests on the lock**: it only orders writers. Every write still
//!   compares the stored bytes, so a lease that ran out (a holder that stalled or died), a lost
//!   wake token or a client of an older version can cost time, never an update. A waiter
//!   blocks at most until the lease of the lock it saw would end.

use super::conn::Deadline;
use super::RedisStore;
use crate::{StoreError, Tally, MAX_TOOLS};
use redis::Value as RValue;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use toolbrake_core::SessionState;

/// Writes (each following a real conflict) before an update gives up.
pub(super) const MAX_RETRIES: u32 = 200;

/// Sessions whose last written state a store remembers (the uncontended path's base).
pub(super) const CACHED_SESSIONS: usize = 64;

/// How long a session's lock holds without its holder's write (a holder that died). A
/// write takes a round trip and the engine's microseconds; a holder that stalls past the
/// lease loses nothing (its write compares the stored bytes) and waiters stop waiting for it.
const LEASE: Duration = Duration::from_millis(200);

/// What a script found and repaired besides its answer: a sum of these flags (one number
/// in every reply, [`RedisStore::noted`] reports them). The Lua prelude every script shares
/// (`note`) keeps the sum.
pub(super) mod notes {
    /// The counters hash is not a hash: nothing was counted.
    pub const COUNTERS_TYPE: i64 = 1;
    /// The session's lock could never expire (no TTL) or was not a string: removed.
    pub const STALE_LOCK: i64 = 2;
    /// The session's wake list was not a list: removed.
    pub const WAKE_TYPE: i64 = 4;
    /// The session's key held something other than a string: it starts afresh.
    pub const STATE_TYPE: i64 = 8;
    /// A counter could not be incremented (not an integer, or at its maximum).
    pub const COUNTER_VALUE: i64 = 16;
    /// The tool set is not a set: nothing was counted.
    pub const TOOLS_TYPE: i64 = 32;
    /// Reading the counters met a key of the wrong type (told once per process, as the
    /// failures to count are; never in a script's reply).
    pub const READ_TYPE: i64 = 64;
    /// Reading the counters met values that are not counts (told once per process).
    pub const READ_VALUE: i64 = 128;
    /// Any of the counting failures.
    pub const COUNTING: i64 = COUNTERS_TYPE | COUNTER_VALUE | TOOLS_TYPE;
}

/// The Lua prelude every script shares. Nothing a key holds makes a script fail half way
/// (Redis keeps a failed script's earlier writes): a key of the wrong type is read with
/// `pcall` or checked with `TYPE` first.
///
/// - `note(n)`: adds flag `n` of [`notes`] to `notes` (once).
/// - `state(key)`: the session's stored bytes (`false`: absent, or not a string, which is
///   noted).
/// - `holder(key, mine)`: the lock's holder (`false`: none). A lock another client holds
///   that can never expire (no TTL: set by hand, or `PERSIST`ed) or that is not a string
///   is stale: removed and noted.
/// - `wake(key, lease)`: one wake token on the wake list (a key of another type removed).
/// - `count(hash, tools, max, first)`: adds the increments of `ARGV` from `first` on (per
///   increment: the amount, the series, the tool (empty when none) and the series with the
///   tool folded into `other`) to the counters hash `hash`, keeping at most `max` tools
///   under their own name in the set `tools`. The counters are telemetry: a key of the
///   wrong type or a value that cannot be incremented is noted, never an error.
macro_rules! prelude {
    () => {
        r"
local notes = 0
local function note(n)
  if notes % (n * 2) < n then notes = notes + n end
end
local function failed(r)
  return type(r) == 'table' and r.err ~= nil
end
local function state(key)
  local v = redis.pcall('GET', key)
  if failed(v) then
    note(8)
    return false
  end
  return v
end
local function holder(key, mine)
  local v = redis.pcall('GET', key)
  if failed(v) or (v and v ~= mine and redis.call('PTTL', key) < 0) then
    redis.call('DEL', key)
    note(2)
    return false
  end
  return v
end
local function wake(key, lease)
  local n = redis.pcall('LLEN', key)
  if failed(n) then
    redis.call('DEL', key)
    note(4)
    n = 0
  end
  if n == 0 then
    redis.call('RPUSH', key, '1')
  end
  redis.call('PEXPIRE', key, lease)
end
local function count(hash, tools, max, first)
  local ht = redis.call('TYPE', hash)['ok']
  if ht ~= 'hash' and ht ~= 'none' then
    note(1)
    return
  end
  local tt = redis.call('TYPE', tools)['ok']
  if tt ~= 'set' and tt ~= 'none' then
    note(32)
    return
  end
  for i = first, #ARGV, 4 do
    local field = ARGV[i + 1]
    local tool = ARGV[i + 2]
    if tool ~= '' and redis.call('SISMEMBER', tools, tool) == 0 then
      if redis.call('SCARD', tools) < max then
        redis.call('SADD', tools, tool)
      else
        field = ARGV[i + 3]
      end
    end
    if failed(redis.pcall('HINCRBY', hash, field, ARGV[i])) then
      note(16)
    end
  end
end
"
    };
}

/// Adds a tally to the counters: `KEYS[1]` the counters hash, `KEYS[2]` the set of tools
/// counted under their own name, `ARGV[1]` that set's bound, the increments from `ARGV[2]`.
/// Returns the [`notes`].
pub(super) const COUNT: &str = concat!(
    prelude!(),
    "count(KEYS[1], KEYS[2], tonumber(ARGV[1]), 2)\nreturn notes\n"
);

/// The write. `KEYS`: the session, its lock, its wake list, and with increments to add
/// the counters hash and the tool set (on the session's slot). `ARGV`: what the update
/// started from (`0`: the key was absent; `1` and its bytes; `2`: the key held something
/// other than a string), the new state, its TTL in ms, the lock id the writer holds
/// (empty: none), the lease in ms, the tool bound, the increments from `ARGV[8]`. Returns
/// `{1, notes}` written (a held lock released, one waiter woken), `{0, notes, pttl}`
/// another client holds the lock, `{2, notes, current}` the bytes changed (`current`
/// only to a writer that took the lock, which recomputes without queueing again, even
/// when its lease ran out).
const WRITE: &str = concat!(
    prelude!(),
    r"
local lock = holder(KEYS[2], ARGV[5])
if lock and lock ~= ARGV[5] then
  return {0, notes, redis.call('PTTL', KEYS[2])}
end
local cur = state(KEYS[1])
local wrong = notes % 16 >= 8
local same
if ARGV[1] == '0' then
  same = (cur == false and not wrong)
elseif ARGV[1] == '2' then
  same = wrong
else
  same = (cur == ARGV[2])
end
if not same then
  if ARGV[5] ~= '' then
    return {2, notes, cur}
  end
  return {2, notes}
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
if #KEYS > 3 then
  count(KEYS[4], KEYS[5], tonumber(ARGV[7]), 8)
end
if lock then
  redis.call('DEL', KEYS[2])
  wake(KEYS[3], ARGV[6])
end
return {1, notes}
"
);

/// Takes the session's lock (a stale one removed first). `KEYS`: the session, its lock,
/// its wake list. `ARGV`: the lock id, the lease in ms. Returns `{1, notes, state}` (the
/// state nil when absent or not a string) or `{0, notes, pttl}` (a wake list of another
/// type removed, so that the waiter can block on it).
const ACQUIRE: &str = concat!(
    prelude!(),
    r"
holder(KEYS[2], ARGV[1])
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local cur = state(KEYS[1])
  return {1, notes, cur}
end
if failed(redis.pcall('LLEN', KEYS[3])) then
  redis.call('DEL', KEYS[3])
  note(4)
end
return {0, notes, redis.call('PTTL', KEYS[2])}
"
);

/// The scripts, hashed once per store.
pub(super) struct Scripts {
    write: redis::Script,
    acquire: redis::Script,
    /// The lock ids of this store: a random prefix and a counter.
    id_prefix: u64,
    ids: AtomicU64,
    /// The server refused a blocking wait with a fractional timeout (before Redis 6):
    /// waiters poll instead.
    no_blocking: AtomicBool,
    /// One session's updates in this process, one at a time (by a hash of its key).
    turns: [Mutex<()>; TURNS],
    /// Updates (and counts) whose counters could not be kept.
    pub(super) uncounted: AtomicU64,
    /// The counting failures ([`notes::COUNTING`]) this process has told already.
    pub(super) told: AtomicI64,
}

/// Stripes of [`Scripts::turns`].
const TURNS: usize = 64;

fn stripe(session: &str) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(session.as_bytes());
    (h.finish() % TURNS as u64) as usize
}

impl Scripts {
    pub(super) fn new() -> Self {
        Scripts {
            write: redis::Script::new(WRITE),
            acquire: redis::Script::new(ACQUIRE),
            id_prefix: std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish(),
            ids: AtomicU64::new(0),
            no_blocking: AtomicBool::new(false),
            turns: std::array::from_fn(|_| Mutex::new(())),
            uncounted: AtomicU64::new(0),
            told: AtomicI64::new(0),
        }
    }

    fn lock_id(&self) -> String {
        format!(
            "{:016x}:{}",
            self.id_prefix,
            self.ids.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// The last state a store wrote for a session, and its bytes.
pub(super) struct Known {
    bytes: Vec<u8>,
    state: SessionState,
    /// The update that wrote it met another client: the next one queues at once.
    contended: bool,
    used: u64,
}

/// A few sessions' last written states ([`CACHED_SESSIONS`]).
#[derive(Default)]
pub(super) struct Cache {
    sessions: HashMap<String, Known>,
    tick: u64,
}

impl Cache {
    fn take(&mut self, session: &str) -> Option<Known> {
        self.sessions.remove(session)
    }

    fn put(&mut self, session: &str, mut known: Known) {
        self.tick += 1;
        known.used = self.tick;
        if self.sessions.len() >= CACHED_SESSIONS && !self.sessions.contains_key(session) {
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|(_, k)| k.used)
                .map(|(s, _)| s.clone());
            if let Some(oldest) = oldest {
                self.sessions.remove(&oldest);
            }
        }
        self.sessions.insert(session.to_string(), known);
    }

    pub(super) fn forget(&mut self, session: &str) {
        self.sessions.remove(session);
    }
}

/// The keys one update touches, all on the session's slot.
pub(super) struct Keys {
    pub(super) value: String,
    pub(super) lock: String,
    pub(super) wake: String,
    pub(super) counters: String,
    pub(super) tools: String,
}

/// What a session's key held.
pub(super) enum Stored {
    Absent,
    Bytes(Vec<u8>),
    /// Something other than a string (a hash, a list…): the session starts afresh.
    WrongType,
}

impl Stored {
    /// The stored value a script answered (`nil`: absent, or of the wrong type when the
    /// reply's notes say so).
    fn from_reply(v: Option<RValue>, notes: i64) -> Option<Stored> {
        if notes & notes::STATE_TYPE != 0 {
            return Some(Stored::WrongType);
        }
        Some(match bytes(v.unwrap_or(RValue::Nil))? {
            None => Stored::Absent,
            Some(b) => Stored::Bytes(b),
        })
    }
}

/// What an update computes from.
enum Base {
    /// This store's last write (boxed: a state is large beside a few bytes).
    Known(Box<Known>),
    /// What the key holds.
    Read(Stored),
}

/// What a write found.
enum Written {
    Yes,
    /// Another client holds the lock.
    Locked,
    /// The bytes changed; what the key holds when this update holds the lock.
    Stale(Option<Stored>),
}

/// `EVALSHA` of `script` with `keys` and `args`, loading the script when the server does
/// not know it (a restart, `SCRIPT FLUSH`).
fn eval(
    c: &mut dyn redis::ConnectionLike,
    script: &redis::Script,
    cmd: &redis::Cmd,
) -> redis::RedisResult<RValue> {
    match cmd.query::<RValue>(c) {
        Err(e) if is_noscript(&e) => {
            script.load(c)?;
            cmd.query(c)
        }
        r => r,
    }
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

fn evalsha(script: &redis::Script, keys: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
    cmd
}

fn unexpected(what: &str, v: &RValue) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Client,
        "unexpected reply",
        format!("{what}: {v:?}"),
    ))
}

fn int(v: &RValue) -> Option<i64> {
    match v {
        RValue::Int(n) => Some(*n),
        _ => None,
    }
}

fn bytes(v: RValue) -> Option<Option<Vec<u8>>> {
    match v {
        RValue::Nil => Some(None),
        RValue::BulkString(b) => Some(Some(b)),
        RValue::SimpleString(s) => Some(Some(s.into_bytes())),
        _ => None,
    }
}

/// What [`ACQUIRE`] answered: the state, or the lock's remaining lease in ms; and the
/// [`notes`].
fn acquired(v: RValue) -> redis::RedisResult<(Result<Stored, i64>, i64)> {
    let RValue::Array(items) = v else {
        return Err(unexpected("acquire", &v));
    };
    let mut it = items.into_iter();
    let (Some(status), Some(notes)) = (it.next(), it.next().as_ref().and_then(int)) else {
        return Err(unexpected("acquire", &RValue::Nil));
    };
    let third = it.next();
    match (int(&status), third.as_ref().and_then(int)) {
        (Some(1), _) => Stored::from_reply(third, notes)
            .map(|s| (Ok(s), notes))
            .ok_or_else(|| unexpected("acquire", &RValue::Nil)),
        (Some(0), Some(pttl)) => Ok((Err(pttl), notes)),
        _ => Err(unexpected("acquire", &status)),
    }
}

/// Whether a command failed on a key that holds another type of value.
pub(super) fn is_wrong_type(e: &redis::RedisError) -> bool {
    e.code() == Some("WRONGTYPE")
}

impl RedisStore {
    pub(super) fn update_keys(&self, session: &str) -> Keys {
        let value = self.key(session);
        let (counters, tools) = self.counter_keys(&value);
        let p = &self.opts.key_prefix;
        Keys {
            lock: format!("{p}lock:{{{session}}}"),
            wake: format!("{p}wake:{{{session}}}"),
            value,
            counters,
            tools,
        }
    }

    pub(super) fn lease_ms(&self) -> u64 {
        LEASE.min(self.opts.command_timeout).as_millis().max(1) as u64
    }

    /// See the module's documentation.
    pub(super) fn update_session(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError> {
        // Threads of this process updating one session take turns here, not on the
        // server: a thread waiting on the server holds this store's connection, which
        // the lock's holder in the same process needs for its write.
        let _turn = self.scripts.turns[stripe(session)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let keys = self.update_keys(session);
        let deadline = Deadline::new(&self.opts);
        let mut tally = Tally::new();
        let known = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(session);
        let mut contended = known.as_ref().is_some_and(|k| k.contended);
        let mut base = known
            .filter(|k| !k.contended)
            .map(|k| Base::Known(Box::new(k)));
        let mut lock: Option<String> = None;
        // Whether this update met another client (it then queues next time at once).
        let mut met = false;
        for attempt in 0..MAX_RETRIES {
            if attempt > 2 {
                // Conflicts although queued: the lock and the state disagree (a lease that
                // ran out, a slot moving between primaries). Back off a little, growing,
                // with jitter from the clock.
                let spin = (attempt.min(10) as u64 + 1) * 50 + (crate::now_ms() % 50);
                std::thread::sleep(Duration::from_micros(spin));
            }
            if lock.is_none() && contended {
                let id = self.scripts.lock_id();
                let (current, waited) = self.acquire(&keys, &id, &deadline)?;
                met |= waited;
                lock = Some(id);
                base = Some(Base::Read(current));
            }
            let from = match base.take() {
                Some(b) => b,
                None => Base::Read(self.read_stored(&keys.value, &deadline)?),
            };
            let (expected, mut state) = match from {
                Base::Known(k) => {
                    let k = *k;
                    (Stored::Bytes(k.bytes), k.state)
                }
                Base::Read(Stored::Bytes(b)) => {
                    let state = self.decode(&b);
                    (Stored::Bytes(b), state)
                }
                Base::Read(other) => (other, SessionState::default()),
            };
            tally.clear();
            f(&mut state, &mut tally);
            let new = serde_json::to_vec(&state).map_err(|e| self.err(e))?;
            match self.write(&keys, &expected, &new, lock.as_deref(), &tally, &deadline)? {
                Written::Yes => {
                    let known = Known {
                        bytes: new,
                        state,
                        contended: met,
                        used: 0,
                    };
                    self.cache
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .put(session, known);
                    return Ok(());
                }
                Written::Locked => {
                    lock = None;
                    contended = true;
                    met = true;
                }
                Written::Stale(current) => {
                    contended = true;
                    met = true;
                    if lock.is_some() {
                        base = current.map(Base::Read);
                    }
                }
            }
        }
        Err(self.err(format!(
            "update of one session conflicted {MAX_RETRIES} times in a row; giving up"
        )))
    }

    /// One [`WRITE`].
    fn write(
        &self,
        keys: &Keys,
        expected: &Stored,
        new: &[u8],
        lock: Option<&str>,
        tally: &Tally,
        deadline: &Deadline,
    ) -> Result<Written, StoreError> {
        // The counters' keys only with something to count: a script declares every key
        // it touches, and a server in cluster mode refuses keys of several slots.
        let all = [
            keys.value.as_str(),
            &keys.lock,
            &keys.wake,
            &keys.counters,
            &keys.tools,
        ];
        let n = if tally.is_empty() { 3 } else { 5 };
        let mut cmd = evalsha(&self.scripts.write, &all[..n]);
        match expected {
            Stored::Bytes(b) => cmd.arg("1").arg(b),
            Stored::Absent => cmd.arg("0").arg(""),
            Stored::WrongType => cmd.arg("2").arg(""),
        };
        cmd.arg(new)
            .arg(self.ttl_ms())
            .arg(lock.unwrap_or(""))
            .arg(self.lease_ms());
        tally_args(&mut cmd, tally);
        let reply = self.with_conn_by(deadline, |c| eval(c, &self.scripts.write, &cmd))?;
        let RValue::Array(items) = reply else {
            return Err(self.caused(unexpected("write", &reply)));
        };
        let mut it = items.into_iter();
        let status = it.next().as_ref().and_then(int);
        let notes = it.next().as_ref().and_then(int).unwrap_or(0);
        let written = match status {
            Some(1) => Written::Yes,
            Some(0) => Written::Locked,
            Some(2) => Written::Stale(Stored::from_reply(it.next(), notes)),
            _ => return Err(self.caused(unexpected("write", &RValue::Nil))),
        };
        self.noted(notes, keys);
        Ok(written)
    }

    /// Takes the session's lock, waiting on the server while another client holds it:
    /// the stored state, and whether it had to wait.
    fn acquire(
        &self,
        keys: &Keys,
        id: &str,
        deadline: &Deadline,
    ) -> Result<(Stored, bool), StoreError> {
        let script = &self.scripts.acquire;
        let mut acq = evalsha(script, &[&keys.value, &keys.lock, &keys.wake]);
        acq.arg(id).arg(self.lease_ms());
        let mut reply = self.with_conn_by(deadline, |c| eval(c, script, &acq))?;
        let mut waited = false;
        loop {
            let (answer, notes) = acquired(reply).map_err(|e| self.caused(e))?;
            self.noted(notes, keys);
            let pttl = match answer {
                Ok(current) => return Ok((current, waited)),
                Err(pttl) => pttl,
            };
            waited = true;
            // Until the holder's write wakes us, at most until its lease would end (a
            // lock already gone: at once), and never past the operation's deadline.
            let lease = u64::try_from(pttl).unwrap_or(0);
            let left = deadline
                .by
                .saturating_duration_since(std::time::Instant::now());
            let wait =
                Duration::from_millis(lease + 1).min(left.saturating_sub(Duration::from_millis(5)));
            reply = self.with_conn_by(deadline, |c| {
                if lease == 0 || wait.is_zero() {
                    return eval(c, script, &acq);
                }
                if self.scripts.no_blocking.load(Ordering::Relaxed) {
                    std::thread::sleep(wait.min(Duration::from_micros(200)));
                    return eval(c, script, &acq);
                }
                let mut blpop = redis::cmd("BLPOP");
                blpop
                    .arg(&keys.wake)
                    .arg(format!("{:.3}", wait.as_secs_f64()));
                if c.supports_pipelining() {
                    // One round trip: the server runs the acquire once the wait ends.
                    let mut pipe = redis::pipe();
                    pipe.add_command(blpop).add_command(acq.clone());
                    let mut replies = c.req_packed_commands(&pipe.get_packed_pipeline(), 0, 2)?;
                    let second = replies.pop();
                    let first = replies.pop();
                    if let Some(RValue::ServerError(e)) = first {
                        // A wake list of another type is removed by the acquire.
                        if e.code() != "WRONGTYPE" {
                            self.scripts.no_blocking.store(true, Ordering::Relaxed);
                        }
                    }
                    match second {
                        Some(RValue::ServerError(e)) => {
                            let e = redis::RedisError::from(e);
                            if is_noscript(&e) {
                                eval(c, script, &acq)
                            } else {
                                Err(e)
                            }
                        }
                        Some(v) => Ok(v),
                        None => Err(unexpected("acquire", &RValue::Nil)),
                    }
                } else {
                    if let Err(e) = blpop.query::<RValue>(c) {
                        if e.kind()
                            != redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
                            && !is_wrong_type(&e)
                        {
                            return Err(e);
                        }
                        if !is_wrong_type(&e) {
                            self.scripts.no_blocking.store(true, Ordering::Relaxed);
                        }
                    }
                    eval(c, script, &acq)
                }
            })?;
        }
    }
}

/// A tally as script arguments (after the bound): amount, series, tool, folded series.
pub(super) fn tally_args(cmd: &mut redis::Cmd, tally: &Tally) {
    cmd.arg(MAX_TOOLS);
    for inc in tally.incs() {
        let (tool, other) = match &inc.tool {
            Some((t, o)) => (t.as_str(), o.as_str()),
            None => ("", inc.key.as_str()),
        };
        cmd.arg(inc.n).arg(&inc.key).arg(tool).arg(other);
    }
}
