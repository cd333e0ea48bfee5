//! The canonical spelling of a shell command (docs/decisions.md, "Same output, other
//! spelling"): the command read as the shell reads it and written without what the shell
//! removes or ignores, as text or straight into a hash. All pure.

use super::words::{is_assignment, is_duration, TIMEOUT_VALUE_OPTS};
use std::borrow::Cow;

/// A shell command in its canonical spelling (docs/decisions.md, "Spelling"): what the
/// shell would run, without what it removes or ignores. Comments, a trailing `;`, empty
/// commands, line continuations and extra blanks go; quotes go where the shell removes
/// them (a quoted character that is special to the shell keeps a backslash, so `'*.py'`
/// stays apart from `*.py`); `./x` is `x`; short flag clusters are one sorted cluster
/// (`-la`, `-al` and `-a -l` are `-al`); leading assignments (`FOO=1 cmd`) and a leading
/// `timeout` go; the count of a `head`/`tail` goes (`head -50` and `head -51` differ only
/// when the output is longer than 50 lines, and then the output differs too). A leading
/// `cd DIR` followed by `&&` or `;` is kept apart in [`Canonical::cd`], so that the caller
/// can tell a `cd` to the directory it is already in.
///
/// An identity, not a command to run: commands that differ only in these ways are one
/// action; two commands that do different things can share a spelling only where their
/// outputs would tell them apart (a head's count), and the breaker never counts a call
/// whose output changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Canonical {
    /// The directory of a leading `cd DIR &&` (or `cd DIR;`, or a lone `cd DIR`): quotes
    /// removed, `./` and a trailing `/` dropped; `~` for a bare `cd`.
    pub cd: Option<String>,
    /// The rest of the command, canonical.
    pub rest: String,
}

impl Canonical {
    /// The whole canonical command: `cd DIR && rest`, or `rest`.
    pub fn text(&self) -> String {
        match (&self.cd, self.rest.is_empty()) {
            (Some(d), true) => format!("cd {d}"),
            (Some(d), false) => format!("cd {d} && {}", self.rest),
            (None, _) => self.rest.clone(),
        }
    }
}

/// The canonical spelling of a shell command ([`Canonical`]).
///
/// ```
/// use toolbrake_core::breaker::shell::canonical;
/// let a = canonical("ls -la 'src'  # try 3");
/// assert_eq!(a, canonical("ls -a -l ./src;"));
/// assert_eq!(a.rest, "ls -al src");
/// let b = canonical("cd /w && FOO=1 pytest -x | head -50");
/// assert_eq!(b.cd.as_deref(), Some("/w"));
/// assert_eq!(b.rest, canonical("pytest -x | head -51").rest);
/// ```
pub fn canonical(command: &str) -> Canonical {
    let mut rest = String::with_capacity(command.len());
    let cd = canonical_into(command, &mut rest);
    Canonical { cd, rest }
}

/// Where a canonical command is written: a `String`, or a hash of its bytes
/// ([`SpellingHash`]) when only its identity is needed.
pub(crate) trait Sink {
    /// Appends `s`.
    fn put(&mut self, s: &str);
}

impl Sink for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

/// FNV-1a, 64 bits, of the bytes written: the same value as `FpId::quick` of the text
/// [`canonical`] writes, without writing it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpellingHash(pub(crate) u64);

impl SpellingHash {
    pub(crate) const START: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub(crate) fn new() -> Self {
        SpellingHash(Self::START)
    }
}

impl Sink for SpellingHash {
    fn put(&mut self, s: &str) {
        for &b in s.as_bytes() {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(Self::PRIME);
        }
    }
}

/// [`canonical`], writing the rest into `out`; returns the leading `cd`'s directory.
pub(crate) fn canonical_into(command: &str, out: &mut impl Sink) -> Option<String> {
    let (toks, lines) = lex(command);
    // A script of several lines is kept as written: a line may be the input of the one
    // before it (a shell fed through its standard input, as an interactive one is, hands
    // the lines after `python` or `read` to them), and then its comments and blanks count.
    if lines {
        out.put(command.trim());
        return None;
    }
    // The first simple command, when it is a `cd DIR` followed by `&&` or `;` (or alone).
    let first = toks
        .iter()
        .position(|t| matches!(t, Tok::Op(_)))
        .unwrap_or(toks.len());
    let mut cd = None;
    let mut from = 0;
    if first > 0 {
        let next = match toks.get(first) {
            Some(Tok::Op(op)) => Some(*op),
            _ => None,
        };
        // Operators that follow an empty command do not count (`cd /w ;; x` is rare).
        if matches!(next, None | Some("&&" | ";" | "\n")) {
            if let Some(dir) = cd_target(&toks[..first]) {
                from = first + 1;
                if dir != "." {
                    cd = Some(dir);
                }
            }
        }
    }
    // The rest, one simple command at a time. An operator is written when the next
    // command starts; between empty commands (`a ; ; b`, a trailing `;`) the stronger
    // operator of the two stays, `;` being the weakest and a line break weaker still.
    let mut pending: Option<&'static str> = None;
    let mut wrote = false;
    let mut flags: Vec<u8> = Vec::new();
    let mut start = from;
    for k in from..=toks.len() {
        let op = match toks.get(k) {
            Some(Tok::Op(op)) => Some(*op),
            Some(_) => continue,
            None => None,
        };
        if k > start {
            if let Some(p) = pending.take() {
                out.put(" ");
                out.put(if p == "\n" { ";" } else { p });
                out.put(" ");
            }
            render_command(&toks[start..k], out, &mut flags);
            wrote = true;
            pending = op;
        } else if let Some(op) = op {
            if pending.is_none() || pending == Some("\n") || (pending == Some(";") && op != "\n") {
                pending = Some(op).filter(|_| wrote);
            }
        }
        start = k + 1;
    }
    // What ends the list is not an operator between commands (`a;`, `a &&` left open).
    if let Some(p) = pending.filter(|p| !matches!(*p, ";" | "\n" | "&&" | "||" | "|")) {
        out.put(" ");
        out.put(p);
    }
    cd
}

/// One token of a command line, quotes removed ([`lex`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok<'a> {
    /// A word: quoted characters special to the shell carry a backslash.
    Word(Cow<'a, str>),
    /// A redirection operator with its descriptor (`>`, `2>&1`, `<<'`), followed by its
    /// target word unless it holds it.
    Redir(&'a str),
    /// A heredoc's body, verbatim.
    Body(&'a str),
    /// A control operator: `&&`, `||`, `|`, `|&`, `&`, `;`, a line break, `;;`, `(`, `)`.
    Op(&'static str),
}

/// Characters that keep a backslash when quoted: they would mean something else bare.
fn special(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t'
            | b'\n'
            | b'\''
            | b'"'
            | b'\\'
            | b'$'
            | b'`'
            | b'*'
            | b'?'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'~'
            | b'#'
            | b';'
            | b'&'
            | b'|'
            | b'<'
            | b'>'
            | b'('
            | b')'
            | b'!'
            | b'='
    )
}

/// A word being read: a slice of the command while it is one, else its own bytes.
struct Word {
    /// The start of the word while it is still a plain slice of the command.
    from: Option<usize>,
    own: Vec<u8>,
    open: bool,
}

impl Word {
    /// Bytes at `at..to` of the command, as they are.
    fn slice(&mut self, b: &[u8], at: usize, to: usize) {
        if !self.open {
            self.open = true;
            self.from = Some(at);
        } else if self.from.is_none() {
            self.own.extend_from_slice(&b[at..to]);
        }
    }

    /// The word stops being a slice: bytes read so far are copied.
    fn owned(&mut self, b: &[u8], at: usize) -> &mut Vec<u8> {
        if self.own.capacity() == 0 {
            // Room for the rest of the command and a few escapes: grown once.
            self.own.reserve(b.len() - self.from.unwrap_or(at) + 8);
        }
        if let Some(f) = self.from.take() {
            self.own.extend_from_slice(&b[f..at]);
        }
        self.open = true;
        &mut self.own
    }

    fn flush<'a>(&mut self, command: &'a str, at: usize, out: &mut Vec<Tok<'a>>) {
        if !self.open {
            return;
        }
        self.open = false;
        out.push(Tok::Word(match self.from.take() {
            Some(f) => Cow::Borrowed(&command[f..at]),
            None => Cow::Owned(bytes_to_string(std::mem::take(&mut self.own))),
        }));
    }
}

/// Splits a command line into tokens the way the shell reads it, as far as an identity
/// needs: words with their quotes removed, control operators, redirections and heredoc
/// bodies; comments and line continuations dropped; `$(…)`, `${…}` and `` `…` `` kept
/// verbatim inside their word. Also says whether the command is several lines (a line
/// break outside quotes and heredocs with something after it).
fn lex(command: &str) -> (Vec<Tok<'_>>, bool) {
    let b = command.as_bytes();
    let mut out: Vec<Tok> = Vec::with_capacity(command.len() / 4 + 2);
    let mut w = Word {
        from: None,
        own: Vec::new(),
        open: false,
    };
    // Heredocs whose body starts after this line: (token index, delimiter, strip tabs).
    let mut pending: Vec<(usize, Vec<u8>, bool)> = Vec::new();
    let mut i = 0;
    let mut newline = false;
    let mut lines = false;
    while i < b.len() {
        let c = b[i];
        lines |= newline && !matches!(c, b' ' | b'\t' | b'\r' | b'\n');
        match c {
            b'\\' => {
                match b.get(i + 1) {
                    Some(b'\n') => {}
                    Some(&n) => {
                        let o = w.owned(b, i);
                        if special(n) {
                            o.push(b'\\');
                        }
                        o.push(n);
                    }
                    None => w.owned(b, i).push(b'\\'),
                }
                i += 2;
            }
            b'\'' => {
                let o = w.owned(b, i);
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    if special(b[i]) {
                        o.push(b'\\');
                    }
                    o.push(b[i]);
                    i += 1;
                }
                i += 1;
            }
            b'"' => {
                w.owned(b, i);
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    match b[i] {
                        b'\\' if matches!(b.get(i + 1), Some(b'"' | b'\\' | b'$' | b'`')) => {
                            w.own.push(b'\\');
                            w.own.push(b[i + 1]);
                            i += 2;
                        }
                        b'\\' if b.get(i + 1) == Some(&b'\n') => i += 2,
                        b'$' | b'`' => {
                            let end = expansion(b, i);
                            w.own.extend_from_slice(&b[i..end]);
                            i = end;
                        }
                        x => {
                            if special(x) {
                                w.own.push(b'\\');
                            }
                            w.own.push(x);
                            i += 1;
                        }
                    }
                }
                i += 1;
            }
            b'$' | b'`' => {
                let end = expansion(b, i);
                w.slice(b, i, end);
                i = end;
            }
            b'#' if !w.open => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b' ' | b'\t' | b'\r' => {
                w.flush(command, i, &mut out);
                i += 1;
            }
            b'\n' => {
                w.flush(command, i, &mut out);
                i += 1;
                for (at, delim, strip) in pending.drain(..) {
                    let start = i;
                    let mut end = b.len();
                    while i < b.len() {
                        let eol = b[i..]
                            .iter()
                            .position(|&x| x == b'\n')
                            .map_or(b.len(), |p| i + p);
                        let line = &b[i..eol];
                        let tabs = if strip {
                            line.iter().take_while(|&&x| x == b'\t').count()
                        } else {
                            0
                        };
                        if line[tabs..] == delim[..] {
                            end = i;
                            i = (eol + 1).min(b.len());
                            break;
                        }
                        i = (eol + 1).min(b.len());
                    }
                    out[at] = Tok::Body(&command[start..end.max(start)]);
                }
                out.push(Tok::Op("\n"));
                // Blank lines before the first command do not make a script.
                newline = newline || out.iter().any(|t| !matches!(t, Tok::Op(_)));
            }
            b'<' | b'>' => {
                // A word of digits right before is the descriptor.
                let fd = match w.from {
                    Some(f) if w.open && b[f..i].iter().all(u8::is_ascii_digit) => {
                        w.open = false;
                        w.from = None;
                        f
                    }
                    _ => {
                        w.flush(command, i, &mut out);
                        i
                    }
                };
                let len = [
                    &b"<<<"[..],
                    b"<<-",
                    b"<<",
                    b"<&",
                    b"<>",
                    b">>",
                    b">&",
                    b">|",
                ]
                .iter()
                .find(|p| b[i..].starts_with(p))
                .map_or(1, |p| p.len());
                i += len;
                if b[i - 1] == b'&' {
                    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'-') {
                        i += 1;
                    }
                }
                let op = &command[fd..i];
                if op.ends_with("<<") || op.ends_with("<<-") {
                    let strip = op.ends_with('-');
                    while i < b.len() && matches!(b[i], b' ' | b'\t') {
                        i += 1;
                    }
                    let mut delim = Vec::new();
                    let mut quoted = false;
                    while i < b.len()
                        && !matches!(
                            b[i],
                            b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>'
                        )
                    {
                        match b[i] {
                            b'\'' | b'"' | b'\\' => quoted = true,
                            x => delim.push(x),
                        }
                        i += 1;
                    }
                    // The body is data, read verbatim; a quoted delimiter means no expansion.
                    out.push(Tok::Redir(if quoted { "<<'" } else { "<<" }));
                    pending.push((out.len(), delim, strip));
                    out.push(Tok::Body(""));
                } else {
                    out.push(Tok::Redir(op));
                }
            }
            b'&' | b'|' | b';' | b'(' | b')' => {
                w.flush(command, i, &mut out);
                if c == b'&' && b.get(i + 1) == Some(&b'>') {
                    // `&>` / `&>>`: a redirection.
                    let len = if b.get(i + 2) == Some(&b'>') { 3 } else { 2 };
                    out.push(Tok::Redir(&command[i..i + len]));
                    i += len;
                    continue;
                }
                let (op, len) = match (c, b.get(i + 1).copied()) {
                    (b'&', Some(b'&')) => ("&&", 2),
                    (b'|', Some(b'|')) => ("||", 2),
                    (b'|', Some(b'&')) => ("|&", 2),
                    (b';', Some(b';')) => (";;", 2),
                    (b'&', _) => ("&", 1),
                    (b'|', _) => ("|", 1),
                    (b';', _) => (";", 1),
                    (b'(', _) => ("(", 1),
                    _ => (")", 1),
                };
                out.push(Tok::Op(op));
                i += len;
            }
            _ => {
                let start = i;
                while i < b.len()
                    && !matches!(
                        b[i],
                        b'\\'
                            | b'\''
                            | b'"'
                            | b'$'
                            | b'`'
                            | b' '
                            | b'\t'
                            | b'\r'
                            | b'\n'
                            | b'<'
                            | b'>'
                            | b'&'
                            | b'|'
                            | b';'
                            | b'('
                            | b')'
                    )
                {
                    i += 1;
                }
                w.slice(b, start, i);
            }
        }
    }
    w.flush(command, b.len().min(i), &mut out);
    (out, lines)
}

/// The end of an expansion starting at `i` (`$(…)`, `$((…))`, `${…}`, `` `…` ``, or a
/// `$` alone), copied verbatim into its word.
fn expansion(b: &[u8], mut i: usize) -> usize {
    match (b[i], b.get(i + 1)) {
        (b'`', _) => {
            i += 1;
            while i < b.len() && b[i] != b'`' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        }
        (b'$', Some(&open @ (b'(' | b'{'))) => {
            let close = if open == b'(' { b')' } else { b'}' };
            let mut depth = 0usize;
            let mut q: Option<u8> = None;
            i += 1;
            while i < b.len() {
                let x = b[i];
                match q {
                    Some(qc) => {
                        if x == b'\\' && qc == b'"' {
                            i += 1;
                        } else if x == qc {
                            q = None;
                        }
                    }
                    None => {
                        if x == b'\'' || x == b'"' {
                            q = Some(x);
                        } else if x == b'\\' {
                            i += 1;
                        } else if x == open {
                            depth += 1;
                        } else if x == close {
                            depth -= 1;
                            if depth == 0 {
                                i += 1;
                                break;
                            }
                        }
                    }
                }
                i += 1;
            }
        }
        _ => i += 1,
    }
    i.min(b.len())
}

fn bytes_to_string(v: Vec<u8>) -> String {
    // Split only at ASCII bytes, so the bytes of a valid string stay valid.
    String::from_utf8(v).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The directory of a simple command that is only `cd DIR` (or `cd`), normalised.
fn cd_target(words: &[Tok]) -> Option<String> {
    match words {
        [Tok::Word(w)] if w == "cd" => Some("~".to_string()),
        [Tok::Word(w), Tok::Word(dir)] if w == "cd" && dir != "-" && !dir.starts_with('-') => {
            Some(normalise_dir(dir))
        }
        _ => None,
    }
}

/// A directory as written, without a leading `./` or a trailing `/` (`/` stays `/`).
///
/// ```
/// use toolbrake_core::breaker::shell::normalise_dir;
/// assert_eq!(normalise_dir("./src/"), "src");
/// assert_eq!(normalise_dir("/w//"), "/w");
/// assert_eq!(normalise_dir("/"), "/");
/// ```
pub fn normalise_dir(dir: &str) -> String {
    let mut d = dir;
    while let Some(r) = d.strip_prefix("./").filter(|r| !r.is_empty()) {
        d = r;
    }
    let d = d.trim_end_matches('/');
    if d.is_empty() && dir.starts_with('/') {
        "/".to_string()
    } else if d.is_empty() {
        ".".to_string()
    } else {
        d.to_string()
    }
}

/// Commands whose single-dash words are long options (`find -name`), not flag clusters.
const LONG_SINGLE_DASH: &[&str] = &[
    "find",
    "java",
    "javac",
    "gcc",
    "g++",
    "cc",
    "clang",
    "clang++",
    "go",
    "ffmpeg",
    "convert",
    "magick",
    "xcodebuild",
    "mvn",
    "gradle",
    "ant",
    "dotnet",
    "openssl",
    "tcpdump",
    "iptables",
];

/// A short flag cluster: `-` and 1 to 4 ASCII letters.
fn is_cluster(w: &str) -> bool {
    let b = w.as_bytes();
    b.len() >= 2 && b.len() <= 5 && b[0] == b'-' && b[1..].iter().all(u8::is_ascii_alphabetic)
}

/// A `head`/`tail` count option, as `(canonical, whether its value is the next word)`:
/// `-50`, `-n 50`, `-n50`, `-n +5`, `-c 9`, `--lines=50`, `--bytes=5`.
fn count_opt(w: &str) -> Option<(&'static str, bool)> {
    let number = |s: &str| {
        let d = s.trim_start_matches(['+', '-']);
        !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
    };
    match w {
        "-n" | "--lines" => Some(("-n#", true)),
        "-c" | "--bytes" => Some(("-c#", true)),
        _ => {
            if let Some(n) = w.strip_prefix("--lines=") {
                number(n).then_some(("-n#", false))
            } else if let Some(n) = w.strip_prefix("--bytes=") {
                number(n).then_some(("-c#", false))
            } else if let Some(n) = w.strip_prefix("-c") {
                number(n).then_some(("-c#", false))
            } else if let Some(n) = w.strip_prefix("-n").or_else(|| w.strip_prefix('-')) {
                number(n).then_some(("-n#", false))
            } else {
                None
            }
        }
    }
}

/// A command word's name without its directory, as the verb lists compare it.
fn verb_name(word: &str) -> &str {
    match word.bytes().rposition(|b| b == b'/' || b == b'\\') {
        Some(i) => &word[i + 1..],
        None => word,
    }
}

/// Writes one simple command, canonical, to `out` (`flags`: a buffer to reuse).
fn render_command(toks: &[Tok], out: &mut impl Sink, flags: &mut Vec<u8>) {
    // Leading assignments and a leading `timeout` (with its options and duration) go,
    // unless nothing else is left.
    let word = |k: usize| match toks.get(k) {
        Some(Tok::Word(w)) => Some(w.as_ref()),
        _ => None,
    };
    let mut skip = 0;
    loop {
        match word(skip) {
            Some(w) if is_assignment(w) => skip += 1,
            Some("timeout") => {
                skip += 1;
                while let Some(o) = word(skip).filter(|o| o.starts_with('-') && o.len() > 1) {
                    skip += 1 + TIMEOUT_VALUE_OPTS.contains(&o) as usize;
                }
                if word(skip).is_some_and(is_duration) {
                    skip += 1;
                }
            }
            _ => break,
        }
    }
    if skip >= toks.len() {
        skip = 0;
    }
    let toks = &toks[skip..];
    let verb = match toks.first() {
        Some(Tok::Word(w)) => verb_name(w),
        _ => "",
    };
    let clusters = !LONG_SINGLE_DASH
        .iter()
        .any(|v| v.eq_ignore_ascii_case(verb));
    let counted = verb.eq_ignore_ascii_case("head") || verb.eq_ignore_ascii_case("tail");
    flags.clear();
    let mut wrote = false;
    let mut after_dashdash = false;
    let mut skip_value = false;
    // The next word follows a redirection operator without a blank.
    let mut glue = false;
    let sep = |out: &mut dyn FnMut(&str), wrote: &mut bool, glue: &mut bool| {
        if *wrote && !*glue {
            out(" ");
        }
        *wrote = true;
        *glue = false;
    };
    let mut put = |s: &str| out.put(s);
    let flush_flags =
        |put: &mut dyn FnMut(&str), flags: &mut Vec<u8>, wrote: &mut bool, glue: &mut bool| {
            if flags.is_empty() {
                return;
            }
            flags.sort_unstable();
            sep(put, wrote, glue);
            put("-");
            // ASCII letters only (`is_cluster`).
            put(std::str::from_utf8(flags).unwrap_or_default());
            flags.clear();
        };
    for (k, t) in toks.iter().enumerate() {
        match t {
            Tok::Word(w) => {
                if skip_value {
                    skip_value = false;
                    continue;
                }
                let count = (k > 0 && counted && !glue).then(|| count_opt(w)).flatten();
                if k > 0 && clusters && !after_dashdash && !glue && is_cluster(w) && count.is_none()
                {
                    flags.extend(w.bytes().skip(1));
                    continue;
                }
                flush_flags(&mut put, flags, &mut wrote, &mut glue);
                if let Some((opt, takes)) = count {
                    sep(&mut put, &mut wrote, &mut glue);
                    put(opt);
                    skip_value = takes;
                    continue;
                }
                after_dashdash |= w == "--";
                sep(&mut put, &mut wrote, &mut glue);
                let mut w: &str = w;
                while let Some(r) = w.strip_prefix("./").filter(|r| !r.is_empty()) {
                    w = r;
                }
                // An empty argument (`''`, `""`) is still an argument.
                put(if w.is_empty() { "''" } else { w });
            }
            Tok::Redir(r) => {
                flush_flags(&mut put, flags, &mut wrote, &mut glue);
                // An operator is never the target of the one before it.
                glue = false;
                sep(&mut put, &mut wrote, &mut glue);
                put(r);
                // The target follows the operator without a blank, unless it holds one.
                glue = !r.ends_with(|c: char| c.is_ascii_digit() || c == '-');
            }
            Tok::Body(body) => {
                flush_flags(&mut put, flags, &mut wrote, &mut glue);
                put("\n");
                put(body.trim_end());
                wrote = true;
                glue = false;
            }
            Tok::Op(_) => {}
        }
    }
    flush_flags(&mut put, flags, &mut wrote, &mut glue);
}
