//! The stream: events read line by line (or from a recorded run's importer), each handed to
//! a processor, each answer written to a [`Sink`] (`run`, and `read_input` that `parallel`
//! shares). A leaf: the crate root re-exports it.

use crate::processor::{Handled, Processor};
use crate::reader::{LineReader, LineRef};
use std::io::{self, BufRead, Write};
use toolbrake_import::Importer;

/// Where the handled events go.
pub trait Sink {
    /// One handled event.
    fn handled(&mut self, h: &Handled) -> io::Result<()>;
}

/// Writes each output line, optionally flushing after every line (for `serve`).
pub struct LineWriter<W: Write> {
    out: W,
    flush_each: bool,
}

impl<W: Write> LineWriter<W> {
    /// A writer over `out`.
    pub fn new(out: W, flush_each: bool) -> Self {
        LineWriter { out, flush_each }
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> Sink for LineWriter<W> {
    fn handled(&mut self, h: &Handled) -> io::Result<()> {
        self.out.write_all(h.line.as_bytes())?;
        self.out.write_all(b"\n")?;
        if self.flush_each {
            self.out.flush()?;
        }
        Ok(())
    }
}

/// One unit of input, in order: a protocol line, a line over the length limit, or an event
/// an importer made of a recorded-run line.
pub(crate) enum Input<'a> {
    /// A protocol line (its number, its bytes, borrowed until the next unit).
    Line(u64, &'a [u8]),
    /// A protocol line longer than the limit (its number, the error message).
    TooLong(u64, String),
    /// An event made by the importer from the line with this number.
    Event(u64, serde_json::Value, usize),
}

/// Reads `input` (through `importer`, when given) and hands each unit to `each`. With an
/// importer, `Event` carries the share of its line's bytes (for memory accounting).
pub(crate) fn read_input(
    input: impl BufRead,
    mut importer: Option<&mut (dyn Importer + '_)>,
    max_line: usize,
    each: &mut dyn FnMut(Input<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let mut lines = LineReader::new(input, max_line);
    let mut line_no: u64 = 0;
    let mut events = Vec::new();
    while let Some(line) = lines.read_line()? {
        line_no += 1;
        match (line, importer.as_deref_mut()) {
            (LineRef::TooLong(n), None) => each(Input::TooLong(
                line_no,
                format!("line is {n} bytes, longer than the maximum of {max_line}"),
            ))?,
            (LineRef::TooLong(_), Some(imp)) => imp.warn("lines longer than the maximum"),
            (LineRef::Ok(bytes), None) => each(Input::Line(line_no, bytes))?,
            (LineRef::Ok(bytes), Some(imp)) => {
                imp.feed(bytes, &mut events);
                let share = bytes.len() / events.len().max(1);
                for ev in events.drain(..) {
                    each(Input::Event(line_no, ev, share))?;
                }
            }
        }
    }
    if let Some(imp) = importer {
        imp.finish(&mut events);
        for ev in events.drain(..) {
            each(Input::Event(line_no, ev, 0))?;
        }
    }
    Ok(())
}

/// Streams `input` through the processor: protocol lines, or, with an importer,
/// recorded-run lines turned into events. Memory stays bounded by the open sessions.
pub fn run(
    input: impl BufRead,
    importer: Option<&mut (dyn Importer + '_)>,
    processor: &mut Processor,
    max_line: usize,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    read_input(input, importer, max_line, &mut |item| {
        let h = match item {
            Input::Line(no, bytes) => processor.handle_line(bytes, no),
            Input::TooLong(no, msg) => processor.error(no, &msg),
            Input::Event(no, ev, _) => processor.handle_owned(ev, no),
        };
        sink.handled(&h)
    })
}
