//! Payloads that are not JSON as they stand but whose meaning is plain: a byte-order mark,
//! UTF-16, bytes that are not UTF-8 (raw invalid or overlong sequences), `NaN` and
//! `Infinity`, control characters inside strings, single-quoted strings, trailing commas,
//! text after the first object (garbage, or a second object). No host sends these today;
//! a host's bug, a proxy or a model's own bytes in a string could, and a payload that is
//! not read is never counted, so a loop in that shape would never be stopped.
//!
//! The bytes are turned into strict JSON text keeping what tells two calls apart: a byte
//! that is not UTF-8 becomes the text `\xNN` (so the session, the tool and the arguments
//! are read, and two payloads that differ in one such byte stay different; an overlong
//! `/` is never read as `/`), a lone UTF-16 surrogate the escape `\uD800` (judged by a
//! hash of its bytes, as in any payload), `NaN` and `Infinity` strings, a control
//! character its `\u00NN` escape. These run only when the payload does not parse as it
//! stands: the hook's usual path does not pay for them.

use std::borrow::Cow;
use std::fmt::Write;

/// What was not strict JSON in a payload (for the warning; never the payload's text).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fixes {
    bom: bool,
    utf16: bool,
    pub(crate) bad_bytes: usize,
    single_quotes: bool,
    trailing_commas: bool,
    non_finite: bool,
    control: bool,
    after_value: bool,
}

impl Fixes {
    /// Whether anything was.
    pub(crate) fn any(&self) -> bool {
        *self != Fixes::default()
    }

    /// What was, in words.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.bom {
            parts.push("a byte-order mark".to_string());
        }
        if self.utf16 {
            parts.push("UTF-16".to_string());
        }
        if self.bad_bytes > 0 {
            parts.push(format!(
                "{} byte(s) that are not UTF-8, read as \\xNN",
                self.bad_bytes
            ));
        }
        for (on, what) in [
            (self.non_finite, "NaN or Infinity, read as strings"),
            (self.control, "control characters in strings"),
            (self.single_quotes, "single-quoted strings"),
            (self.trailing_commas, "trailing commas"),
            (self.after_value, "text after the first object, not read"),
        ] {
            if on {
                parts.push(what.to_string());
            }
        }
        parts.join("; ")
    }
}

/// The payload's bytes as text: without a byte-order mark, UTF-16 decoded, each byte that
/// is not UTF-8 written `\\xNN` (inside a JSON string, the four characters `\xNN`).
pub(crate) fn decode<'a>(input: &'a [u8], fixes: &mut Fixes) -> Cow<'a, str> {
    let mut bytes = input;
    if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
        fixes.bom = true;
        bytes = rest;
    }
    let utf16 = match bytes {
        [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..] => {
            fixes.bom = true;
            let le = bytes[0] == 0xFF;
            bytes = &bytes[2..];
            Some(le)
        }
        // JSON text starts with an ASCII character: its other byte is NUL in UTF-16.
        [a, 0, ..] if *a != 0 => Some(true),
        [0, b, ..] if *b != 0 => Some(false),
        _ => None,
    };
    if let Some(le) = utf16 {
        fixes.utf16 = true;
        let units = bytes.chunks_exact(2).map(|p| {
            if le {
                u16::from_le_bytes([p[0], p[1]])
            } else {
                u16::from_be_bytes([p[0], p[1]])
            }
        });
        let mut out = String::with_capacity(bytes.len() / 2);
        for c in char::decode_utf16(units) {
            match c {
                Ok(c) => out.push(c),
                Err(e) => {
                    let _ = write!(out, "\\u{:04X}", e.unpaired_surrogate());
                }
            }
        }
        if bytes.len() % 2 == 1 {
            fixes.bad_bytes += 1;
            let _ = write!(out, "\\\\x{:02X}", bytes[bytes.len() - 1]);
        }
        return Cow::Owned(out);
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 64);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            fixes.bad_bytes += 1;
            let _ = write!(out, "\\\\x{b:02X}");
        }
    }
    Cow::Owned(out)
}

/// `text` as strict JSON: single-quoted strings double-quoted, control characters in
/// strings escaped, commas before a closing bracket dropped, `NaN`, `Infinity` and
/// `-Infinity` as strings, and nothing after the first object or array.
pub(crate) fn normalise(text: &str, fixes: &mut Fixes) -> String {
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len() + 16);
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' | b'\'' => i = string(b, i, &mut out, fixes),
            b'{' | b'[' => {
                depth += 1;
                out.push(c);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(p) = out.iter().rposition(|x| !x.is_ascii_whitespace()) {
                    if out[p] == b',' {
                        out.remove(p);
                        fixes.trailing_commas = true;
                    }
                }
                out.push(c);
                i += 1;
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    fixes.after_value |= b[i..].iter().any(|x| !x.is_ascii_whitespace());
                    break;
                }
            }
            c if c.is_ascii_alphabetic() || c == b'-' || c == b'+' => {
                let len = b[i..]
                    .iter()
                    .position(|x| !(x.is_ascii_alphanumeric() || b"+-._".contains(x)))
                    .unwrap_or(b.len() - i);
                let word = &b[i..i + len];
                match word {
                    b"NaN" | b"-NaN" | b"+NaN" | b"Infinity" | b"+Infinity" | b"-Infinity" => {
                        fixes.non_finite = true;
                        out.push(b'"');
                        out.extend_from_slice(word.strip_prefix(b"+").unwrap_or(word));
                        out.push(b'"');
                    }
                    _ => out.extend_from_slice(word),
                }
                i += len;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    // Only ASCII was added or removed, at ASCII positions: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Copies the string starting at `b[start]` (a `"` or `'`) as a double-quoted JSON string;
/// returns where the text after it starts.
fn string(b: &[u8], start: usize, out: &mut Vec<u8>, fixes: &mut Fixes) -> usize {
    let quote = b[start];
    fixes.single_quotes |= quote == b'\'';
    out.push(b'"');
    let mut i = start + 1;
    while i < b.len() {
        let c = b[i];
        if c == quote {
            out.push(b'"');
            return i + 1;
        }
        match c {
            b'\\' => match b.get(i + 1) {
                Some(b'\'') => {
                    out.push(b'\'');
                    i += 2;
                }
                // A backslash before a raw line break or other control character: the
                // character itself, escaped below.
                Some(n) if *n < 0x20 => i += 1,
                Some(n) => {
                    out.push(b'\\');
                    out.push(*n);
                    i += 2;
                }
                None => {
                    out.push(b'\\');
                    i += 1;
                }
            },
            // Only inside a single-quoted string.
            b'"' => {
                out.extend_from_slice(b"\\\"");
                i += 1;
            }
            c if c < 0x20 => {
                fixes.control = true;
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn lenient(input: &[u8]) -> (Value, Fixes) {
        let mut f = Fixes::default();
        let text = decode(input, &mut f);
        let strict = normalise(&text, &mut f);
        (
            serde_json::from_str(&strict).unwrap_or_else(|e| panic!("{e}: {strict}")),
            f,
        )
    }

    #[test]
    fn each_shape_reads_as_the_object_it_means() {
        let want = json!({"s": "a'b\"c", "n": [1, -2.5e3], "t": true, "z": null});
        for input in [
            &b"{'s': 'a\\'b\"c', 'n': [1, -2.5e3,], 't': true, 'z': null,}"[..],
            b"\xEF\xBB\xBF{\"s\": \"a'b\\\"c\", \"n\": [1, -2.5e3], \"t\": true, \"z\": null}",
            b"{\"s\": \"a'b\\\"c\", \"n\": [1, -2.5e3], \"t\": true, \"z\": null} trailing {",
            b"{\"s\": \"a'b\\\"c\", \"n\": [1, -2.5e3], \"t\": true, \"z\": null}{\"s\": 2}",
        ] {
            let (v, f) = lenient(input);
            assert_eq!(v, want, "{}", String::from_utf8_lossy(input));
            assert!(f.any());
        }
        let text = want.to_string();
        for le in [true, false] {
            let mut bytes = if le { vec![0xFF, 0xFE] } else { vec![] };
            for u in text.encode_utf16() {
                bytes.extend(if le { u.to_le_bytes() } else { u.to_be_bytes() });
            }
            assert_eq!(lenient(&bytes).0, want);
        }
        let (v, _) = lenient(b"{\"a\": NaN, \"b\": -Infinity, \"c\": \"x\ty\n\x01\"}");
        assert_eq!(v, json!({"a": "NaN", "b": "-Infinity", "c": "x\ty\n\u{1}"}));
    }

    #[test]
    fn bytes_that_are_not_utf8_keep_their_value() {
        let (v, f) = lenient(b"{\"s\": \"a\xFFb\", \"p\": \"\xC0\xAF\"}");
        assert_eq!(v, json!({"s": "a\\xFFb", "p": "\\xC0\\xAF"}));
        assert_eq!(f.bad_bytes, 3);
        assert_ne!(lenient(b"{\"s\": \"a\xFEb\"}").0["s"], v["s"]);
        // A lone surrogate in UTF-16 stays an escape (judged by its hash downstream).
        let mut bytes = vec![];
        for u in [b'"' as u16, 0xD800, b'"' as u16] {
            bytes.extend(u.to_le_bytes());
        }
        let mut f = Fixes::default();
        assert_eq!(decode(&bytes, &mut f), "\"\\uD800\"");
    }

    proptest::proptest! {
        #[test]
        fn strict_json_means_the_same_after(v in toolbrake_testkit::arb_json(), pretty: bool) {
            let text = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                v.to_string()
            };
            let mut f = Fixes::default();
            let out = normalise(&decode(text.as_bytes(), &mut f), &mut f);
            proptest::prop_assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), v);
            proptest::prop_assert!(!f.any());
        }
    }

    #[test]
    fn anything_else_is_left_for_the_parse_to_refuse() {
        for input in [&b"not json"[..], b"{\"a\":", b"", b"\x00", b"{'a", b"\\"] {
            let mut f = Fixes::default();
            let text = decode(input, &mut f);
            let strict = normalise(&text, &mut f);
            assert!(serde_json::from_str::<Value>(&strict).is_err(), "{strict}");
        }
    }
}
