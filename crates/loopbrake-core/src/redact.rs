//! Redaction: credentials are replaced by [`MARKER`] in everything loopbrake shows or
//! stores (messages, fingerprint previews, the last tool result, reports, session state).
//!
//! Redaction changes what is *shown and stored*, never a call's identity: hashes and
//! fingerprint ids are computed from the unredacted call first. What is redacted:
//! - values of auth-like headers (`Authorization`, `Proxy-Authorization`, `Cookie`,
//!   `Set-Cookie`, `X-Api-Key`, `Api-Key`, `X-Auth-Token`, `Private-Token`), keeping an
//!   authorization scheme (`Bearer`, `Basic`, `Token`);
//! - credential-like query parameters (`api_key`, `apikey`, `access_token`, `token`, `auth`,
//!   `password`, `secret`, `client_secret`, `signature`, `sig`, `key`, `code`, AWS
//!   `X-Amz-Signature` / `X-Amz-Credential`…);
//! - the password of URL user info (`user:[REDACTED]@host`), and a lone token there;
//! - credential flags (`-u user:pass`, `--user`, `--password`, `--token`, `--api-key`,
//!   `--secret`, `--header` values of auth-like headers) and environment assignments of
//!   secret-like names (`GITHUB_TOKEN=…`, `DB_PASSWORD=…`);
//! - well-known token shapes (`sk-…`, `ghp_…`/`gho_…`/`github_pat_…`, `glpat-…`,
//!   `xox?-…`, `AKIA…`, `AIza…`, JWTs);
//! - values next to key-like names (`"password": "…"`, `secret=…`, `api_key: …`).

use regex::{Captures, Regex};
use std::borrow::Cow;
use std::sync::LazyLock;

/// What replaces a secret.
pub const MARKER: &str = "[REDACTED]";

fn re(p: &str) -> Regex {
    Regex::new(p).expect("constant pattern")
}

static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key|x-auth-token|private-token)(\s*[:=]\s*)((?:bearer|basic|token|digest)\s+)?([^\s'\x22,;}\]\\][^'\x22\r\n\\]*)",
    )
});
/// Credential-like query parameter names (compared lowercased, `-` read as `_`).
const QUERY_NAMES: &[&str] = &[
    "api_key",
    "apikey",
    "access_token",
    "refresh_token",
    "id_token",
    "token",
    "auth",
    "password",
    "passwd",
    "pwd",
    "secret",
    "client_secret",
    "signature",
    "sig",
    "key",
    "code",
    "session_id",
    "sessionid",
    "x_amz_signature",
    "x_amz_credential",
    "x_amz_security_token",
];
static USERINFO: LazyLock<Regex> =
    LazyLock::new(|| re(r"([a-zA-Z][a-zA-Z0-9+.-]*://)([^/\s:@'\x22]*):([^/\s@'\x22]+)@"));
static FLAG: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)((?:^|\s)(?:-u|--user|--password|--passwd|--token|--api-key|--apikey|--secret|--client-secret|--access-token|--auth)(?:\s+|=))('[^']*'|\x22[^\x22]*\x22|\S+)",
    )
});
static ENV: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b([A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)[A-Z0-9_]*=)('[^']*'|\x22[^\x22]*\x22|[^\s;&|]+)",
    )
});
static TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    )
});
static KEYED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)([\x22']?\b(?:password|passwd|secret|client[_-]?secret|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|token)\b[\x22']?\s*[:=]\s*)(\x22[^\x22]*\x22|'[^']*'|[^\s,;}&\x22']+)"#,
    )
});

/// `text` with its credentials replaced by [`MARKER`]; borrowed when nothing matched.
///
/// ```
/// use loopbrake_core::redact::redact;
/// assert_eq!(
///     redact("curl -H 'Authorization: Bearer abc.def' 'https://u:pw@api.x.com/v1?api_key=K1&q=2'"),
///     "curl -H 'Authorization: Bearer [REDACTED]' 'https://u:[REDACTED]@api.x.com/v1?api_key=[REDACTED]&q=2'"
/// );
/// assert_eq!(redact("ls -la"), "ls -la");
/// ```
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    // One pass finds every anchor a pattern needs (redaction only adds markers, so what
    // was absent stays absent): most texts hold none, and no pattern runs on them.
    let found = anchors(text);
    if found & HEADER_ANCHORS != 0 {
        out = replace(out, &HEADER, |c| {
            format!(
                "{}{}{}{MARKER}",
                &c[1],
                &c[2],
                c.get(3).map_or("", |m| m.as_str())
            )
        });
    }
    if out.contains('=') && (out.contains('?') || out.contains('&') || out.contains(';')) {
        out = redact_query(out);
    }
    if out.contains("://") && out.contains('@') {
        out = replace(out, &USERINFO, |c| {
            if c[2].is_empty() {
                format!("{}{MARKER}@", &c[1])
            } else {
                format!("{}{}:{MARKER}@", &c[1], &c[2])
            }
        });
    }
    if out.contains("-u") || out.contains("--") {
        out = replace(out, &FLAG, |c| {
            let v = &c[2];
            // `-u user:pass` keeps the user name.
            let shown = match v.trim_matches(['\'', '"']).split_once(':') {
                Some((user, _)) if c[1].trim_start().starts_with("-u") || c[1].contains("user") => {
                    format!("{user}:{MARKER}")
                }
                _ => MARKER.to_string(),
            };
            format!("{}{shown}", &c[1])
        });
    }
    if found & ENV_ANCHORS != 0 && out.contains('=') {
        out = replace(out, &ENV, |c| format!("{}{MARKER}", &c[1]));
    }
    if found & TOKEN_ANCHORS != 0 {
        out = replace(out, &TOKEN, |_| MARKER.to_string());
    }
    if found & KEYED_ANCHOR != 0 {
        out = replace(out, &KEYED, |c| {
            let v = &c[2];
            let q = if v.starts_with('"') {
                "\""
            } else if v.starts_with('\'') {
                "'"
            } else {
                ""
            };
            format!("{}{q}{MARKER}{q}", &c[1])
        });
    }
    out
}

/// How far past a cut a secret is still recognised whole: [`redact_cut`] redacts this much
/// more than it keeps, so a credential that begins before the cut is never half-shown.
pub const CUT_MARGIN: usize = 1024;

/// The first `chars` characters of `text`, redacted. Only a bounded prefix is read (the
/// kept part and [`CUT_MARGIN`] more), whatever the text's length.
///
/// ```
/// use loopbrake_core::redact::redact_cut;
/// let long = format!("token=sk-live-abcdefghijklmnop0123 {}", "x".repeat(100_000));
/// assert_eq!(redact_cut(&long, 14), "token=[REDACTE");
/// ```
pub fn redact_cut(text: &str, chars: usize) -> String {
    let head = match text.char_indices().nth(chars + CUT_MARGIN) {
        Some((i, _)) => &text[..i],
        None => text,
    };
    let red = redact(head);
    match red.char_indices().nth(chars) {
        Some((i, _)) => red[..i].to_string(),
        None => red.into_owned(),
    }
}

const HEADER_ANCHORS: u8 = 1;
const ENV_ANCHORS: u8 = 2;
const TOKEN_ANCHORS: u8 = 4;
/// A key-like name followed (past quotes, spaces, `_`, `-` and letters) by `:` or `=`.
const KEYED_ANCHOR: u8 = 8;

/// The anchors, ASCII case ignored (the patterns decide case), with the groups each wakes.
/// Matches do not overlap (the longest wins), so a needle that ends with another carries
/// its groups too (`auth-token` wakes what `token` does).
const NEEDLES: &[(&str, u8)] = &[
    ("authorization", HEADER_ANCHORS),
    ("cookie", HEADER_ANCHORS),
    ("api-key", HEADER_ANCHORS | KEYED_ANCHOR),
    ("auth-token", HEADER_ANCHORS | ENV_ANCHORS | KEYED_ANCHOR),
    ("private-token", HEADER_ANCHORS | ENV_ANCHORS | KEYED_ANCHOR),
    ("password", ENV_ANCHORS | KEYED_ANCHOR),
    ("passwd", ENV_ANCHORS | KEYED_ANCHOR),
    ("secret", ENV_ANCHORS | KEYED_ANCHOR),
    ("token", ENV_ANCHORS | KEYED_ANCHOR),
    ("api_key", ENV_ANCHORS | KEYED_ANCHOR),
    ("apikey", ENV_ANCHORS | KEYED_ANCHOR),
    ("access_key", ENV_ANCHORS | KEYED_ANCHOR),
    ("private_key", ENV_ANCHORS | KEYED_ANCHOR),
    ("credential", ENV_ANCHORS),
    ("key", KEYED_ANCHOR),
    ("sk-", TOKEN_ANCHORS),
    ("ghp_", TOKEN_ANCHORS),
    ("gho_", TOKEN_ANCHORS),
    ("ghu_", TOKEN_ANCHORS),
    ("ghs_", TOKEN_ANCHORS),
    ("ghr_", TOKEN_ANCHORS),
    ("github_pat_", TOKEN_ANCHORS),
    ("glpat-", TOKEN_ANCHORS),
    ("xox", TOKEN_ANCHORS),
    ("akia", TOKEN_ANCHORS),
    ("aiza", TOKEN_ANCHORS),
    ("eyj", TOKEN_ANCHORS),
];

static ANCHORS: LazyLock<aho_corasick::AhoCorasick> = LazyLock::new(|| {
    aho_corasick::AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .match_kind(aho_corasick::MatchKind::LeftmostLongest)
        .build(NEEDLES.iter().map(|(n, _)| n))
        .expect("constant needles")
});

/// Which pattern groups can match `text`, in one scan.
fn anchors(text: &str) -> u8 {
    let bytes = text.as_bytes();
    let mut found = 0u8;
    for m in ANCHORS.find_iter(text) {
        let (_, group) = NEEDLES[m.pattern().as_usize()];
        let mut g = group & !KEYED_ANCHOR;
        if group & KEYED_ANCHOR != 0 && found & KEYED_ANCHOR == 0 {
            let next = bytes[m.end()..].iter().find(|c| {
                !matches!(c, b'"' | b'\'' | b' ' | b'_' | b'-') && !c.is_ascii_alphabetic()
            });
            if next.is_some_and(|c| *c == b':' || *c == b'=') {
                g |= KEYED_ANCHOR;
            }
        }
        found |= g;
        if found == HEADER_ANCHORS | ENV_ANCHORS | TOKEN_ANCHORS | KEYED_ANCHOR {
            break;
        }
    }
    found
}

/// Query values of credential-like names (`?api_key=…`, `&token=…`), by a scan: URLs are
/// the commonest text loopbrake shows, and a hook should not compile a regex for them.
fn redact_query(text: Cow<'_, str>) -> Cow<'_, str> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if !matches!(b[i], b'?' | b'&' | b';') {
            i += 1;
            continue;
        }
        let start = i + 1;
        let n = b[start..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
            .count();
        let eq = start + n;
        if n == 0 || b.get(eq) != Some(&b'=') {
            i += 1;
            continue;
        }
        let name = text[start..eq].to_ascii_lowercase().replace('-', "_");
        let v = eq + 1;
        let len = b[v..]
            .iter()
            .take_while(|c| {
                !matches!(c, b'&' | b'#' | b'\'' | b'"' | b'\\') && !c.is_ascii_whitespace()
            })
            .count();
        if !QUERY_NAMES.contains(&name.as_str()) || len == 0 || &text[v..v + len] == MARKER {
            i = eq;
            continue;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
        o.push_str(&text[copied..v]);
        o.push_str(MARKER);
        copied = v + len;
        i = copied;
    }
    match out {
        None => text,
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
    }
}

fn replace<'a>(
    text: Cow<'a, str>,
    re: &Regex,
    f: impl Fn(&Captures<'_>) -> String,
) -> Cow<'a, str> {
    if !re.is_match(&text) {
        return text;
    }
    let replaced = re.replace_all(&text, |c: &Captures<'_>| {
        let whole = &c[0];
        if whole.contains(MARKER) && whole.ends_with(MARKER) {
            // Already redacted: leave it (redaction is idempotent).
            return whole.to_string();
        }
        f(c)
    });
    Cow::Owned(replaced.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_go() {
        for (input, secret) in [
            ("curl -H 'Authorization: Bearer sk-live-0123456789abcdefXYZ' https://a.com", "0123456789abcdef"),
            ("curl -H \"X-Api-Key: k3y-value-123\" https://a.com", "k3y-value-123"),
            ("https://api.x.com/v1/items?access_token=abcdEFGH1234&page=2", "abcdEFGH1234"),
            ("git clone https://bob:hunter2@github.com/o/r", "hunter2"),
            ("curl -u admin:s3cr3t https://a.com", "s3cr3t"),
            ("mysql --password=swordfish db", "swordfish"),
            ("gh auth login --token ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnop"),
            ("GITHUB_TOKEN=ghs_zzzzzzzzzzzzzzzzzzzzzzzz ./deploy.sh", "zzzzzzzzzzzz"),
            ("export DB_PASSWORD='correct horse' && run", "correct horse"),
            ("aws key AKIAABCDEFGHIJKLMNOP found", "AKIAABCDEFGHIJKLMNOP"),
            ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "dozjgNryP4J3jVmNHl0w5N"),
            ("{\"password\": \"hunter2\", \"user\": \"bob\"}", "hunter2"),
            ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890"),
            ("client_secret=0f9e8d7c6b5a4f3e2d1c", "0f9e8d7c6b5a"),
            ("Cookie: session=abc123def; theme=dark", "abc123def"),
        ] {
            let r = redact(input);
            assert!(!r.contains(secret), "{input:?} → {r:?}");
            assert!(r.contains(MARKER), "{input:?} → {r:?}");
        }
    }

    #[test]
    fn ordinary_text_stays() {
        for t in [
            "ls -la /repo",
            "grep -rn 'token' src/ | head",
            "pytest -k test_password_reset",
            "curl -s https://api.example.com/v1/items?page=2&per_page=100",
            "user: bob",
            "the key point is this",
            "cargo build --release",
        ] {
            assert_eq!(redact(t), t);
        }
    }

    #[test]
    fn redaction_is_idempotent() {
        let once = redact(
            "curl -u a:b -H 'Authorization: Basic Zm9vOmJhcg==' 'https://x:y@h/p?token=t&k=v'",
        )
        .into_owned();
        assert_eq!(redact(&once), once);
    }
}
