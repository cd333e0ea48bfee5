//! Canonical JSON and the call hash (docs/decisions.md, "Call hash").
//!
//! `canonical_json` is byte-compatible with the original JavaScript formula
//! (`JSON.stringify` over a value whose object keys were sorted at every depth):
//! keys ordered by UTF-16 code units, numbers printed as ECMAScript prints them,
//! strings escaped as `JSON.stringify` escapes them. For every value JSON can carry
//! this is RFC 8785 (JCS).
//!
//! The writer streams into any sink, so hashing a 100 MB argument never builds the
//! canonical text in memory: [`call_hash`] feeds SHA-256 through a small buffer.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::cmp::Ordering;

/// The deepest nesting (objects and arrays) accepted. `serde_json` refuses JSON text
/// nested deeper than 128 when parsing, so the canonical writer uses the same bound for
/// values built in code; deeper input is refused with [`CanonicalError::TooDeep`]
/// rather than risking the stack.
pub const MAX_DEPTH: usize = 128;

/// Number of hex characters of a digest shown anywhere (logs, errors, messages).
pub const HASH_PREFIX_LEN: usize = 12;

/// Why a value has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// The value nests objects/arrays deeper than [`MAX_DEPTH`].
    #[error("arguments nest deeper than {limit} levels; refusing to canonicalise them")]
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
    },
}

/// A sink the canonical writer appends to.
trait Sink {
    fn put(&mut self, bytes: &[u8]);

    /// About `n` more bytes are coming (a string about to be written): a buffer makes room
    /// for them at once rather than doubling its way there.
    fn expect(&mut self, _n: usize) {}
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn expect(&mut self, n: usize) {
        self.reserve(n);
    }
}

/// The first size of a buffer for canonical text: most arguments fit, so it is not grown
/// byte-doubling from 8 on every call.
const FIRST_CAPACITY: usize = 256;

/// SHA-256 as a sink (it buffers whole 64-byte blocks itself).
struct HashSink {
    hasher: Sha256,
}

impl HashSink {
    fn new() -> Self {
        HashSink {
            hasher: Sha256::new(),
        }
    }

    fn finish(self) -> [u8; 32] {
        self.hasher.finalize().into()
    }
}

impl Sink for HashSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }
}

/// The canonical JSON text of `value`.
///
/// ```
/// use serde_json::json;
/// let text = toolbrake_core::canonical::canonical_json(&json!({"b": 1, "a": [1.0, {"d": 2, "c": 3}]})).unwrap();
/// assert_eq!(text, r#"{"a":[1,{"c":3,"d":2}],"b":1}"#);
/// ```
pub fn canonical_json(value: &Value) -> Result<String, CanonicalError> {
    let mut out = Vec::with_capacity(FIRST_CAPACITY);
    write_value(&mut out, value, 0)?;
    // The writer only emits valid UTF-8 (it copies `str` data and ASCII escapes).
    Ok(String::from_utf8(out).expect("canonical writer emits UTF-8"))
}

/// The digest identifying a call: `sha256(tool + "\n" + canonical_json(args))`, 32 bytes.
pub fn call_digest(tool: &str, args: &Value) -> Result<[u8; 32], CanonicalError> {
    let mut sink = HashSink::new();
    sink.put(tool.as_bytes());
    sink.put(b"\n");
    write_value(&mut sink, args, 0)?;
    Ok(sink.finish())
}

/// The call digest from arguments already written canonically: `sha256(tool + "\n" +
/// canonical)`. Equals [`call_digest`] when `canonical` is `canonical_json(args)`; for
/// a caller that needs the text anyway (the breaker's `exact:` fingerprint carries it),
/// so the arguments are written once.
pub fn digest_of_canonical(tool: &str, canonical: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update(b"\n");
    h.update(canonical.as_bytes());
    h.finalize().into()
}

/// The digest of a call with decoy keys left out of its arguments (as in
/// [`canonical_args_without`]): `sha256(tool + "\n" + canonical_args_without(args, skip))`.
/// With nothing skipped and object arguments it equals [`call_digest`].
pub fn call_digest_without(
    tool: &str,
    args: &Value,
    skip: impl Fn(&str) -> bool,
) -> Result<[u8; 32], CanonicalError> {
    let mut sink = HashSink::new();
    sink.put(tool.as_bytes());
    sink.put(b"\n");
    match args {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> =
                map.iter().filter(|(k, _)| !skip(k)).collect();
            entries.sort_by(|a, b| utf16_cmp(a.0, b.0));
            write_entries(&mut sink, entries, 0)?;
        }
        other => write_value(&mut sink, other, 0)?,
    }
    Ok(sink.finish())
}

/// The call hash as 64 lowercase hex characters.
///
/// ```
/// use serde_json::json;
/// use toolbrake_core::canonical::{call_hash, hash_prefix};
/// let a = call_hash("search", &json!({"q": "weather", "n": 1})).unwrap();
/// let b = call_hash("search", &json!({"n": 1, "q": "weather"})).unwrap();
/// assert_eq!(a, b);
/// assert_eq!(hash_prefix(&a).len(), 12);
/// ```
pub fn call_hash(tool: &str, args: &Value) -> Result<String, CanonicalError> {
    call_digest(tool, args).map(hex::encode)
}

/// The first [`HASH_PREFIX_LEN`] hex characters of a hash, and no more.
pub fn hash_prefix(hash: &str) -> &str {
    let end = hash.len().min(HASH_PREFIX_LEN);
    &hash[..end]
}

/// The canonical JSON of a call's arguments with decoy keys removed (docs/decisions.md,
/// "Decoys"; the seed's `omitIgnored`): `null` becomes `{}`, any other non-object `v` becomes
/// `{"value": v}`, and top-level keys for which `skip` answers true are left out.
/// The arguments are never copied.
pub fn canonical_args_without(
    args: &Value,
    skip: impl Fn(&str) -> bool,
) -> Result<String, CanonicalError> {
    canonical_args_without_after(String::new(), args, skip)
}

/// `prefix` followed by [`canonical_args_without`], written into `prefix`'s own buffer (the
/// breaker's `exact:` fingerprint is `exact:{tool}:` and that text: written once, it is
/// neither copied nor allocated twice).
pub fn canonical_args_without_after(
    prefix: String,
    args: &Value,
    skip: impl Fn(&str) -> bool,
) -> Result<String, CanonicalError> {
    let mut out = prefix.into_bytes();
    out.reserve(FIRST_CAPACITY);
    match args {
        Value::Null => out.put(b"{}"),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> =
                map.iter().filter(|(k, _)| !skip(k)).collect();
            entries.sort_by(|a, b| utf16_cmp(a.0, b.0));
            write_entries(&mut out, entries, 0)?;
        }
        other => {
            if skip("value") {
                out.put(b"{}");
            } else {
                write_entries(&mut out, vec![(&"value".to_string(), other)], 0)?;
            }
        }
    }
    // The prefix was a `String`, and the writer only emits valid UTF-8.
    Ok(String::from_utf8(out).expect("canonical writer emits UTF-8"))
}

/// Orders two keys as JavaScript's default sort does: by UTF-16 code units.
pub fn utf16_cmp(a: &str, b: &str) -> Ordering {
    // Byte order is code point order, which is UTF-16 order except between an astral
    // character and one in U+E000..=U+FFFF. So compare bytes, and only look closer when
    // the first difference is inside a non-ASCII character.
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    match ab.iter().zip(bb).position(|(x, y)| x != y) {
        None => ab.len().cmp(&bb.len()),
        Some(i) if ab[i] < 0x80 && bb[i] < 0x80 => ab[i].cmp(&bb[i]),
        Some(_) => a.chars().map(utf16_units).cmp(b.chars().map(utf16_units)),
    }
}

/// A character's UTF-16 code units, as a pair comparable in code-unit order.
fn utf16_units(c: char) -> (u16, u16) {
    let mut buf = [0u16; 2];
    let units = c.encode_utf16(&mut buf);
    (units[0], units.get(1).copied().unwrap_or(0))
}

fn write_value<S: Sink>(out: &mut S, value: &Value, depth: usize) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.put(b"null"),
        Value::Bool(true) => out.put(b"true"),
        Value::Bool(false) => out.put(b"false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            if depth >= MAX_DEPTH {
                return Err(CanonicalError::TooDeep { limit: MAX_DEPTH });
            }
            out.put(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_value(out, item, depth + 1)?;
            }
            out.put(b"]");
        }
        Value::Object(map) => {
            if depth >= MAX_DEPTH {
                return Err(CanonicalError::TooDeep { limit: MAX_DEPTH });
            }
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| utf16_cmp(a.0, b.0));
            write_entries(out, entries, depth)?;
        }
    }
    Ok(())
}

/// Writes already sorted object members at `depth` (the object's own depth).
fn write_entries<S: Sink>(
    out: &mut S,
    entries: Vec<(&String, &Value)>,
    depth: usize,
) -> Result<(), CanonicalError> {
    out.put(b"{");
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write_string(out, k);
        out.put(b":");
        write_value(out, v, depth + 1)?;
    }
    out.put(b"}");
    Ok(())
}

/// Numbers as JavaScript sees them: every JSON number is an IEEE double, printed by
/// ECMAScript's Number::toString (`1.0` → `1`, `1e21` → `1e+21`, `-0` → `0`).
fn write_number<S: Sink>(out: &mut S, n: &serde_json::Number) {
    if let Some(i) = n.as_i64() {
        if i.unsigned_abs() < (1u64 << 53) {
            out.put(i.to_string().as_bytes());
            return;
        }
    }
    let f = n.as_f64().unwrap_or(0.0);
    if f == 0.0 {
        out.put(b"0");
        return;
    }
    let mut buf = ryu_js::Buffer::new();
    out.put(buf.format(f).as_bytes());
}

/// Bytes `JSON.stringify` escapes: `"`, `\\` and the C0 controls.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// `JSON.stringify` string escaping: `"` `\\` and the C0 controls; short forms for
/// `\b \f \n \r \t`, `\u00xx` (lowercase hex) for the rest; everything else verbatim.
fn write_string<S: Sink>(out: &mut S, s: &str) {
    out.expect(s.len() + 2);
    out.put(b"\"");
    let mut rest = s.as_bytes();
    while let Some(i) = rest.iter().position(|&b| NEEDS_ESCAPE[b as usize]) {
        out.put(&rest[..i]);
        let b = rest[i];
        match b {
            b'"' => out.put(b"\\\""),
            b'\\' => out.put(b"\\\\"),
            0x08 => out.put(b"\\b"),
            0x0c => out.put(b"\\f"),
            b'\n' => out.put(b"\\n"),
            b'\r' => out.put(b"\\r"),
            b'\t' => out.put(b"\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ]);
            }
        }
        rest = &rest[i + 1..];
    }
    out.put(rest);
    out.put(b"\"");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_as_javascript_does() {
        let cases = [
            ("1.0", "1"),
            ("-0", "0"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("0.1", "0.1"),
            ("1.5e-7", "1.5e-7"),
            ("12345678901234567890", "12345678901234567000"),
            ("9007199254740993", "9007199254740992"),
            ("-5", "-5"),
        ];
        for (input, want) in cases {
            let v: Value = serde_json::from_str(input).unwrap();
            assert_eq!(canonical_json(&v).unwrap(), want, "input {input}");
        }
    }

    #[test]
    fn strings_escape_as_json_stringify() {
        let v = json!("a\"b\\c\u{0001}\u{001f}\n\t\u{007f}\u{2028}é😀");
        assert_eq!(
            canonical_json(&v).unwrap(),
            "\"a\\\"b\\\\c\\u0001\\u001f\\n\\t\u{007f}\u{2028}é😀\""
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+FF61 sorts after U+1F600 in code points but before it in UTF-16 code units.
        let v = json!({"\u{ff61}": 1, "😀": 2, "a": 3});
        assert_eq!(
            canonical_json(&v).unwrap(),
            "{\"a\":3,\"😀\":2,\"\u{ff61}\":1}"
        );
    }

    #[test]
    fn depth_limit_is_an_error_not_a_crash() {
        let mut v = json!(1);
        for _ in 0..MAX_DEPTH {
            v = json!([v]);
        }
        assert!(canonical_json(&v).is_ok());
        let v = json!([v]);
        assert_eq!(
            canonical_json(&v),
            Err(CanonicalError::TooDeep { limit: MAX_DEPTH })
        );
    }

    #[test]
    fn hash_matches_the_streamed_text() {
        let args = json!({"q": "weather", "deep": {"z": [1, 2.5, null], "a": true}});
        let text = canonical_json(&args).unwrap();
        let mut h = Sha256::new();
        h.update(b"search\n");
        h.update(text.as_bytes());
        let want = hex::encode(h.finalize());
        assert_eq!(call_hash("search", &args).unwrap(), want);
    }
}
