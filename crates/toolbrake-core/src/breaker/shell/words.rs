//! Shell words (docs/decisions.md, "Shell and URL primitives"): the tokenizer, the
//! command's verb (past wrappers, assignments and `timeout`), volatile-flag stripping for
//! HTTP clients, and the output sink a command writes to. All pure.

use std::borrow::Cow;

/// Splits a command into words: whitespace separates; single and double quotes group
/// and are removed; a backslash escapes the next character outside quotes and inside
/// double quotes; nothing is special inside single quotes; an empty quoted string is
/// still a word. An unbalanced quote runs to the end of the command.
///
/// ```
/// use toolbrake_core::breaker::shell::tokenize;
/// assert_eq!(
///     tokenize(r#"curl -H 'Accept: a b' "https://x/y" -o 'out.bin'"#),
///     ["curl", "-H", "Accept: a b", "https://x/y", "-o", "out.bin"]
/// );
/// ```
pub fn tokenize(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    #[derive(PartialEq)]
    enum Q {
        None,
        Single,
        Double,
    }
    let mut q = Q::None;
    while let Some(c) = chars.next() {
        match q {
            Q::Single => {
                if c == '\'' {
                    q = Q::None;
                } else {
                    cur.push(c);
                }
            }
            Q::Double => match c {
                '"' => q = Q::None,
                '\\' => {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                _ => cur.push(c),
            },
            Q::None => match c {
                c if c.is_whitespace() => {
                    if in_word {
                        out.push(std::mem::take(&mut cur));
                        in_word = false;
                    }
                }
                '\'' => {
                    q = Q::Single;
                    in_word = true;
                }
                '"' => {
                    q = Q::Double;
                    in_word = true;
                }
                '\\' => {
                    in_word = true;
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                _ => {
                    in_word = true;
                    cur.push(c);
                }
            },
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// [`tokenize`], each word borrowed from the command when it holds no quote and no
/// backslash (the common case): the same words, without a copy of each.
pub(crate) fn tokenize_cow(command: &str) -> Vec<Cow<'_, str>> {
    let mut out = Vec::with_capacity(command.len() / 6 + 2);
    let mut rest = command;
    loop {
        rest = rest.trim_start_matches(char::is_whitespace);
        if rest.is_empty() {
            return out;
        }
        let end = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '\\'))
            .unwrap_or(rest.len());
        let after = &rest[end..];
        if after.is_empty() || after.starts_with(char::is_whitespace) {
            out.push(Cow::Borrowed(&rest[..end]));
            rest = after;
            continue;
        }
        // A word with quotes or escapes: the rest is read as `tokenize` reads it.
        let offset = command.len() - rest.len();
        let tail = tokenize(&command[offset..]);
        out.extend(tail.into_iter().map(Cow::Owned));
        return out;
    }
}

/// Commands that run another command after their own options.
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "command", "env", "time", "nice", "nohup", "exec",
];
/// Wrapper options that take a value.
const WRAPPER_VALUE_OPTS: &[&str] = &[
    "-u", "-g", "-p", "-C", "-h", "-r", "-t", "-U", "-R", "-T", "-S", "-n", "-D",
];
/// `timeout`'s options that take a value.
pub(super) const TIMEOUT_VALUE_OPTS: &[&str] = &["-s", "-k", "--signal", "--kill-after"];
/// HTTP clients: only their argv loses volatile flags.
pub const HTTP_CLIENTS: &[&str] = &["curl", "wget", "http", "httpie", "aria2c"];
/// Words that separate commands in a pipeline or list.
const OPERATORS: &[&str] = &["|", "||", "&&", ";", "&", "|&"];

/// Whether a word is a `NAME=value` assignment.
pub(crate) fn is_assignment(tok: &str) -> bool {
    let Some(eq) = tok.find('=') else {
        return false;
    };
    let name = &tok[..eq];
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn is_duration(tok: &str) -> bool {
    let body = tok.strip_suffix(['s', 'm', 'h', 'd']).unwrap_or(tok);
    let mut parts = body.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next();
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
}

/// Index just past a `timeout` word at `i`: its options (with the values of `-s`/`-k`,
/// wherever they stand) and an optional duration.
fn skip_timeout<S: AsRef<str>>(toks: &[S], mut i: usize) -> usize {
    i += 1;
    while i < toks.len() && toks[i].as_ref().starts_with('-') && toks[i].as_ref().len() > 1 {
        let t = toks[i].as_ref();
        i += 1;
        if TIMEOUT_VALUE_OPTS.contains(&t) {
            i += 1;
        }
    }
    if i < toks.len() && is_duration(toks[i].as_ref()) {
        i += 1;
    }
    i
}

/// Index of the command word of the command starting at `start`, skipping assignments,
/// `timeout` and the wrapper words with all their options, wherever they stand.
fn verb_index<S: AsRef<str>>(toks: &[S], start: usize, end: usize) -> Option<usize> {
    let mut i = start;
    while i < end {
        let t = toks[i].as_ref();
        if is_assignment(t) {
            i += 1;
        } else if t == "timeout" {
            i = skip_timeout(toks, i);
        } else if WRAPPERS.contains(&t) {
            i += 1;
            while i < end && toks[i].as_ref().starts_with('-') && toks[i].as_ref().len() > 1 {
                let opt = toks[i].as_ref();
                i += 1;
                if WRAPPER_VALUE_OPTS.contains(&opt) {
                    i += 1;
                }
            }
        } else {
            return Some(i);
        }
    }
    None
}

/// A command word without its directory, lowercased.
pub(crate) fn basename_lower(word: &str) -> String {
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word);
    base.to_lowercase()
}

/// The command's verb: the first word after assignments and wrappers, reduced to its
/// basename and lowercased; `""` when there is none.
///
/// ```
/// use toolbrake_core::breaker::shell::first_verb;
/// assert_eq!(first_verb("FOO=1 sudo timeout 5 /usr/bin/curl https://a.com"), "curl");
/// assert_eq!(first_verb("timeout -s KILL 5 curl https://a.com"), "curl");
/// ```
pub fn first_verb(command: &str) -> String {
    let toks = tokenize(command);
    verb_of(&toks)
}

pub(crate) fn verb_of<S: AsRef<str>>(toks: &[S]) -> String {
    verb_index(toks, 0, toks.len())
        .map(|i| basename_lower(toks[i].as_ref()))
        .unwrap_or_default()
}

const VOLATILE_BOOL: &[&str] = &[
    "--silent",
    "--show-error",
    "--fail",
    "--location",
    "--insecure",
    "--compressed",
    "--no-progress-meter",
];
// `--user-agent` takes a value in every client that has it, so it is treated as a value
// flag only (the original listed it among the booleans as well, which left its value).
const VOLATILE_VALUE: &[&str] = &[
    "--max-time",
    "--connect-timeout",
    "--retry",
    "--retry-delay",
    "--retry-max-time",
    "--speed-time",
    "--speed-limit",
    "--max-redirs",
    "--user-agent",
    "-m",
    "-A",
];

fn is_volatile_single(tok: &str) -> bool {
    if VOLATILE_BOOL.contains(&tok) {
        return true;
    }
    if let Some((flag, _)) = tok.split_once('=') {
        if flag.starts_with("--") && VOLATILE_VALUE.contains(&flag) {
            return true;
        }
    }
    for short in ["-m", "-A"] {
        if let Some(rest) = tok.strip_prefix(short) {
            if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) {
                return true;
            }
        }
    }
    if let Some(cluster) = tok.strip_prefix('-') {
        if !cluster.is_empty()
            && !cluster.starts_with('-')
            && cluster.chars().all(|c| "sSfLk".contains(c))
        {
            return true;
        }
    }
    false
}

/// The command without its volatile parts (feeds `cmd:`): leading assignments and a
/// leading `timeout` wrapper go, and inside the argv of an HTTP client the flags that
/// only tune the transfer (`-sSL`, `--max-time 10`, …) go. Other commands keep every
/// flag (`ls -s`, `grep -f`).
///
/// ```
/// use toolbrake_core::breaker::shell::strip_volatile_flags;
/// assert_eq!(strip_volatile_flags("timeout 30 curl -s -o out.bin https://a.com/x"), "curl -o out.bin https://a.com/x");
/// assert_eq!(strip_volatile_flags("ls -s | grep -f pats"), "ls -s | grep -f pats");
/// ```
pub fn strip_volatile_flags(command: &str) -> String {
    let toks = tokenize(command);
    strip_tokens(&toks)
}

pub(crate) fn strip_tokens<S: AsRef<str>>(toks: &[S]) -> String {
    let mut i = 0;
    loop {
        if i < toks.len() && is_assignment(toks[i].as_ref()) {
            i += 1;
        } else if i < toks.len() && toks[i].as_ref() == "timeout" {
            i = skip_timeout(toks, i);
        } else {
            break;
        }
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut seg_start = i;
    while seg_start < toks.len() {
        let seg_end = (seg_start..toks.len())
            .find(|&j| OPERATORS.contains(&toks[j].as_ref()))
            .unwrap_or(toks.len());
        let http = verb_index(toks, seg_start, seg_end)
            .is_some_and(|v| HTTP_CLIENTS.contains(&basename_lower(toks[v].as_ref()).as_str()));
        let mut j = seg_start;
        while j < seg_end {
            let t = toks[j].as_ref();
            if http && VOLATILE_VALUE.contains(&t) {
                j += 2;
                continue;
            }
            if !(http && is_volatile_single(t)) {
                kept.push(t);
            }
            j += 1;
        }
        if seg_end < toks.len() {
            kept.push(toks[seg_end].as_ref());
        }
        seg_start = seg_end + 1;
    }
    kept.join(" ")
}

/// Output destinations that are never fingerprints.
pub const GENERIC_SINKS: &[&str] = &[
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/zero",
    "/dev/tty",
    "-",
];

fn is_operator_or_redirect(t: &str) -> bool {
    OPERATORS.contains(&t) || matches!(t, ">" | ">>" | "<")
}

fn clean_sink(path: &str) -> Option<String> {
    let mut p = path.trim();
    p = p.strip_prefix(['\'', '"']).unwrap_or(p);
    p = p.strip_suffix(['\'', '"']).unwrap_or(p);
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    (!p.is_empty()).then(|| p.to_string())
}

/// Where the command writes its output: `-o`/`--output`/`--output-document FILE`,
/// wget's `-O FILE`, `--output=FILE`, a `>`/`>>` redirect, or `tee`'s last file.
/// Generic sinks are *not* filtered here (see [`GENERIC_SINKS`]).
///
/// ```
/// use toolbrake_core::breaker::shell::extract_sink;
/// assert_eq!(extract_sink("curl -s https://a.com/x 2>/dev/null > out.bin").as_deref(), Some("out.bin"));
/// assert_eq!(extract_sink("curl https://a.com/x | tee -a ./out.bin").as_deref(), Some("out.bin"));
/// assert_eq!(extract_sink("ls -la"), None);
/// ```
pub fn extract_sink(command: &str) -> Option<String> {
    sink_of(&tokenize(command))
}

pub(crate) fn sink_of<S: AsRef<str>>(toks: &[S]) -> Option<String> {
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_ref();
        let next = toks.get(i + 1).map(AsRef::as_ref);
        match t {
            "-o" | "--output" | "--output-document" => {
                if let Some(n) = next.filter(|n| !n.starts_with('-')) {
                    return clean_sink(n);
                }
            }
            "-O" => {
                if let Some(n) = next.filter(|n| {
                    !n.starts_with('-') && !n.starts_with("http://") && !n.starts_with("https://")
                }) {
                    return clean_sink(n);
                }
            }
            "tee" => {
                let end = (i + 1..toks.len())
                    .find(|&j| is_operator_or_redirect(toks[j].as_ref()))
                    .unwrap_or(toks.len());
                if let Some(f) = toks[i + 1..end]
                    .iter()
                    .rev()
                    .find(|x| !x.as_ref().starts_with('-'))
                {
                    return clean_sink(f.as_ref());
                }
            }
            _ => {
                if let Some(p) = t.strip_prefix("--output=") {
                    return clean_sink(p);
                }
                if t.starts_with('>') {
                    let rest = t.trim_start_matches('>');
                    if !rest.is_empty() {
                        return clean_sink(rest);
                    }
                    if let Some(n) = next.filter(|n| !is_operator_or_redirect(n)) {
                        return clean_sink(n);
                    }
                }
            }
        }
        i += 1;
    }
    None
}
