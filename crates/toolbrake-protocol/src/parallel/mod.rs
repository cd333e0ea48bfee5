//! The event stream on several cores, with exactly the output of one [`Processor`].
//!
//! Sessions are independent: each shard owns a [`Processor`] (and its own store), and every
//! event of a session (its sub-agents' included) goes to the shard of the session's name.
//! The calling thread reads the input, reads just enough of each line to route it
//! (`event`, `session`, `id`), judges shard 0's lines itself, and writes the answers in
//! input order; each other shard parses and judges on a thread of its own. `--jobs N` is N
//! threads in all: a routing thread of its own took a core's share of the time from the
//! judging on two cores. Invariants:
//!
//! - The output is the serial output, line for line: a shard sees, in order, every event
//!   that can touch its sessions, and a line in error touches no session (any shard may
//!   answer it).
//! - An `answer` or `result` that names no session is routed by its call id: to the only
//!   shard that was ever sent a call with that id. When several were, every shard is asked
//!   (after it has answered everything before this line) where the id is open, and the
//!   line goes to the one shard that has it, or is answered as unknown or ambiguous as one
//!   processor would answer it. The router keeps each id by a 64-bit hash of it, not its
//!   text: ids with one hash share an entry, the shards of all of them, so an entry always
//!   holds every shard where an id of its hash may be open; a wider one is only asked.
//! - Memory stays bounded: answers are written as soon as they are next in order, and the
//!   lines in flight are capped in number and bytes; the id map is rebuilt from the shards'
//!   open calls every [`REBUILD_EVERY`] events.

mod route;

use crate::processor::{Handled, Processor};
use crate::stream::Input;
use crate::stream::Sink;
use route::Route;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::io::{self, BufRead};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use toolbrake_import::Importer;

/// Lines in flight (routed, not yet written) at most.
const MAX_IN_FLIGHT: usize = 4096;
/// Bytes of input in flight at most (a few long lines must not multiply the memory of a
/// replay by the number of queued lines).
const MAX_IN_FLIGHT_BYTES: usize = 64 << 20;
/// Lines handed to a shard at once, and answers handed back (one wake-up per batch, not
/// per line: per line, the threads spent more time waking each other than judging).
const BATCH: usize = 64;
/// Events between two rebuilds of the id → shard map from the shards' open calls.
pub const REBUILD_EVERY: u64 = 1 << 16;

enum Work {
    /// A line in its batch's bytes (see [`Batch`]).
    Span(u64, std::ops::Range<usize>),
    Event(u64, Value),
    Error(u64, String),
    Ambiguous(u64, String, Vec<String>),
    OpenKeys(String, SyncSender<Vec<String>>),
    OpenIds(SyncSender<Vec<String>>),
}

/// Work handed to a shard at once: the lines' bytes in one buffer. A batch crosses once
/// each way: the shard sends it back with its answers (in `answers`), the router writes
/// them from there, in place, and fills the batch again, so its buffers are neither freed
/// nor grown again line after line. The answers written ride back to the shard in it and
/// are freed there, where they were made: memory freed by a thread other than the one that
/// took it makes the allocator lock that thread's arena, once per allocation (in `perf` of
/// a sharded replay, futex wake-ups and `_int_free` came before any of toolbrake's own
/// functions). An answer is several hundred bytes: moving each from batch to queue to a
/// list of spent ones was a tenth of the routing thread's time.
struct Batch {
    bytes: Vec<u8>,
    work: Vec<Work>,
    /// Coming back from the shard: its answers, in order. Going to it: the answers it
    /// sent last time, written, to be freed there.
    answers: Vec<Handled>,
}

/// A batch buffer larger than this is not kept for the next batch (one long line must
/// not keep its memory for the rest of the replay).
const KEEP_BATCH_BYTES: usize = 256 << 10;
/// Emptied batches kept per shard, at most.
const KEEP_BATCHES: usize = 4;

impl Batch {
    fn with_capacity(n: usize) -> Batch {
        Batch {
            bytes: Vec::new(),
            work: Vec::with_capacity(n),
            answers: Vec::new(),
        }
    }

    fn push_line(&mut self, no: u64, line: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(line);
        self.work.push(Work::Span(no, start..self.bytes.len()));
    }
}

/// The hasher of the routing: fixed, so a session goes to the same shard in every run; fast
/// (SipHash of every line's session and every call id took a tenth of the router's time).
const ROUTING: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(0x6c6f_6f70);

/// Shares of the sessions: the routing thread judges [`LOCAL_SHARE`] of them for every
/// [`SHARE`] each other shard judges, as it also reads and routes every line (about a sixth
/// of a replay's time on one thread).
const LOCAL_SHARE: u64 = 3;
const SHARE: u64 = 5;

/// The shard of a session: sub-agent keys (`session#agent:…`) go with their session; shard
/// 0 (the routing thread's) takes a smaller share.
fn shard_of(session: &str, shards: usize) -> usize {
    let base = session
        .split(toolbrake_core::engine::AGENT_SEPARATOR)
        .next()
        .unwrap_or(session);
    let parts = LOCAL_SHARE + SHARE * (shards as u64).saturating_sub(1);
    match ROUTING.hash_one(base) % parts {
        h if h < LOCAL_SHARE => 0,
        h => 1 + ((h - LOCAL_SHARE) / SHARE) as usize,
    }
}

struct Router<'a> {
    /// Shard 0's processor, judging on the routing thread.
    local: Processor,
    /// Shards 1 and up: batches going to their threads.
    work: Vec<SyncSender<Batch>>,
    /// Shards 1 and up: batches coming back with their answers.
    out: Vec<Receiver<Batch>>,
    /// Per shard: batches back and emptied, to be filled again.
    free: Vec<Vec<Batch>>,
    /// Per shard: lines routed but not yet handed over, and batches back with answers not
    /// yet all written.
    pending: Vec<Batch>,
    ready: Vec<VecDeque<Batch>>,
    /// Per shard: the index of the next answer to write in its first ready batch.
    cursor: Vec<usize>,
    /// The shard of each line in flight, in input order, and its size.
    order: VecDeque<(usize, usize)>,
    bytes: usize,
    /// A call id's [`id_hash`] → the shards that were sent a call with an id of that hash
    /// since the last rebuild (or, once the shards were asked, where one is open). Keyed
    /// by the hash, the map copies no id and stays small: with ids as strings, it was one
    /// allocation a call and, grown to every call id between two rebuilds, two fifths of
    /// a sharded replay's page faults.
    ids: HashMap<u64, Shards, foldhash::fast::FixedState>,
    events: u64,
    sink: &'a mut dyn Sink,
}

/// The key of a call id in the router's id map.
fn id_hash(id: &str) -> u64 {
    let h = ROUTING.hash_one(id);
    #[cfg(test)]
    let h = h & tests::ID_HASH_MASK.with(std::cell::Cell::get);
    h
}

/// The shards a call id was sent to: one, nearly always (kept without an allocation).
enum Shards {
    One(usize),
    Many(Vec<usize>),
}

impl Shards {
    fn add(&mut self, shard: usize) {
        match self {
            Shards::One(s) if *s == shard => {}
            Shards::One(s) => *self = Shards::Many(vec![*s, shard]),
            Shards::Many(v) if v.contains(&shard) => {}
            Shards::Many(v) => v.push(shard),
        }
    }

    fn as_slice(&self) -> &[usize] {
        match self {
            Shards::One(s) => std::slice::from_ref(s),
            Shards::Many(v) => v,
        }
    }
}

/// Where an event goes: the shard that judges it, or (an answer or result naming no
/// session, whose id is open in several shards) the error line that answers it instead, and
/// the shard that writes it.
enum Target {
    Shard(usize),
    Refused(usize, Work),
}

fn gone() -> io::Error {
    io::Error::other("a replay shard stopped")
}

impl Router<'_> {
    fn shards(&self) -> usize {
        self.work.len() + 1
    }

    fn send(&mut self, shard: usize, size: usize, w: Work) -> io::Result<()> {
        self.pending[shard].work.push(w);
        self.pushed(shard, size)
    }

    /// Sends a line, copied into its shard's batch.
    fn send_line(&mut self, shard: usize, line_no: u64, line: &[u8]) -> io::Result<()> {
        self.pending[shard].push_line(line_no, line);
        self.pushed(shard, line.len())
    }

    /// After a unit joined a shard's batch: hands the batch over when full, writes what
    /// answers are ready, and waits while too much is in flight.
    fn pushed(&mut self, shard: usize, size: usize) -> io::Result<()> {
        self.order.push_back((shard, size));
        self.bytes += size;
        if self.pending[shard].work.len() >= BATCH {
            self.hand_over(shard)?;
        }
        self.write_ready()?;
        while self.order.len() > MAX_IN_FLIGHT || self.bytes > MAX_IN_FLIGHT_BYTES {
            self.write_next()?;
        }
        Ok(())
    }

    /// Hands a shard the lines routed to it so far.
    fn hand_over(&mut self, shard: usize) -> io::Result<()> {
        if self.pending[shard].work.is_empty() {
            return Ok(());
        }
        let next = self.free[shard]
            .pop()
            .unwrap_or_else(|| Batch::with_capacity(BATCH));
        let mut batch = std::mem::replace(&mut self.pending[shard], next);
        if shard == 0 {
            // Judged here, now: its answers are ready at once.
            serve_batch(&mut self.local, &mut batch);
            self.returned(0, batch);
            return Ok(());
        }
        self.work[shard - 1].send(batch).map_err(|_| gone())
    }

    /// A batch back from a shard: its answers are written from it, in place.
    fn returned(&mut self, shard: usize, batch: Batch) {
        self.ready[shard].push_back(batch);
    }

    /// Writes the shard's next answer if it is there: `false` (nothing written) until its
    /// batch is back.
    fn write_answer(&mut self, shard: usize, size: usize) -> io::Result<bool> {
        let Some(h) = next_answer(
            &mut self.ready[shard],
            &mut self.cursor[shard],
            &mut self.free[shard],
        ) else {
            return Ok(false);
        };
        self.sink.handled(h)?;
        self.cursor[shard] += 1;
        self.order.pop_front();
        self.bytes -= size;
        Ok(true)
    }

    /// Writes the answers that are next in order and already there.
    fn write_ready(&mut self) -> io::Result<()> {
        while let Some(&(shard, size)) = self.order.front() {
            if self.write_answer(shard, size)? {
                continue;
            }
            if shard == 0 {
                break;
            }
            match self.out[shard - 1].try_recv() {
                Ok(batch) => self.returned(shard, batch),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Err(gone()),
            }
            if !self.write_answer(shard, size)? {
                break;
            }
        }
        Ok(())
    }

    /// Waits for the next answer in order and writes it.
    fn write_next(&mut self) -> io::Result<()> {
        let Some(&(shard, size)) = self.order.front() else {
            return Ok(());
        };
        loop {
            if self.write_answer(shard, size)? {
                return Ok(());
            }
            // Its line may still be waiting for a full batch.
            self.hand_over(shard)?;
            if shard == 0 {
                // Judged by the hand-over, and still nothing: a line was lost.
                return if self.write_answer(0, size)? {
                    Ok(())
                } else {
                    Err(gone())
                };
            }
            let batch = self.out[shard - 1].recv().map_err(|_| gone())?;
            self.returned(shard, batch);
        }
    }

    /// Writes every answer in flight: afterwards every shard has handled every line sent.
    fn drain(&mut self) -> io::Result<()> {
        for shard in 0..self.shards() {
            self.hand_over(shard)?;
        }
        while !self.order.is_empty() {
            self.write_next()?;
        }
        Ok(())
    }

    /// A question to an idle shard (after [`Router::drain`]).
    fn ask<T>(&mut self, shard: usize, make: impl FnOnce(SyncSender<T>) -> Work) -> io::Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let mut batch = Batch {
            work: vec![make(tx)],
            ..Batch::with_capacity(0)
        };
        if shard == 0 {
            serve_batch(&mut self.local, &mut batch);
        } else {
            self.work[shard - 1].send(batch).map_err(|_| gone())?;
        }
        rx.recv().map_err(|_| gone())
    }

    /// Rebuilds the id → shards map from the shards' open calls.
    fn rebuild(&mut self) -> io::Result<()> {
        self.drain()?;
        self.ids.clear();
        for shard in 0..self.shards() {
            for id in self.ask(shard, Work::OpenIds)? {
                self.ids
                    .entry(id_hash(&id))
                    .and_modify(|s| s.add(shard))
                    .or_insert(Shards::One(shard));
            }
        }
        Ok(())
    }

    /// Where the event of line `line_no` goes (counted as routed).
    fn target(&mut self, r: Route, line_no: u64) -> io::Result<Target> {
        self.events += 1;
        if self.events.is_multiple_of(REBUILD_EVERY) {
            self.rebuild()?;
        }
        let n = self.shards();
        let by_session = r.session.as_deref().map(|s| shard_of(s, n));
        let shard = match r.event.as_deref() {
            Some("call") => {
                let shard = by_session.unwrap_or(0);
                if let (Some(id), Some(_)) = (r.id, by_session) {
                    self.ids
                        .entry(id_hash(&id))
                        .and_modify(|s| s.add(shard))
                        .or_insert(Shards::One(shard));
                }
                shard
            }
            Some("answer" | "result") if by_session.is_none() => match r.id {
                Some(id) => match self.ids.get(&id_hash(&id)).map(Shards::as_slice) {
                    None | Some([]) => 0,
                    Some([one]) => *one,
                    Some(_) => return self.resolve(id.into_owned(), line_no),
                },
                None => 0,
            },
            _ => by_session.unwrap_or(0),
        };
        Ok(Target::Shard(shard))
    }

    /// An id sent to several shards, with no session named: where is it open now?
    fn resolve(&mut self, id: String, line_no: u64) -> io::Result<Target> {
        self.drain()?;
        let mut holders = Vec::new();
        let mut keys = Vec::new();
        let hash = id_hash(&id);
        let sent: Vec<usize> = self
            .ids
            .get(&hash)
            .map(|s| s.as_slice().to_vec())
            .unwrap_or_default();
        for &shard in &sent {
            let open = self.ask(shard, |tx| Work::OpenKeys(id.clone(), tx))?;
            if !open.is_empty() {
                holders.push(shard);
                keys.extend(open);
            }
        }
        // The entry narrowed to where an id of its hash is open now (every line before
        // this one answered): this id's holders, and any shard with another id of the
        // same hash open. Later answers to an id that moved between shards then go
        // straight to its shard again instead of asking every time.
        let mut kept = Vec::with_capacity(sent.len());
        for &shard in &sent {
            if holders.contains(&shard)
                || self
                    .ask(shard, Work::OpenIds)?
                    .iter()
                    .any(|open| id_hash(open) == hash)
            {
                kept.push(shard);
            }
        }
        match kept.as_slice() {
            [] => self.ids.remove(&hash),
            [one] => self.ids.insert(hash, Shards::One(*one)),
            _ => self.ids.insert(hash, Shards::Many(kept)),
        };
        let shard = holders.first().copied().unwrap_or(0);
        Ok(if holders.len() > 1 {
            Target::Refused(shard, Work::Ambiguous(line_no, id, keys))
        } else {
            Target::Shard(shard)
        })
    }
}

/// The next answer to write from a shard's ready batches (`cursor` into the first), or
/// `None` until its batch is back. Batches written to the end are kept in `free` to be
/// filled again, their answers still in them (freed by the shard, see [`Batch`]).
fn next_answer<'b>(
    ready: &'b mut VecDeque<Batch>,
    cursor: &mut usize,
    free: &mut Vec<Batch>,
) -> Option<&'b Handled> {
    while ready.front().is_some_and(|b| *cursor >= b.answers.len()) {
        let done = ready.pop_front().expect("a first batch");
        *cursor = 0;
        if free.len() < KEEP_BATCHES {
            free.push(done);
        }
    }
    ready.front().map(|b| &b.answers[*cursor])
}

/// Judges a batch with `p`: its lines' answers in `batch.answers` (questions are answered on
/// their own channels), its bytes and the answers it brought back freed.
fn serve_batch(p: &mut Processor, batch: &mut Batch) {
    let answers = &mut batch.answers;
    answers.clear();
    for w in batch.work.drain(..) {
        answers.push(match w {
            Work::Span(no, span) => p.handle_line(&batch.bytes[span], no),
            Work::Event(no, v) => p.handle_owned(v, no),
            Work::Error(no, msg) => p.error(no, &msg),
            Work::Ambiguous(no, id, keys) => p.ambiguous_error(no, &id, &keys),
            Work::OpenKeys(id, reply) => {
                let _ = reply.send(p.open_keys(&id));
                continue;
            }
            Work::OpenIds(reply) => {
                let _ = reply.send(p.open_ids());
                continue;
            }
        });
    }
    batch.bytes.clear();
    if batch.bytes.capacity() > KEEP_BATCH_BYTES {
        batch.bytes = Vec::new();
    }
}

fn serve_shard(mut p: Processor, work: Receiver<Batch>, out: mpsc::Sender<Batch>) -> Processor {
    for mut batch in work {
        serve_batch(&mut p, &mut batch);
        if batch.answers.is_empty() {
            // A question's batch (see `Router::ask`): nothing goes back.
            continue;
        }
        if out.send(batch).is_err() {
            break;
        }
    }
    p
}

/// [`crate::run`] over several processors, one thread each (sessions spread by name): the
/// same output, in the same order, as one processor. Returns the processors (their error
/// and degradation counts), which should each have their own store. With one processor
/// this is [`crate::run`].
pub fn run_sharded(
    input: impl BufRead,
    importer: Option<&mut (dyn Importer + '_)>,
    mut processors: Vec<Processor>,
    max_line: usize,
    sink: &mut dyn Sink,
) -> io::Result<Vec<Processor>> {
    if processors.len() <= 1 {
        if let Some(p) = processors.first_mut() {
            crate::stream::run(input, importer, p, max_line, sink)?;
        }
        return Ok(processors);
    }
    let n = processors.len();
    let mut processors = processors.into_iter();
    let local = processors.next().expect("two processors or more");
    std::thread::scope(|scope| {
        let mut work = Vec::new();
        let mut out = Vec::new();
        let mut handles = Vec::new();
        for p in processors {
            let (wtx, wrx) = mpsc::sync_channel(8);
            let (otx, orx) = mpsc::channel();
            handles.push(scope.spawn(move || serve_shard(p, wrx, otx)));
            work.push(wtx);
            out.push(orx);
        }
        let mut router = Router {
            local,
            work,
            out,
            free: (0..n).map(|_| Vec::new()).collect(),
            pending: (0..n).map(|_| Batch::with_capacity(BATCH)).collect(),
            ready: (0..n).map(|_| VecDeque::new()).collect(),
            cursor: vec![0; n],
            order: VecDeque::new(),
            bytes: 0,
            ids: HashMap::with_hasher(ROUTING),
            events: 0,
            sink,
        };
        let read = (|| -> io::Result<()> {
            // The processors may hold open calls from an earlier input.
            router.rebuild()?;
            let fed =
                crate::stream::read_input(input, importer, max_line, &mut |item| match item {
                    Input::Line(no, bytes) => {
                        let route = Route::of_line(bytes);
                        match router.target(route, no)? {
                            Target::Shard(shard) => router.send_line(shard, no, bytes),
                            Target::Refused(shard, error) => router.send(shard, bytes.len(), error),
                        }
                    }
                    Input::TooLong(no, msg) => router.send(0, 0, Work::Error(no, msg)),
                    Input::Event(no, ev, size) => match router.target(Route::of_value(&ev), no)? {
                        Target::Shard(shard) => router.send(shard, size, Work::Event(no, ev)),
                        Target::Refused(shard, error) => router.send(shard, size, error),
                    },
                });
            // Whatever stopped the input (a read error, say), the lines read before it are
            // answered, as one processor would have answered them.
            let drained = router.drain();
            fed.and(drained)
        })();
        // Closing the queues ends the shards (after the lines already queued, if reading
        // stopped early).
        let local = router.local;
        drop(router.work);
        let processors: Vec<Processor> = std::iter::once(local)
            .chain(
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
            )
            .collect();
        read.map(|()| processors)
    })
}

#[cfg(test)]
mod tests;
