//! Shared state on Redis (and Valkey, KeyDB, Redis Cluster): one key per session holding
//! its serialised state, so every process and machine of a fleet sees one session's counts.
//!
//! Key layout: `<prefix>{<session>}`. The braces are a Redis Cluster hash tag: a session's
//! key always lands on one slot, and every operation touches one key.
//!
//! Redis Cluster: with [`RedisOptions::cluster`] set, the store speaks to a cluster through
//! the `redis` crate's cluster client, which follows `MOVED` and `ASK` redirections (a
//! resharding in the middle of a run loses nothing). A transaction cannot span the
//! cluster client's routing, so there an update is a compare-and-set script on the one key
//! (the old value travels back with the new one); listing scans every primary.
//!
//! Atomicity (one server): optimistic, with `WATCH` / `MULTI` / `EXEC` and a bounded retry. The
//! read-modify-write logic is the engine, which is Rust: a server-side script cannot run
//! it. A compare-and-set script would have to receive the old state back as an argument
//! (doubling the bytes per decision) or keep a separate version field; `WATCH` costs no
//! extra bytes, keeps the value a plain string with a TTL, and works on one key in Cluster.
//! Uncontended, a decision costs two round trips: `WATCH`+`GET` pipelined, then
//! `MULTI`+`SET PX`+`EXEC` pipelined. A conflicting write makes `EXEC` return nil and
//! nothing is written, so a half-applied update cannot exist; the update is re-run on the
//! fresh value.
//!
//! Counters: an update's tally is added by a script (`COUNT`, `HINCRBY` on a counters hash,
//! the tool names kept in a set bounded by [`crate::MAX_TOOLS`]) inside the same
//! `MULTI`/`EXEC` as the session's `SET`, so it lands exactly when the state does. On a
//! cluster a script may only touch keys of one slot: each slot a session lives on gets its
//! own counters hash and tool set (`<prefix>counters:{<tag>}`, the tag found once per slot
//! so that the key lands on the session's slot; at most 16,384 of each, never expiring),
//! updated by the compare-and-set script itself; [`Store::counters`] sums them all.
//!
//! Expiry: every write sets the key's TTL to `idle_ttl`, so idle sessions expire in Redis.
//! Reconnection: a connection that fails is dropped and the next operation connects again,
//! so a long-lived process survives a Redis restart without restarting itself.
//!
//! Time: one deadline per store operation ([`Deadline`]). An update (its retries included),
//! a read or a removal waits at most the larger of `connect_timeout` and `command_timeout`
//! in all, however many replies it awaits: connecting (TCP to each of the host's addresses
//! in turn, TLS, `AUTH`, `SELECT`, the client's name) gives up `connect_timeout` after the
//! operation started, and its commands `command_timeout` after they began, never past the
//! operation's deadline. The client library awaits every reply of a pipeline for the
//! whole timeout (a hung server that still accepts connections held a hook for twice
//! `connect_timeout`, one for each reply of the connection's setup, and an open connection
//! for twice `command_timeout` at `WATCH`+`GET`), so on one server the store connects and
//! awaits replies itself ([`Until`]). On a cluster the deadline bounds
//! each step the store takes; the cluster client's own redirections and reconnections
//! within a step keep its per-reply timeouts. Listing and counting (`list`, `counters`,
//! the scans) read many keys and give each round trip a deadline of its own.

use crate::{now_ms, Counters, SessionInfo, Store, StoreError, Tally, MAX_TOOLS};
use redis::cluster_routing::Slot;
use redis::Value as RValue;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::net::ToSocketAddrs;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use toolbrake_core::SessionState;

/// Optimistic retries before an update gives up (each retry follows a real conflict).
pub const MAX_RETRIES: u32 = 200;

/// Options of the Redis store.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// `redis://[user:password@]host:port[/db]` or `rediss://…` (TLS).
    pub url: String,
    /// Prefix of every key (default `toolbrake:`).
    pub key_prefix: String,
    /// Sessions idle longer than this expire (the keys' TTL).
    pub idle_ttl: Duration,
    /// Connecting (TCP, TLS, authentication, database) gives up this long after the
    /// operation that connects started. A store operation, connecting included, never
    /// waits longer than the larger of this and `command_timeout` in all.
    pub connect_timeout: Duration,
    /// A store operation's commands (an update's `WATCH`/`GET` and `MULTI`…`EXEC`, or its
    /// script, retries included) give up this long after they began, in all: not per
    /// reply.
    pub command_timeout: Duration,
    /// Username when the URL has none.
    pub username: Option<String>,
    /// Password when the URL has none.
    pub password: Option<String>,
    /// A Redis Cluster reached through these seed nodes (`redis://host:port` each); `None`
    /// for one server at `url`.
    pub cluster: Option<Vec<String>>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            url: "redis://127.0.0.1:6379".into(),
            key_prefix: "toolbrake:".into(),
            idle_ttl: Duration::from_secs(7 * 24 * 3600),
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(2),
            username: None,
            password: None,
            cluster: None,
        }
    }
}

/// The connection(s) of a store: one server, or a cluster.
enum Backend {
    Single {
        /// Where and how to connect (credentials included: never shown).
        info: redis::ConnectionInfo,
        conn: Mutex<Option<redis::Connection>>,
    },
    Cluster {
        client: redis::cluster::ClusterClient,
        // Boxed: a cluster connection is much larger than a server's.
        conn: Box<Mutex<Option<redis::cluster::ClusterConnection>>>,
    },
}

/// Compare-and-set of one session key, for a cluster: writes `ARGV[3]` with a TTL of
/// `ARGV[4]` ms only if the key still holds `ARGV[2]` (or is absent, when `ARGV[1]` is 0).
const CAS: &str = r"
local cur = redis.call('GET', KEYS[1])
if (ARGV[1] == '0' and cur == false) or (ARGV[1] == '1' and cur == ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  return 1
end
return 0
";

/// The Lua function both counting scripts share: adds the increments of `ARGV` from
/// `first` on (per increment: the amount, the series, the tool (empty when none) and the
/// series with the tool folded into `other`) to the counters hash `hash`, keeping at most
/// `max` tools under their own name in the set `tools`.
macro_rules! count_fn {
    () => {
        r"
local function count(hash, tools, max, first)
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
    redis.call('HINCRBY', hash, field, ARGV[i])
  end
end
"
    };
}

/// Adds a tally to the counters: `KEYS[1]` the counters hash, `KEYS[2]` the set of tools
/// counted under their own name, `ARGV[1]` that set's bound, the increments from `ARGV[2]`.
const COUNT: &str = concat!(
    count_fn!(),
    "count(KEYS[1], KEYS[2], tonumber(ARGV[1]), 2)\nreturn 1\n"
);

/// [`CAS`] and then, only if it wrote, the counting on the slot's counters (`KEYS[2]`,
/// `KEYS[3]`; `ARGV[5]` the bound, the increments from `ARGV[6]`): one script, one slot.
const CAS_COUNT: &str = concat!(
    count_fn!(),
    r"
local cur = redis.call('GET', KEYS[1])
if not ((ARGV[1] == '0' and cur == false) or (ARGV[1] == '1' and cur == ARGV[2])) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
count(KEYS[2], KEYS[3], tonumber(ARGV[5]), 6)
return 1
"
);

/// A tally as script arguments (after the bound): amount, series, tool, folded series.
fn tally_args(cmd: &mut redis::Cmd, tally: &Tally) {
    cmd.arg(MAX_TOOLS);
    for inc in tally.incs() {
        let (tool, other) = match &inc.tool {
            Some((t, o)) => (t.as_str(), o.as_str()),
            None => ("", inc.key.as_str()),
        };
        cmd.arg(inc.n).arg(&inc.key).arg(tool).arg(other);
    }
}

/// Session state in Redis.
pub struct RedisStore {
    backend: Backend,
    opts: RedisOptions,
    name: String,
    warnings: Mutex<Vec<String>>,
    /// Per cluster slot, the hash tag that puts a counters key on that slot.
    tags: Mutex<HashMap<Slot, String>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it can carry a password.
        f.debug_struct("RedisStore")
            .field("store", &self.name)
            .finish()
    }
}

impl RedisStore {
    /// A store for `opts`. Nothing is contacted until the first operation.
    pub fn new(opts: RedisOptions) -> Result<Self, StoreError> {
        if let Some(nodes) = opts.cluster.clone() {
            return Self::new_cluster(opts, nodes);
        }
        let mut info: redis::ConnectionInfo =
            opts.url.as_str().into_connection_info().map_err(|e| {
                StoreError::unavailable(
                    "redis",
                    format!(
                        "invalid redis URL ({:?}; the URL is not shown, it may hold a password)",
                        e.kind()
                    ),
                )
            })?;
        let name = format!("redis {}", info.addr());
        let mut redis_info = info.redis_settings().clone();
        if redis_info.username().is_none() {
            if let Some(u) = &opts.username {
                redis_info = redis_info.set_username(u);
            }
        }
        if redis_info.password().is_none() {
            if let Some(p) = &opts.password {
                redis_info = redis_info.set_password(p);
            }
        }
        info = info.set_redis_settings(redis_info);
        // What the client would refuse, refused now (nothing is contacted).
        redis::Client::open(info.clone()).map_err(|e| StoreError::caused(name.clone(), e))?;
        Ok(RedisStore {
            backend: Backend::Single {
                info,
                conn: Mutex::new(None),
            },
            opts,
            name,
            warnings: Mutex::new(Vec::new()),
            tags: Mutex::new(HashMap::new()),
        })
    }

    fn new_cluster(opts: RedisOptions, nodes: Vec<String>) -> Result<Self, StoreError> {
        let invalid = |e: redis::RedisError| {
            StoreError::unavailable(
                "redis cluster",
                format!(
                    "invalid cluster node URL ({:?}; URLs are not shown, they may hold a password)",
                    e.kind()
                ),
            )
        };
        let mut infos = Vec::new();
        for n in &nodes {
            infos.push(n.as_str().into_connection_info().map_err(invalid)?);
        }
        let name = format!(
            "redis cluster {}",
            infos
                .first()
                .map(|i| i.addr().to_string())
                .unwrap_or_default()
        );
        let mut builder = redis::cluster::ClusterClient::builder(infos)
            .connection_timeout(opts.connect_timeout)
            .response_timeout(opts.command_timeout);
        if let Some(u) = &opts.username {
            builder = builder.username(u);
        }
        if let Some(p) = &opts.password {
            builder = builder.password(p);
        }
        let client = builder
            .build()
            .map_err(|e| StoreError::caused(name.clone(), e))?;
        Ok(RedisStore {
            backend: Backend::Cluster {
                client,
                conn: Box::new(Mutex::new(None)),
            },
            opts,
            name,
            warnings: Mutex::new(Vec::new()),
            tags: Mutex::new(HashMap::new()),
        })
    }

    fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Cluster { .. })
    }

    fn key(&self, session: &str) -> String {
        format!("{}{{{}}}", self.opts.key_prefix, session)
    }

    /// The counters hash and the tool set: one pair on one server; on a cluster, the pair
    /// whose keys share the slot of the session key `key`.
    fn counter_keys(&self, key: &str) -> (String, String) {
        let p = &self.opts.key_prefix;
        if !self.is_cluster() {
            return (format!("{p}counters"), format!("{p}counter-tools"));
        }
        let bucket = |tag: &str| format!("{p}counters:{{{tag}}}");
        let slot = Slot::for_key(key);
        let mut tags = self.tags.lock().unwrap_or_else(|e| e.into_inner());
        let tag = tags
            .entry(slot)
            .or_insert_with(|| {
                // About 16,384 tries on average; at most once per slot per process.
                (0u64..)
                    .map(|i| i.to_string())
                    .find(|t| Slot::for_key(bucket(t)) == slot)
                    .expect("every slot has a tag")
            })
            .clone();
        (bucket(&tag), format!("{p}counter-tools:{{{tag}}}"))
    }

    fn session_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(self.opts.key_prefix.as_str())?
            .strip_prefix('{')?
            .strip_suffix('}')
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::unavailable(self.name.clone(), e.to_string())
    }

    /// Connecting failed; the client's error stays reachable through `source()`.
    fn cannot_connect(&self, e: redis::RedisError) -> StoreError {
        let message = if e.is_timeout() {
            format!(
                "cannot connect: no answer within connect_timeout ({})",
                humantime::format_duration(self.opts.connect_timeout)
            )
        } else {
            format!("cannot connect: {e}")
        };
        StoreError::Unavailable {
            store: self.name.clone(),
            message,
            source: Some(Box::new(e)),
        }
    }

    /// A command failed; a timeout names the setting that bounds it.
    fn command_failed(&self, e: redis::RedisError) -> StoreError {
        if !e.is_timeout() {
            return self.caused(e);
        }
        let (connect, command) = (self.opts.connect_timeout, self.opts.command_timeout);
        StoreError::Unavailable {
            store: self.name.clone(),
            message: format!(
                "no answer in time (command_timeout {}; a store operation waits at most {} in all)",
                humantime::format_duration(command),
                humantime::format_duration(connect.max(command))
            ),
            source: Some(Box::new(e)),
        }
    }

    /// A failure caused by `e`, which stays reachable through `source()`.
    fn caused(&self, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::caused(self.name.clone(), e)
    }

    fn ttl_ms(&self) -> u64 {
        self.opts.idle_ttl.as_millis().clamp(1, u64::MAX as u128) as u64
    }

    /// Runs `f` on a live connection (one server's, or the cluster's) within a deadline
    /// of its own: one round trip of a listing or a count.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        self.with_conn_by(&Deadline::new(&self.opts), f)
    }

    /// Runs `f` on a live connection (one server's, or the cluster's), connecting first
    /// when there is none, all within the operation's `deadline`; a connection that
    /// failed is dropped so the next call reconnects.
    fn with_conn_by<T>(
        &self,
        deadline: &Deadline,
        f: impl FnOnce(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        match &self.backend {
            Backend::Single { info, conn } => {
                let mut guard: MutexGuard<'_, Option<redis::Connection>> =
                    conn.lock().unwrap_or_else(|e| e.into_inner());
                if guard.is_none() {
                    let c =
                        connect(info, deadline.connect_by).map_err(|e| self.cannot_connect(e))?;
                    *guard = Some(c);
                }
                let by = deadline.commands_by();
                let c = guard.as_mut().expect("connected above");
                let r = f(&mut Until { conn: c, by });
                self.settle(r, &mut guard, |c| {
                    // Leave no WATCH behind on a connection we keep.
                    redis::cmd("UNWATCH")
                        .exec(&mut Until { conn: c, by })
                        .is_ok()
                })
            }
            Backend::Cluster { client, conn } => {
                let mut guard: MutexGuard<'_, Option<redis::cluster::ClusterConnection>> =
                    conn.lock().unwrap_or_else(|e| e.into_inner());
                if guard.is_none() {
                    let c = client
                        .get_connection()
                        .map_err(|e| self.cannot_connect(e))?;
                    *guard = Some(c);
                }
                let c = guard.as_mut().expect("connected above");
                // Each reply the cluster client awaits: at most what is left.
                let r = left(deadline.commands_by()).and_then(|left| {
                    let bound = Some(left.min(self.opts.command_timeout));
                    c.set_read_timeout(bound)?;
                    c.set_write_timeout(bound)?;
                    f(c)
                });
                self.settle(r, &mut guard, |_| true)
            }
        }
    }

    /// The result of one operation; a broken connection (or one `keep` could not clean)
    /// is dropped for the next call.
    fn settle<T, C>(
        &self,
        r: redis::RedisResult<T>,
        guard: &mut Option<C>,
        keep: impl FnOnce(&mut C) -> bool,
    ) -> Result<T, StoreError> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => {
                if e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_timeout()
                    || e.is_unrecoverable_error()
                {
                    *guard = None;
                } else if let Some(c) = guard.as_mut() {
                    if !keep(c) {
                        *guard = None;
                    }
                }
                Err(self.command_failed(e))
            }
        }
    }

    fn decode(&self, bytes: &[u8]) -> SessionState {
        crate::decode_or_warn(bytes, &self.name, &self.warnings)
    }

    /// The session's next state as stored bytes: `f` applied to the current one (or to a
    /// fresh state when the key is absent).
    fn next_state(
        &self,
        current: Option<&[u8]>,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
        tally: &mut Tally,
    ) -> redis::RedisResult<Vec<u8>> {
        let mut state = current.map(|b| self.decode(b)).unwrap_or_default();
        tally.clear();
        f(&mut state, tally);
        serde_json::to_vec(&state).map_err(|e| {
            redis::RedisError::from((redis::ErrorKind::Client, "encode", e.to_string()))
        })
    }
}

use redis::IntoConnectionInfo;

impl Store for RedisStore {
    fn update(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError> {
        let key = self.key(session);
        let ttl = self.ttl_ms();
        let cluster = self.is_cluster();
        let (counters, tools) = self.counter_keys(&key);
        let cas = redis::Script::new(CAS);
        let cas_count = redis::Script::new(CAS_COUNT);
        let mut tally = Tally::new();
        // One deadline for every attempt.
        let deadline = Deadline::new(&self.opts);
        for attempt in 0..MAX_RETRIES {
            let committed = if cluster {
                self.with_conn_by(&deadline, |c| {
                    let current: Option<Vec<u8>> = redis::cmd("GET").arg(&key).query(c)?;
                    let bytes = self.next_state(current.as_deref(), f, &mut tally)?;
                    let script = if tally.is_empty() { &cas } else { &cas_count };
                    let mut inv = script.key(&key);
                    if !tally.is_empty() {
                        inv.key(&counters).key(&tools);
                    }
                    inv.arg(if current.is_some() { "1" } else { "0" })
                        .arg(current.unwrap_or_default())
                        .arg(bytes)
                        .arg(ttl);
                    if !tally.is_empty() {
                        inv.arg(MAX_TOOLS);
                        for inc in tally.incs() {
                            let (tool, other) = match &inc.tool {
                                Some((t, o)) => (t.as_str(), o.as_str()),
                                None => ("", inc.key.as_str()),
                            };
                            inv.arg(inc.n).arg(&inc.key).arg(tool).arg(other);
                        }
                    }
                    let done: i64 = inv.invoke(c)?;
                    Ok(done == 1)
                })?
            } else {
                self.with_conn_by(&deadline, |c| {
                    let (current,): (Option<Vec<u8>>,) = redis::pipe()
                        .cmd("WATCH")
                        .arg(&key)
                        .ignore()
                        .cmd("GET")
                        .arg(&key)
                        .query(c)?;
                    let bytes = self.next_state(current.as_deref(), f, &mut tally)?;
                    let mut pipe = redis::pipe();
                    pipe.atomic()
                        .cmd("SET")
                        .arg(&key)
                        .arg(bytes)
                        .arg("PX")
                        .arg(ttl);
                    if !tally.is_empty() {
                        // The script's text, not its digest: inside MULTI a NOSCRIPT
                        // error would not undo the SET.
                        let mut eval = redis::cmd("EVAL");
                        eval.arg(COUNT).arg(2).arg(&counters).arg(&tools);
                        tally_args(&mut eval, &tally);
                        pipe.add_command(eval);
                    }
                    let exec: RValue = pipe.query(c)?;
                    Ok(!matches!(exec, RValue::Nil))
                })?
            };
            if committed {
                return Ok(());
            }
            // Someone else wrote the session between our GET and EXEC: back off a little
            // (growing, with jitter from the clock) and run the update again.
            let spin = (attempt.min(10) as u64 + 1) * 50 + (now_ms() % 50);
            std::thread::sleep(Duration::from_micros(spin));
        }
        Err(self.err(format!(
            "update of one session conflicted {MAX_RETRIES} times in a row; giving up"
        )))
    }

    fn add_counts(&self, tally: &Tally) -> Result<(), StoreError> {
        if tally.is_empty() {
            return Ok(());
        }
        // On a cluster, the bucket of an arbitrary slot (the tag of any session named ``).
        let (counters, tools) = self.counter_keys(&self.key(""));
        let mut eval = redis::cmd("EVAL");
        eval.arg(COUNT).arg(2).arg(&counters).arg(&tools);
        tally_args(&mut eval, tally);
        self.with_conn(|c| eval.query::<i64>(c))?;
        Ok(())
    }

    fn counters(&self) -> Result<Counters, StoreError> {
        let keys = if self.is_cluster() {
            let pattern = format!("{}counters:{{*", glob_escape(&self.opts.key_prefix));
            self.scan(&pattern)?
        } else {
            vec![self.counter_keys("").0]
        };
        let mut out = Counters::default();
        let mut unreadable = 0usize;
        for key in keys {
            let fields: Vec<(Vec<u8>, i64)> =
                self.with_conn(|c| redis::cmd("HGETALL").arg(&key).query(c))?;
            for (series, value) in fields {
                if !out.add_stored(&series, value.max(0) as u64) {
                    unreadable += 1;
                }
            }
        }
        if unreadable > 0 {
            self.warnings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!(
                    "{}: {unreadable} stored counter(s) could not be read and were left out",
                    self.name
                ));
        }
        Ok(out)
    }

    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        let key = self.key(session);
        let v: Option<Vec<u8>> = self.with_conn(|c| redis::cmd("GET").arg(&key).query(c))?;
        Ok(v.map(|b| self.decode(&b)))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        let key = self.key(session);
        let n: i64 = self.with_conn(|c| redis::cmd("DEL").arg(&key).query(c))?;
        Ok(n > 0)
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let keys = self.scan_keys("")?;
        let ttl = self.ttl_ms();
        let now = now_ms();
        let mut out = Vec::new();
        for key in keys {
            let (state, pttl): (Option<Vec<u8>>, i64) = self.with_conn(|c| {
                if c.supports_pipelining() {
                    redis::pipe()
                        .cmd("GET")
                        .arg(&key)
                        .cmd("PTTL")
                        .arg(&key)
                        .query(c)
                } else {
                    // The cluster connection routes commands one at a time.
                    Ok((
                        redis::cmd("GET").arg(&key).query(c)?,
                        redis::cmd("PTTL").arg(&key).query(c)?,
                    ))
                }
            })?;
            let Some(bytes) = state else { continue };
            let Some(session) = self.session_of(&key) else {
                continue;
            };
            // The TTL is reset on every write: last activity = now - (ttl - remaining).
            let idle = ttl.saturating_sub(pttl.max(0) as u64);
            let Some(state) =
                crate::decode_listed(session, &bytes, &self.describe(), &self.warnings)
            else {
                continue;
            };
            out.push(SessionInfo {
                key: session.to_string(),
                last_activity_ms: now.saturating_sub(idle),
                state,
            });
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self
            .scan_keys(prefix)?
            .iter()
            .filter_map(|k| self.session_of(k).map(str::to_string))
            .filter(|s| s.starts_with(prefix))
            .collect())
    }

    fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl RedisStore {
    /// Keys of sessions whose name starts with `prefix`, by `SCAN` (never `KEYS`); on a
    /// cluster, on every primary.
    fn scan_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let pattern = format!(
            "{}{{{}*",
            glob_escape(&self.opts.key_prefix),
            glob_escape(prefix)
        );
        self.scan(&pattern)
    }

    /// Keys matching `pattern`, by `SCAN`; on a cluster, on every primary.
    fn scan(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        let nodes: Vec<Option<(String, u16)>> = if self.is_cluster() {
            self.primaries()?.into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        for node in nodes {
            let mut cursor: u64 = 0;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let (next, batch): (u64, Vec<String>) = match &node {
                    None => self.with_conn(|c| cmd.query(c))?,
                    Some((host, port)) => self.on_node(host, *port, &cmd)?,
                };
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// The cluster's primaries, from `CLUSTER NODES`.
    fn primaries(&self) -> Result<Vec<(String, u16)>, StoreError> {
        let text: String = self.with_conn(|c| redis::cmd("CLUSTER").arg("NODES").query(c))?;
        Ok(text
            .lines()
            .filter(|l| {
                let flags = l.split_whitespace().nth(2).unwrap_or("");
                flags.split(',').any(|f| f == "master") && !flags.contains("fail")
            })
            .filter_map(|l| {
                let addr = l.split_whitespace().nth(1)?;
                let hostport = addr.split('@').next()?;
                let (host, port) = hostport.rsplit_once(':')?;
                Some((host.to_string(), port.parse().ok()?))
            })
            .collect())
    }

    /// Runs one command on one cluster node.
    fn on_node<T: redis::FromRedisValue>(
        &self,
        host: &str,
        port: u16,
        cmd: &redis::Cmd,
    ) -> Result<T, StoreError> {
        let Backend::Cluster { conn, .. } = &self.backend else {
            return Err(self.err("not a cluster"));
        };
        // Connect first if needed.
        self.with_conn(|_| Ok(()))?;
        let mut guard = conn.lock().unwrap_or_else(|e| e.into_inner());
        let c = guard.as_mut().ok_or_else(|| self.err("not connected"))?;
        let routing = redis::cluster_routing::RoutingInfo::SingleNode(
            redis::cluster_routing::SingleNodeRoutingInfo::ByAddress {
                host: host.to_string(),
                port,
            },
        );
        let v = c.route_command(cmd, routing).map_err(|e| self.caused(e))?;
        redis::FromRedisValue::from_redis_value(v).map_err(|e| self.caused(e))
    }
}

/// When one store operation must be done: connecting by `connect_by`, its commands by
/// [`Deadline::commands_by`], both never past the operation's deadline (the larger of
/// `connect_timeout` and `command_timeout` after it started).
struct Deadline {
    /// The operation's deadline.
    by: Instant,
    /// Connecting gives up then.
    connect_by: Instant,
    command_timeout: Duration,
    /// Set when the first command is sent.
    commands_by: OnceCell<Instant>,
}

/// `d` after `t`, or a year after when that is past what an `Instant` holds.
fn after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .unwrap_or_else(|| t + Duration::from_secs(365 * 24 * 3600))
}

impl Deadline {
    fn new(opts: &RedisOptions) -> Self {
        let now = Instant::now();
        let by = after(now, opts.connect_timeout.max(opts.command_timeout));
        Deadline {
            by,
            connect_by: after(now, opts.connect_timeout).min(by),
            command_timeout: opts.command_timeout,
            commands_by: OnceCell::new(),
        }
    }

    /// The commands' deadline: `command_timeout` after the first of them, at the latest
    /// the operation's.
    fn commands_by(&self) -> Instant {
        *self
            .commands_by
            .get_or_init(|| after(Instant::now(), self.command_timeout).min(self.by))
    }
}

/// What is left until `by`, or a timeout error once it has passed.
fn left(by: Instant) -> redis::RedisResult<Duration> {
    let left = by.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the store operation's deadline passed",
        )
        .into());
    }
    Ok(left)
}

/// A server's connection whose every write and reply is awaited only until `by`: the
/// client's own `Connection` awaits each reply of a pipeline for the whole timeout.
struct Until<'c> {
    conn: &'c mut redis::Connection,
    by: Instant,
}

impl Until<'_> {
    fn send(&mut self, bytes: &[u8]) -> redis::RedisResult<()> {
        self.conn.set_write_timeout(Some(left(self.by)?))?;
        self.conn.send_packed_command(bytes)
    }

    /// The next reply (push messages, which are no reply, skipped).
    fn reply(&mut self) -> redis::RedisResult<RValue> {
        loop {
            self.conn.set_read_timeout(Some(left(self.by)?))?;
            match self.conn.recv_response()? {
                RValue::Push { .. } => continue,
                v => return Ok(v),
            }
        }
    }
}

impl redis::ConnectionLike for Until<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<RValue> {
        self.send(cmd)?;
        self.reply()
    }

    /// The replies from `offset` on; a server error among the first `offset` (the
    /// commands a transaction queued) fails the whole, once every reply is read. A
    /// timeout or broken connection stops at once (the caller drops the connection).
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<RValue>> {
        self.send(cmd)?;
        let mut out = Vec::with_capacity(count);
        let mut queued_error = None;
        for i in 0..offset + count {
            match self.reply()? {
                RValue::ServerError(e) if i < offset => {
                    queued_error.get_or_insert(e);
                }
                v if i >= offset => out.push(v),
                _ => {}
            }
        }
        match queued_error {
            Some(e) => Err(e.into()),
            None => Ok(out),
        }
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.conn.is_open()
    }
}

/// Connects to one server by `by`: TCP to each of the host's addresses in turn with what
/// is left (TLS with it), then the setup (`AUTH`, `SELECT`, the client's name) through
/// [`Until`]. The client library would give each address the whole timeout and await each
/// reply of its setup for it too.
fn connect(info: &redis::ConnectionInfo, by: Instant) -> redis::RedisResult<redis::Connection> {
    let settings = info.redis_settings();
    let resp3 = settings.protocol().supports_resp3();
    // Nothing for the library to set up but, with RESP3, its HELLO (which authenticates,
    // in one reply).
    let mut bare = redis::RedisConnectionInfo::default()
        .set_protocol(settings.protocol())
        .set_skip_set_lib_name();
    if resp3 {
        if let Some(u) = settings.username() {
            bare = bare.set_username(u);
        }
        if let Some(p) = settings.password() {
            bare = bare.set_password(p);
        }
    }
    let bare = info.clone().set_redis_settings(bare);
    let mut conn = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => {
            let mut last = None;
            let mut found = None;
            for addr in (host.as_str(), *port).to_socket_addrs()? {
                let one = bare
                    .clone()
                    .set_addr(redis::ConnectionAddr::Tcp(addr.ip().to_string(), *port));
                match redis::Client::open(one)?.get_connection_with_timeout(left(by)?) {
                    Ok(c) => {
                        found = Some(c);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            match (found, last) {
                (Some(c), _) => c,
                (None, Some(e)) => return Err(e),
                (None, None) => {
                    return Err((
                        redis::ErrorKind::InvalidClientConfig,
                        "could not resolve to any addresses",
                    )
                        .into())
                }
            }
        }
        _ => redis::Client::open(bare)?.get_connection_with_timeout(left(by)?)?,
    };
    let mut until = Until {
        conn: &mut conn,
        by,
    };
    // With a user name first; a server before Redis 6 takes the password alone.
    for with_user in [true, false] {
        let mut setup = redis::pipe();
        let auth = match settings.password().filter(|_| !resp3) {
            Some(password) => {
                let mut cmd = redis::cmd("AUTH");
                if let Some(user) = settings.username().filter(|_| with_user) {
                    cmd.arg(user);
                }
                setup.add_command(cmd.arg(password).to_owned());
                Some(0)
            }
            None => None,
        };
        let select = (settings.db() != 0).then(|| {
            setup.cmd("SELECT").arg(settings.db());
            setup.len() - 1
        });
        // The client's name, as the library sends it (a server that does not know the
        // command answers an error, which is ignored).
        if !settings.skip_set_lib_name() {
            setup
                .cmd("CLIENT")
                .arg("SETINFO")
                .arg("LIB-NAME")
                .arg(settings.lib_name().unwrap_or("toolbrake"));
            setup
                .cmd("CLIENT")
                .arg("SETINFO")
                .arg("LIB-VER")
                .arg(settings.lib_ver().unwrap_or(env!("CARGO_PKG_VERSION")));
        }
        if setup.is_empty() {
            break;
        }
        let replies = redis::ConnectionLike::req_packed_commands(
            &mut until,
            &setup.get_packed_pipeline(),
            0,
            setup.len(),
        )?;
        if let Some(RValue::ServerError(e)) = auth.and_then(|i| replies.get(i)) {
            let old_server = with_user
                && settings.username().is_some()
                && e.details()
                    .is_some_and(|d| d.contains("wrong number of arguments for 'auth' command"));
            if old_server {
                continue;
            }
            return Err((
                redis::ErrorKind::AuthenticationFailed,
                "Password authentication failed",
            )
                .into());
        }
        if let Some(RValue::ServerError(e)) = select.and_then(|i| replies.get(i)) {
            return Err(e.clone().into());
        }
        break;
    }
    Ok(conn)
}
