//! The event stream on several cores, with exactly the output of one [`Processor`].
//!
//! Sessions are independent: each shard owns a [`Processor`] (and its own store), and every
//! event of a session (its sub-agents' included) goes to the shard of the session's name.
//! The calling thread reads the input, reads just enough of each line to route it
//! (`event`, `session`, `id`), and writes the answers in input order; the shards parse and
//! judge. Invariants:
//!
//! - The output is the serial output, line for line: a shard sees, in order, every event
//!   that can touch its sessions, and a line in error touches no session (any shard may
//!   answer it).
//! - An `answer` or `result` that names no session is routed by its call id: to the only
//!   shard that was ever sent a call with that id. When several were, every shard is asked
//!   (after it has answered everything before this line) where the id is open, and the
//!   line goes to the one shard that has it, or is answered as unknown or ambiguous as one
//!   processor would answer it.
//! - Memory stays bounded: answers are written as soon as they are next in order, and the
//!   lines in flight are capped in number and bytes; the id map is rebuilt from the shards'
//!   open calls every [`REBUILD_EVERY`] events.

use crate::import::Importer;
use crate::processor::{Handled, Processor};
use crate::Input;
use crate::Sink;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::io::{self, BufRead};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};

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
    Line(u64, Vec<u8>),
    Event(u64, Value),
    Error(u64, String),
    Ambiguous(u64, String, Vec<String>),
    OpenKeys(String, SyncSender<Vec<String>>),
    OpenIds(SyncSender<Vec<String>>),
}

/// What routing needs of an event: its kind, session and call id, when they are strings.
#[derive(Default)]
struct Route {
    event: Option<String>,
    session: Option<String>,
    id: Option<String>,
}

/// A field's value when it is a string; any other value is skipped.
struct MaybeStr(Option<String>);

impl<'de> serde::Deserialize<'de> for MaybeStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MaybeStr;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, v: &str) -> Result<MaybeStr, E> {
                Ok(MaybeStr(Some(v.to_string())))
            }
            fn visit_bool<E>(self, _: bool) -> Result<MaybeStr, E> {
                Ok(MaybeStr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<MaybeStr, E> {
                Ok(MaybeStr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<MaybeStr, E> {
                Ok(MaybeStr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<MaybeStr, E> {
                Ok(MaybeStr(None))
            }
            fn visit_unit<E>(self) -> Result<MaybeStr, E> {
                Ok(MaybeStr(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<MaybeStr, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<MaybeStr, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> serde::Deserialize<'de> for Route {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Route;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an event object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Route, A::Error> {
                // Like serde_json's `Value`, the last of duplicate keys wins.
                let mut r = Route::default();
                while let Some(key) = a.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "event" => r.event = a.next_value::<MaybeStr>()?.0,
                        "session" => r.session = a.next_value::<MaybeStr>()?.0,
                        "id" => r.id = a.next_value::<MaybeStr>()?.0,
                        _ => {
                            a.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
}

impl Route {
    fn of_value(v: &Value) -> Route {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Route {
            event: s("event"),
            session: s("session"),
            id: s("id"),
        }
    }
}

/// The shard of a session: sub-agent keys (`session#agent:…`) go with their session.
fn shard_of(session: &str, shards: usize) -> usize {
    let base = session
        .split(loopbrake_core::engine::AGENT_SEPARATOR)
        .next()
        .unwrap_or(session);
    let mut h = std::hash::DefaultHasher::new();
    base.hash(&mut h);
    (h.finish() % shards as u64) as usize
}

struct Router<'a> {
    work: Vec<SyncSender<Vec<Work>>>,
    out: Vec<Receiver<Vec<Handled>>>,
    /// Per shard: lines routed but not yet handed over, and answers received but not yet
    /// written.
    pending: Vec<Vec<Work>>,
    ready: Vec<VecDeque<Handled>>,
    /// The shard of each line in flight, in input order, and its size.
    order: VecDeque<(usize, usize)>,
    bytes: usize,
    /// Call id → the shards that were sent a call with it (since the last rebuild).
    ids: HashMap<String, Vec<usize>>,
    events: u64,
    sink: &'a mut dyn Sink,
}

fn gone() -> io::Error {
    io::Error::other("a replay shard stopped")
}

impl Router<'_> {
    fn shards(&self) -> usize {
        self.work.len()
    }

    fn send(&mut self, shard: usize, size: usize, w: Work) -> io::Result<()> {
        self.pending[shard].push(w);
        self.order.push_back((shard, size));
        self.bytes += size;
        if self.pending[shard].len() >= BATCH {
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
        if self.pending[shard].is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.pending[shard], Vec::with_capacity(BATCH));
        self.work[shard].send(batch).map_err(|_| gone())
    }

    /// Writes the answers that are next in order and already there.
    fn write_ready(&mut self) -> io::Result<()> {
        while let Some(&(shard, size)) = self.order.front() {
            if self.ready[shard].is_empty() {
                match self.out[shard].try_recv() {
                    Ok(batch) => self.ready[shard].extend(batch),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return Err(gone()),
                }
            }
            let Some(h) = self.ready[shard].pop_front() else {
                break;
            };
            self.order.pop_front();
            self.bytes -= size;
            self.sink.handled(&h)?;
        }
        Ok(())
    }

    /// Waits for the next answer in order and writes it.
    fn write_next(&mut self) -> io::Result<()> {
        let Some(&(shard, size)) = self.order.front() else {
            return Ok(());
        };
        while self.ready[shard].is_empty() {
            // Its line may still be waiting for a full batch.
            self.hand_over(shard)?;
            let batch = self.out[shard].recv().map_err(|_| gone())?;
            self.ready[shard].extend(batch);
        }
        let h = self.ready[shard].pop_front().ok_or_else(gone)?;
        self.order.pop_front();
        self.bytes -= size;
        self.sink.handled(&h)
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
    fn ask<T>(&self, shard: usize, make: impl FnOnce(SyncSender<T>) -> Work) -> io::Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.work[shard].send(vec![make(tx)]).map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())
    }

    /// Rebuilds the id → shards map from the shards' open calls.
    fn rebuild(&mut self) -> io::Result<()> {
        self.drain()?;
        self.ids.clear();
        for shard in 0..self.shards() {
            for id in self.ask(shard, Work::OpenIds)? {
                self.ids.entry(id).or_default().push(shard);
            }
        }
        Ok(())
    }

    /// Routes one event (`work` is its line or its value).
    fn route(&mut self, r: Route, line_no: u64, size: usize, work: Work) -> io::Result<()> {
        self.events += 1;
        if self.events % REBUILD_EVERY == 0 {
            self.rebuild()?;
        }
        let n = self.shards();
        let by_session = r.session.as_deref().map(|s| shard_of(s, n));
        let shard = match r.event.as_deref() {
            Some("call") => {
                let shard = by_session.unwrap_or(0);
                if let (Some(id), Some(_)) = (r.id, by_session) {
                    let shards = self.ids.entry(id).or_default();
                    if !shards.contains(&shard) {
                        shards.push(shard);
                    }
                }
                shard
            }
            Some("answer" | "result") if by_session.is_none() => match r.id {
                Some(id) => match self.ids.get(&id).map(Vec::as_slice) {
                    None | Some([]) => 0,
                    Some([one]) => *one,
                    Some(_) => return self.route_ambiguous(id, line_no, size, work),
                },
                None => 0,
            },
            _ => by_session.unwrap_or(0),
        };
        self.send(shard, size, work)
    }

    /// An id sent to several shards, with no session named: where is it open now?
    fn route_ambiguous(
        &mut self,
        id: String,
        line_no: u64,
        size: usize,
        work: Work,
    ) -> io::Result<()> {
        self.drain()?;
        let mut holders = Vec::new();
        let mut keys = Vec::new();
        for shard in self.ids.get(&id).cloned().unwrap_or_default() {
            let open = self.ask(shard, |tx| Work::OpenKeys(id.clone(), tx))?;
            if !open.is_empty() {
                holders.push(shard);
                keys.extend(open);
            }
        }
        let work = if holders.len() > 1 {
            Work::Ambiguous(line_no, id.clone(), keys)
        } else {
            work
        };
        let shard = holders.first().copied().unwrap_or(0);
        self.ids.insert(id, holders);
        self.send(shard, size, work)
    }
}

fn serve_shard(
    mut p: Processor,
    work: Receiver<Vec<Work>>,
    out: mpsc::Sender<Vec<Handled>>,
) -> Processor {
    for batch in work {
        let mut answers = Vec::with_capacity(batch.len());
        for w in batch {
            answers.push(match w {
                Work::Line(no, bytes) => p.handle_line(&bytes, no),
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
        if !answers.is_empty() && out.send(answers).is_err() {
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
            crate::run(input, importer, p, max_line, sink)?;
        }
        return Ok(processors);
    }
    let n = processors.len();
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
            work,
            out,
            pending: (0..n).map(|_| Vec::with_capacity(BATCH)).collect(),
            ready: (0..n).map(|_| VecDeque::new()).collect(),
            order: VecDeque::new(),
            bytes: 0,
            ids: HashMap::new(),
            events: 0,
            sink,
        };
        let read = (|| -> io::Result<()> {
            // The processors may hold open calls from an earlier input.
            router.rebuild()?;
            let fed = crate::read_input(input, importer, max_line, &mut |item| match item {
                Input::Line(no, bytes) => {
                    let r = serde_json::from_slice::<Route>(&bytes).unwrap_or_default();
                    let size = bytes.len();
                    router.route(r, no, size, Work::Line(no, bytes))
                }
                Input::TooLong(no, msg) => router.send(0, 0, Work::Error(no, msg)),
                Input::Event(no, ev, size) => {
                    router.route(Route::of_value(&ev), no, size, Work::Event(no, ev))
                }
            });
            // Whatever stopped the input (a read error, say), the lines read before it are
            // answered, as one processor would have answered them.
            let drained = router.drain();
            fed.and(drained)
        })();
        // Closing the queues ends the shards (after the lines already queued, if reading
        // stopped early).
        drop(router);
        let processors: Vec<Processor> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        read.map(|()| processors)
    })
}
