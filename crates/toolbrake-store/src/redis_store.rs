//! Shared state on Redis (and Valkey, KeyDB, Redis Cluster): one key per session holding
//! its serialised state, so every process and machine of a fleet sees one session's counts.
//!
//! Key layout: `<prefix>{<session>}` holds the state, a plain string with a TTL;
//! `<prefix>lock:{<session>}` and `<prefix>wake:{<session>}` (short-lived) order the
//! writers of a contended session. The braces are a Redis Cluster hash tag: every key of
//! one session lands on one slot, so a script may touch them together.
//!
//! Redis Cluster: with [`RedisOptions::cluster`] set, the store speaks to a cluster through
//! the `redis` crate's cluster client, which follows `MOVED` and `ASK` redirections (a
//! resharding in the middle of a run loses nothing); listing scans every primary.
//!
//! Atomicity: the read-modify-write logic is the engine, which is Rust, so a server-side
//! script cannot run it; each update's write is one compare-and-set script instead, the
//! same on one server and on a cluster, and a contended session queues its writers on the
//! server rather than retrying them (`redis_store/update.rs` tells how). Uncontended, an update costs one
//! round trip (two in a process that has not written the session yet).
//!
//! Counters: an update's tally is added by the same script that writes the state
//! (`HINCRBY` on a counters hash, the tool names kept in a set bounded by
//! [`crate::MAX_TOOLS`]), so it lands exactly when the state does. On a cluster a script
//! may only touch keys of one slot: each slot a session lives on gets its own counters hash
//! and tool set (`<prefix>counters:{<tag>}`, the tag found once per slot so that the key
//! lands on the session's slot; at most 16,384 of each, never expiring);
//! [`Store::counters`] sums them all.
//!
//! Hostile values: nothing another client leaves in the shared keys decides a call
//! (`redis_store/repair.rs`): counters that cannot be kept are said and skipped, a lock
//! that could never expire is stale, a session's key of the wrong type starts it afresh.
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
//! whole timeout, and each read of a reply for it again (a hung server that still accepts
//! connections held a hook for twice `connect_timeout`; one that trickled a long reply a
//! byte every half second, as long as it liked), so on one server the store has its own
//! connection ([`conn::Conn`]: the socket, TLS, the library's reply parser), each read and
//! write of which is given what is left of the deadline ([`Until`]). On a cluster the deadline bounds
//! each step the store takes; the cluster client's own redirections and reconnections
//! within a step keep its per-reply timeouts. Listing and counting (`list`, `counters`,
//! the scans) read many keys and give each round trip a deadline of its own.

use crate::{now_ms, Counters, SessionInfo, Store, StoreError, Tally};
use redis::cluster_routing::Slot;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use toolbrake_core::SessionState;

mod conn;
mod repair;
mod update;

use conn::{connect, left, Deadline, Until};

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
        conn: Mutex<Option<conn::Conn>>,
    },
    Cluster {
        client: redis::cluster::ClusterClient,
        // Boxed: a cluster connection is much larger than a server's.
        conn: Box<Mutex<Option<redis::cluster::ClusterConnection>>>,
    },
}

/// Session state in Redis.
pub struct RedisStore {
    backend: Backend,
    opts: RedisOptions,
    name: String,
    warnings: Mutex<Vec<String>>,
    /// Per cluster slot, the hash tag that puts a counters key on that slot.
    tags: Mutex<HashMap<Slot, String>>,
    scripts: update::Scripts,
    /// The last state written for a few sessions (the uncontended update's base).
    cache: Mutex<update::Cache>,
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
            scripts: update::Scripts::new(),
            cache: Mutex::new(update::Cache::default()),
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
            scripts: update::Scripts::new(),
            cache: Mutex::new(update::Cache::default()),
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
                let mut guard: MutexGuard<'_, Option<conn::Conn>> =
                    conn.lock().unwrap_or_else(|e| e.into_inner());
                if guard.is_none() {
                    let c =
                        connect(info, deadline.connect_by).map_err(|e| self.cannot_connect(e))?;
                    *guard = Some(c);
                }
                let by = deadline.commands_by();
                let c = guard.as_mut().expect("connected above");
                let r = f(&mut Until { conn: c, by });
                self.settle(r, &mut guard)
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
                self.settle(r, &mut guard)
            }
        }
    }

    /// The result of one operation; a broken connection is dropped for the next call.
    fn settle<T, C>(
        &self,
        r: redis::RedisResult<T>,
        guard: &mut Option<C>,
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
                }
                Err(self.command_failed(e))
            }
        }
    }

    fn decode(&self, bytes: &[u8]) -> SessionState {
        crate::decode_or_warn(bytes, &self.name, &self.warnings)
    }
}

use redis::IntoConnectionInfo;

impl Store for RedisStore {
    fn update(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError> {
        self.update_session(session, f)
    }

    fn add_counts(&self, tally: &Tally) -> Result<(), StoreError> {
        if tally.is_empty() {
            return Ok(());
        }
        // On a cluster, the bucket of an arbitrary slot (the tag of any session named ``).
        let (counters, tools) = self.counter_keys(&self.key(""));
        let mut eval = redis::cmd("EVAL");
        eval.arg(update::COUNT).arg(2).arg(&counters).arg(&tools);
        update::tally_args(&mut eval, tally);
        let found = self.with_conn(|c| eval.query::<i64>(c))?;
        let keys = update::Keys {
            value: String::new(),
            lock: String::new(),
            wake: String::new(),
            counters,
            tools,
        };
        self.noted(found, &keys);
        Ok(())
    }

    fn uncounted(&self) -> u64 {
        self.scripts
            .uncounted
            .load(std::sync::atomic::Ordering::Relaxed)
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
            // A key of the wrong type, or a value that is not a count, is left out (and
            // said): one bad value never hides the others.
            let fields: Option<Vec<(Vec<u8>, Vec<u8>)>> =
                self.with_conn(|c| match redis::cmd("HGETALL").arg(&key).query(c) {
                    Err(e) if update::is_wrong_type(&e) => Ok(None),
                    r => r.map(Some),
                })?;
            let Some(fields) = fields else {
                self.warn_once(
                    update::notes::READ_TYPE,
                    format!(
                        "{}: the counters key `{key}` holds a value of the wrong type (not a hash): its counters are left out",
                        self.name
                    ),
                );
                continue;
            };
            for (series, value) in fields {
                let value = std::str::from_utf8(&value)
                    .ok()
                    .and_then(|v| v.parse::<i64>().ok());
                match value {
                    Some(v) if out.add_stored(&series, v.max(0) as u64) => {}
                    _ => unreadable += 1,
                }
            }
        }
        if unreadable > 0 {
            self.warn_once(
                update::notes::READ_VALUE,
                format!(
                    "{}: {unreadable} stored counter(s) could not be read and were left out",
                    self.name
                ),
            );
        }
        Ok(out)
    }

    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        let key = self.key(session);
        Ok(match self.read_stored(&key, &Deadline::new(&self.opts))? {
            update::Stored::Absent => None,
            update::Stored::Bytes(b) => Some(self.decode(&b)),
            update::Stored::WrongType => Some(SessionState::default()),
        })
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(session);
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
            let (state, pttl): (redis::Value, i64) = self.with_conn(|c| {
                if c.supports_pipelining() {
                    redis::pipe()
                        // A key of the wrong type answers an error, read as a value.
                        .ignore_errors()
                        .cmd("GET")
                        .arg(&key)
                        .cmd("PTTL")
                        .arg(&key)
                        .query(c)
                } else {
                    // The cluster connection routes commands one at a time.
                    let state = match redis::cmd("GET").arg(&key).query(c) {
                        Err(e) if update::is_wrong_type(&e) => redis::Value::Nil,
                        r => r?,
                    };
                    Ok((state, redis::cmd("PTTL").arg(&key).query(c)?))
                }
            })?;
            // A key of the wrong type holds no session (its next update replaces it).
            let bytes = match state {
                redis::Value::BulkString(b) => b,
                redis::Value::SimpleString(s) => s.into_bytes(),
                _ => continue,
            };
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
