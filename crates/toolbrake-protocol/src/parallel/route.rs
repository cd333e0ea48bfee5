//! The route of one input line: its `event`, `session` and `id`, read without a JSON
//! parser where the line allows it, else by serde (both give the same route).

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;

/// What routing needs of an event: its kind, session and call id, when they are strings
/// (borrowed from the line unless they hold escapes).
#[derive(Default)]
pub(super) struct Route<'a> {
    pub(super) event: Option<Cow<'a, str>>,
    pub(super) session: Option<Cow<'a, str>>,
    pub(super) id: Option<Cow<'a, str>>,
}

/// A field's value when it is a string; any other value is skipped.
struct MaybeStr<'a>(Option<Cow<'a, str>>);

impl<'de> serde::Deserialize<'de> for MaybeStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MaybeStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_unit<E>(self) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<MaybeStr<'de>, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<MaybeStr<'de>, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> serde::Deserialize<'de> for Route<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Route<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an event object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Route<'de>, A::Error> {
                // Like serde_json's `Value`, the last of duplicate keys wins.
                let mut r = Route::default();
                // Keys are borrowed from the line (serde's own `Cow<str>` would copy each).
                while let Some(key) = a.next_key::<MaybeStr>()? {
                    match key.0.as_deref().unwrap_or_default() {
                        "event" => r.event = a.next_value::<MaybeStr>()?.0,
                        "session" => r.session = a.next_value::<MaybeStr>()?.0,
                        "id" => r.id = a.next_value::<MaybeStr>()?.0,
                        _ => {
                            a.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
}

impl<'a> Route<'a> {
    /// The route of a line, read without a JSON parser where it can be: the line's
    /// top-level keys, the string values of `event`, `session` and `id`, and every other
    /// value skipped by its quotes and brackets (the routing read of every line was a fifth
    /// of a two-core replay, on its serial thread, when serde read and checked every value
    /// it skipped). A key or a routed value holding an escape, or a shape this reading does
    /// not expect, goes to the full read. On a well-formed line both give the same route
    /// (the last of duplicate keys wins); on a line that is not JSON the quick reading may
    /// give a route where the full one gives none, which is harmless: a line in error
    /// touches no session, so any shard may answer it.
    pub(super) fn of_line(line: &'a [u8]) -> Route<'a> {
        Route::scan(line)
            .unwrap_or_else(|| serde_json::from_slice::<Route>(line).unwrap_or_default())
    }

    /// The quick reading of [`Route::of_line`]: `None` when it cannot settle the route.
    /// At the first value it would skip, it looks ahead once: when the rest of the line
    /// cannot hold a routed key (see [`may_name_a_route_key`]), no later key can change the
    /// route, and the route is settled there without walking the rest (a call's arguments
    /// and a result's output are two thirds of the input's bytes, and walking them was most
    /// of the routing read).
    pub(super) fn scan(line: &'a [u8]) -> Option<Route<'a>> {
        let mut r = Route::default();
        let mut looked_ahead = false;
        let mut i = skip_blanks(line, 0);
        if line.get(i) != Some(&b'{') {
            return None;
        }
        i = skip_blanks(line, i + 1);
        if line.get(i) == Some(&b'}') {
            return Some(r);
        }
        loop {
            if line.get(i) != Some(&b'"') {
                return None;
            }
            let (key, after) = plain_string(line, i + 1)?;
            i = skip_blanks(line, after);
            if line.get(i) != Some(&b':') {
                return None;
            }
            i = skip_blanks(line, i + 1);
            let slot = match key {
                b"event" => Some(&mut r.event),
                b"session" => Some(&mut r.session),
                b"id" => Some(&mut r.id),
                _ => None,
            };
            i = match slot {
                Some(slot) if line.get(i) == Some(&b'"') => {
                    let (value, after) = plain_string(line, i + 1)?;
                    *slot = Some(Cow::Borrowed(std::str::from_utf8(value).ok()?));
                    after
                }
                Some(slot) => {
                    // Like the full read: a value that is not a string routes nothing.
                    *slot = None;
                    skip_value(line, i)?
                }
                None => {
                    let first = !std::mem::replace(&mut looked_ahead, true);
                    if first && !may_name_a_route_key(&line[i..]) {
                        return Some(r);
                    }
                    skip_value(line, i)?
                }
            };
            i = skip_blanks(line, i);
            match line.get(i) {
                Some(b',') => i = skip_blanks(line, i + 1),
                Some(b'}') => return Some(r),
                _ => return None,
            }
        }
    }

    pub(super) fn of_value(v: &Value) -> Route<'_> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(Cow::Borrowed);
        Route {
            event: s("event"),
            session: s("session"),
            id: s("id"),
        }
    }
}

/// Whether `rest` of a line may hold a key `event`, `session` or `id`: it holds one of them
/// in quotes, or a `\u` escape (the only escape that can spell a letter of them: a key
/// written `"\u0069d"` is `id`). `false` is certain, `true` may be wrong (a value that
/// spells one, an escaped backslash before a `u`): then the line is walked to its end.
fn may_name_a_route_key(rest: &[u8]) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    static NEEDLES: LazyLock<[Finder<'static>; 4]> = LazyLock::new(|| {
        [
            Finder::new(b"\"id\""),
            Finder::new(b"\"session\""),
            Finder::new(b"\"event\""),
            Finder::new(b"\\u"),
        ]
    });
    NEEDLES.iter().any(|f| f.find(rest).is_some())
}

/// The index of the first byte from `i` that is not JSON whitespace.
fn skip_blanks(line: &[u8], mut i: usize) -> usize {
    while matches!(line.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// A string's bytes from `start` (just after its opening quote) to its closing quote, and
/// the index after that quote; `None` when it holds an escape or does not close.
fn plain_string(line: &[u8], start: usize) -> Option<(&[u8], usize)> {
    let end = start + memchr::memchr2(b'"', b'\\', line.get(start..)?)?;
    (line[end] == b'"').then(|| (&line[start..end], end + 1))
}

/// The index after a string whose opening quote is just before `i`.
fn skip_string(line: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let at = i + memchr::memchr2(b'"', b'\\', line.get(i..)?)?;
        if line[at] == b'"' {
            return Some(at + 1);
        }
        // An escape: its next byte is never the string's end.
        i = at + 2;
    }
}

/// The index after the value that starts at `i`: a string to its closing quote, an object
/// or array to its closing bracket (strings inside skipped whole), anything else to the
/// next comma, closing bracket or blank.
fn skip_value(line: &[u8], mut i: usize) -> Option<usize> {
    match line.get(i)? {
        b'"' => skip_string(line, i + 1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match line.get(i)? {
                    b'"' => {
                        i = skip_string(line, i + 1)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while !matches!(
                line.get(i),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                i += 1;
            }
            Some(i)
        }
    }
}
