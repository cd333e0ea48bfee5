//! Reading newline-delimited messages with a bound on each one.
//!
//! A message longer than [`MAX_MESSAGE`] is never held whole: once the bound is passed,
//! the rest of its line is read and dropped as it comes (so a line that never ends costs
//! time, not memory), keeping only its first [`HEAD`] and last [`TAIL`] bytes, where the
//! JSON-RPC id of a request or an answer is found ([`oversized_id`]). The caller decides
//! what to tell whom: the client gets an error for its request, the server's answer
//! becomes an error for the request it answered.

use crate::MAX_MESSAGE;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Bytes kept of the start of a message over the bound.
const HEAD: usize = 64 << 10;
/// Bytes kept of the end of a message over the bound.
const TAIL: usize = 4 << 10;
/// A buffer grown past this by a large message is given back before the next one.
const KEEP: usize = 1 << 20;

/// What one read gave.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A message (without its line end), as text.
    Line(String),
    /// A message began that is over the bound; the rest of it is being dropped. Returned
    /// once, when the bound is passed; [`Frame::TooLarge`] follows when its line ends.
    Overflowing,
    /// A message over the bound ended (or the input did): how long it was, and its id
    /// when one could be read from its head or its tail.
    TooLarge {
        /// Its length in bytes, line end left out.
        len: usize,
        /// Its JSON-RPC id, if found.
        id: Option<Value>,
    },
}

/// A message over the bound, being dropped.
struct Dropping {
    len: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
}

/// Newline-delimited messages from `r`, each at most [`MAX_MESSAGE`] bytes held.
pub(crate) struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    dropping: Option<Dropping>,
}

impl<R: AsyncBufRead + Unpin> Lines<R> {
    pub(crate) fn new(r: R) -> Self {
        Lines {
            r,
            buf: Vec::new(),
            dropping: None,
        }
    }

    /// The next message; `None` at the end of the input (after a last message without a
    /// newline, which is still returned).
    pub(crate) async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        if self.buf.capacity() > KEEP {
            self.buf = Vec::new();
        }
        self.buf.clear();
        loop {
            let chunk = self.r.fill_buf().await?;
            let newline = memchr::memchr(b'\n', chunk);
            let take = newline.map_or(chunk.len(), |i| i + 1);
            let part = &chunk[..newline.unwrap_or(chunk.len())];
            let end = newline.is_some() || chunk.is_empty();
            if let Some(d) = &mut self.dropping {
                d.len += part.len();
                keep_tail(&mut d.tail, part);
                self.r.consume(take);
                if end {
                    let d = self.dropping.take().expect("dropping");
                    return Ok(Some(d.finish()));
                }
                continue;
            }
            if chunk.is_empty() {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(self.line()));
            }
            // One byte over the bound is allowed for a `\r` before the newline.
            if self.buf.len() + part.len() > MAX_MESSAGE + 1 {
                // Over the bound: keep the head and the tail, drop the rest as it comes.
                let mut tail = Vec::with_capacity(2 * TAIL);
                keep_tail(&mut tail, &self.buf);
                keep_tail(&mut tail, part);
                let mut head = Vec::with_capacity(HEAD);
                head.extend_from_slice(&self.buf[..self.buf.len().min(HEAD)]);
                let room = HEAD - head.len();
                head.extend_from_slice(&part[..part.len().min(room)]);
                let d = Dropping {
                    len: self.buf.len() + part.len(),
                    head,
                    tail,
                };
                self.buf = Vec::new();
                self.r.consume(take);
                if end {
                    return Ok(Some(d.finish()));
                }
                self.dropping = Some(d);
                return Ok(Some(Frame::Overflowing));
            }
            self.buf.extend_from_slice(&chunk[..take]);
            self.r.consume(take);
            if newline.is_some() {
                return Ok(Some(self.line()));
            }
        }
    }

    /// The buffered message as text, its line end removed; [`Frame::TooLarge`] if it is
    /// still over the bound without it.
    fn line(&mut self) -> Frame {
        let buf = &mut self.buf;
        while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            buf.pop();
        }
        if buf.len() > MAX_MESSAGE {
            let len = buf.len();
            let id = oversized_id(&buf[..HEAD], &buf[len - TAIL..]);
            return Frame::TooLarge { len, id };
        }
        // Room for the newline the writer adds, so sending it on costs no second allocation.
        let mut line = String::with_capacity(buf.len() + 1);
        // Valid UTF-8 (nearly every message) is checked word by word; `from_utf8_lossy` alone
        // walked it character by character, about a thousand instructions a message.
        match std::str::from_utf8(buf) {
            Ok(text) => line.push_str(text),
            Err(_) => line.push_str(&String::from_utf8_lossy(buf)),
        }
        Frame::Line(line)
    }
}

/// Appends `part` to `tail`, keeping about its last [`TAIL`] bytes.
fn keep_tail(tail: &mut Vec<u8>, part: &[u8]) {
    if part.len() >= TAIL {
        tail.clear();
        tail.extend_from_slice(&part[part.len() - TAIL..]);
        return;
    }
    tail.extend_from_slice(part);
    if tail.len() > 2 * TAIL {
        tail.drain(..tail.len() - TAIL);
    }
}

impl Dropping {
    fn finish(mut self) -> Frame {
        while self.tail.last().is_some_and(|b| *b == b'\r') {
            self.tail.pop();
            self.len -= 1;
        }
        let id = oversized_id(&self.head, &self.tail);
        Frame::TooLarge { len: self.len, id }
    }
}

/// The JSON-RPC id of a message known only by its head and its tail: a top-level `"id"`
/// member read from the start (members before it skipped, as long as they are whole in
/// the head), else the message's last member when it is `"id"` (a client that writes the
/// id after the params, as the TypeScript SDK does). `None` when neither says.
pub(crate) fn oversized_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    head_id(head).or_else(|| tail_id(tail))
}

fn head_id(head: &[u8]) -> Option<Value> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Find<'a>(&'a mut Option<Value>);
    impl<'de> Visitor<'de> for Find<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON-RPC message")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "id" {
                    *self.0 = Some(map.next_value::<Value>()?);
                    // Found: the rest (cut short) need not be read.
                    return Err(serde::de::Error::custom("found"));
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut id = None;
    let _ = serde_json::Deserializer::from_slice(head).deserialize_map(Find(&mut id));
    id.filter(valid_id)
}

/// The id when the message ends with `, "id": VALUE }` (or `{ "id": … }`): the last member
/// of the top-level object, whatever came before it.
fn tail_id(tail: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(tail);
    let body = text.trim_end().strip_suffix('}')?.trim_end();
    // The value: a number, `null`, or a string without quotes or backslashes inside.
    let (start, value) = if let Some(inner) = body.strip_suffix('"') {
        let open = inner.rfind('"')?;
        let s = &inner[open + 1..];
        if s.contains('\\') || inner[..open].ends_with('\\') {
            return None;
        }
        (open, &body[open..])
    } else {
        let start = body
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.')))
            .map_or(0, |i| i + 1);
        (start, &body[start..])
    };
    let before = body[..start].trim_end().strip_suffix(':')?.trim_end();
    let before = before.strip_suffix("\"id\"")?.trim_end();
    if !(before.ends_with(',') || before.ends_with('{')) {
        return None;
    }
    serde_json::from_str::<Value>(value).ok().filter(valid_id)
}

/// What JSON-RPC allows as an id: a string, a number or null.
fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_) | Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::BufReader;

    async fn frames(input: &[u8]) -> Vec<Frame> {
        let mut lines = Lines::new(BufReader::new(input));
        let mut out = Vec::new();
        while let Some(f) = lines.next().await.unwrap() {
            out.push(f);
        }
        out
    }

    fn texts(frames: &[Frame]) -> Vec<String> {
        frames
            .iter()
            .map(|f| match f {
                Frame::Line(l) => l.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_message_is_read_as_text_and_bytes_that_are_not_utf8_become_replacement_characters() {
        let input: &[u8] = b"{\"a\":\"\xc3\xa9\"}\r\n{\"b\":\"\xff\"}\n\n{\"c\":1}";
        assert_eq!(
            texts(&frames(input).await),
            ["{\"a\":\"é\"}", "{\"b\":\"\u{FFFD}\"}", "", "{\"c\":1}"]
        );
    }

    /// A message over the bound is dropped, its id read from its head or its tail, and the
    /// messages around it arrive whole.
    #[tokio::test]
    async fn a_message_over_the_bound_is_dropped_with_its_id_and_the_next_one_is_read() {
        let filler = "x".repeat(MAX_MESSAGE + 100_000);
        let head_first = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"a":"{filler}"}}}}"#
        );
        let id_last = format!(
            r#"{{"method":"tools/call","params":{{"a":"{filler}","id":1}},"jsonrpc":"2.0", "id" : "k-9" }}"#
        );
        let no_id = format!(r#"{{"method":"notifications/x","params":{{"a":"{filler}"}}}}"#);
        let exact = "y".repeat(MAX_MESSAGE);
        let input =
            format!("{{\"n\":1}}\n{head_first}\n{id_last}\r\n{no_id}\n{exact}\r\n{{\"n\":2}}");
        let got = frames(input.as_bytes()).await;
        let summary: Vec<String> = got
            .iter()
            .map(|f| match f {
                Frame::Line(l) if l.len() > 100 => format!("line of {}", l.len()),
                Frame::Line(l) => l.clone(),
                Frame::Overflowing => "overflowing".into(),
                Frame::TooLarge { len, id } => format!("too large {len} {id:?}"),
            })
            .collect();
        assert_eq!(
            summary,
            [
                "{\"n\":1}".to_string(),
                "overflowing".into(),
                format!("too large {} {:?}", head_first.len(), Some(json!(7))),
                "overflowing".into(),
                format!("too large {} {:?}", id_last.len(), Some(json!("k-9"))),
                "overflowing".into(),
                format!("too large {} None", no_id.len()),
                format!("line of {MAX_MESSAGE}"),
                "{\"n\":2}".into(),
            ]
        );
    }

    /// An input that never ends its line: read and dropped as it comes, never held.
    #[tokio::test]
    async fn a_line_that_never_ends_is_not_held() {
        struct Endless(usize);
        impl tokio::io::AsyncRead for Endless {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let n = buf.remaining().min(self.0);
                buf.put_slice(&vec![b'a'; n]);
                self.0 -= n;
                std::task::Poll::Ready(Ok(()))
            }
        }
        let total = 3 * MAX_MESSAGE;
        let mut lines = Lines::new(BufReader::new(Endless(total)));
        assert!(matches!(
            lines.next().await.unwrap(),
            Some(Frame::Overflowing)
        ));
        assert_eq!(lines.buf.capacity(), 0, "nothing held while dropping");
        match lines.next().await.unwrap() {
            Some(Frame::TooLarge { len, id: None }) => assert_eq!(len, total),
            other => panic!("{other:?}"),
        }
        assert!(lines.next().await.unwrap().is_none());
    }

    #[test]
    fn an_id_is_read_only_where_it_is_the_messages_own() {
        for (head, tail, id) in [
            (r#"{"jsonrpc":"2.0","id":3,"params":{"#, "", Some(json!(3))),
            (r#"{"jsonrpc":"2.0","params":{"id":3,"#, "", None),
            ("", r#"...,"jsonrpc":"2.0","id":12}"#, Some(json!(12))),
            ("", r#"...x"},"id":"a b"}  "#, Some(json!("a b"))),
            ("", r#"{"id":-4}"#, Some(json!(-4))),
            // The last member of an inner object.
            ("", r#"...{"id":-4}}"#, None),
            // Inside a string, escaped: not the message's id.
            ("", r#"..."text":"\"id\":5}"#, None),
            ("", r#"..."x":"a\\"id":5}"#, None),
            ("", r#"...,"id":[1]}"#, None),
            ("", r#"...,"idx":1}"#, None),
        ] {
            assert_eq!(
                oversized_id(head.as_bytes(), tail.as_bytes()),
                id,
                "{head} … {tail}"
            );
        }
    }
}
