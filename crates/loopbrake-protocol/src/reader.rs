//! Reading input lines with a bound on their length, so a 1 GB line cannot exhaust
//! memory: an over-long line is consumed and reported, and reading goes on.

use std::io::{self, BufRead};

/// The default maximum line length: 16 MiB.
pub const DEFAULT_MAX_LINE: usize = 16 << 20;

/// The most buffer kept from one line to the next.
const KEEP: usize = 1 << 20;

/// One line read into the reader's own buffer ([`LineReader::read_line`]).
#[derive(Debug, PartialEq, Eq)]
pub enum LineRef<'a> {
    /// The line's bytes, without the newline (and without a trailing `\r`).
    Ok(&'a [u8]),
    /// The line was longer than the limit; its length in bytes.
    TooLong(u64),
}

/// A line reader with a length limit.
pub struct LineReader<R> {
    inner: R,
    max: usize,
    /// The last line, reused from line to line (one allocation for a whole input).
    buf: Vec<u8>,
}

impl<R: BufRead> LineReader<R> {
    /// Reads lines of at most `max` bytes from `inner`.
    pub fn new(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            max,
            buf: Vec::new(),
        }
    }

    /// The next line, borrowed from the reader's buffer until the next call, or `None` at
    /// the end of input.
    pub fn read_line(&mut self) -> io::Result<Option<LineRef<'_>>> {
        let buf = &mut self.buf;
        buf.clear();
        if buf.capacity() > KEEP {
            // A long line's buffer is not kept for the rest of the input.
            *buf = Vec::new();
        }
        let mut total: u64 = 0;
        let mut too_long = false;
        let mut saw_any = false;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            saw_any = true;
            let (part, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..i], Some(i + 1)),
                None => (chunk, None),
            };
            total += part.len() as u64;
            if !too_long {
                if buf.len() + part.len() > self.max {
                    too_long = true;
                    *buf = Vec::new();
                } else {
                    buf.extend_from_slice(part);
                }
            }
            let used = done.unwrap_or(chunk.len());
            self.inner.consume(used);
            if done.is_some() {
                break;
            }
        }
        if !saw_any {
            return Ok(None);
        }
        if too_long {
            return Ok(Some(LineRef::TooLong(total)));
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok(Some(LineRef::Ok(buf)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_reported_and_skipped() {
        let data = b"ok\n0123456789abcdef\r\nlast";
        let mut r = LineReader::new(&data[..], 10);
        assert_eq!(r.read_line().unwrap(), Some(LineRef::Ok(b"ok")));
        assert_eq!(r.read_line().unwrap(), Some(LineRef::TooLong(17)));
        assert_eq!(r.read_line().unwrap(), Some(LineRef::Ok(b"last")));
        assert_eq!(r.read_line().unwrap(), None);
    }
}
