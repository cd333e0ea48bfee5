//! One server's connection under one operation's deadline: connecting, and every reply
//! awaited only until the operation must be done.
//!
//! The connection is the store's own ([`Conn`]: a socket, TLS over it for `rediss://`, and
//! the client library's reply parser), not the library's: the library sets a socket
//! timeout once per reply, and the operating system applies it to each read, so a server
//! that trickles its reply (`$100000` then a byte every half second) held an operation for
//! as long as it liked. Here every read and write of the socket, TLS's included, is given
//! what is left of the operation's deadline, so the deadline covers the whole reply.

use super::RedisOptions;
use redis::Value as RValue;
use std::cell::OnceCell;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
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
    Ok(io_left(by)?)
}

fn io_left(by: Instant) -> std::io::Result<Duration> {
    let left = by.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the store operation's deadline passed",
        ));
    }
    Ok(left)
}

/// A socket whose every read and write waits at most until `by`.
struct Sock {
    kind: SockKind,
    by: Instant,
}

enum SockKind {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = Some(io_left(self.by)?);
        match &mut self.kind {
            SockKind::Tcp(s) => {
                s.set_read_timeout(left)?;
                s.read(buf)
            }
            #[cfg(unix)]
            SockKind::Unix(s) => {
                s.set_read_timeout(left)?;
                s.read(buf)
            }
        }
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let left = Some(io_left(self.by)?);
        match &mut self.kind {
            SockKind::Tcp(s) => {
                s.set_write_timeout(left)?;
                s.write(buf)
            }
            #[cfg(unix)]
            SockKind::Unix(s) => {
                s.set_write_timeout(left)?;
                s.write(buf)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The socket, or TLS over it.
enum Stream {
    Plain(Sock),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Sock>>),
}

impl Stream {
    fn sock(&mut self) -> &mut Sock {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &mut t.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

/// One server's connection: its stream and the reply parser (which keeps what it read
/// past one reply for the next).
pub(super) struct Conn {
    stream: Stream,
    parser: redis::Parser,
    db: i64,
    open: bool,
}

/// A server's connection whose every write and reply is awaited only until `by`, in all.
pub(super) struct Until<'c> {
    pub(super) conn: &'c mut Conn,
    pub(super) by: Instant,
}

impl Until<'_> {
    /// `r`, the connection marked closed when it failed on the socket or the protocol (a
    /// reply cut in the middle leaves the stream unusable).
    fn io<T>(&mut self, r: redis::RedisResult<T>) -> redis::RedisResult<T> {
        if let Err(e) = &r {
            if e.is_io_error() || e.kind() == redis::ErrorKind::Parse {
                self.conn.open = false;
            }
        }
        r
    }

    fn send(&mut self, bytes: &[u8]) -> redis::RedisResult<()> {
        self.conn.stream.sock().by = self.by;
        let r = self
            .conn
            .stream
            .write_all(bytes)
            .and_then(|()| self.conn.stream.flush())
            .map_err(redis::RedisError::from);
        self.io(r)
    }

    /// The next reply (push messages, which are no reply, skipped).
    fn reply(&mut self) -> redis::RedisResult<RValue> {
        self.conn.stream.sock().by = self.by;
        loop {
            let r = self.conn.parser.parse_value(&mut self.conn.stream);
            match self.io(r)? {
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
        self.conn.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.conn.open
    }
}

/// TCP to each of the host's addresses in turn, each with what is left until `by`.
fn tcp(host: &str, port: u16, by: Instant) -> redis::RedisResult<TcpStream> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, left(by)?) {
            Ok(s) => {
                // Without Nagle's algorithm: a request is one small write awaiting its
                // reply.
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => e.into(),
        None => (
            redis::ErrorKind::InvalidClientConfig,
            "could not resolve to any addresses",
        )
            .into(),
    })
}

/// The TLS client configuration: the web's roots (as the client library's, built with
/// `tls-rustls-webpki-roots`), no client certificate. Built once per process.
fn tls_config() -> redis::RedisResult<Arc<rustls::ClientConfig>> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    if let Some(c) = CONFIG.get() {
        return Ok(c.clone());
    }
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(CONFIG.get_or_init(|| Arc::new(config)).clone())
}

/// The stream to the server of `addr`, by `by` (TLS's handshake happens on the first
/// write, under the same deadline).
fn open(addr: &redis::ConnectionAddr, by: Instant) -> redis::RedisResult<Stream> {
    let invalid = |what: &'static str| -> redis::RedisError {
        (redis::ErrorKind::InvalidClientConfig, what).into()
    };
    let sock = |kind| Sock { kind, by };
    Ok(match addr {
        redis::ConnectionAddr::Tcp(host, port) => {
            Stream::Plain(sock(SockKind::Tcp(tcp(host, *port, by)?)))
        }
        redis::ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            ..
        } => {
            if *insecure {
                return Err(invalid(
                    "TLS without certificate checks (#insecure) is not supported",
                ));
            }
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|_| invalid("the host is not a valid TLS server name"))?;
            let tls = rustls::ClientConnection::new(tls_config()?, name).map_err(|e| {
                redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "cannot set up TLS",
                    e.to_string(),
                ))
            })?;
            let s = sock(SockKind::Tcp(tcp(host, *port, by)?));
            Stream::Tls(Box::new(rustls::StreamOwned::new(tls, s)))
        }
        #[cfg(unix)]
        redis::ConnectionAddr::Unix(path) => Stream::Plain(sock(SockKind::Unix(
            std::os::unix::net::UnixStream::connect(path)?,
        ))),
        _ => return Err(invalid("this kind of address is not supported here")),
    })
}

/// Connects to one server by `by`: TCP to each of the host's addresses in turn with what
/// is left (TLS with it), then the setup (`HELLO` for RESP3, or `AUTH`; `SELECT`; the
/// client's name) through [`Until`], all within the one deadline.
pub(super) fn connect(info: &redis::ConnectionInfo, by: Instant) -> redis::RedisResult<Conn> {
    let settings = info.redis_settings();
    let resp3 = settings.protocol().supports_resp3();
    let mut conn = Conn {
        stream: open(info.addr(), by)?,
        parser: redis::Parser::new(),
        db: settings.db(),
        open: true,
    };
    let mut until = Until {
        conn: &mut conn,
        by,
    };
    // With a user name first; a server before Redis 6 takes the password alone.
    for with_user in [true, false] {
        let mut setup = redis::pipe();
        let auth = if resp3 {
            // RESP3, authenticating in the same reply.
            let mut hello = redis::cmd("HELLO");
            hello.arg("3");
            if let Some(password) = settings.password() {
                hello
                    .arg("AUTH")
                    .arg(settings.username().unwrap_or("default"))
                    .arg(password);
            }
            setup.add_command(hello);
            Some(0)
        } else {
            match settings.password() {
                Some(password) => {
                    let mut cmd = redis::cmd("AUTH");
                    if let Some(user) = settings.username().filter(|_| with_user) {
                        cmd.arg(user);
                    }
                    setup.add_command(cmd.arg(password).to_owned());
                    Some(0)
                }
                None => None,
            }
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
            if resp3 {
                return Err(e.clone().into());
            }
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
