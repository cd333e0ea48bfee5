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
    // The anchors are looked for once, in a lowercased copy of the input: redaction only
    // adds markers, so what was absent stays absent.
    let lower = text.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if has(&[
        "authorization",
        "cookie",
        "api-key",
        "auth-token",
        "private-token",
    ]) {
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
    if out.contains('=')
        && [
            "PASSWORD",
            "PASSWD",
            "SECRET",
            "TOKEN",
            "API_KEY",
            "APIKEY",
            "ACCESS_KEY",
            "PRIVATE_KEY",
            "CREDENTIAL",
        ]
        .iter()
        .any(|n| out.contains(n))
    {
        out = replace(out, &ENV, |c| format!("{}{MARKER}", &c[1]));
    }
    if [
        "sk-",
        "gh",
        "github_pat_",
        "glpat-",
        "xox",
        "AKIA",
        "AIza",
        "eyJ",
    ]
    .iter()
    .any(|n| out.contains(n))
    {
        out = replace(out, &TOKEN, |_| MARKER.to_string());
    }
    if keyed_candidate(&lower) {
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

/// Whether a key-like name stands before a `:` or `=` somewhere (`"password": `,
/// `secret=`): the only texts the key-value pattern can change. Words such as `passed` or
/// `keyboard` do not wake it.
fn keyed_candidate(lower: &str) -> bool {
    const NAMES: &[&str] = &["password", "passwd", "secret", "key", "token"];
    NAMES.iter().any(|name| {
        lower.match_indices(name).any(|(i, _)| {
            lower[i + name.len()..]
                .bytes()
                .find(|c| {
                    !matches!(c, b'"' | b'\'' | b' ' | b'_' | b'-') && !c.is_ascii_alphabetic()
                })
                .is_some_and(|c| c == b':' || c == b'=')
        })
    })
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
