//! Output memory: what a call's outcome said, reduced to a short digest that ignores what
//! changes on every run of the same thing.
//!
//! Both engines use it to tell a loop from progress (see `docs/decisions.md`, "Progress"):
//! an identical call whose previous identical call returned a *different* outcome brought
//! new information, one that returned the same outcome did not. Only the digest is kept in
//! session state, never the output text.
//!
//! Normalisation masks, so that a true loop still compares equal:
//! - numbers of three digits or more (`line 11316:` counters, pids, byte counts, years);
//! - hexadecimal addresses (`0x7f3a…`) and hex runs of eight characters or more that carry
//!   a digit (commit ids, UUID parts, object ids);
//! - clock times (`03:04:05.123`) and durations (`0.03s`, `12 ms`, `1.5 seconds`);
//! - temporary paths (`/tmp/…`, `/var/folders/…`, Python's `tmpab12cd_x` names);
//! - terminal colour escapes, carriage returns and trailing blanks.
//!
//! Small numbers stay: `5 failed, 3 passed` and `4 failed, 4 passed` are different results.
//!
//! The outcome's fields come first in what is hashed (exit code, HTTP status, error and
//! timeout flags): a run that now passes is a new result even when its text is the same, so
//! an exit status that changes restarts the unchanged track's count (docs/decisions.md,
//! "Unchanged: a rerun that may differ runs").

use crate::outcome::Outcome;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::io::Write as _;

/// Output text beyond this many bytes does not enter the digest (bounds the work a hook
/// does on a huge tool output; a loop's outputs already differ or agree by then).
pub const MAX_DIGEST_BYTES: usize = 64 * 1024;

/// The digest of one normalised outcome: 8 bytes of SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OutputDigest(pub u64);

/// What a stopped call would have brought, judged by what it returned when it ran anyway (a
/// recorded run replayed, an ask the operator approved): *waste* when its output repeated
/// what the same call returned last, *new information* when it differed or nothing came
/// before. `None` when its output is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// Its output repeated the last identical call's: stopping it lost nothing.
    Waste,
    /// Its output was new: stopping it stopped progress.
    NewInformation,
}

impl Stopped {
    /// `waste` or `new_information`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stopped::Waste => "waste",
            Stopped::NewInformation => "new_information",
        }
    }
}

/// Judges a stopped call's output `now` against what the same call returned `before`: the
/// one rule the replay report and the live counters share.
///
/// ```
/// use toolbrake_core::progress::{judge_stopped, OutputDigest, Stopped};
/// let d = OutputDigest(7);
/// assert_eq!(judge_stopped(Some(d), Some(d)), Some(Stopped::Waste));
/// assert_eq!(judge_stopped(Some(d), None), Some(Stopped::NewInformation));
/// assert_eq!(judge_stopped(None, Some(d)), None);
/// ```
pub fn judge_stopped(now: Option<OutputDigest>, before: Option<OutputDigest>) -> Option<Stopped> {
    match (now?, before) {
        (now, Some(before)) if now == before => Some(Stopped::Waste),
        _ => Some(Stopped::NewInformation),
    }
}

/// An outcome's [`digest`], made once for an outcome recorded more than once: `toolbrake
/// tune` records every outcome of a history under each setting of its sweep, and the digest
/// (normalising the text, hashing it) was a tenth of that work. It is made only from the
/// outcome ([`Digested::of`]); given to [`crate::Engine::post_digested`] with another
/// outcome than its own, it would stand for that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digested(Option<OutputDigest>);

impl Digested {
    /// The digest of `outcome`.
    pub fn of(outcome: &Outcome) -> Digested {
        Digested(digest(outcome))
    }

    /// The digest ([`digest`] of the outcome it was made of).
    pub fn get(self) -> Option<OutputDigest> {
        self.0
    }
}

/// The digest of what an outcome said: its structured fields and its normalised text.
/// `None` when the outcome carries nothing to compare (no text, no field): an unknown
/// outcome is never evidence of progress.
///
/// ```
/// use toolbrake_core::progress::digest;
/// use toolbrake_core::Outcome;
/// let a = digest(&Outcome::success("bash: line 11316: cd: fastjson/: No such file or directory"));
/// let b = digest(&Outcome::success("bash: line 11317: cd: fastjson/: No such file or directory"));
/// assert_eq!(a, b);
/// assert_ne!(digest(&Outcome::success("5 failed")), digest(&Outcome::success("4 failed")));
/// // The exit status is part of the result: the same text, now passing, is new.
/// let failing = Outcome { exit_code: Some(1), text: Some("1 passed".into()), ..Outcome::default() };
/// assert_ne!(digest(&failing), digest(&Outcome::success("1 passed")));
/// assert_eq!(digest(&Outcome::default()), None);
/// ```
pub fn digest(o: &Outcome) -> Option<OutputDigest> {
    if o.is_aborted() {
        return None;
    }
    if o.text.is_none() && !o.has_fields() {
        return None;
    }
    // The fields line, then the normalised text, in one buffer hashed once.
    let text = o.text.as_deref().map(|text| {
        let mut end = text.len().min(MAX_DIGEST_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..end]
    });
    let mut buf = Vec::with_capacity(64 + text.map_or(0, str::len));
    fields_line(o, &mut buf);
    if let Some(text) = text {
        normalise_into(text, &mut buf);
    }
    let mut h = Sha256::new();
    h.update(&buf);
    let d = h.finalize();
    Some(OutputDigest(u64::from_be_bytes(
        d[..8].try_into().expect("8 bytes"),
    )))
}

/// The outcome's fields as the digest's first line: each field's `Debug` form, joined by
/// `|`. Written by hand when no field holds a string (nearly always): through `writeln!`
/// the line took a thousand instructions a result.
fn fields_line(o: &Outcome, buf: &mut Vec<u8>) {
    if o.signal.is_some() || o.error_code.is_some() {
        fields_line_debug(o, buf);
        return;
    }
    let flag = |b: Option<bool>| -> &'static [u8] {
        if b.unwrap_or(false) {
            b"true"
        } else {
            b"false"
        }
    };
    let mut int = itoa::Buffer::new();
    buf.extend_from_slice(flag(o.is_error));
    buf.push(b'|');
    buf.extend_from_slice(int.format(o.exit_code.unwrap_or(0)).as_bytes());
    buf.push(b'|');
    match o.status_code {
        Some(code) => {
            buf.extend_from_slice(b"Some(");
            buf.extend_from_slice(int.format(code).as_bytes());
            buf.push(b')');
        }
        None => buf.extend_from_slice(b"None"),
    }
    buf.push(b'|');
    buf.extend_from_slice(flag(o.timed_out));
    // The signal: none here.
    buf.extend_from_slice(b"|None|");
    buf.extend_from_slice(flag(o.sandbox_denied));
    buf.push(b'|');
    buf.extend_from_slice(flag(o.background));
    // The error code: none here.
    buf.extend_from_slice(b"|None\n");
}

/// The fields line through `Debug` (what [`fields_line`] writes by hand otherwise).
fn fields_line_debug(o: &Outcome, buf: &mut Vec<u8>) {
    writeln!(
        buf,
        "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        o.is_error.unwrap_or(false),
        o.exit_code.unwrap_or(0),
        o.status_code,
        o.timed_out.unwrap_or(false),
        o.signal,
        o.sandbox_denied.unwrap_or(false),
        o.background.unwrap_or(false),
        o.error_code
    )
    .expect("writing to a Vec cannot fail");
}

/// Units that make a number a duration (`12ms`, `0.5 s`, `3 seconds`).
const UNITS: &[&str] = &[
    "ns", "us", "µs", "ms", "s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute",
    "minutes", "h", "hr", "hrs", "hour", "hours",
];

/// Temporary-file prefixes whose next path segment is masked.
const TEMP_PREFIXES: &[&str] = &[
    "/tmp/",
    "/var/tmp/",
    "/var/folders/",
    "/private/var/folders/",
];

/// Byte classes for the normaliser, looked up once per byte.
const WORD: u8 = 1;
const DIGIT: u8 = 2;
const HEX: u8 = 4;
const ALPHA: u8 = 8;
/// A byte that starts its own case (`ESC`, `\r`, `\n`, `/`).
const SPECIAL: u8 = 16;

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let mut k = 0;
        if b.is_ascii_alphanumeric() || b == b'_' {
            k |= WORD;
        }
        if b.is_ascii_digit() {
            k |= DIGIT;
        }
        if b.is_ascii_hexdigit() {
            k |= HEX;
        }
        if b.is_ascii_alphabetic() {
            k |= ALPHA;
        }
        if matches!(b, 0x1b | b'\r' | b'\n' | b'/') {
            k |= SPECIAL;
        }
        t[i] = k;
        i += 1;
    }
    t
};

fn is_word(b: u8) -> bool {
    CLASS[b as usize] & WORD != 0
}

fn digits_at(b: &[u8], i: usize) -> usize {
    b[i..].iter().take_while(|c| c.is_ascii_digit()).count()
}

/// The length of a duration unit at `i` (after an optional single space), ending at a
/// word boundary; 0 when there is none.
fn unit_at(s: &str, i: usize) -> usize {
    let b = s.as_bytes();
    let start = if b.get(i) == Some(&b' ') { i + 1 } else { i };
    let rest = &s[start.min(s.len())..];
    let word_len = rest
        .char_indices()
        .find(|(_, c)| !(c.is_alphabetic()))
        .map_or(rest.len(), |(k, _)| k);
    if word_len == 0 || !UNITS.contains(&&rest[..word_len]) {
        return 0;
    }
    // A one-letter unit only when attached (`3s`, `5m`): `5 m` is more likely a word.
    if start > i && rest[..word_len].chars().count() == 1 {
        return 0;
    }
    if rest.as_bytes().get(word_len).is_some_and(|c| is_word(*c)) {
        return 0;
    }
    start - i + word_len
}

/// Normalises output text for comparison (see the module documentation).
///
/// ```
/// use toolbrake_core::progress::normalise;
/// assert_eq!(normalise("took 0.031s at 12:01:59\r\n"), "took # at #");
/// assert_eq!(normalise("object at 0x7f3a2c\x1b[0m"), "object at 0x#");
/// assert_eq!(normalise("wrote /tmp/tmpk3j9x2/out.txt"), "wrote /tmp/#");
/// assert_eq!(normalise("5 failed, 12 passed"), "5 failed, 12 passed");
/// ```
pub fn normalise(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    normalise_into(text, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Drops trailing blanks of the line `out` ends with, never below `floor` (what was in the
/// buffer before the text).
fn trim_line_end(out: &mut Vec<u8>, floor: usize) {
    while out.len() > floor && matches!(out.last(), Some(b' ' | b'\t' | b'\x0b' | b'\x0c')) {
        out.pop();
    }
}

/// [`normalise`] appended to a byte buffer, in one pass (the digest hashes the bytes
/// directly); what the buffer held before is left as it was.
///
/// Most of a text passes unchanged: bytes are copied in runs, from `kept` (the first byte
/// not yet copied) up to a byte that is masked, dropped or ends a line, not word by word.
fn normalise_into(text: &str, out: &mut Vec<u8>) {
    let floor = out.len();
    let b = text.as_bytes();
    // The bytes `b[kept..i]` are to be copied as they are.
    let mut kept = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let k = CLASS[c as usize];
        if k & (WORD | SPECIAL) == 0 {
            // Blanks, punctuation, the bytes of non-ASCII characters: kept as they are.
            i += 1;
            continue;
        }
        match c {
            // A terminal escape, dropped.
            0x1b => {
                out.extend_from_slice(&b[kept..i]);
                i = escape_end(b, i);
                kept = i;
            }
            b'\r' | b'\n' => {
                out.extend_from_slice(&b[kept..i]);
                if c == b'\n' || b.get(i + 1) != Some(&b'\n') {
                    trim_line_end(out, floor);
                    out.push(b'\n');
                }
                i += 1;
                kept = i;
            }
            b'/' => {
                if let Some((prefix, end)) = temp_path_at(b, i) {
                    out.extend_from_slice(&b[kept..i + prefix]);
                    out.push(b'#');
                    i = end;
                    kept = i;
                } else {
                    i += 1;
                }
            }
            _ => {
                // A word byte.
                let word_start = i == 0 || !is_word(b[i - 1]);
                if word_start {
                    if let Some(n) = hex_address_at(b, i) {
                        out.extend_from_slice(&b[kept..i + 2]);
                        out.push(b'#');
                        i += 2 + n;
                        kept = i;
                        continue;
                    }
                    let w = word_at(b, i);
                    if w.masked {
                        out.extend_from_slice(&b[kept..i]);
                        out.push(b'#');
                        i += w.len;
                        kept = i;
                        continue;
                    }
                    if !w.digit {
                        // No number in it: kept as it is.
                        i += w.len;
                        continue;
                    }
                }
                if !c.is_ascii_digit() {
                    // Letters up to the next digit or the end of the word: kept.
                    i += b[i..]
                        .iter()
                        .take_while(|c| is_word(**c) && !c.is_ascii_digit())
                        .count();
                    continue;
                }
                let (end, masked) = number(text, i);
                if masked {
                    out.extend_from_slice(&b[kept..i]);
                    out.push(b'#');
                    kept = end;
                }
                i = end;
            }
        }
    }
    out.extend_from_slice(&b[kept.min(b.len())..]);
    trim_line_end(out, floor);
    while out.len() > floor && out.last() == Some(&b'\n') {
        out.pop();
        trim_line_end(out, floor);
    }
}

/// A temporary path at `i` (a `/`): the length of its prefix (`/tmp/`, …) and the index
/// where its masked segment ends (a blank, a quote or punctuation that closes a path); `None`
/// when no temporary prefix starts there.
fn temp_path_at(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let prefix = TEMP_PREFIXES
        .iter()
        .find(|p| b[i..].starts_with(p.as_bytes()))?
        .len();
    let mut end = i + prefix;
    while end < b.len() && !b[end].is_ascii_whitespace() && !b"'\"`:),;".contains(&b[end]) {
        end += 1;
    }
    Some((prefix, end))
}

/// The length of the hex digits of a hexadecimal address (`0x7f3a…`) starting at `i`, a
/// word's start; `None` when there is none.
fn hex_address_at(b: &[u8], i: usize) -> Option<usize> {
    if b[i] != b'0' || !matches!(b.get(i + 1), Some(b'x' | b'X')) {
        return None;
    }
    let n = b[i + 2..]
        .iter()
        .take_while(|c| c.is_ascii_hexdigit())
        .count();
    (n > 0 && !b.get(i + 2 + n).is_some_and(|c| is_word(*c))).then_some(n)
}

/// A word read at its start, in one pass.
struct Word {
    len: usize,
    /// It holds a digit.
    digit: bool,
    /// It is masked whole: a hex run of eight or more that carries a digit and a letter
    /// (commit ids, UUID parts), or a temporary name (`tmpab12cd_x`).
    masked: bool,
}

fn word_at(b: &[u8], i: usize) -> Word {
    let (mut len, mut all) = (0, HEX);
    let mut any = 0;
    for &x in &b[i..] {
        let k = CLASS[x as usize];
        if k & WORD == 0 {
            break;
        }
        len += 1;
        all &= k;
        any |= k;
    }
    let digit = any & DIGIT != 0;
    let hexish = len >= 8 && all & HEX != 0 && digit && any & ALPHA != 0;
    let temp = len >= 8 && b[i..i + len].starts_with(b"tmp") && digit;
    Word {
        len,
        digit,
        masked: hexish || temp,
    }
}

/// The index after the terminal escape that starts at `i` (an `ESC`): CSI (`ESC [ …
/// final`), OSC (`ESC ] … BEL` or `ESC \`), or `ESC` and one ASCII byte; at most the
/// text's end.
fn escape_end(b: &[u8], mut i: usize) -> usize {
    i += 1;
    match b.get(i) {
        Some(b'[') => {
            i += 1;
            while i < b.len() && !(0x40..=0x7e).contains(&b[i]) {
                i += 1;
            }
            i += 1;
        }
        Some(b']') => {
            while i < b.len() && b[i] != 0x07 && !(b[i] == b'\\' && b[i - 1] == 0x1b) {
                i += 1;
            }
            i += 1;
        }
        Some(n) if n.is_ascii() => i += 1,
        _ => {}
    }
    i.min(b.len())
}

/// A run of digits at `i`: a clock time or a duration is masked whole, a number of three
/// digits or more is masked, a smaller one stays. Returns the index after it, and whether
/// it is masked (written as `#`).
fn number(text: &str, i: usize) -> (usize, bool) {
    let b = text.as_bytes();
    let n = digits_at(b, i);
    let mut end = i + n;
    let mut masked = n >= 3;
    // A clock time: `H:MM`, `HH:MM:SS`, with an optional fraction.
    if n <= 2 && b.get(end) == Some(&b':') && digits_at(b, end + 1) == 2 {
        end += 3;
        if b.get(end) == Some(&b':') && digits_at(b, end + 1) == 2 {
            end += 3;
        }
        if b.get(end) == Some(&b'.') && digits_at(b, end + 1) > 0 {
            end += 1 + digits_at(b, end + 1);
        }
        masked = true;
    } else {
        // A number with a fraction and a duration unit is a duration.
        let mut num_end = end;
        if b.get(end) == Some(&b'.') && digits_at(b, end + 1) > 0 {
            num_end = end + 1 + digits_at(b, end + 1);
        }
        let u = unit_at(text, num_end);
        if u > 0 {
            end = num_end + u;
            masked = true;
        }
    }
    (end, masked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // The normaliser as it was written before its bytes were copied in runs (each word,
    // run and number pushed to the buffer as it was read): the property test below holds
    // the two to the same output.
    fn normalise_into_reference(text: &str, out: &mut Vec<u8>) {
        let floor = out.len();
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            let word_start = i == 0 || !is_word(b[i - 1]);
            match c {
                0x1b => i = escape_end(b, i),
                b'\r' | b'\n' => {
                    if c == b'\n' || b.get(i + 1) != Some(&b'\n') {
                        trim_line_end(out, floor);
                        out.push(b'\n');
                    }
                    i += 1;
                }
                b'/' => {
                    if let Some((prefix, end)) = temp_path_at(b, i) {
                        out.extend_from_slice(&b[i..i + prefix]);
                        out.push(b'#');
                        i = end;
                    } else {
                        out.push(c);
                        i += 1;
                    }
                }
                c if is_word(c) => {
                    if word_start {
                        if let Some(n) = hex_address_at(b, i) {
                            out.extend_from_slice(b"0x#");
                            i += 2 + n;
                            continue;
                        }
                        let w = word_at(b, i);
                        if w.masked {
                            out.push(b'#');
                            i += w.len;
                            continue;
                        }
                        if !w.digit {
                            // No number in it: the word as it is, in one copy.
                            out.extend_from_slice(&b[i..i + w.len]);
                            i += w.len;
                            continue;
                        }
                    }
                    if !c.is_ascii_digit() {
                        // Letters up to the next digit or the end of the word, in one copy.
                        let n = b[i..]
                            .iter()
                            .take_while(|c| is_word(**c) && !c.is_ascii_digit())
                            .count();
                        out.extend_from_slice(&b[i..i + n]);
                        i += n;
                        continue;
                    }
                    let (end, masked) = number(text, i);
                    if masked {
                        out.push(b'#');
                    } else {
                        out.extend_from_slice(&b[i..end]);
                    }
                    i = end;
                }
                _ => {
                    // A run of such bytes (blanks, punctuation, the bytes of non-ASCII
                    // characters) is copied as it is, in one copy.
                    let n = b[i..]
                        .iter()
                        .take_while(|c| CLASS[**c as usize] & (WORD | SPECIAL) == 0)
                        .count();
                    out.extend_from_slice(&b[i..i + n]);
                    i += n;
                }
            }
        }
        trim_line_end(out, floor);
        while out.len() > floor && out.last() == Some(&b'\n') {
            out.pop();
            trim_line_end(out, floor);
        }
    }

    /// The digest is SHA-256 of the fields line and then the normalised text: texts that
    /// normalise to nothing, or end in blank lines, must not eat into the fields line they
    /// are written after.
    #[test]
    fn the_digest_is_the_fields_line_then_the_normalised_text() {
        for text in [
            "",
            "\n\n",
            "  \n \t",
            "a\r\n",
            "ok  \n\n",
            "\x1b[0m",
            "é 12:30\n",
        ] {
            let mut o = Outcome::success(text);
            o.error_code = Some("E1".into());
            let fields = format!(
                "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}\n",
                false, 0, o.status_code, false, o.signal, false, false, o.error_code
            );
            let d = Sha256::digest(format!("{fields}{}", normalise(text)).as_bytes());
            let want = OutputDigest(u64::from_be_bytes(d[..8].try_into().unwrap()));
            assert_eq!(digest(&o), Some(want), "{text:?}");
        }
    }

    /// Texts made of the pieces the normaliser treats apart: escapes, line ends, temporary
    /// paths, hex words, numbers with units and clock times, non-ASCII letters.
    fn arb_output() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("\x1b[".to_string()),
            Just("\x1b]".to_string()),
            Just("\x1b\\".to_string()),
            Just("\x1b".to_string()),
            Just("\x07".to_string()),
            Just("\r".to_string()),
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            Just(" ".to_string()),
            Just("\t".to_string()),
            Just("/tmp/".to_string()),
            Just("/var/folders/".to_string()),
            Just("/".to_string()),
            Just("0x".to_string()),
            Just("tmp".to_string()),
            Just(":".to_string()),
            Just(".".to_string()),
            Just("ms".to_string()),
            Just(" seconds".to_string()),
            Just("é".to_string()),
            Just("µs".to_string()),
            "[0-9]{1,5}",
            "[a-fA-F0-9]{1,10}",
            "[a-z_]{1,6}",
            "[ -~]{1,4}",
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        /// The fields line written by hand is the `Debug` line it stands for, byte for byte
        /// (stored digests compare across versions).
        #[test]
        fn the_fields_line_is_the_debug_line(
            flags in proptest::array::uniform5(proptest::option::of(any::<bool>())),
            exit_code in proptest::option::of(any::<i64>()),
            status_code in proptest::option::of(any::<i64>()),
            signal in proptest::option::of("[ -~é\"\\\\]{0,6}"),
            error_code in proptest::option::of("[A-Z_0-9\"]{0,6}"),
        ) {
            let o = Outcome {
                is_error: flags[0],
                timed_out: flags[1],
                sandbox_denied: flags[2],
                background: flags[3],
                aborted: flags[4],
                exit_code,
                status_code,
                signal,
                error_code,
                ..Outcome::default()
            };
            let mut want = Vec::new();
            fields_line_debug(&o, &mut want);
            let mut got = Vec::new();
            fields_line(&o, &mut got);
            prop_assert_eq!(String::from_utf8(got).unwrap(), String::from_utf8(want).unwrap());
        }
    }

    proptest! {
        #[test]
        fn copying_in_runs_changes_no_byte(text in arb_output(), before in "[a-z\n ]{0,3}") {
            let mut want = before.clone().into_bytes();
            normalise_into_reference(&text, &mut want);
            let mut got = before.into_bytes();
            normalise_into(&text, &mut got);
            prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
        }
    }

    #[test]
    fn loops_compare_equal_after_masking() {
        let pairs = [
            (
                "bash: line 11316: cd: x: No such file",
                "bash: line 11317: cd: x: No such file",
            ),
            ("at 0x7ffd5e8a1b20>", "at 0x7ffd5e8a9c48>"),
            (
                "Ran 3 tests in 0.004s\n\nFAILED",
                "Ran 3 tests in 0.017s\n\nFAILED",
            ),
            (
                "2026-11-30T03:12:57.123Z started",
                "2026-11-30T03:14:02.999Z started",
            ),
            ("done in 12 ms", "done in 340 ms"),
            ("commit 3f9c2e1ab4d5", "commit 8e7d6c5b4a31"),
            ("\x1b[31mERROR\x1b[0m: x\r\n", "ERROR: x\n"),
            (
                "saved /tmp/tmpa1b2c3d4/report.json",
                "saved /tmp/tmpz9y8x7w6/report.json",
            ),
            ("pid 4242 exited", "pid 5151 exited"),
        ];
        for (a, b) in pairs {
            assert_eq!(normalise(a), normalise(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn progress_stays_visible() {
        let pairs = [
            ("5 failed, 3 passed", "4 failed, 4 passed"),
            ("lines 1-100 of 4000", "lines 101-200 of 4000"),
            ("AssertionError: 1 != 2", "AssertionError: 2 != 2"),
            ("NameError: name 'foo'", "TypeError: 'foo'"),
            ("status: running (step 3)", "status: running (step 4)"),
        ];
        for (a, b) in pairs {
            assert_ne!(normalise(a), normalise(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn words_and_units_are_not_confused() {
        assert_eq!(normalise("3 stars"), "3 stars");
        assert_eq!(normalise("12 ms"), "#");
        assert_eq!(normalise("deadbeef"), "deadbeef");
        assert_eq!(normalise("décor 123 ü"), "décor # ü");
        assert_eq!(normalise("x\x1b"), "x");
        assert_eq!(normalise("0x"), "0x");
    }

    #[test]
    fn structured_fields_enter_the_digest() {
        let a = Outcome {
            exit_code: Some(1),
            text: Some("x".into()),
            ..Outcome::default()
        };
        let b = Outcome {
            exit_code: Some(2),
            text: Some("x".into()),
            ..Outcome::default()
        };
        assert_ne!(digest(&a), digest(&b));
        let aborted = Outcome {
            aborted: Some(true),
            text: Some("x".into()),
            ..Outcome::default()
        };
        assert_eq!(digest(&aborted), None);
    }
}
