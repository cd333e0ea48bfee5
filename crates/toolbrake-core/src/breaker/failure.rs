//! Whether an [`Outcome`] is a failure, and why (docs/decisions.md, "Outcomes"): structured
//! fields first; the output text only for shell tools; `aborted` is never a failure.

use regex::Regex;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::LazyLock;

pub use crate::outcome::Outcome;

/// Why a call counts as failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    /// Non-zero exit code.
    Exit,
    /// HTTP status >= 400.
    Http,
    /// Timed out.
    Timeout,
    /// Killed by a signal.
    Signal,
    /// Sandbox denial.
    Sandbox,
    /// The host reported an error.
    Error,
    /// A script raised an uncaught exception.
    Exception,
    /// curl's own diagnostic.
    Curl,
}

impl Reason {
    /// The protocol name (`exit`, `http`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Exit => "exit",
            Reason::Http => "http",
            Reason::Timeout => "timeout",
            Reason::Signal => "signal",
            Reason::Sandbox => "sandbox",
            Reason::Error => "error",
            Reason::Exception => "exception",
            Reason::Curl => "curl",
        }
    }
}

/// A classified failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Why.
    pub reason: Reason,
    /// The code, status, signal, exception name… when known.
    pub detail: Option<String>,
}

impl Failure {
    fn new(reason: Reason, detail: Option<String>) -> Self {
        Failure {
            reason,
            detail: detail.filter(|d| !d.is_empty()),
        }
    }
}

impl fmt::Display for Failure {
    /// The human description used in messages (`the command exited 2`, …).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.detail.as_deref();
        match (self.reason, d) {
            (Reason::Exit, Some(d)) => write!(f, "the command exited {d}"),
            (Reason::Exit, None) => write!(f, "the command exited non-zero"),
            (Reason::Http, Some(d)) => write!(f, "the request returned HTTP {d}"),
            (Reason::Http, None) => write!(f, "the request returned an error status"),
            (Reason::Timeout, Some(d)) => write!(f, "the call timed out ({d})"),
            (Reason::Timeout, None) => write!(f, "the call timed out"),
            (Reason::Signal, Some(d)) => write!(f, "the command was killed by signal {d}"),
            (Reason::Signal, None) => write!(f, "the command was killed"),
            (Reason::Sandbox, Some(d)) => write!(f, "the sandbox denied the operation ({d})"),
            (Reason::Sandbox, None) => write!(f, "the sandbox denied the operation"),
            (Reason::Error, Some(d)) => write!(f, "the call raised an error ({d})"),
            (Reason::Error, None) => write!(f, "the call raised an error"),
            (Reason::Exception, Some(d)) => write!(f, "the script raised {d}"),
            (Reason::Exception, None) => write!(f, "the script raised an uncaught exception"),
            (Reason::Curl, Some(d)) => write!(f, "curl failed (code {d})"),
            (Reason::Curl, None) => write!(f, "the call failed"),
        }
    }
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("constant pattern")
}

static EXIT: LazyLock<Regex> = LazyLock::new(|| re(r"\[exit code: (-?\d+)\]"));
static PAREN_HTTP: LazyLock<Regex> = LazyLock::new(|| re(r"\(HTTP (\d{3})\)"));
static TIMED_OUT: LazyLock<Regex> = LazyLock::new(|| re(r"\[timed out after (\d+)ms\]"));
static KILLED: LazyLock<Regex> = LazyLock::new(|| re(r"\[killed by signal: ([^\]\n]*)\]"));
static FULL_EXC: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception)):"));
static SHORT_EXC: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?m)^(?:[A-Za-z_][A-Za-z0-9_]*\.)*([A-Za-z_][A-Za-z0-9_]*(?:Error|Exception)): ")
});
static HTTP_ERROR: LazyLock<Regex> = LazyLock::new(|| re(r"HTTP Error (\d{3})"));
static CURL: LazyLock<Regex> = LazyLock::new(|| re(r"curl: \((\d+)\)"));

/// Classifies an outcome: `None` is a success (or an abort, which is never a failure).
///
/// ```
/// use toolbrake_core::breaker::failure::{classify, Outcome, Reason};
/// let o = Outcome { exit_code: Some(2), ..Outcome::default() };
/// assert_eq!(classify(&o, true).unwrap().reason, Reason::Exit);
/// let page = Outcome { status_code: Some(200), text: Some("HTTP Error 400".into()), ..Outcome::default() };
/// assert_eq!(classify(&page, true), None);
/// ```
pub fn classify(o: &Outcome, shell: bool) -> Option<Failure> {
    if o.is_aborted() {
        return None;
    }
    if o.is_error == Some(true) {
        return Some(Failure::new(Reason::Error, o.error_code.clone()));
    }
    if o.background == Some(true) {
        return None;
    }
    if let Some(code) = o.exit_code.filter(|c| *c != 0) {
        return Some(Failure::new(Reason::Exit, Some(code.to_string())));
    }
    if o.timed_out == Some(true) {
        return Some(Failure::new(Reason::Timeout, None));
    }
    if let Some(sig) = o.signal.as_ref().filter(|s| !s.is_empty()) {
        return Some(Failure::new(Reason::Signal, Some(sig.clone())));
    }
    if let Some(status) = o.status_code {
        return (status >= 400).then(|| Failure::new(Reason::Http, Some(status.to_string())));
    }
    if o.sandbox_denied == Some(true) {
        return Some(Failure::new(Reason::Sandbox, None));
    }
    if !shell {
        return None;
    }
    classify_text(o.text.as_deref().unwrap_or(""))
}

/// The shell-output markers, first match wins.
///
/// Each pattern runs only when its literal anchor is in the text, so most outputs (which
/// carry no marker) never compile a regular expression: a hook process classifies one
/// output and exits.
pub fn classify_text(text: &str) -> Option<Failure> {
    if text.is_empty() {
        return None;
    }
    if text.contains("[exit code: ") {
        if let Some(c) = EXIT
            .captures_iter(text)
            .find(|c| !matches!(c[1].parse::<i64>(), Ok(0)))
        {
            return Some(Failure::new(Reason::Exit, Some(c[1].to_string())));
        }
    }
    if text.contains("(HTTP ") {
        if let Some(c) = PAREN_HTTP
            .captures_iter(text)
            .find(|c| c[1].parse::<u16>().is_ok_and(|n| n >= 400))
        {
            return Some(Failure::new(Reason::Http, Some(c[1].to_string())));
        }
    }
    if text.contains("[timed out after ") {
        if let Some(c) = TIMED_OUT.captures(text) {
            return Some(Failure::new(Reason::Timeout, Some(format!("{}ms", &c[1]))));
        }
    }
    if text.contains("[killed by signal: ") {
        if let Some(c) = KILLED.captures(text) {
            return Some(Failure::new(Reason::Signal, Some(c[1].trim().to_string())));
        }
    }
    if text.contains("[sandbox: file access denied") {
        return Some(Failure::new(Reason::Sandbox, None));
    }
    if text.contains("Traceback (most recent call last)") {
        let last = FULL_EXC
            .captures_iter(text)
            .last()
            .map(|c| c[1].to_string());
        return Some(Failure::new(Reason::Exception, last));
    }
    if text.contains("Error: ") || text.contains("Exception: ") {
        if let Some(c) = SHORT_EXC.captures(text) {
            return Some(Failure::new(Reason::Exception, Some(c[1].to_string())));
        }
    }
    if text.contains("HTTP Error ") {
        if let Some(c) = HTTP_ERROR.captures(text) {
            return Some(Failure::new(Reason::Http, Some(c[1].to_string())));
        }
    }
    if text.contains("curl: (") {
        if let Some(c) = CURL.captures(text) {
            return Some(Failure::new(Reason::Curl, Some(c[1].to_string())));
        }
    }
    None
}

/// The longest error line a shape reads, in bytes.
const SHAPE_LINE_BYTES: usize = 240;

/// The shape of a failure (docs/decisions.md, "Failure target of a plain tool"): why it
/// failed, its code or error name, and the line of its text that says what went wrong
/// ([`error_lines`]) with what names one instance taken out: every quoted name, and every
/// word holding a digit (ids, counts, times, addresses). `order 17 not found` and `order
/// 18 not found` have one shape; `user 'alice' not found` and `no such table: orders` do
/// not share it, nor do two JSON errors whose quoted messages differ.
///
/// ```
/// use toolbrake_core::breaker::failure::{classify, shape, Outcome};
/// let err = |t: &str| Outcome { is_error: Some(true), error_code: Some("LookupError".into()), text: Some(t.into()), ..Outcome::default() };
/// let of = |o: &Outcome| shape(o, &classify(o, false).unwrap());
/// assert_eq!(of(&err("order 17 not found")), of(&err("order 18 not found\nat line 3")));
/// assert_eq!(of(&err("no row for 'alice'")), of(&err("no row for 'bob'")));
/// assert_ne!(of(&err("order 17 not found")), of(&err("service unavailable")));
/// assert_ne!(of(&err(r#"{"error": "no such table"}"#)), of(&err(r#"{"error": "user is locked"}"#)));
/// assert_eq!(of(&err(r#"{"error": "order 17 not found"}"#)), of(&err(r#"{"error": "order 18 not found"}"#)));
/// ```
pub fn shape(o: &Outcome, f: &Failure) -> crate::progress::OutputDigest {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(f.reason.as_str());
    h.update([0]);
    h.update(f.detail.as_deref().unwrap_or(""));
    h.update([0]);
    for line in error_lines(o.text.as_deref().unwrap_or("")) {
        let mut end = line.len().min(SHAPE_LINE_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        h.update(line_shape(&line[..end]));
        h.update([0]);
    }
    let d = h.finalize();
    crate::progress::OutputDigest(u64::from_be_bytes(d[..8].try_into().expect("8 bytes")))
}

/// The lines of a failure's text that say what went wrong: the last exception line of a
/// Python traceback (its first line is the same for every error); else the first non-blank
/// line, and the next one too when the first is a header ending in `:` (`Error executing
/// tool get_order:`).
fn error_lines(text: &str) -> Vec<&str> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if text.contains("Traceback (most recent call last)") {
        if let Some(last) = text.lines().map(str::trim).rfind(|l| FULL_EXC.is_match(l)) {
            return vec![last];
        }
    }
    let Some(first) = lines.next() else {
        return vec![""];
    };
    match lines.next() {
        Some(next) if first.ends_with(':') => vec![first, next],
        _ => vec![first],
    }
}

/// [`shape`]'s reading of one line: words holding a digit become `#`; a quoted span
/// without a blank (a name, an id, a key: `'alice'`) becomes `'…'`, a quoted span with
/// blanks (a message, as JSON errors quote theirs: `{"error": "no such table"}`) is read
/// like the line.
fn line_shape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if matches!(c, '\'' | '"' | '`') {
            // A quoted span up to its closing quote on the line; a lone quote stays.
            let rest: String = chars.clone().collect();
            if let Some(close) = rest.find(c) {
                for _ in 0..rest[..close].chars().count() + 1 {
                    chars.next();
                }
                let inner = &rest[..close];
                if inner.contains(char::is_whitespace) {
                    out.push('\'');
                    out.push_str(&line_shape(inner));
                    out.push('\'');
                } else {
                    out.push_str("'…'");
                }
                continue;
            }
            out.push(c);
        } else if c.is_alphanumeric() || c == '_' {
            let mut word = String::from(c);
            while let Some(&n) = chars.peek() {
                if n.is_alphanumeric() || matches!(n, '_' | '-' | '.') {
                    word.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
            if word.chars().any(|ch| ch.is_ascii_digit()) {
                out.push('#');
            } else {
                out.push_str(&word);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Option<(Reason, Option<String>)> {
        classify_text(text).map(|f| (f.reason, f.detail))
    }

    #[test]
    fn text_markers() {
        assert_eq!(
            t("ok\n[exit code: 3]"),
            Some((Reason::Exit, Some("3".into())))
        );
        assert_eq!(t("[exit code: 0]"), None);
        assert_eq!(
            t("GET /x (HTTP 404)"),
            Some((Reason::Http, Some("404".into())))
        );
        assert_eq!(
            t("Traceback (most recent call last):\n  File \"x\", line 1\nurllib.error.URLError: <urlopen error>"),
            Some((Reason::Exception, Some("urllib.error.URLError".into())))
        );
        assert_eq!(
            t("json.decoder.JSONDecodeError: Expecting value"),
            Some((Reason::Exception, Some("JSONDecodeError".into())))
        );
        assert_eq!(t("the docs say ValueError: is raised"), None);
        assert_eq!(
            t("curl: (6) Could not resolve host"),
            Some((Reason::Curl, Some("6".into())))
        );
        assert_eq!(
            t("urllib says HTTP Error 503: x"),
            Some((Reason::Http, Some("503".into())))
        );
        // The markers the cases above leave out, each alone in its output.
        assert_eq!(
            t("ran [timed out after 3000ms]"),
            Some((Reason::Timeout, Some("3000ms".into())))
        );
        assert_eq!(
            t("[killed by signal: SIGKILL]"),
            Some((Reason::Signal, Some("SIGKILL".into())))
        );
        assert_eq!(
            t("[sandbox: file access denied: /etc]"),
            Some((Reason::Sandbox, None))
        );
        assert_eq!(
            t("app.BadThingException: no"),
            Some((Reason::Exception, Some("BadThingException".into())))
        );
        assert_eq!(t("a plain answer: fine (mostly) [ok]"), None);
    }

    #[test]
    fn descriptions_are_clean_with_and_without_detail() {
        for reason in [
            Reason::Exit,
            Reason::Http,
            Reason::Timeout,
            Reason::Signal,
            Reason::Sandbox,
            Reason::Error,
            Reason::Exception,
            Reason::Curl,
        ] {
            for detail in [None, Some("X".to_string())] {
                let s = Failure { reason, detail }.to_string();
                assert!(
                    !s.is_empty() && !s.contains("  ") && !s.contains("( ") && !s.contains(" )"),
                    "{s}"
                );
            }
        }
    }

    #[test]
    fn structured_fields_win_and_abort_is_no_failure() {
        let aborted = Outcome {
            aborted: Some(true),
            is_error: Some(true),
            ..Outcome::default()
        };
        assert_eq!(classify(&aborted, true), None);
        let bg = Outcome {
            background: Some(true),
            exit_code: Some(1),
            ..Outcome::default()
        };
        assert_eq!(classify(&bg, true), None);
        let read = Outcome::success("Traceback (most recent call last):");
        assert_eq!(classify(&read, false), None);
        assert!(classify(&read, true).is_some());
    }
}
