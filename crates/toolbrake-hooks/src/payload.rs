//! A hook's stdin into the JSON value its host meant. The usual payload (UTF-8 JSON, at
//! most 1 MiB) is parsed whole, and nothing else runs. Otherwise it is read part by part
//! (`salvage`: parts no value can hold, large payloads in bounded memory) and, when it is
//! not JSON as it stands, leniently first (`lenient`: encodings and near-JSON shapes). Only
//! a payload that still cannot be read is refused, and the failure policy applies.

use crate::{lenient, salvage, PayloadError};
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A payload read, with what the user is told about how.
pub(crate) struct Payload {
    pub(crate) value: Value,
    pub(crate) warnings: Vec<String>,
}

/// Reads a hook's stdin.
pub(crate) fn read(input: &[u8]) -> Result<Payload, PayloadError> {
    if input.len() <= salvage::WHOLE {
        if let Some(value) = std::str::from_utf8(input)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
        {
            return Ok(Payload {
                value,
                warnings: Vec::new(),
            });
        }
    }
    let mut fixes = lenient::Fixes::default();
    let text = lenient::decode(input, &mut fixes);
    if let Some(r) = salvage::read(&text) {
        return Ok(with_warnings(r, fixes));
    }
    // Why it is not JSON as it stands.
    let strict = serde_json::from_str::<Check>(&text).err();
    let Some(strict) = strict else {
        // JSON, but not an object: no host sends it; it names no session.
        return Ok(Payload {
            value: Value::Null,
            warnings: Vec::new(),
        });
    };
    let fixed = lenient::normalise(&text, &mut fixes);
    drop(text);
    if let Some(r) = salvage::read(&fixed) {
        return Ok(with_warnings(r, fixes));
    }
    Err(if fixes.bad_bytes > 0 {
        PayloadError::NotUtf8
    } else if strict.to_string().starts_with("recursion limit exceeded") {
        PayloadError::TooDeep
    } else {
        PayloadError::NotJson {
            line: strict.line(),
            column: strict.column(),
        }
    })
}

fn with_warnings(r: salvage::Reading, fixes: lenient::Fixes) -> Payload {
    let mut warnings = Vec::new();
    if fixes.any() {
        warnings.push(format!(
            "the hook payload is not strict JSON ({}): read leniently, and judged like any other call",
            fixes.describe()
        ));
    }
    if r.unreadable > 0 {
        warnings.push(format!(
            "{} part(s) of the hook payload cannot be read as JSON values (a lone surrogate escape, or nesting deeper than 128 levels): judged by a hash of their bytes",
            r.unreadable
        ));
    }
    if r.fields_left > 0 {
        warnings.push(format!(
            "the hook payload has more than {} top-level fields: the {} after them were not read",
            salvage::MAX_MEMBERS,
            r.fields_left
        ));
    }
    Payload {
        value: r.value,
        warnings,
    }
}

/// Any JSON value, checked and dropped as it is read: the parser's own errors (its
/// recursion limit, a lone surrogate) without building the value.
struct Check;

impl<'de> serde::Deserialize<'de> for Check {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Check, D::Error> {
        d.deserialize_any(Check)
    }
}

impl<'de> Visitor<'de> for Check {
    type Value = Check;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_str<E>(self, _: &str) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_unit<E>(self) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Check, A::Error> {
        while a.next_element::<Check>()?.is_some() {}
        Ok(Check)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Check, A::Error> {
        while a.next_key::<std::borrow::Cow<'de, str>>()?.is_some() {
            a.next_value::<Check>()?;
        }
        Ok(Check)
    }
}
