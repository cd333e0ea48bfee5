//! Payloads that are well-formed JSON text but cannot be read as values: a string with a
//! lone surrogate escape (`"\ud800"`, which Node's `JSON.stringify` writes) or arguments
//! nested deeper than the parser's 128 levels. A model can put either into its own
//! arguments, so refusing to read them would let it loop without ever being counted.
//! Instead the payload is read as far down as it can be, and each part that cannot be is
//! replaced by a string naming a hash of its bytes: identical calls stay identical, and
//! the engines count them like any other (the MCP proxy does the same with such calls).

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// How deep the reading goes before a part that still fails is hashed whole.
const MAX_LEVELS: usize = 16;

/// The payload with every unreadable part replaced by its hash, and how many parts were;
/// `None` when the text is not JSON at all (or its top level is not an object).
pub(crate) fn salvage(text: &str) -> Option<(Value, usize)> {
    let mut replaced = 0;
    let top: Vec<(String, Box<RawValue>)> = serde_json::from_str::<RawObject>(text).ok()?.0;
    let mut map = Map::new();
    for (k, raw) in top {
        map.insert(k, read(raw.get(), 1, &mut replaced));
    }
    Some((Value::Object(map), replaced))
}

/// One part: as a value when it reads whole (and is shallow enough to judge), else its
/// object's or array's members one by one, else its hash.
fn read(raw: &str, level: usize, replaced: &mut usize) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(raw) {
        if level + depth(&v) < toolbrake_core::canonical::MAX_DEPTH {
            return v;
        }
    }
    if level < MAX_LEVELS {
        if let Ok(RawObject(members)) = serde_json::from_str::<RawObject>(raw) {
            let mut map = Map::new();
            for (k, v) in members {
                map.insert(k, read(v.get(), level + 1, replaced));
            }
            return Value::Object(map);
        }
        if let Ok(items) = serde_json::from_str::<Vec<Box<RawValue>>>(raw) {
            return Value::Array(
                items
                    .iter()
                    .map(|v| read(v.get(), level + 1, replaced))
                    .collect(),
            );
        }
    }
    *replaced += 1;
    Value::String(format!(
        "unreadable JSON, hash {:016x}",
        toolbrake_core::breaker::FpId::of(raw).0
    ))
}

/// A string longer than this is judged by its head and a hash of the whole.
pub(crate) const LONG_TEXT: usize = 1 << 20;

/// How much of a long string's head is kept.
const HEAD: usize = 256 << 10;

/// Cuts every string of `v` longer than [`LONG_TEXT`] bytes to its first [`HEAD`] bytes,
/// followed by its length and a hash of all of it: a 50 MB command or output is judged by
/// what identifies it (two that differ anywhere stay different), and the engines' work on
/// it (canonical text, fingerprints, output digests) is bounded, so a hook holds about
/// twice its payload rather than nine times. Returns how many were cut.
pub(crate) fn cut_long_strings(v: &mut Value) -> usize {
    match v {
        Value::String(s) if s.len() > LONG_TEXT => {
            let mut end = HEAD;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            let cut = format!(
                "{}… [{} bytes in all, hash {:016x}]",
                &s[..end],
                s.len(),
                toolbrake_core::breaker::FpId::of(s).0
            );
            *s = cut;
            1
        }
        Value::Array(a) => a.iter_mut().map(cut_long_strings).sum(),
        Value::Object(m) => m.values_mut().map(cut_long_strings).sum(),
        _ => 0,
    }
}

/// How many levels of objects and arrays a value holds (a scalar: 0).
fn depth(v: &Value) -> usize {
    match v {
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// An object's members as raw text, in order.
struct RawObject(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for RawObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawObject;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<RawObject, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = a.next_entry::<String, Box<RawValue>>()? {
                    members.push(member);
                }
                Ok(RawObject(members))
            }
        }
        d.deserialize_map(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_parts_become_their_hash_and_the_rest_stays() {
        let text = r#"{"session_id":"s","tool_input":{"command":"ls","description":"\ud800"}}"#;
        let (v, n) = salvage(text).unwrap();
        assert_eq!(n, 1);
        assert_eq!(v["session_id"], "s");
        assert_eq!(v["tool_input"]["command"], "ls");
        let h = v["tool_input"]["description"].as_str().unwrap();
        assert!(h.starts_with("unreadable JSON, hash "), "{h}");
        // The same bytes, the same hash; other bytes, another.
        assert_eq!(salvage(text).unwrap().0, v);
        let other = text.replace("ud800", "ud801");
        assert_ne!(salvage(&other).unwrap().0, v);

        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let text = format!(r#"{{"session_id":"s","tool_input":{{"x":{deep},"y":1}}}}"#);
        let (v, n) = salvage(&text).unwrap();
        assert_eq!(n, 1);
        assert_eq!(v["tool_input"]["y"], 1);
        assert!(depth(&v) < toolbrake_core::canonical::MAX_DEPTH);

        assert!(salvage("{\"a\":").is_none());
        assert!(salvage("[1]").is_none());
    }

    #[test]
    fn long_strings_keep_their_head_and_a_hash_of_the_whole() {
        let long = "é".repeat(LONG_TEXT);
        let mut v = serde_json::json!({"a": {"b": [long.clone()]}, "c": "short"});
        assert_eq!(cut_long_strings(&mut v), 1);
        let cut = v["a"]["b"][0].as_str().unwrap();
        assert!(cut.len() < HEAD + 100 && long.starts_with(&cut[..HEAD - 2]));
        assert!(cut.ends_with(&format!(
            "[{} bytes in all, hash {:016x}]",
            long.len(),
            toolbrake_core::breaker::FpId::of(&long).0
        )));
        assert_eq!(v["c"], "short");
        let mut other = serde_json::json!({"a": {"b": [format!("{long}x")]}, "c": "short"});
        cut_long_strings(&mut other);
        assert_ne!(other, v);
    }
}
