//! The scanners: [`redact`] finds the tables' anchors in one Aho-Corasick pass each,
//! then replaces the credentials it finds after a name or by their shape.

use super::tables::{
    looks_like_credential, Scope, IDENTIFYING_KEYS, KEY_NAMES, KEY_NEEDLES, MARKER,
    NOT_A_CREDENTIAL, SHAPES,
};
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::{Captures, Regex};
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, OnceLock};

/// Bytes the anchor scan reads in a process before it builds its DFA ([`Compiled::scanner`]).
pub(super) const DFA_AFTER_BYTES: usize = 256 << 10;

pub(super) struct Compiled {
    /// The key names alone, built the first time a text holds one.
    pub(super) key_needles: OnceLock<AhoCorasick>,
    /// Every anchor (pattern `i` wakes row `anchor_row[i]`), then every key needle: the
    /// scan that tells which shapes can match and whether any key name can
    /// ([`anchors_present`]).
    pub(super) any_leftmost: AhoCorasick,
    /// The same scan as a DFA, built once the process has scanned [`DFA_AFTER_BYTES`]: it
    /// reads text about twice as fast, but building it costs 1.3 M instructions, more than
    /// a hook's whole start-up (which scans a few KiB), so only a process that redacts
    /// much (replay, `tune`, `serve`, the proxy, the dashboard) pays for it, once.
    pub(super) any_leftmost_dfa: OnceLock<AhoCorasick>,
    /// Bytes scanned by [`Compiled::any_leftmost`] so far (only up to the switch).
    scanned: AtomicUsize,
    /// For each anchor, the row of [`SHAPES`] it wakes.
    pub(super) anchor_row: Vec<usize>,
    /// Each row's expression, compiled the first time an anchor wakes it: compiling them
    /// all is most of a hook's start-up, and most text wakes none.
    pub(super) shapes: Vec<OnceLock<Regex>>,
}

/// The automaton of the key names ([`redact_keys`]).
fn key_automaton() -> AhoCorasick {
    AhoCorasick::builder()
        .kind(Some(AhoCorasickKind::NoncontiguousNFA))
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::LeftmostLongest)
        .build(KEY_NEEDLES)
        .expect("constant needles")
}

/// Every anchor of [`SHAPES`] (each with the row it wakes), then every key needle.
pub(super) fn all_needles() -> (Vec<&'static str>, Vec<usize>) {
    let mut all = Vec::new();
    let mut anchor_row = Vec::new();
    for (row, shape) in SHAPES.iter().enumerate() {
        for a in shape.anchors {
            all.push(*a);
            anchor_row.push(row);
        }
    }
    all.extend_from_slice(KEY_NEEDLES);
    (all, anchor_row)
}

/// The anchor scan's automaton of `kind` over `needles` ([`all_needles`]).
pub(super) fn anchor_automaton(kind: AhoCorasickKind, needles: &[&str]) -> AhoCorasick {
    AhoCorasick::builder()
        .kind(Some(kind))
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::LeftmostFirst)
        .build(needles)
        .expect("constant needles")
}

/// The tables, compiled once. What is compiled is immutable; which automaton scans is a
/// matter of speed only (both find the same matches, a test holds it). A noncontiguous NFA
/// first: building a DFA was a third of a hook's start-up once the expressions were
/// compiled only on need.
pub(super) static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let (needles, anchor_row) = all_needles();
    Compiled {
        key_needles: OnceLock::new(),
        any_leftmost: anchor_automaton(AhoCorasickKind::NoncontiguousNFA, &needles),
        any_leftmost_dfa: OnceLock::new(),
        scanned: AtomicUsize::new(0),
        anchor_row,
        shapes: SHAPES.iter().map(|_| OnceLock::new()).collect(),
    }
});

impl Compiled {
    /// The automaton to scan `len` bytes with: the DFA once built, or built now when the
    /// process has scanned [`DFA_AFTER_BYTES`]; the NFA before that.
    fn scanner(&self, len: usize) -> &AhoCorasick {
        if let Some(dfa) = self.any_leftmost_dfa.get() {
            return dfa;
        }
        if self.scanned.fetch_add(len, Ordering::Relaxed) + len >= DFA_AFTER_BYTES {
            return self
                .any_leftmost_dfa
                .get_or_init(|| anchor_automaton(AhoCorasickKind::DFA, &all_needles().0));
        }
        &self.any_leftmost
    }
}

/// `text` with its credentials replaced by [`MARKER`]; borrowed when nothing matched.
///
/// ```
/// use toolbrake_core::redact::redact;
/// assert_eq!(
///     redact("curl -H 'Authorization: Bearer abc.def' 'https://u:pw@api.x.com/v1?api_key=K1&q=2'"),
///     "curl -H 'Authorization: Bearer [REDACTED]' 'https://u:[REDACTED]@api.x.com/v1?api_key=[REDACTED]&q=2'"
/// );
/// assert_eq!(
///     redact(r#"{"OPENAI_API_KEY": "abc", "max_tokens": 512}"#),
///     r#"{"OPENAI_API_KEY": "[REDACTED]", "max_tokens": 512}"#
/// );
/// assert_eq!(redact("ls -la"), "ls -la");
/// ```
pub fn redact(text: &str) -> Cow<'_, str> {
    let c = &*COMPILED;
    // Which shapes can match, and whether any key name can, in one scan (redaction only
    // adds markers, which hold no anchor or key name, so what was absent stays absent).
    // Most text has neither: it is read once and returned as it is.
    let (rows, keys) = anchors_present(c, text);
    if rows == 0 && !keys {
        return Cow::Borrowed(text);
    }
    let mut out = Cow::Borrowed(text);
    for (row, shape) in SHAPES.iter().enumerate() {
        if rows & (1 << row) != 0 {
            let re =
                c.shapes[row].get_or_init(|| Regex::new(shape.pattern).expect("constant pattern"));
            out = replace_shape(out, re, shape.check);
        }
    }
    if keys {
        redact_keys(out, c.key_needles.get_or_init(key_automaton))
    } else {
        out
    }
}

/// The rows of [`SHAPES`] whose anchors occur in `text` (bit `row`), and whether a key
/// needle occurs: every occurrence of every needle, as an overlapping search reports them.
///
/// No needle is a prefix of another (a test holds it), so at most one needle starts at any
/// position, and the leftmost match found from each position after the last match's start
/// enumerates them all. Each search skips to its next candidate with the automaton's
/// prefilter (a vectorised scan), where an overlapping search steps the automaton through
/// every byte.
pub(super) fn anchors_present(c: &Compiled, text: &str) -> (u64, bool) {
    anchors_with(c.scanner(text.len()), &c.anchor_row, text)
}

/// [`anchors_present`] with the automaton `ac` (built by [`anchor_automaton`]).
pub(super) fn anchors_with(ac: &AhoCorasick, anchor_row: &[usize], text: &str) -> (u64, bool) {
    let mut rows = 0u64;
    let mut keys = false;
    let mut from = 0;
    while from < text.len() {
        let input = aho_corasick::Input::new(text).span(from..text.len());
        let Some(m) = ac.find(input) else {
            break;
        };
        match anchor_row.get(m.pattern().as_usize()) {
            Some(row) => rows |= 1 << row,
            None => keys = true,
        }
        from = m.start() + 1;
    }
    (rows, keys)
}

/// The groups that hold a row's secrets (`s`; `t` where a row has two kinds of secret;
/// `u` for a command's earlier password when it takes two).
const SECRET_GROUPS: [&str; 3] = ["u", "s", "t"];

/// `text` with the matches of `re` replaced: each secret group that took part (or the
/// whole match when the row has none) by [`MARKER`], unless it is a marker already or
/// fails the row's `check`.
fn replace_shape<'a>(
    text: Cow<'a, str>,
    re: &Regex,
    check: Option<fn(&str) -> bool>,
) -> Cow<'a, str> {
    let replaced = re.replace_all(&text, |c: &Captures<'_>| {
        let whole = c.get(0).expect("group 0");
        if SECRET_GROUPS.iter().all(|g| c.name(g).is_none()) {
            return MARKER.to_string();
        }
        let mut out = String::with_capacity(whole.len());
        let mut copied = whole.start();
        for s in SECRET_GROUPS.iter().filter_map(|g| c.name(g)) {
            let keep = s.as_str() == MARKER || check.is_some_and(|f| !f(s.as_str()));
            if keep || s.start() < copied {
                continue;
            }
            out.push_str(&text[copied..s.start()]);
            out.push_str(MARKER);
            copied = s.end();
        }
        out.push_str(&text[copied..whole.end()]);
        out
    });
    match replaced {
        Cow::Borrowed(_) => text,
        Cow::Owned(o) if o == *text => text,
        Cow::Owned(o) => Cow::Owned(o),
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

/// The words of an identifier: split at `_`, `-`, `.` and camelCase (`XApiKey`: `X`,
/// `Api`, `Key`; `APIKey`: `API`, `Key`).
pub(super) fn words(ident: &str) -> Vec<&str> {
    let b = ident.as_bytes();
    let mut out = Vec::new();
    let mut start = None;
    for i in 0..=b.len() {
        let c = b.get(i).copied();
        let sep = c.is_none_or(|c| matches!(c, b'_' | b'-' | b'.'));
        let camel = c.is_some_and(|c| c.is_ascii_uppercase())
            && i > 0
            && start.is_some()
            && (b[i - 1].is_ascii_lowercase()
                || b[i - 1].is_ascii_digit()
                || (b[i - 1].is_ascii_uppercase()
                    && b.get(i + 1).is_some_and(|n| n.is_ascii_lowercase())));
        if sep || camel {
            if let Some(s) = start.take() {
                out.push(&ident[s..i]);
            }
        }
        if !sep && start.is_none() {
            start = Some(i);
        }
    }
    out
}

/// How a name stands before its value.
#[derive(Clone, Copy)]
struct Context {
    /// In quotes (`"pass": …`).
    quoted: bool,
    /// A command-line flag (`--pass …`).
    flag: bool,
    /// A URL query parameter (`?key=…`).
    query: bool,
    /// Followed by `=` (not `:` or a space).
    equals: bool,
}

/// What a name says of its value.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Named {
    /// Nothing: the value stays.
    No,
    /// A credential when it looks like one ([`Scope::Vague`]).
    IfCredentialLike,
    /// A credential unless it is a path or a variable ([`Scope::Keyed`], the name alone).
    UnlessPath,
    /// A credential.
    Yes,
}

/// What an identifier of these words says of its value, in this context: the strongest
/// of its rows.
fn names_credential(w: &[&str], cx: Context) -> Named {
    let mut named = Named::No;
    for (name, scope) in KEY_NAMES {
        let n = name.split('_').count();
        for i in 0..w.len().saturating_sub(n - 1) {
            let hit = name
                .split('_')
                .zip(&w[i..i + n])
                .all(|(a, b)| a.eq_ignore_ascii_case(b));
            if !hit {
                continue;
            }
            let last = i + n == w.len();
            let yes = |b: bool| if b { Named::Yes } else { Named::No };
            let says = match scope {
                Scope::Anywhere => yes(!w
                    .get(i + n)
                    .is_some_and(|q| NOT_A_CREDENTIAL.iter().any(|x| x.eq_ignore_ascii_case(q)))),
                Scope::Last => yes(last),
                Scope::LastOfSeveral => yes(last && i > 0),
                Scope::Keyed if last && i > 0 => Named::Yes,
                Scope::Keyed if last && (cx.quoted || cx.flag || cx.equals) => Named::UnlessPath,
                Scope::Keyed => Named::No,
                Scope::Vague
                    if last
                        && !(i > 0
                            && IDENTIFYING_KEYS
                                .iter()
                                .any(|x| x.eq_ignore_ascii_case(w[i - 1]))) =>
                {
                    Named::IfCredentialLike
                }
                Scope::Vague => Named::No,
                Scope::Query => yes(cx.query && cx.equals && i == 0 && last),
            };
            named = named.max(says);
        }
    }
    named
}

/// Values of credential names (see [`KEY_NAMES`]), in every syntax a value follows a name.
fn redact_keys<'a>(text: Cow<'a, str>, needles: &AhoCorasick) -> Cow<'a, str> {
    let s: &str = &text;
    let b = s.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut resume = 0;
    for m in needles.find_iter(s) {
        if m.start() < resume {
            continue;
        }
        let mut start = m.start();
        while start > 0 && is_ident(b[start - 1]) {
            start -= 1;
        }
        // A line break escaped in a JSON string (`…\npassword …`) is not the name's.
        if break_before(b, start + 1) > 0 {
            start += 1;
        }
        let mut end = m.end();
        while end < b.len() && is_ident(b[end]) {
            end += 1;
        }
        resume = end;
        if start < copied {
            continue;
        }
        let Some((sep, vs, ve)) = value_after(b, start, end) else {
            continue;
        };
        let before = start.checked_sub(1).map(|i| b[i]);
        let flag = b[start] == b'-';
        let cx = Context {
            quoted: matches!(before, Some(b'"' | b'\'')) || sep == b'>',
            flag,
            query: matches!(before, Some(b'?' | b'&' | b';')),
            equals: sep == b'=',
        };
        let w = words(&s[start..end]);
        let named = names_credential(&w, cx);
        if named == Named::No {
            continue;
        }
        let header = w
            .iter()
            .any(|w| w.eq_ignore_ascii_case("authorization") || w.eq_ignore_ascii_case("cookie"));
        // A value that follows its name after a space (a flag's, a setting's) is never a
        // flag itself.
        let Some((mut vs, ve)) = value_span(b, sep, vs, ve, header, flag || sep == b' ') else {
            continue;
        };
        let v = &s[vs..ve];
        let keep = match named {
            Named::UnlessPath => v.starts_with(['/', '~', '$']),
            Named::IfCredentialLike => !looks_like_credential(v),
            _ => false,
        };
        // A flag's value that says where openssl reads a pass phrase (`-passin env:NAME`,
        // `file:PATH`, `fd:N`, `stdin`) holds none; `pass:SECRET` keeps its `pass:`.
        let source =
            flag && (["env:", "file:", "fd:"].iter().any(|p| v.starts_with(p)) || v == "stdin");
        if keep || source {
            continue;
        }
        if flag && v.len() > 5 && v.starts_with("pass:") {
            if s[vs + 5..].starts_with(MARKER) {
                continue;
            }
            vs += 5;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(s.len() + 16));
        o.push_str(&s[copied..vs]);
        o.push_str(MARKER);
        copied = ve;
        resume = resume.max(ve);
    }
    match out {
        None => text,
        Some(mut o) => {
            o.push_str(&s[copied..]);
            Cow::Owned(o)
        }
    }
}

/// After the identifier `start..end`: the separator (`=`, `:`, or `' '` for a flag's
/// value) and where its value begins, with the text's end.
fn value_after(b: &[u8], start: usize, end: usize) -> Option<(u8, usize, usize)> {
    let flag = b[start] == b'-';
    // An XML element: `<password>VALUE</password>` (separator `>`).
    if start > 0 && b[start - 1] == b'<' && b.get(end) == Some(&b'>') {
        return Some((b'>', end + 1, b.len()));
    }
    let mut i = end;
    // A closing quote: `"`, `'`, or `"` escaped as JSON escapes it, once or more (`\"`,
    // `\\\"`: a JSON text inside a JSON string).
    let closed = if let Some(q) = escaped_quote(b, i) {
        i = q + 1;
        true
    } else if matches!(b.get(i), Some(b'"' | b'\'')) {
        i += 1;
        true
    } else {
        false
    };
    let spaced = i;
    while matches!(b.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    let sep = match b.get(i) {
        Some(b':') if !matches!(b.get(i + 1), Some(b':' | b'/')) => b':',
        Some(b'=') if b.get(i + 1) != Some(&b'=') => b'=',
        // An argument vector: `"--token", "value"`.
        Some(b',') if flag && closed => b' ',
        _ if flag && !closed && i > spaced && i < b.len() => return Some((b' ', i, b.len())),
        _ if !closed && i > spaced && i < b.len() && takes_next_word(b, start, end) => {
            return Some((b' ', i, b.len()))
        }
        _ => return None,
    };
    i += 1;
    while matches!(b.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    // Pretty-printed JSON puts a value on the next line, its line break escaped when
    // that JSON is itself inside a JSON string.
    if sep == b':' {
        let mut j = i;
        loop {
            match (b.get(j), b.get(j + 1)) {
                (Some(c), _) if c.is_ascii_whitespace() => j += 1,
                (Some(b'\\'), _) => match b[j..].iter().position(|c| *c != b'\\') {
                    Some(k) if matches!(b[j + k], b'n' | b'r' | b't') => j += k + 1,
                    _ => break,
                },
                _ => break,
            }
        }
        let quote = b.get(j) == Some(&b'"') || escaped_quote(b, j).is_some();
        if j > i && quote {
            i = j;
        }
    }
    Some((sep, i, b.len()))
}

/// The length of the line break or tab escaped in a JSON string (`\n`, `\r`, `\t`; its
/// backslash doubled in a JSON text inside a JSON string, `\\n`) that ends just before
/// `end`, or 0.
fn break_before(b: &[u8], end: usize) -> usize {
    if end == 0 || !matches!(b[end - 1], b'n' | b'r' | b't') {
        return 0;
    }
    match b[..end - 1]
        .iter()
        .rev()
        .take_while(|c| **c == b'\\')
        .count()
    {
        0 => 0,
        run => run + 1,
    }
}

/// The words before `at`, nearest first: text between whitespace or the escaped line
/// breaks and tabs of a JSON string.
fn words_before(b: &[u8], at: usize) -> impl Iterator<Item = &[u8]> {
    // The separator that ends just before `i`: its length.
    let sep = |i: usize| {
        if b[i - 1].is_ascii_whitespace() {
            1
        } else {
            break_before(b, i)
        }
    };
    let mut end = at;
    std::iter::from_fn(move || {
        while end > 0 && sep(end) > 0 {
            end -= sep(end);
        }
        if end == 0 {
            return None;
        }
        let mut start = end;
        while start > 0 && sep(start) == 0 {
            start -= 1;
        }
        let word = &b[start..end];
        end = start;
        Some(word)
    })
}

/// The trailing name of a word (`{"command":"git` → `git`, `config` → `config`).
fn bare(word: &[u8]) -> &[u8] {
    let from = word
        .iter()
        .rposition(|c| !is_ident(*c))
        .map_or(0, |i| i + 1);
    &word[from..]
}

/// How many words before a name [`takes_next_word`] reads at most.
const WORDS_BACK: usize = 12;

/// Whether the name `b[start..end]` takes the next word as its value, with no `=` or `:`
/// between them: a setting of a command-line configuration tool (`aws configure set
/// aws_secret_access_key V`, `npm config set //host/:_authToken V`, `git config
/// user.password V`: the word holding the name follows `config set`, `configure set` or
/// `git config`, flags aside), or a `.netrc` entry's `password V` (after `machine HOST`
/// or `default`, with `login`, `account` and `port` between: a `login` among them or a
/// dotted host, so that prose about a machine's password is not an entry).
fn takes_next_word(b: &[u8], start: usize, end: usize) -> bool {
    let mut word_start = start;
    while word_start > 0
        && !b[word_start - 1].is_ascii_whitespace()
        && break_before(b, word_start) == 0
    {
        word_start -= 1;
    }
    // The command words before it, flags aside (a few: the walk back stays short).
    let mut command = words_before(b, word_start)
        .take(WORDS_BACK)
        .filter(|w| !w.starts_with(b"-"))
        .map(bare);
    let (w1, w2) = (command.next(), command.next());
    let setting = match (w1, w2) {
        (Some(b"set"), Some(c)) => c == b"config" || c == b"configure",
        (Some(b"config"), Some(g)) => g == b"git",
        _ => false,
    };
    if setting {
        return true;
    }
    if word_start != start || !b[start..end].eq_ignore_ascii_case(b"password") {
        return false;
    }
    // A .netrc entry: pairs of a keyword and its value back to `machine HOST` or `default`.
    let mut words = words_before(b, start).take(WORDS_BACK).map(bare);
    let mut login = false;
    loop {
        let Some(value) = words.next() else {
            return false;
        };
        if value == b"default" {
            return true;
        }
        match words.next() {
            Some(b"machine") => return login || value.contains(&b'.'),
            Some(b"login") => login = true,
            Some(b"account" | b"port") => {}
            _ => return false,
        }
    }
}

/// Where the `"` is, when `b[i..]` is a `"` escaped by one or more backslashes.
fn escaped_quote(b: &[u8], i: usize) -> Option<usize> {
    let n = b.get(i..)?.iter().take_while(|c| **c == b'\\').count();
    (n > 0 && b.get(i + n) == Some(&b'"')).then_some(i + n)
}

/// The span of the value starting at `i` (its content, inside quotes), or `None` when
/// there is nothing to redact: no value, a nested object, a flag, a boolean or null, or
/// a marker already.
fn value_span(
    b: &[u8],
    sep: u8,
    i: usize,
    len: usize,
    header: bool,
    flag: bool,
) -> Option<(usize, usize)> {
    let until = |from: usize, stop: &dyn Fn(u8) -> bool| {
        from + b[from..len].iter().take_while(|c| !stop(**c)).count()
    };
    let (mut vs, mut ve) = match b.get(i)? {
        b'\\' if escaped_quote(b, i).is_some() => {
            // An escaped quote inside a JSON string: up to the next quote, less the
            // backslashes that escape it.
            let from = escaped_quote(b, i).map_or(len, |q| q + 1);
            let mut end = from + b[from..len].iter().take_while(|c| **c != b'"').count();
            while end > from && b[end - 1] == b'\\' {
                end -= 1;
            }
            (from, end)
        }
        b'"' => {
            let from = i + 1;
            let mut j = from;
            while j < len && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (from, j.min(len))
        }
        b'\'' => (i + 1, until(i + 1, &|c| c == b'\'')),
        b'{' | b'[' => return None,
        b'-' if flag => return None,
        _ if sep == b'>' => (i, until(i, &|c| matches!(c, b'<' | b'\r' | b'\n'))),
        _ if sep == b':' => {
            // A header or YAML value: the rest of the line.
            let end = until(i, &|c| {
                matches!(c, b'\r' | b'\n' | b'"' | b'\'' | b'\\')
                    || (!header && matches!(c, b',' | b';' | b'}' | b']'))
            });
            (i, end)
        }
        _ => (
            i,
            until(i, &|c| {
                c.is_ascii_whitespace()
                    || matches!(
                        c,
                        b'"' | b'\''
                            | b'\\'
                            | b';'
                            | b'&'
                            | b'|'
                            | b','
                            | b')'
                            | b'}'
                            | b']'
                            | b'<'
                            | b'>'
                    )
            }),
        ),
    };
    while ve > vs && b[ve - 1].is_ascii_whitespace() {
        ve -= 1;
    }
    // An authorization scheme stays: `Bearer [REDACTED]`.
    let word = until(vs, &|c| !c.is_ascii_alphabetic()).min(ve);
    if b.get(word).is_some_and(|c| *c == b' ') && word < ve {
        let scheme = &b[vs..word];
        if [
            &b"bearer"[..],
            b"basic",
            b"token",
            b"digest",
            b"negotiate",
            b"bot",
        ]
        .iter()
        .any(|k| scheme.eq_ignore_ascii_case(k))
        {
            vs = word;
            while vs < ve && b[vs] == b' ' {
                vs += 1;
            }
        }
    }
    let v = &b[vs..ve];
    let skip = v.is_empty()
        || v.starts_with(MARKER.as_bytes())
        || [&b"true"[..], b"false", b"null", b"none"]
            .iter()
            .any(|k| v.eq_ignore_ascii_case(k));
    (!skip).then_some((vs, ve))
}
