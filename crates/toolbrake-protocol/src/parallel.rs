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

use crate::import::Importer;
use crate::processor::{Handled, Processor};
use crate::Input;
use crate::Sink;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
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

/// What routing needs of an event: its kind, session and call id, when they are strings
/// (borrowed from the line unless they hold escapes).
#[derive(Default)]
struct Route<'a> {
    event: Option<Cow<'a, str>>,
    session: Option<Cow<'a, str>>,
    id: Option<Cow<'a, str>>,
}

/// A field's value when it is a string; any other value is skipped.
struct MaybeStr<'a>(Option<Cow<'a, str>>);

impl<'de> serde::Deserialize<'de> for MaybeStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MaybeStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_unit<E>(self) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<MaybeStr<'de>, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<MaybeStr<'de>, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> serde::Deserialize<'de> for Route<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Route<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an event object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Route<'de>, A::Error> {
                // Like serde_json's `Value`, the last of duplicate keys wins.
                let mut r = Route::default();
                // Keys are borrowed from the line (serde's own `Cow<str>` would copy each).
                while let Some(key) = a.next_key::<MaybeStr>()? {
                    match key.0.as_deref().unwrap_or_default() {
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

impl<'a> Route<'a> {
    /// The route of a line, read without a JSON parser where it can be: the line's
    /// top-level keys, the string values of `event`, `session` and `id`, and every other
    /// value skipped by its quotes and brackets (the routing read of every line was a fifth
    /// of a two-core replay, on its serial thread, when serde read and checked every value
    /// it skipped). A key or a routed value holding an escape, or a shape this reading does
    /// not expect, goes to the full read. On a well-formed line both give the same route
    /// (the last of duplicate keys wins); on a line that is not JSON the quick reading may
    /// give a route where the full one gives none, which is harmless: a line in error
    /// touches no session, so any shard may answer it.
    fn of_line(line: &'a [u8]) -> Route<'a> {
        Route::scan(line)
            .unwrap_or_else(|| serde_json::from_slice::<Route>(line).unwrap_or_default())
    }

    /// The quick reading of [`Route::of_line`]: `None` when it cannot settle the route.
    /// At the first value it would skip, it looks ahead once: when the rest of the line
    /// cannot hold a routed key (see [`may_name_a_route_key`]), no later key can change the
    /// route, and the route is settled there without walking the rest (a call's arguments
    /// and a result's output are two thirds of the input's bytes, and walking them was most
    /// of the routing read).
    fn scan(line: &'a [u8]) -> Option<Route<'a>> {
        let mut r = Route::default();
        let mut looked_ahead = false;
        let mut i = skip_blanks(line, 0);
        if line.get(i) != Some(&b'{') {
            return None;
        }
        i = skip_blanks(line, i + 1);
        if line.get(i) == Some(&b'}') {
            return Some(r);
        }
        loop {
            if line.get(i) != Some(&b'"') {
                return None;
            }
            let (key, after) = plain_string(line, i + 1)?;
            i = skip_blanks(line, after);
            if line.get(i) != Some(&b':') {
                return None;
            }
            i = skip_blanks(line, i + 1);
            let slot = match key {
                b"event" => Some(&mut r.event),
                b"session" => Some(&mut r.session),
                b"id" => Some(&mut r.id),
                _ => None,
            };
            i = match slot {
                Some(slot) if line.get(i) == Some(&b'"') => {
                    let (value, after) = plain_string(line, i + 1)?;
                    *slot = Some(Cow::Borrowed(std::str::from_utf8(value).ok()?));
                    after
                }
                Some(slot) => {
                    // Like the full read: a value that is not a string routes nothing.
                    *slot = None;
                    skip_value(line, i)?
                }
                None => {
                    let first = !std::mem::replace(&mut looked_ahead, true);
                    if first && !may_name_a_route_key(&line[i..]) {
                        return Some(r);
                    }
                    skip_value(line, i)?
                }
            };
            i = skip_blanks(line, i);
            match line.get(i) {
                Some(b',') => i = skip_blanks(line, i + 1),
                Some(b'}') => return Some(r),
                _ => return None,
            }
        }
    }

    fn of_value(v: &Value) -> Route<'_> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(Cow::Borrowed);
        Route {
            event: s("event"),
            session: s("session"),
            id: s("id"),
        }
    }
}

/// Whether `rest` of a line may hold a key `event`, `session` or `id`: it holds one of them
/// in quotes, or a `\u` escape (the only escape that can spell a letter of them: a key
/// written `"\u0069d"` is `id`). `false` is certain, `true` may be wrong (a value that
/// spells one, an escaped backslash before a `u`): then the line is walked to its end.
fn may_name_a_route_key(rest: &[u8]) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    static NEEDLES: LazyLock<[Finder<'static>; 4]> = LazyLock::new(|| {
        [
            Finder::new(b"\"id\""),
            Finder::new(b"\"session\""),
            Finder::new(b"\"event\""),
            Finder::new(b"\\u"),
        ]
    });
    NEEDLES.iter().any(|f| f.find(rest).is_some())
}

/// The index of the first byte from `i` that is not JSON whitespace.
fn skip_blanks(line: &[u8], mut i: usize) -> usize {
    while matches!(line.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// A string's bytes from `start` (just after its opening quote) to its closing quote, and
/// the index after that quote; `None` when it holds an escape or does not close.
fn plain_string(line: &[u8], start: usize) -> Option<(&[u8], usize)> {
    let end = start + memchr::memchr2(b'"', b'\\', line.get(start..)?)?;
    (line[end] == b'"').then(|| (&line[start..end], end + 1))
}

/// The index after a string whose opening quote is just before `i`.
fn skip_string(line: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let at = i + memchr::memchr2(b'"', b'\\', line.get(i..)?)?;
        if line[at] == b'"' {
            return Some(at + 1);
        }
        // An escape: its next byte is never the string's end.
        i = at + 2;
    }
}

/// The index after the value that starts at `i`: a string to its closing quote, an object
/// or array to its closing bracket (strings inside skipped whole), anything else to the
/// next comma, closing bracket or blank.
fn skip_value(line: &[u8], mut i: usize) -> Option<usize> {
    match line.get(i)? {
        b'"' => skip_string(line, i + 1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match line.get(i)? {
                    b'"' => {
                        i = skip_string(line, i + 1)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while !matches!(
                line.get(i),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                i += 1;
            }
            Some(i)
        }
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
            crate::run(input, importer, p, max_line, sink)?;
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
            let fed = crate::read_input(input, importer, max_line, &mut |item| match item {
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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cell::Cell;

    thread_local! {
        /// The bits of [`id_hash`] kept on this thread (the router's: the calling thread):
        /// fewer bits, ids sharing entries.
        pub(super) static ID_HASH_MASK: Cell<u64> = const { Cell::new(u64::MAX) };
    }

    struct Lines(Vec<String>);

    impl Sink for Lines {
        fn handled(&mut self, h: &Handled) -> io::Result<()> {
            self.0.push(h.line.clone());
            Ok(())
        }
    }

    fn processor() -> Processor {
        use toolbrake_config::ConfigToml as _;
        let cfg = toolbrake_core::config::Config::from_toml_str(
            "[breaker]\nwarn_at = 2\n",
            &toolbrake_core::config::no_env,
        )
        .unwrap();
        Processor::new(
            toolbrake_core::Engine::new(cfg),
            std::sync::Arc::new(toolbrake_store::MemoryStore::new()),
        )
    }

    /// Calls of a few sessions with call ids reused across them, and answers and results
    /// that name no session: every one routed by its id.
    fn id_stream() -> impl Strategy<Value = Vec<u8>> {
        let line = (0u8..3, 0usize..6, 0usize..5, any::<bool>()).prop_map(|(kind, s, id, flag)| {
            let session = ["a", "b", "c", "d", "e", "f"][s];
            let id = ["1", "2", "3", "4", "5"][id];
            match kind {
                0 => serde_json::json!({"event": "call", "session": session, "id": id, "tool": "bash", "args": {"command": "ls"}}),
                1 => serde_json::json!({"event": "result", "id": id, "outcome": {"exit_code": i32::from(flag)}}),
                _ => serde_json::json!({"event": "answer", "id": id, "approved": flag}),
            }
            .to_string()
        });
        prop::collection::vec(line, 0..120).prop_map(|lines| (lines.join("\n") + "\n").into_bytes())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The id map is keyed by a hash of each id: when ids share a hash (here, with the
        /// hash cut to one bit or none, nearly all do), an entry holds the shards of all of
        /// them and the output is still one processor's, line for line.
        #[test]
        fn ids_sharing_a_hash_route_as_one_processor_would(
            input in id_stream(),
            bits in 0u32..2,
            shards in 2usize..4,
        ) {
            let mut one = Lines(Vec::new());
            crate::run(&input[..], None, &mut processor(), 1 << 20, &mut one).unwrap();
            ID_HASH_MASK.with(|m| m.set((1u64 << bits) - 1));
            let mut many = Lines(Vec::new());
            let run = run_sharded(&input[..], None, (0..shards).map(|_| processor()).collect(), 1 << 20, &mut many);
            ID_HASH_MASK.with(|m| m.set(u64::MAX));
            run.unwrap();
            prop_assert_eq!(many.0, one.0);
        }
    }

    fn owned(r: &Route) -> [Option<String>; 3] {
        [&r.event, &r.session, &r.id].map(|v| v.as_deref().map(str::to_string))
    }

    /// A top-level key: a routed one (sometimes written with an escape) or another.
    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            r#""event""#,
            r#""session""#,
            r#""id""#,
            r#""tool""#,
            r#""args""#,
            r#""outcome""#,
            r#""\u0069d""#,
            r#""sess\u0069on""#,
            r#""ev\"ent""#,
        ])
        .prop_map(str::to_string)
    }

    /// A value: strings plain and escaped, scalars, and nested JSON with strings holding
    /// quotes, brackets and backslashes.
    fn value() -> impl Strategy<Value = String> {
        let nested = any::<Vec<(String, Option<i64>)>>().prop_map(|items| {
            let v: Vec<Value> = items
                .into_iter()
                .map(|(s, n)| serde_json::json!({"s": s, "n": n, "a": [s, {"k": "}]\\\"["}]}))
                .collect();
            serde_json::to_string(&v).unwrap()
        });
        prop_oneof![
            "[a-z0-9#/:._ -]{0,12}".prop_map(|s| format!("\"{s}\"")),
            any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
            Just("null".to_string()),
            Just("true".to_string()),
            any::<i32>().prop_map(|n| n.to_string()),
            Just("-1.5e3".to_string()),
            Just("{}".to_string()),
            Just("[]".to_string()),
            nested,
        ]
    }

    fn blank() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", " ", "  ", "\t", " \r "]).prop_map(str::to_string)
    }

    proptest! {
        /// On a well-formed object, the quick reading gives the full read's route whenever
        /// it gives one, and it gives one for every line whose keys and routed values hold
        /// no escape.
        #[test]
        fn the_quick_route_is_the_full_route(
            fields in prop::collection::vec((key(), value(), blank(), blank()), 0..7),
            edge in (blank(), blank()),
        ) {
            let body: Vec<String> = fields
                .iter()
                .map(|(k, v, b1, b2)| format!("{b1}{k}{b2}:{b1}{v}{b2}"))
                .collect();
            let line = format!("{}{{{}}}{}", edge.0, body.join(","), edge.1);
            prop_assert!(serde_json::from_str::<Value>(&line).is_ok(), "{}", line);
            let full: Route = serde_json::from_slice(line.as_bytes()).unwrap();
            let quick = Route::scan(line.as_bytes());
            if let Some(quick) = &quick {
                prop_assert_eq!(owned(quick), owned(&full), "{}", line);
            }
            let escaped = fields.iter().any(|(k, v, _, _)| {
                k.contains('\\')
                    || (["\"event\"", "\"session\"", "\"id\""].contains(&k.as_str())
                        && v.starts_with('"')
                        && v.contains('\\'))
            });
            // A line with an escape may still be settled quickly, when the escape is past
            // the look-ahead and cannot spell a routed key.
            if !escaped {
                prop_assert!(quick.is_some(), "{}", line);
            }
            prop_assert_eq!(owned(&Route::of_line(line.as_bytes())), owned(&full));
        }
    }

    #[test]
    fn the_quick_route_on_lines_that_are_not_json_falls_back_or_routes() {
        // Anything it cannot settle goes to the full read, which routes nothing.
        for line in [
            &b"[1]"[..],
            b"",
            b"{",
            b"{\"event\" \"call\"}",
            b"{\"id\":\"x",
        ] {
            assert!(
                Route::scan(line).is_none(),
                "{}",
                String::from_utf8_lossy(line)
            );
            assert_eq!(owned(&Route::of_line(line)), [None, None, None]);
        }
        // Past the look-ahead a malformed rest is not read: the route it gives is the
        // full read's (none) here, and any shard may answer a line in error.
        let line = b"{\"a\":1 \"b\":2}";
        assert_eq!(owned(&Route::scan(line).unwrap()), [None, None, None]);
        assert_eq!(owned(&Route::of_line(line)), [None, None, None]);
        // The last of duplicate keys wins, a value that is not a string routes nothing.
        let r = Route::of_line(br#"{"session":"a","id":"1","session":"b","event":"call","id":7}"#);
        assert_eq!(owned(&r), [Some("call".into()), Some("b".into()), None]);
    }

    #[test]
    fn a_routed_key_after_a_skipped_value_still_routes() {
        // The look-ahead starts at the first value skipped (`tool`'s, `args`'); a routed
        // key after it, plain or spelled with a `\u` escape, is still read, and wins.
        for (line, session) in [
            (
                &br#"{"event":"call","session":"a","args":{"x":1},"session":"b"}"#[..],
                "b",
            ),
            (
                br#"{"event":"call","session":"a","tool":"t","s\u0065ssion":"b"}"#,
                "b",
            ),
            (
                br#"{"event":"call","session":"a","args":{"cmd":"id"},"x":"\u00e9"}"#,
                "a",
            ),
        ] {
            let r = Route::of_line(line);
            assert_eq!(
                owned(&r)[1].as_deref(),
                Some(session),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        let r = Route::of_line(br#"{"event":"result","args":[1],"id":"7","outcome":{}}"#);
        assert_eq!(owned(&r), [Some("result".into()), None, Some("7".into())]);
        let r = Route::of_line(br#"{"args":"x","event":"end","\u0065vent":"call"}"#);
        assert_eq!(owned(&r)[0].as_deref(), Some("call"));
    }
}
