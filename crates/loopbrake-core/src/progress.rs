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

use crate::breaker::Outcome;
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
/// use loopbrake_core::progress::{judge_stopped, OutputDigest, Stopped};
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

/// The digest of what an outcome said: its structured fields and its normalised text.
/// `None` when the outcome carries nothing to compare (no text, no field): an unknown
/// outcome is never evidence of progress.
///
/// ```
/// use loopbrake_core::progress::digest;
/// use loopbrake_core::Outcome;
/// let a = digest(&Outcome::success("bash: line 11316: cd: fastjson/: No such file or directory"));
/// let b = digest(&Outcome::success("bash: line 11317: cd: fastjson/: No such file or directory"));
/// assert_eq!(a, b);
/// assert_ne!(digest(&Outcome::success("5 failed")), digest(&Outcome::success("4 failed")));
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
/// use loopbrake_core::progress::normalise;
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
fn normalise_into(text: &str, out: &mut Vec<u8>) {
    let floor = out.len();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let word_start = i == 0 || !is_word(b[i - 1]);
        match c {
            // Terminal escapes: CSI (`ESC [ … final`) and OSC (`ESC ] … BEL` or `ESC \`).
            0x1b => {
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
            }
            b'\r' | b'\n' => {
                if c == b'\n' || b.get(i + 1) != Some(&b'\n') {
                    trim_line_end(out, floor);
                    out.push(b'\n');
                }
                i += 1;
            }
            b'/' => {
                if let Some(p) = TEMP_PREFIXES
                    .iter()
                    .find(|p| b[i..].starts_with(p.as_bytes()))
                {
                    out.extend_from_slice(p.as_bytes());
                    out.push(b'#');
                    i += p.len();
                    while i < b.len() && !b[i].is_ascii_whitespace() && !b"'\"`:),;".contains(&b[i])
                    {
                        i += 1;
                    }
                } else {
                    out.push(c);
                    i += 1;
                }
            }
            c if is_word(c) => {
                if word_start && c == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')) {
                    let n = b[i + 2..]
                        .iter()
                        .take_while(|c| c.is_ascii_hexdigit())
                        .count();
                    if n > 0 && !b.get(i + 2 + n).is_some_and(|c| is_word(*c)) {
                        out.extend_from_slice(b"0x#");
                        i += 2 + n;
                        continue;
                    }
                }
                if word_start {
                    // The whole word in one pass: its length and what its bytes are.
                    let (mut n, mut all) = (0, HEX);
                    let mut any = 0;
                    for &x in &b[i..] {
                        let k = CLASS[x as usize];
                        if k & WORD == 0 {
                            break;
                        }
                        n += 1;
                        all &= k;
                        any |= k;
                    }
                    let w = &b[i..i + n];
                    let digit = any & DIGIT != 0;
                    let hexish = n >= 8 && all & HEX != 0 && digit && any & ALPHA != 0;
                    let temp = n >= 8 && w.starts_with(b"tmp") && digit;
                    if hexish || temp {
                        out.push(b'#');
                        i += n;
                        continue;
                    }
                    if !digit {
                        // No number in it: the word as it is, in one copy.
                        out.extend_from_slice(w);
                        i += n;
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
                i = number(text, i, out);
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

/// A run of digits at `i`: a clock time or a duration is masked whole, a number of three
/// digits or more becomes `#`, a smaller one stays. Returns the index after it.
fn number(text: &str, i: usize, out: &mut Vec<u8>) -> usize {
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
    if masked {
        out.push(b'#');
    } else {
        out.extend_from_slice(&b[i..end]);
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

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
