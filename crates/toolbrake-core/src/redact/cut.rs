//! The cut: text redacted, then cut to a length ([`redact_cut`], [`RedactedCut`]), and
//! log lines redacted; the cut never splits a credential the cut-off would expose.

use super::scan::redact;
use std::borrow::Cow;
use std::cell::Cell;
use std::sync::OnceLock;

/// The index of the `n`-th character of `text` (0-based), `None` when it has at most `n`:
/// `text.char_indices().nth(n)`, without decoding characters when the prefix is ASCII.
pub(super) fn nth_char_index(text: &str, n: usize) -> Option<usize> {
    if text.len() <= n {
        // Fewer bytes than `n + 1`, so fewer characters.
        return None;
    }
    if text.as_bytes()[..n].is_ascii() {
        // `n` one-byte characters, and a character starts at `n`.
        return Some(n);
    }
    text.char_indices().nth(n).map(|(i, _)| i)
}

/// How far past a cut a secret is still recognised whole: [`redact_cut`] redacts this much
/// more than it keeps, so a credential that begins before the cut is never half-shown.
pub const CUT_MARGIN: usize = 1024;

/// The first `chars` characters of `text`, redacted. Only a bounded prefix is read (the
/// kept part and [`CUT_MARGIN`] more), whatever the text's length.
///
/// ```
/// use toolbrake_core::redact::redact_cut;
/// let long = format!("token=sk-live-abcdefghijklmnop0123 {}", "x".repeat(100_000));
/// assert_eq!(redact_cut(&long, 14), "token=[REDACTE");
/// ```
pub fn redact_cut(text: &str, chars: usize) -> String {
    let head = match nth_char_index(text, chars + CUT_MARGIN) {
        Some(i) => &text[..i],
        None => text,
    };
    let red = redact(head);
    match nth_char_index(&red, chars) {
        Some(i) => red[..i].to_string(),
        None => red.into_owned(),
    }
}

/// A line of a text log as a terminal may show it: redacted, and its control characters
/// escaped as Rust escapes them (`\n`, `\t`, `\u{1b}`), with the Unicode characters that
/// break a line or reorder it (`\u{2028}`, the bidirectional overrides and isolates). No
/// text in it, whoever chose it (a tool's name, a server's error), can end the line, forge
/// the next one or drive the operator's terminal. Borrowed when nothing changed.
///
/// ```
/// use toolbrake_core::redact::log_line;
/// assert_eq!(
///     log_line("a call of x\ntoolbrake: reloaded \u{1b}[2J sk-proj-abcdefghijklmnop0123"),
///     r"a call of x\ntoolbrake: reloaded \u{1b}[2J [REDACTED]"
/// );
/// assert_eq!(log_line("toolbrake: reloaded /etc/toolbrake.toml"), "toolbrake: reloaded /etc/toolbrake.toml");
/// ```
pub fn log_line(text: &str) -> Cow<'_, str> {
    use std::fmt::Write as _;
    let unsafe_on_a_terminal = |c: char| {
        c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    let red = redact(text);
    if !red.chars().any(unsafe_on_a_terminal) {
        return red;
    }
    let mut out = String::with_capacity(red.len() + 16);
    for c in red.chars() {
        if !unsafe_on_a_terminal(c) {
            out.push(c);
        } else if c.is_ascii() {
            let _ = write!(out, "{}", c.escape_debug());
        } else {
            let _ = write!(out, "{}", c.escape_unicode());
        }
    }
    Cow::Owned(out)
}

/// A text kept as read and redacted whenever it leaves: stored (serialised), shown,
/// compared or printed, each time as [`redact_cut`] of the text would show it (with a
/// preview's `… (+N more chars)` mark, and cut again for the timeline, when asked). Only
/// the prefix [`redact_cut`] reads is kept. For what is usually never shown (the last tool
/// result, which only a denial quotes; the previews of a call's fingerprints, which only a
/// verdict, an advisory or the dashboard names), the redaction is paid when it is needed,
/// not on every call. A value read back from storage was redacted when it was written.
/// Once redacted, the text shown is kept: a store serialises a session's state on every
/// update (the memory store to count its bytes, Redis and SQLite to write it), and
/// redacting every preview of the window again each time was a third of a replay.
#[derive(Clone)]
pub struct RedactedCut {
    /// A prefix of the text as read or, once `redacted`, what it shows.
    head: Box<str>,
    /// Characters kept ([`redact_cut`]'s `chars`).
    chars: u32,
    /// For a preview of a longer text: the text's length in characters, for the mark (0:
    /// no mark).
    total: u32,
    /// Characters shown at most, mark included (the timeline's cut; `u32::MAX`: no cut).
    limit: u32,
    redacted: bool,
    /// What [`RedactedCut::shown`] computed the first time.
    shown: OnceLock<Box<str>>,
}

/// A count as the compact fields keep it (a count beyond `u32` cannot come from a line of
/// the protocol's bounded length).
fn small(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Default for RedactedCut {
    fn default() -> Self {
        RedactedCut {
            head: Box::default(),
            chars: 0,
            total: 0,
            limit: u32::MAX,
            redacted: false,
            shown: OnceLock::new(),
        }
    }
}

impl RedactedCut {
    /// The first `chars` characters of `text`, redacted when they leave.
    pub fn new(text: &str, chars: usize) -> Self {
        let head = match nth_char_index(text, chars.saturating_add(CUT_MARGIN)) {
            Some(i) => &text[..i],
            None => text,
        };
        RedactedCut {
            head: head.into(),
            chars: small(chars),
            ..RedactedCut::default()
        }
    }

    /// A preview: the first `chars` characters of `text`, redacted when they leave, marked
    /// `… (+N more chars)` when the text was longer and its redacted head was not shorter.
    pub fn preview(text: &str, chars: usize) -> Self {
        RedactedCut {
            // Fewer bytes than `chars + 1` means fewer characters: no mark, no count.
            total: (text.len() > chars)
                .then(|| text.chars().count())
                .filter(|&n| n > chars)
                .map_or(0, small),
            ..RedactedCut::new(text, chars)
        }
    }

    /// A text that was redacted already (a verdict's fingerprint).
    pub fn redacted(text: String) -> Self {
        RedactedCut {
            head: text.into_boxed_str(),
            redacted: true,
            ..RedactedCut::default()
        }
    }

    /// The same text, showing at most `limit` characters.
    pub fn limited(mut self, limit: usize) -> Self {
        if self.redacted {
            if let Some(i) = nth_char_index(&self.head, limit) {
                self.head = self.head[..i].into();
            }
        } else {
            self.limit = self.limit.min(small(limit));
            self.shown = OnceLock::new();
        }
        self
    }

    /// Whether there is no text at all.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty()
    }

    /// The text as it may be shown or stored.
    pub fn shown(&self) -> Cow<'_, str> {
        if self.redacted {
            return Cow::Borrowed(&self.head);
        }
        Cow::Borrowed(self.shown.get_or_init(|| self.redact().into_boxed_str()))
    }

    /// The text redacted, cut and marked, as [`RedactedCut::shown`] shows it.
    fn redact(&self) -> String {
        let chars = self.chars as usize;
        let mut red = redact_cut(&self.head, chars);
        if self.total > 0 && red.chars().count() >= chars {
            red = format!("{red}… (+{} more chars)", self.total as usize - chars);
        }
        if let Some(i) = nth_char_index(&red, self.limit as usize) {
            red.truncate(i);
        }
        red
    }
}

impl PartialEq for RedactedCut {
    fn eq(&self, other: &Self) -> bool {
        self.shown() == other.shown()
    }
}

impl Eq for RedactedCut {}

impl std::fmt::Debug for RedactedCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.shown(), f)
    }
}

impl std::fmt::Display for RedactedCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl serde::Serialize for RedactedCut {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.redacted && self.shown.get().is_none() && MEASURING.with(Cell::get) {
            // Inside [`json_len`] alone, whose writer only counts: the length of the kept
            // characters stands for the length shown, and nothing is redacted to count.
            let kept = nth_char_index(&self.head, self.chars as usize)
                .map_or(&*self.head, |i| &self.head[..i]);
            return s.serialize_str(kept);
        }
        s.serialize_str(&self.shown())
    }
}

thread_local! {
    /// Set only while [`json_len`] serialises into its counter (an argument of that one
    /// call, reset when it returns; no state outlives it).
    static MEASURING: Cell<bool> = const { Cell::new(false) };
}

/// About the length of `value`'s JSON, without redacting what is still to be redacted: a
/// [`RedactedCut`] not yet shown counts its kept characters (redaction changes that by a
/// few characters a credential), one already shown its text. What a store bounding its
/// memory counts: measuring a state by serialising it redacted every preview of the
/// window, which the laziness of [`RedactedCut`] exists to avoid, and was most of the
/// redaction in a replay. The JSON is counted, never kept.
///
/// ```
/// use toolbrake_core::redact::{json_len, RedactedCut};
/// let cut = RedactedCut::new("token=sk-live-abcdefghijklmnop0123", 100);
/// assert_eq!(json_len(&cut), "token=sk-live-abcdefghijklmnop0123".len() as u64 + 2);
/// assert_eq!(json_len(&"a"), 3);
/// ```
pub fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            MEASURING.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(MEASURING.with(|m| m.replace(true)));
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, value);
    c.0
}

impl<'de> serde::Deserialize<'de> for RedactedCut {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Redacted and cut when it was written: shown as it is.
        Ok(RedactedCut::redacted(String::deserialize(d)?))
    }
}
