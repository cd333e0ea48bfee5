//! One server's connection under one operation's deadline: connecting, and every reply
//! awaited only until the operation must be done.

use super::RedisOptions;
use redis::Value as RValue;
use std::cell::OnceCell;
use std::net::ToSocketAddrs;
use std::time::{Duration, Instant};

/// When one store operation must be done: connecting by `connect_by`, its commands by
/// [`Deadline::commands_by`], both never past the operation's deadline (the larger of
/// `connect_timeout` and `command_timeout` after it started).
pub(super) struct Deadline {
    /// The operation's deadline.
    pub(super) by: Instant,
    /// Connecting gives up then.
    pub(super) connect_by: Instant,
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
    pub(super) fn new(opts: &RedisOptions) -> Self {
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
    pub(super) fn commands_by(&self) -> Instant {
        *self
            .commands_by
            .get_or_init(|| after(Instant::now(), self.command_timeout).min(self.by))
    }
}

/// What is left until `by`, or a timeout error once it has passed.
pub(super) fn left(by: Instant) -> redis::RedisResult<Duration> {
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
pub(super) struct Until<'c> {
    pub(super) conn: &'c mut redis::Connection,
    pub(super) by: Instant,
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
pub(super) fn connect(
    info: &redis::ConnectionInfo,
    by: Instant,
) -> redis::RedisResult<redis::Connection> {
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
    // Without Nagle's algorithm: a request is one small write awaiting its reply.
    let tcp = info.tcp_settings().clone().set_nodelay(true);
    let bare = info.clone().set_redis_settings(bare).set_tcp_settings(tcp);
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
