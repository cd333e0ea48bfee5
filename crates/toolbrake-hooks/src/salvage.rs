//! Reading a payload part by part, when the plain parse cannot take it whole or should
//! not.
//!
//! Cannot: well-formed JSON text with parts no value can hold (a string with a lone
//! surrogate escape, `"\ud800"`, which Node's `JSON.stringify` writes, or arguments nested
//! deeper than the parser's 128 levels). A model can put either into its own arguments,
//! so refusing to read them would let it loop without ever being counted. Each such part
//! is replaced by a string naming a hash of its bytes: identical calls stay identical, and
//! the engines count them like any other (the MCP proxy does the same with such calls).
//!
//! Should not: a payload over 1 MiB. A JSON value takes about ten times its text in
//! memory when it is many small keys or items, so a large payload is read from its text
//! without building it whole: strings and numbers as values (a string over 1 MiB cut to its
//! head and a hash of the whole), objects and arrays member by member, and at most 1 MiB of
//! the text in all read into objects and arrays. An object or array with more than 1,024
//! members, or met once that is spent, is judged by its head and a hash of its text. A
//! hook then holds about twice its payload (the text, and one long string at a time),
//! and a call is still judged by what identifies it: two that differ anywhere stay
//! different.

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use toolbrake_core::breaker::FpId;

/// How deep the reading goes before a part that still fails is hashed whole.
const MAX_LEVELS: usize = 16;

/// A string longer than this is judged by its head and a hash of the whole.
pub(crate) const LONG_TEXT: usize = 1 << 20;

/// How much of a long string's head is kept.
const HEAD: usize = 256 << 10;

/// A payload up to this long is parsed whole (when it parses); a longer one is read part
/// by part.
pub(crate) const WHOLE: usize = LONG_TEXT;

/// How much of a payload's text, at most, is read into objects and arrays (their members'
/// keys count, and each member [`MEMBER_COST`] more).
const STRUCTURE_BUDGET: usize = LONG_TEXT;

/// What a member of an object or array read part by part costs, besides its key.
const MEMBER_COST: usize = 16;

/// An object or array read part by part with more members than this is judged by its head
/// and a hash of its text; past this many top-level fields, the rest are not read.
pub(crate) const MAX_MEMBERS: usize = 1024;

/// An object or array whose text is at most this long is parsed whole.
const SMALL: usize = 64 << 10;

/// How much of the text of an object or array judged by its hash is kept.
const CONTAINER_HEAD: usize = 4 << 10;

/// A payload read part by part.
#[derive(Debug)]
pub(crate) struct Reading {
    /// The payload, each part it could not or should not hold replaced.
    pub(crate) value: Value,
    /// Parts that cannot be read as values (replaced by `unreadable JSON, hash …`).
    pub(crate) unreadable: usize,
    /// Top-level fields past [`MAX_MEMBERS`], not read.
    pub(crate) fields_left: usize,
}

/// The payload, read part by part; `None` when the text is not JSON as it stands (or its
/// top level is not an object).
pub(crate) fn read(text: &str) -> Option<Reading> {
    // The whole text, validated without building anything.
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    let Split {
        parts: Parts::Object(members),
        more,
    } = split(raw.get(), MAX_MEMBERS)?
    else {
        return None;
    };
    let mut r = Reader {
        budget: STRUCTURE_BUDGET,
        unreadable: 0,
    };
    let mut map = Map::new();
    for (k, v) in members {
        r.spend(k.len() + MEMBER_COST);
        let v = r.node(v.get(), 1);
        map.insert(k, v);
    }
    Some(Reading {
        value: Value::Object(map),
        unreadable: r.unreadable,
        fields_left: more,
    })
}

struct Reader {
    budget: usize,
    unreadable: usize,
}

impl Reader {
    fn spend(&mut self, n: usize) {
        self.budget = self.budget.saturating_sub(n);
    }

    /// One part, at `level` below the top: a scalar as its value (a long string cut); an
    /// object or array whole when it is small, parses and the budget allows, else member
    /// by member, else by its hash.
    fn node(&mut self, raw: &str, level: usize) -> Value {
        if !raw.starts_with(['{', '[']) {
            return match serde_json::from_str::<Value>(raw) {
                Ok(mut v) => {
                    cut_long_strings(&mut v);
                    v
                }
                Err(_) => self.unreadable(raw),
            };
        }
        let mut failed = false;
        if raw.len() <= SMALL {
            if raw.len() > self.budget {
                return self.summary(raw);
            }
            match serde_json::from_str::<Value>(raw) {
                Ok(v) if level + depth(&v) < toolbrake_core::canonical::MAX_DEPTH => {
                    self.spend(raw.len());
                    return v;
                }
                _ => failed = true,
            }
        }
        if level >= MAX_LEVELS {
            return if failed {
                self.unreadable(raw)
            } else {
                self.summary(raw)
            };
        }
        let Some(Split { parts, more }) = split(raw, MAX_MEMBERS) else {
            return self.unreadable(raw);
        };
        let cost = match &parts {
            Parts::Object(m) => m.iter().map(|(k, _)| k.len() + MEMBER_COST).sum(),
            Parts::Array(a) => a.len() * MEMBER_COST,
        };
        if more > 0 || cost > self.budget {
            return self.summary(raw);
        }
        self.spend(cost);
        match parts {
            Parts::Object(members) => {
                let mut map = Map::new();
                for (k, v) in members {
                    let v = self.node(v.get(), level + 1);
                    map.insert(k, v);
                }
                Value::Object(map)
            }
            Parts::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|v| self.node(v.get(), level + 1))
                    .collect(),
            ),
        }
    }

    /// A part no value can hold: a string naming a hash of its bytes.
    fn unreadable(&mut self, raw: &str) -> Value {
        self.unreadable += 1;
        Value::String(format!("unreadable JSON, hash {:016x}", FpId::of(raw).0))
    }

    /// An object or array too large to hold: its head, its length and a hash of its text.
    fn summary(&self, raw: &str) -> Value {
        Value::String(format!(
            "{}… [{} bytes of JSON in all, hash {:016x}]",
            &raw[..floor_boundary(raw, CONTAINER_HEAD)],
            raw.len(),
            FpId::of(raw).0
        ))
    }
}

/// The largest char boundary of `s` at or below `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut end = at.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// Cuts every string of `v` longer than [`LONG_TEXT`] bytes to its first [`HEAD`] bytes,
/// followed by its length and a hash of all of it: a 50 MB command or output is judged by
/// what identifies it (two that differ anywhere stay different), and the engines' work on
/// it (canonical text, fingerprints, output digests) is bounded, so a hook holds about
/// twice its payload rather than nine times. Returns how many were cut.
pub(crate) fn cut_long_strings(v: &mut Value) -> usize {
    match v {
        Value::String(s) if s.len() > LONG_TEXT => {
            let cut = format!(
                "{}… [{} bytes in all, hash {:016x}]",
                &s[..floor_boundary(s, HEAD)],
                s.len(),
                FpId::of(s).0
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

/// An object's or array's first members, as raw text borrowed from the payload, in order.
enum Parts<'a> {
    Object(Vec<(String, &'a RawValue)>),
    Array(Vec<&'a RawValue>),
}

/// [`Parts`], and how many members came after the ones kept.
struct Split<'a> {
    parts: Parts<'a>,
    more: usize,
}

/// The first `cap` members of the object or array `raw`; `None` when it is neither, or a
/// key cannot be read.
fn split(raw: &str, cap: usize) -> Option<Split<'_>> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let s = SplitSeed(cap).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(s)
}

struct SplitSeed(usize);

impl<'de> DeserializeSeed<'de> for SplitSeed {
    type Value = Split<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Split<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SplitSeed {
    type Value = Split<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object or array")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Split<'de>, A::Error> {
        let mut members = Vec::new();
        let mut more = 0;
        loop {
            if members.len() < self.0 {
                match a.next_entry::<String, &'de RawValue>()? {
                    Some(m) => members.push(m),
                    None => break,
                }
            } else if a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                more += 1;
            } else {
                break;
            }
        }
        Ok(Split {
            parts: Parts::Object(members),
            more,
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Split<'de>, A::Error> {
        let mut items = Vec::new();
        let mut more = 0;
        loop {
            if items.len() < self.0 {
                match a.next_element::<&'de RawValue>()? {
                    Some(v) => items.push(v),
                    None => break,
                }
            } else if a.next_element::<IgnoredAny>()?.is_some() {
                more += 1;
            } else {
                break;
            }
        }
        Ok(Split {
            parts: Parts::Array(items),
            more,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> (Value, usize) {
        let r = read(text).unwrap();
        (r.value, r.unreadable)
    }

    #[test]
    fn unreadable_parts_become_their_hash_and_the_rest_stays() {
        let text = r#"{"session_id":"s","tool_input":{"command":"ls","description":"\ud800"}}"#;
        let (v, n) = value(text);
        assert_eq!(n, 1);
        assert_eq!(v["session_id"], "s");
        assert_eq!(v["tool_input"]["command"], "ls");
        let h = v["tool_input"]["description"].as_str().unwrap();
        assert!(h.starts_with("unreadable JSON, hash "), "{h}");
        // The same bytes, the same hash; other bytes, another.
        assert_eq!(value(text).0, v);
        let other = text.replace("ud800", "ud801");
        assert_ne!(value(&other).0, v);

        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let text = format!(r#"{{"session_id":"s","tool_input":{{"x":{deep},"y":1}}}}"#);
        let (v, n) = value(&text);
        assert_eq!(n, 1);
        assert_eq!(v["tool_input"]["y"], 1);
        assert!(depth(&v) < toolbrake_core::canonical::MAX_DEPTH);

        assert!(read("{\"a\":").is_none());
        assert!(read("[1]").is_none());
        assert!(read("{\"a\":1} x").is_none());
    }

    #[test]
    fn a_large_payload_reads_as_the_whole_parse_does_when_it_has_few_parts() {
        let long = "x".repeat(3 * LONG_TEXT);
        let whole = serde_json::json!({"session_id": "s", "tool_input": {"file_path": "/a",
            "content": long, "edits": [{"old": "a", "new": [1, 2.5, null, true]}]},
            "n": -3, "f": 1e300});
        let text = whole.to_string();
        let mut expected = whole.clone();
        cut_long_strings(&mut expected);
        let r = read(&text).unwrap();
        assert_eq!(r.value, expected);
        assert_eq!((r.unreadable, r.fields_left), (0, 0));
    }

    #[test]
    fn many_members_are_judged_by_their_head_and_a_hash() {
        let keys: Map<String, Value> = (0..200_000)
            .map(|i| (format!("k{i}"), Value::from("v")))
            .collect();
        let text = serde_json::json!({"session_id": "s", "tool_input": keys}).to_string();
        let r = read(&text).unwrap();
        assert_eq!(r.value["session_id"], "s");
        let s = r.value["tool_input"].as_str().unwrap();
        assert!(s.len() < CONTAINER_HEAD + 100, "{}", s.len());
        assert!(s.starts_with("{\"k0\":\"v\""), "{}", &s[..40]);
        assert!(s.contains(" bytes of JSON in all, hash "), "{s}");
        // The same text, the same value; one byte different at the end, another.
        assert_eq!(read(&text).unwrap().value, r.value);
        let other = text.replacen("\"k199999\":\"v\"", "\"k199999\":\"w\"", 1);
        assert_ne!(read(&other).unwrap().value, r.value);

        // Many small parts: read until the budget is spent, then by their hash.
        let items: Vec<Value> = (0..20_000)
            .map(|i| serde_json::json!({"i": i, "pad": "p".repeat(100)}))
            .collect();
        let chunks: Vec<Value> = items
            .chunks(1000)
            .map(|c| Value::from(c.to_vec()))
            .collect();
        let text = serde_json::json!({"session_id": "s", "tool_input": {"c": chunks}}).to_string();
        let r = read(&text).unwrap();
        let c = r.value["tool_input"]["c"].as_array().unwrap();
        assert_eq!(c.len(), 20);
        assert!(c[0].is_array() && c[19].is_string());

        // Top-level fields past the bound are not read.
        let fields: Map<String, Value> = (0..MAX_MEMBERS + 5)
            .map(|i| (format!("f{i:05}"), Value::from(i)))
            .collect();
        let text = serde_json::to_string(&fields).unwrap();
        let r = read(&text).unwrap();
        assert_eq!(r.fields_left, 5);
        assert_eq!(r.value.as_object().unwrap().len(), MAX_MEMBERS);
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
            FpId::of(&long).0
        )));
        assert_eq!(v["c"], "short");
        let mut other = serde_json::json!({"a": {"b": [format!("{long}x")]}, "c": "short"});
        cut_long_strings(&mut other);
        assert_ne!(other, v);
    }
}
