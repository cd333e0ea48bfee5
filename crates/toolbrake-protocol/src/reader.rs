//! Reading input lines with a bound on their length, so a 1 GB line cannot exhaust
//! memory: an over-long line is consumed and reported, and reading goes on.

use std::io::{self, BufRead};

/// The default maximum line length: 16 MiB.
pub const DEFAULT_MAX_LINE: usize = 16 << 20;

/// The most buffer kept from one line to the next.
const KEEP: usize = 1 << 20;

/// One line read ([`LineReader::read_line`]).
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
    /// A line that did not lie whole in `inner`'s buffer, gathered here, reused from line
    /// to line (one allocation for a whole input).
    buf: Vec<u8>,
    /// Bytes of `inner`'s buffer lent as the last line, consumed at the next call.
    lent: usize,
}

impl<R: BufRead> LineReader<R> {
    /// Reads lines of at most `max` bytes from `inner`.
    pub fn new(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            max,
            buf: Vec::new(),
            lent: 0,
        }
    }

    /// The next line, borrowed from the reader's buffer until the next call, or `None` at
    /// the end of input. A line that lies whole in `inner`'s buffer is lent from there,
    /// not copied (nearly every line of a replay, whose buffer is 64 KiB: the copy was a
    /// second pass over every byte of the input); any other is gathered in a buffer of
    /// this reader's own.
    pub fn read_line(&mut self) -> io::Result<Option<LineRef<'_>>> {
        if self.lent > 0 {
            self.inner.consume(std::mem::take(&mut self.lent));
        }
        let whole = loop {
            match self.inner.fill_buf() {
                Ok([]) => return Ok(None),
                Ok(c) => break memchr::memchr(b'\n', c).filter(|&i| i <= self.max),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        if let Some(i) = whole {
            // The same bytes again: a buffer that is not empty is returned as it is.
            let chunk = self.inner.fill_buf()?;
            self.lent = i + 1;
            let line = &chunk[..i];
            return Ok(Some(LineRef::Ok(line.strip_suffix(b"\r").unwrap_or(line))));
        }
        self.gather()
    }

    /// [`LineReader::read_line`] of a line that does not lie whole in `inner`'s buffer.
    fn gather(&mut self) -> io::Result<Option<LineRef<'_>>> {
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

    proptest::proptest! {
        /// Whatever the reader's buffer size, the lines are the input's lines: split at
        /// each newline, a trailing `\r` dropped, a line over the limit (its `\r` counted)
        /// reported by its length, a last line without a newline read too.
        #[test]
        fn lines_are_the_same_whatever_the_buffer(
            data in proptest::collection::vec(
                proptest::sample::select(vec![b'a', b'b', b'\n', b'\r']), 0..200),
            capacity in 1usize..40,
            max in 0usize..12,
        ) {
            // Each line as `Ok(bytes)` or `Err(length)` when over the limit.
            let mut expected: Vec<Result<Vec<u8>, u64>> = Vec::new();
            let mut parts: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
            if data.last().is_none_or(|b| *b == b'\n') {
                parts.pop();
            }
            for part in parts {
                expected.push(if part.len() > max {
                    Err(part.len() as u64)
                } else {
                    Ok(part.strip_suffix(b"\r").unwrap_or(part).to_vec())
                });
            }
            let mut r = LineReader::new(io::BufReader::with_capacity(capacity, &data[..]), max);
            let mut got = Vec::new();
            while let Some(line) = r.read_line().unwrap() {
                got.push(match line {
                    LineRef::Ok(b) => Ok(b.to_vec()),
                    LineRef::TooLong(n) => Err(n),
                });
                proptest::prop_assert!(got.len() <= data.len(), "more lines than bytes");
            }
            proptest::prop_assert_eq!(got, expected);
        }
    }
}
