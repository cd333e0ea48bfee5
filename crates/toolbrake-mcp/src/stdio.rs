//! The relay's own standard input and output, read and written on the runtime's thread.
//!
//! Tokio's `stdin()`/`stdout()` hand every read and write to a blocking thread and back:
//! on a `tools/call` that is four cross-thread wake-ups the proxy adds to the client's
//! round trip (BENCHMARKS.md, "Speed against the floors"). MCP clients start their servers
//! with a socket pair (Node, libuv) or a pipe on each side, which the runtime can wait on
//! itself; those are put in non-blocking mode and registered with the reactor. Anything
//! else (a terminal, a regular file) keeps tokio's blocking-thread reader and writer.
//!
//! A socket on standard output is written directly and joins the reactor only while a write
//! would block: registered, it would wake the relay each time the client reads an answer
//! (the kernel tells a socket's writers that room was freed), one wake-up per message for
//! nothing (BENCHMARKS.md, "Speed to the floor, second round"). A pipe tells its writer only
//! when it was full, and stays registered.
//!
//! Non-blocking mode belongs to the open file, not to the descriptor: standard output is
//! left to tokio when standard error is the same socket or pipe, so that an `eprintln!`
//! never meets a full pipe in non-blocking mode.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The relay's standard input.
pub enum Stdin {
    /// A socket, waited on by the reactor.
    Socket(tokio::net::UnixStream),
    /// A pipe (FIFO), waited on by the reactor.
    Pipe(tokio::net::unix::pipe::Receiver),
    /// Anything else: tokio's blocking-thread reader.
    Blocking(tokio::io::Stdin),
}

/// The relay's standard output.
pub enum Stdout {
    /// A socket, written directly; waited on by the reactor only while it is full.
    Socket(SocketOut),
    /// A pipe (FIFO), waited on by the reactor.
    Pipe(tokio::net::unix::pipe::Sender),
    /// Anything else, or shared with standard error: tokio's blocking-thread writer.
    Blocking(tokio::io::Stdout),
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Socket,
    Pipe,
    Other,
}

/// A duplicate of `fd`, what it is, and its identity (device, inode).
fn open(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, Kind, (u64, u64))> {
    let file = std::fs::File::from(fd.try_clone_to_owned()?);
    let meta = file.metadata()?;
    let ty = meta.file_type();
    let kind = if ty.is_socket() {
        Kind::Socket
    } else if ty.is_fifo() {
        Kind::Pipe
    } else {
        Kind::Other
    };
    Ok((OwnedFd::from(file), kind, (meta.dev(), meta.ino())))
}

/// A non-blocking socket written without the reactor until a write would block.
pub struct SocketOut {
    /// The socket while writes go through.
    idle: Option<std::os::unix::net::UnixStream>,
    /// The socket registered with the reactor while a write waits for room.
    waiting: Option<tokio::net::UnixStream>,
}

impl SocketOut {
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            if let Some(waiting) = &mut self.waiting {
                let written = ready!(Pin::new(waiting).poll_write(cx, buf));
                // Room again: out of the reactor until a write would block.
                if let Some(s) = self.waiting.take() {
                    self.idle = Some(s.into_std()?);
                }
                return Poll::Ready(written);
            }
            let Some(socket) = &mut self.idle else {
                return Poll::Ready(Err(io::Error::other("standard output is gone")));
            };
            match socket.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Registering reads the socket's state: room freed since is not missed.
                    if let Some(s) = self.idle.take() {
                        self.waiting = Some(tokio::net::UnixStream::from_std(s)?);
                    }
                }
                written => return Poll::Ready(written),
            }
        }
    }
}

fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(std)
}

/// The relay's standard input; must be called inside a tokio runtime (with I/O enabled).
pub fn stdin() -> Stdin {
    let attempt = || -> io::Result<Option<Stdin>> {
        let (owned, kind, _) = open(io::stdin().as_fd())?;
        Ok(match kind {
            Kind::Socket => Some(Stdin::Socket(socket(owned)?)),
            Kind::Pipe => Some(Stdin::Pipe(
                tokio::net::unix::pipe::Receiver::from_owned_fd(owned)?,
            )),
            Kind::Other => None,
        })
    };
    match attempt() {
        Ok(Some(s)) => s,
        _ => Stdin::Blocking(tokio::io::stdin()),
    }
}

/// The relay's standard output; must be called inside a tokio runtime (with I/O enabled).
pub fn stdout() -> Stdout {
    let attempt = || -> io::Result<Option<Stdout>> {
        let (owned, kind, id) = open(io::stdout().as_fd())?;
        let shared = open(io::stderr().as_fd()).is_ok_and(|(_, _, err)| err == id);
        Ok(match kind {
            _ if shared => None,
            Kind::Socket => {
                let std = std::os::unix::net::UnixStream::from(owned);
                std.set_nonblocking(true)?;
                Some(Stdout::Socket(SocketOut {
                    idle: Some(std),
                    waiting: None,
                }))
            }
            Kind::Pipe => Some(Stdout::Pipe(tokio::net::unix::pipe::Sender::from_owned_fd(
                owned,
            )?)),
            Kind::Other => None,
        })
    };
    match attempt() {
        Ok(Some(s)) => s,
        _ => Stdout::Blocking(tokio::io::stdout()),
    }
}

impl AsyncRead for Stdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stdin::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Stdin::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            Stdin::Blocking(b) => Pin::new(b).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stdout {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stdout::Socket(s) => s.poll_write(cx, buf),
            Stdout::Pipe(p) => Pin::new(p).poll_write(cx, buf),
            Stdout::Blocking(b) => Pin::new(b).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            // Nothing is buffered: every write went to the socket.
            Stdout::Socket(_) => Poll::Ready(Ok(())),
            Stdout::Pipe(p) => Pin::new(p).poll_flush(cx),
            Stdout::Blocking(b) => Pin::new(b).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stdout::Socket(s) => match (&s.idle, &mut s.waiting) {
                (Some(socket), _) => Poll::Ready(socket.shutdown(std::net::Shutdown::Write)),
                (None, Some(socket)) => Pin::new(socket).poll_shutdown(cx),
                (None, None) => Poll::Ready(Ok(())),
            },
            Stdout::Pipe(p) => Pin::new(p).poll_shutdown(cx),
            Stdout::Blocking(b) => Pin::new(b).poll_shutdown(cx),
        }
    }
}
