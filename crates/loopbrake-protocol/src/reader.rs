//! Reading input lines with a bound on their length, so a 1 GB line cannot exhaust
//! memory: an over-long line is consumed and reported, and reading goes on.

use std::io::{self, BufRead};

/// The default maximum line length: 16 MiB.
pub const DEFAULT_MAX_LINE: usize = 16 << 20;

/// One line read.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The line's bytes, without the newline (and without a trailing `\r`).
    Ok(Vec<u8>),
    /// The line was longer than the limit; its length in bytes.
    TooLong(u64),
}

/// A line reader with a length limit.
pub struct LineReader<R> {
    inner: R,
    max: usize,
}

impl<R: BufRead> LineReader<R> {
    /// Reads lines of at most `max` bytes from `inner`.
    pub fn new(inner: R, max: usize) -> Self {
        LineReader { inner, max }
    }

    /// The next line, or `None` at the end of input.
    pub fn next_line(&mut self) -> io::Result<Option<Line>> {
        let mut buf = Vec::new();
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
                if buf.is_empty() && done.is_some() {
                    // The whole line is in the buffer: one allocation of its size.
                    buf.reserve_exact(part.len());
                }
                if buf.len() + part.len() > self.max {
                    too_long = true;
                    buf = Vec::new();
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
            return Ok(Some(Line::TooLong(total)));
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok(Some(Line::Ok(buf)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_reported_and_skipped() {
        let data = b"ok\n0123456789abcdef\r\nlast";
        let mut r = LineReader::new(&data[..], 10);
        assert_eq!(r.next_line().unwrap(), Some(Line::Ok(b"ok".to_vec())));
        assert_eq!(r.next_line().unwrap(), Some(Line::TooLong(17)));
        assert_eq!(r.next_line().unwrap(), Some(Line::Ok(b"last".to_vec())));
        assert_eq!(r.next_line().unwrap(), None);
    }
}
