//! One direction's writer: a message is written by the task that produced it when nothing is
//! waiting before it, and queued for the direction's writer task otherwise.
//!
//! Handing every message to a writer task cost the proxy a task hand-off per message, both
//! ways (BENCHMARKS.md, "Speed to the floor, fourth round"). Now [`Sender::send`] tries the
//! write itself, without waiting: when the queue is empty and the last write is flushed, the
//! message goes out in the producer's own step. Whatever does not go out at once (a full
//! pipe or socket, a terminal or file written from tokio's blocking thread whose flush
//! completes later) stays queued, and [`Drain::run`] finishes it with the writer task's own
//! waker; later messages queue behind it, so the order of `send` calls is the order on the
//! wire.
//!
//! Invariants:
//! - Messages leave in the order `send` was called, each whole and followed by a newline.
//! - `send` never waits: it writes what the stream takes now and queues the rest.
//! - A write is attempted without the writer task only when nothing is queued and nothing
//!   is left to flush; after a `Pending`, the writer task polls the stream again with its
//!   own waker before anything else is written, so the stream's last registered waker is
//!   always one that will run.
//! - After a write error, or once the writer task is gone, messages are dropped (as a
//!   closed channel dropped them); the error ends the writer task.
//! - The queue is bounded by its readers, not by `send`: a task reading what it will send
//!   here awaits [`Sender::room`] before each read, which waits while more than
//!   [`BOUND`] bytes are queued. A peer that reads nothing thus stops the relay reading
//!   from the other side (backpressure, as a pipe gives), instead of the queue growing:
//!   at most [`BOUND`] plus the messages of one read are held.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use tokio::io::AsyncWrite;
use tokio::sync::Notify;

type Stream = Pin<Box<dyn AsyncWrite + Send>>;

/// Bytes queued in one direction past which [`Sender::room`] waits.
pub const BOUND: usize = 1 << 20;

/// One direction of the relay: messages to write, in order.
struct Outbox {
    inner: Mutex<Inner>,
    /// Wakes the writer task when something was queued, or the outbox closed.
    queued: Notify,
    /// Wakes [`Sender::room`] when the queue went under [`BOUND`] or the stream is gone.
    room: Notify,
}

struct Inner {
    /// The stream; `None` once the writer task is gone or a write failed.
    out: Option<Stream>,
    /// Messages not yet written whole, oldest first (each with its newline).
    queue: VecDeque<Vec<u8>>,
    /// Bytes of the front message already written.
    written: usize,
    /// Bytes in `queue`.
    bytes: usize,
    /// [`Sender::room`] waits for `room` to be notified.
    room_wanted: bool,
    /// Something was written and not yet flushed.
    unflushed: bool,
    /// No more messages will come.
    closed: bool,
    /// The write error that ended the stream, kept for the writer task.
    failed: Option<io::Error>,
}

/// An outbox writing to `out`: its sender, and its writer task ([`Drain::run`]) to spawn.
pub fn outbox<W: AsyncWrite + Send + 'static>(out: W) -> (Sender, Drain) {
    let outbox = Arc::new(Outbox {
        inner: Mutex::new(Inner {
            out: Some(Box::pin(out)),
            queue: VecDeque::new(),
            written: 0,
            bytes: 0,
            room_wanted: false,
            unflushed: false,
            closed: false,
            failed: None,
        }),
        queued: Notify::new(),
        room: Notify::new(),
    });
    (Sender(outbox.clone()), Drain(outbox))
}

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells [`Sender::room`] when the queue has room again (or will never need it).
    fn wake_room(&self, mut g: MutexGuard<'_, Inner>) {
        if g.room_wanted && g.has_room() {
            g.room_wanted = false;
            drop(g);
            self.room.notify_waiters();
        }
    }
}

/// The producing side of an [`outbox`]; the outbox closes when it is dropped. Sending from
/// a thread outside the runtime is allowed: the writer task then writes the message.
pub struct Sender(Arc<Outbox>);

impl Sender {
    /// Writes `line` and a newline now if nothing waits before it and the stream takes it;
    /// queues what is left for the writer task. Dropped after a write error.
    pub fn send(&self, line: String) {
        let mut line = line.into_bytes();
        line.push(b'\n');
        let mut g = self.0.lock();
        let inner = &mut *g;
        if inner.out.is_none() {
            return;
        }
        // Outside the runtime (no reactor to register a full socket with, no blocking pool
        // for a terminal's writer) a message only queues.
        let direct = inner.queue.is_empty()
            && !inner.unflushed
            && tokio::runtime::Handle::try_current().is_ok();
        inner.bytes += line.len();
        inner.queue.push_back(line);
        if direct {
            // Nothing waits: the writer task's own step, with a waker that does nothing (a
            // `Pending` leaves the rest to the writer task, which polls again with its own).
            match inner.poll_drain(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(Ok(())) => return self.0.wake_room(g),
                // Kept for the writer task, which ends with it.
                Poll::Ready(Err(e)) => inner.failed = Some(e),
                Poll::Pending => {}
            }
        }
        self.0.wake_room(g);
        self.0.queued.notify_one();
    }

    /// Waits while more than [`BOUND`] bytes are queued (the peer reads slowly or not at
    /// all); returns at once otherwise, and when the stream is gone.
    pub async fn room(&self) {
        if self.0.lock().has_room() {
            return;
        }
        loop {
            let freed = self.0.room.notified();
            tokio::pin!(freed);
            // Enabled before the check: a notification after it is not missed.
            freed.as_mut().enable();
            {
                let mut g = self.0.lock();
                if g.has_room() {
                    return;
                }
                g.room_wanted = true;
            }
            freed.await;
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.queued.notify_one();
    }
}

impl Inner {
    fn fail(&mut self, e: io::Error) {
        self.out = None;
        self.queue.clear();
        self.bytes = 0;
        self.failed = Some(e);
    }

    /// Whether a reader may read another message for this direction.
    fn has_room(&self) -> bool {
        self.bytes <= BOUND || self.out.is_none()
    }

    /// Writes the queue and flushes, with the writer task's waker. Ready once nothing is
    /// left (or the stream failed).
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(e) = self.failed.take() {
            return Poll::Ready(Err(e));
        }
        let Some(out) = self.out.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        while let Some(front) = self.queue.front() {
            match out.as_mut().poll_write(cx, &front[self.written..]) {
                Poll::Ready(Ok(0)) => {
                    self.fail(io::ErrorKind::WriteZero.into());
                    return Poll::Ready(Err(self.failed.take().expect("just set")));
                }
                Poll::Ready(Ok(n)) => {
                    self.unflushed = true;
                    self.written += n;
                    if self.written == front.len() {
                        self.bytes -= front.len();
                        self.queue.pop_front();
                        self.written = 0;
                    }
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => {
                    self.fail(e);
                    return Poll::Ready(Err(self.failed.take().expect("just set")));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        if self.unflushed {
            match out.as_mut().poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => {
                    self.fail(e);
                    return Poll::Ready(Err(self.failed.take().expect("just set")));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The writer task of an [`outbox`]: writes what [`Sender::send`] queued, until the sender
/// is dropped and everything is written (`Ok`) or a write fails (`Err`). The stream is
/// dropped when it returns or is dropped unfinished (aborted), closing the peer's input.
pub struct Drain(Arc<Outbox>);

impl Drain {
    /// Runs the writer task.
    pub async fn run(self) -> io::Result<()> {
        loop {
            std::future::poll_fn(|cx| {
                let mut g = self.0.lock();
                let r = g.poll_drain(cx);
                self.0.wake_room(g);
                r
            })
            .await?;
            {
                let g = self.0.lock();
                if g.out.is_none() || (g.closed && g.queue.is_empty() && !g.unflushed) {
                    return Ok(());
                }
                if !g.queue.is_empty() || g.unflushed {
                    continue;
                }
            }
            self.0.queued.notified().await;
        }
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        let mut g = self.0.lock();
        g.out = None;
        g.queue.clear();
        g.bytes = 0;
        self.0.wake_room(g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncReadExt;

    /// Ten thousand messages through a pipe that holds 64 bytes: most writes find it full,
    /// so most messages wait in the queue while others are written directly. All arrive,
    /// whole and in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_stream_keeps_every_message_in_order() {
        let (w, mut r) = tokio::io::duplex(64);
        let (tx, drain) = outbox(w);
        let writer = tokio::spawn(drain.run());
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            r.read_to_end(&mut all).await.map(|_| all)
        });
        let producer = tokio::spawn(async move {
            for i in 0..10_000 {
                tx.send(format!("{{\"n\":{i}}}"));
                if i % 97 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            // The sender dropped: the writer finishes the queue, then ends.
        });
        let all = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            producer.await.expect("producer");
            writer.await.expect("writer task").expect("no write error");
            reader.await.expect("reader").expect("read")
        })
        .await
        .expect("every message was written");
        let text = String::from_utf8(all).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 10_000);
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(*line, format!("{{\"n\":{i}}}"));
        }
    }

    /// A peer that reads nothing: `room` waits once more than [`BOUND`] bytes are queued,
    /// and returns when the peer reads again.
    #[tokio::test]
    async fn room_waits_while_the_peer_reads_nothing() {
        let (w, mut r) = tokio::io::duplex(64 << 10);
        let (tx, drain) = outbox(w);
        let writer = tokio::spawn(drain.run());
        let message = "x".repeat(16 << 10);
        let mut sent = 0;
        let wait = std::time::Duration::from_millis(200);
        while tokio::time::timeout(wait, tx.room()).await.is_ok() {
            tx.send(message.clone());
            sent += 1;
            assert!(sent < 1000, "room never ran out");
        }
        // Held back at the bound (plus what the stream itself holds).
        assert!(sent * message.len() <= BOUND + (64 << 10) + 2 * message.len());
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            r.read_to_end(&mut all).await.map(|_| all.len())
        });
        tokio::time::timeout(std::time::Duration::from_secs(20), tx.room())
            .await
            .expect("room again once the peer reads");
        drop(tx);
        writer.await.expect("writer task").expect("no write error");
        let read = reader.await.expect("reader").expect("read");
        assert_eq!(read, sent * (message.len() + 1));
    }

    /// A writer like tokio's blocking-thread stdout: a write is taken into its buffer at
    /// once, and its flush completes later, on another thread.
    struct SlowFlush {
        out: Arc<Mutex<Vec<u8>>>,
        pending: Vec<u8>,
        flushes: Arc<AtomicUsize>,
        done: Option<tokio::sync::oneshot::Receiver<()>>,
    }

    impl AsyncWrite for SlowFlush {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            if self.done.is_some() {
                // A write while the last one is still on its way waits for it.
                std::task::ready!(self.as_mut().poll_flush(cx))?;
            }
            self.pending.extend_from_slice(buf);
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(1));
                let _ = tx.send(());
            });
            self.done = Some(rx);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            if let Some(rx) = self.done.as_mut() {
                let _ = std::task::ready!(Pin::new(rx).poll(cx));
                self.done = None;
                let bytes = std::mem::take(&mut self.pending);
                self.out.lock().expect("lock").extend_from_slice(&bytes);
                self.flushes.fetch_add(1, Ordering::SeqCst);
            }
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.poll_flush(cx)
        }
    }

    use std::future::Future;

    #[tokio::test]
    async fn a_flush_that_completes_later_is_finished_by_the_writer_task() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let flushes = Arc::new(AtomicUsize::new(0));
        let (tx, drain) = outbox(SlowFlush {
            out: out.clone(),
            pending: Vec::new(),
            flushes: flushes.clone(),
            done: None,
        });
        let writer = tokio::spawn(drain.run());
        let delivered = |n: usize| {
            let expected: String = (0..n).map(|i| format!("m{i}\n")).collect();
            let out = out.clone();
            async move {
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
                while *out.lock().expect("lock") != expected.as_bytes() {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "not delivered: {:?}",
                        String::from_utf8_lossy(&out.lock().expect("lock"))
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
        };
        // In a burst, messages queue behind a flush still on its way.
        for i in 0..20 {
            tx.send(format!("m{i}"));
        }
        delivered(20).await;
        // One at a time, each is written directly and its flush left to the writer task:
        // it reaches the peer while the sender is open, with nothing sent after it.
        for i in 20..30 {
            tx.send(format!("m{i}"));
            delivered(i + 1).await;
        }
        drop(tx);
        tokio::time::timeout(std::time::Duration::from_secs(20), writer)
            .await
            .expect("every message was written")
            .expect("writer task")
            .expect("no write error");
        delivered(30).await;
        assert!(flushes.load(Ordering::SeqCst) >= 10);
    }

    /// A peer that is gone: the write error ends the writer task, and later messages are
    /// dropped without a panic or a hang.
    #[tokio::test]
    async fn a_write_error_ends_the_writer_and_later_messages_are_dropped() {
        let (w, r) = tokio::io::duplex(64);
        drop(r);
        let (tx, drain) = outbox(w);
        let writer = tokio::spawn(drain.run());
        tx.send("first".to_string());
        tx.send("second".to_string());
        let e = tokio::time::timeout(std::time::Duration::from_secs(20), writer)
            .await
            .expect("the writer task ends")
            .expect("writer task")
            .expect_err("the peer is gone");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        tx.send("third".to_string());
    }

    /// A stream that needs the runtime to be written (as a socket registering with the
    /// reactor, or tokio's blocking-thread stdout, do).
    struct NeedsRuntime(tokio::io::DuplexStream);

    impl AsyncWrite for NeedsRuntime {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let _ = tokio::runtime::Handle::current();
            Pin::new(&mut self.0).poll_write(cx, buf)
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_shutdown(cx)
        }
    }

    /// A message sent from a thread outside the runtime is written by the writer task.
    #[tokio::test]
    async fn a_message_sent_outside_the_runtime_is_written_by_the_writer_task() {
        let (w, mut r) = tokio::io::duplex(1 << 16);
        let (tx, drain) = outbox(NeedsRuntime(w));
        let writer = tokio::spawn(drain.run());
        std::thread::spawn(move || {
            tx.send("from a plain thread".to_string());
        })
        .join()
        .expect("no panic");
        let mut all = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(5), r.read_to_end(&mut all))
            .await
            .expect("written and closed")
            .expect("read");
        assert_eq!(all, b"from a plain thread\n");
        writer.await.expect("writer task").expect("no write error");
    }

    /// An aborted writer task lets go of the stream: the peer reads its end.
    #[tokio::test]
    async fn aborting_the_writer_closes_the_stream() {
        let (w, mut r) = tokio::io::duplex(1 << 16);
        let (tx, drain) = outbox(w);
        let writer = tokio::spawn(drain.run());
        tx.send("hello".to_string());
        writer.abort();
        let _ = writer.await;
        let mut all = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(5), r.read_to_end(&mut all))
            .await
            .expect("the stream was closed")
            .expect("read");
        assert_eq!(all, b"hello\n");
        drop(tx);
    }
}
