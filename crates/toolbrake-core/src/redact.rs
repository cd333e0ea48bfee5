//! Redaction: credentials are replaced by [`MARKER`] in everything toolbrake shows or
//! stores (messages, fingerprint previews, the last tool result, reports, session state).
//!
//! Redaction changes what is *shown and stored*, never a call's identity: hashes and
//! fingerprint ids are computed from the unredacted call first.
//!
//! The detector is two tables, each row with its own test (the shared cases of
//! `toolbrake-testkit`, `CREDENTIAL_CASES`):
//! - [`KEY_NAMES`]: names whose *value* is a credential, matched case-insensitively as a
//!   whole identifier or as a run of the words of a larger one (split at `_`, `-`, `.` and
//!   camelCase: `aws_secret_access_key`, `OPENAI_API_KEY`, `dbPassword`, `_authToken`,
//!   `X-Api-Key`), in every syntax a value follows a name: `KEY=value`, `KEY: value`
//!   (headers, YAML; an authorization scheme such as `Bearer` is kept), `"KEY": "value"`
//!   (JSON, escaped or not), `--key value`, `--key=value`, `["--key", "value"]`, URL
//!   query parameters, a configuration tool's `KEY value` (`aws configure set`, `npm config
//!   set`, `git config`) and a `.netrc` entry's `password value`. A word naming something
//!   else right after the name keeps the value (`token_count`, `password_reset`,
//!   `--token-file`: see [`NOT_A_CREDENTIAL`]);
//! - [`SHAPES`]: credentials recognisable by their form wherever they appear: PEM private
//!   keys, `Bearer`/`Basic` credentials, provider tokens (`sk-…`, `ghp_…`, `hf_…`,
//!   `rk_live_…`, `xoxb-…`, `AKIA…`, JWTs…), webhook URLs (with or without their scheme:
//!   a `net:` fingerprint names a URL without it), URL user info, and passwords
//!   given on a command line (`mysql -pPASS`, `sshpass -p PASS`, `docker login -p PASS`,
//!   `htpasswd -b FILE USER PASS`, `curl -u user:PASS`).
//!
//! Both tables are scanned for literal anchors first (one Aho-Corasick pass each), so a
//! text holding none of them costs two scans and no regular expression.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use base64::Engine as _;
use regex::{Captures, Regex};
use std::borrow::Cow;
use std::sync::{LazyLock, OnceLock};

/// What replaces a secret.
pub const MARKER: &str = "[REDACTED]";

/// Where a [`KEY_NAMES`] row counts, among the words of an identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Anywhere, unless a word of [`NOT_A_CREDENTIAL`] follows it (`DB_PASSWORD`,
    /// `password_confirmation`; not `password_reset`).
    Anywhere,
    /// As the identifier's last words (`basic_auth`, `_auth`; not `auth_method`).
    Last,
    /// As the last words of a longer identifier (`MYSQL_PWD`; not the shell's `PWD`).
    LastOfSeveral,
    /// As the last words of a longer identifier, or alone where a value is assigned to it
    /// (`"pass": …`, `pass=…`, `--pass …`; not a test runner's `PASS: test_x`).
    Keyed,
    /// As the whole name of a URL query parameter (`?key=…`, `&code=…`).
    Query,
}

/// Names whose value is a credential: words joined by `_`, and where they count.
pub const KEY_NAMES: &[(&str, Scope)] = &[
    ("password", Scope::Anywhere),
    ("passwd", Scope::Anywhere),
    ("passphrase", Scope::Anywhere),
    ("pgpassword", Scope::Anywhere),
    ("pass", Scope::Keyed),
    ("sshpass", Scope::Keyed),
    ("pwd", Scope::LastOfSeveral),
    ("secret", Scope::Anywhere),
    ("token", Scope::Anywhere),
    ("api_key", Scope::Anywhere),
    ("apikey", Scope::Anywhere),
    ("access_key", Scope::Anywhere),
    ("private_key", Scope::Anywhere),
    ("encryption_key", Scope::Anywhere),
    ("signing_key", Scope::Anywhere),
    ("master_key", Scope::Anywhere),
    ("account_key", Scope::Anywhere),
    ("credential", Scope::Anywhere),
    ("credentials", Scope::Anywhere),
    ("authorization", Scope::Anywhere),
    ("cookie", Scope::Anywhere),
    ("auth", Scope::Last),
    ("dsn", Scope::Last),
    ("key", Scope::Query),
    ("code", Scope::Query),
    ("sig", Scope::Query),
    ("signature", Scope::Query),
    ("amz_signature", Scope::Anywhere),
    ("session_id", Scope::Query),
    ("sessionid", Scope::Query),
];

/// Words that, right after a name of [`KEY_NAMES`], say the value is about the
/// credential, not the credential (`token_count`, `password_reset`, `--token-file`).
pub const NOT_A_CREDENTIAL: &[&str] = &[
    "count",
    "counts",
    "type",
    "limit",
    "length",
    "len",
    "size",
    "max",
    "min",
    "reset",
    "file",
    "path",
    "dir",
    "name",
    "url",
    "uri",
    "endpoint",
    "expiry",
    "expires",
    "expiration",
    "ttl",
    "id",
    "policy",
    "required",
    "hint",
    "label",
    "usage",
    "jar",
    "stdin",
    "env",
    "rate",
    "format",
];

/// The literals that locate a [`KEY_NAMES`] candidate: every row's words contain one.
const KEY_NEEDLES: &[&str] = &[
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "credential",
    "auth",
    "cookie",
    "dsn",
    "code",
    "sig",
    "session",
];

/// A credential recognisable by its form.
pub struct Shape {
    /// What it is (each row has a test case of this name).
    pub name: &'static str,
    /// Literals (ASCII case ignored) one of which any match contains.
    anchors: &'static [&'static str],
    /// The pattern; its group `s`, when it has one, is the secret (the rest is kept).
    pattern: &'static str,
    /// A further check of the secret, where the pattern alone would catch prose.
    check: Option<fn(&str) -> bool>,
}

/// Credentials recognisable by their form, wherever they appear.
pub const SHAPES: &[Shape] = &[
    Shape {
        name: "pem private key",
        anchors: &["private key"],
        pattern: r"(?s)-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?P<s>.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)",
        check: None,
    },
    Shape {
        name: "bearer",
        anchors: &["bearer"],
        pattern: r"\b(?i:bearer)\s+(?P<s>[A-Za-z0-9._~+/=-]{8,})",
        check: Some(not_a_word),
    },
    Shape {
        name: "basic",
        anchors: &["basic"],
        pattern: r"\b(?i:basic)\s+(?P<s>[A-Za-z0-9+/]{4,}={0,2})",
        check: Some(user_colon_password),
    },
    Shape {
        name: "sk-",
        anchors: &["sk-"],
        pattern: r"\bsk-[A-Za-z0-9_-]{16,}",
        check: None,
    },
    Shape {
        name: "github",
        anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        check: None,
    },
    Shape {
        name: "gitlab",
        anchors: &["glpat-"],
        pattern: r"\bglpat-[A-Za-z0-9_-]{16,}",
        check: None,
    },
    Shape {
        name: "hugging face",
        anchors: &["hf_"],
        pattern: r"\bhf_[A-Za-z0-9]{20,}",
        check: None,
    },
    Shape {
        name: "stripe",
        anchors: &["_live_", "_test_", "whsec_"],
        pattern: r"\b(?:(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9+/=]{16,})",
        check: None,
    },
    Shape {
        name: "slack token",
        anchors: &["xox", "xapp-"],
        pattern: r"\b(?:xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,})",
        check: None,
    },
    // The webhook rows match from the host on, so that a URL without its scheme (as a
    // `net:` fingerprint names it) is redacted as the URL is.
    Shape {
        name: "slack webhook",
        anchors: &["hooks.slack.com/"],
        pattern: r"(?i:hooks\.slack\.com/(?:services|workflows|triggers)/)(?P<s>[A-Za-z0-9/_-]+)",
        check: None,
    },
    Shape {
        name: "discord webhook",
        anchors: &["/api/webhooks/"],
        pattern: r"(?i:discord(?:app)?\.com/api/webhooks/)[0-9]+/(?P<s>[A-Za-z0-9_-]+)",
        check: None,
    },
    Shape {
        name: "aws access key id",
        anchors: &["akia", "asia"],
        pattern: r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        check: None,
    },
    Shape {
        name: "google api key",
        anchors: &["aiza"],
        pattern: r"\bAIza[0-9A-Za-z_-]{30,}",
        check: None,
    },
    Shape {
        name: "npm token",
        anchors: &["npm_"],
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        check: None,
    },
    Shape {
        name: "jwt",
        anchors: &["eyj"],
        pattern: r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        check: None,
    },
    Shape {
        name: "url user info",
        anchors: &["@"],
        pattern: r#"[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@'"\\]*:(?P<s>[^/\s@'"\\]+)@"#,
        check: None,
    },
    Shape {
        // Passwords given on a command line, one pattern for every command (their secret is
        // group `s`, a shell word: quoted, escaped-quoted in a JSON string, or bare):
        // `mysql -pPASS` (mysqldump, mariadb…), `sshpass -p PASS`, `redis-cli -a PASS`,
        // `curl -u user:PASS`; a registry login's `-p PASS`, `--password PASS` or
        // `--password=PASS` (docker, podman, nerdctl, buildah, skopeo, oras, finch, `helm
        // registry login`); and the password `htpasswd -b` takes as an argument: the third
        // (`htpasswd -b FILE USER PASS`, `-bc`, `-Bb`, `-C 12`…) or, with `-n` (no file),
        // the second (`htpasswd -nb USER PASS`). Words are split at spaces and tabs.
        name: "command-line password",
        anchors: &[
            "mysql",
            "mariadb",
            "sshpass",
            "redis-cli",
            "curl",
            "login",
            "htpasswd",
        ],
        pattern: concat!(
            r"(?:\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)\b[^|;&\n]*?[ \t]-p",
            r"|\bsshpass(?:[ \t]+-[^p \t\n][^ \t\n]*)*[ \t]+-p[ \t]*",
            r"|\bredis-cli\b[^|;&\n]*?[ \t]-a[ \t]+",
            r#"|\bcurl\b[^|;&\n]*?[ \t](?:-u|--user|--proxy-user)(?:[ \t]+|=)?['"]?(?:\\")?[^ \t\n:'"\\]*:"#,
            r"|\b(?:docker|podman|nerdctl|buildah|skopeo|oras|finch|helm[ \t]+registry)[ \t]+login\b[^|;&\n]*?[ \t](?:-p[ \t]*|-p=|--password(?:[ \t]+|=))",
            // htpasswd: flags (and the numbers `-C` and `-r` take), one of them with b and
            // none with n, then the file; or flags, one of them with n. Then the user.
            r"|\bhtpasswd(?:(?:[ \t]+(?:-[A-Za-mo-z0-9]+|[0-9]+))*?[ \t]+-[A-Za-mo-z0-9]*b[A-Za-mo-z0-9]*(?:[ \t]+(?:-[A-Za-mo-z0-9]+|[0-9]+))*[ \t]+[^ \t\n|;&<>]+",
            r"|(?:[ \t]+(?:-[A-Za-z0-9]+|[0-9]+))*?[ \t]+-[A-Za-z0-9]*n[A-Za-z0-9]*(?:[ \t]+(?:-[A-Za-z0-9]+|[0-9]+))*)[ \t]+[^ \t\n|;&<>]+[ \t]+)",
            r#"(?P<s>'[^']*'|"[^"]*"|\\"(?:[^"\\]|\\[^"])*\\"|[^ \t\r\n'"\\]+)"#,
        ),
        check: None,
    },
];

/// A `Bearer` credential is not a word of prose (`Bearer authentication`).
fn not_a_word(s: &str) -> bool {
    s.bytes().any(|c| !c.is_ascii_alphabetic())
}

/// A `Basic` credential is base64 of `user:password` (not `Basic authentication`).
fn user_colon_password(s: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    STANDARD
        .decode(s)
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .is_ok_and(|d| {
            std::str::from_utf8(&d)
                .is_ok_and(|t| t.contains(':') && !t.chars().any(char::is_control))
        })
}

struct Compiled {
    /// The key names alone, built the first time a text holds one.
    key_needles: OnceLock<AhoCorasick>,
    /// Every anchor (pattern `i` wakes row `anchor_row[i]`), then every key needle: the
    /// scan that tells which shapes can match and whether any key name can
    /// ([`anchors_present`]).
    any_leftmost: AhoCorasick,
    /// For each anchor, the row of [`SHAPES`] it wakes.
    anchor_row: Vec<usize>,
    /// Each row's expression, compiled the first time an anchor wakes it: compiling them
    /// all is most of a hook's start-up, and most text wakes none.
    shapes: Vec<OnceLock<Regex>>,
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

/// The tables, compiled once (immutable: no state survives a call). Noncontiguous NFAs: a
/// DFA of these needles scans no faster on the short texts that are redacted, and building
/// one was a third of a hook's start-up once the expressions were compiled only on need.
static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let mut anchors = Vec::new();
    let mut anchor_row = Vec::new();
    for (row, shape) in SHAPES.iter().enumerate() {
        for a in shape.anchors {
            anchors.push(*a);
            anchor_row.push(row);
        }
    }
    let mut all = anchors;
    all.extend_from_slice(KEY_NEEDLES);
    Compiled {
        key_needles: OnceLock::new(),
        any_leftmost: AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::NoncontiguousNFA))
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(all)
            .expect("constant needles"),
        anchor_row,
        shapes: SHAPES.iter().map(|_| OnceLock::new()).collect(),
    }
});

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
fn anchors_present(c: &Compiled, text: &str) -> (u64, bool) {
    let mut rows = 0u64;
    let mut keys = false;
    let mut from = 0;
    while from < text.len() {
        let input = aho_corasick::Input::new(text).span(from..text.len());
        let Some(m) = c.any_leftmost.find(input) else {
            break;
        };
        match c.anchor_row.get(m.pattern().as_usize()) {
            Some(row) => rows |= 1 << row,
            None => keys = true,
        }
        from = m.start() + 1;
    }
    (rows, keys)
}

/// The index of the `n`-th character of `text` (0-based), `None` when it has at most `n`:
/// `text.char_indices().nth(n)`, without decoding characters when the prefix is ASCII.
fn nth_char_index(text: &str, n: usize) -> Option<usize> {
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
        let chars = self.chars as usize;
        let mut red = redact_cut(&self.head, chars);
        if self.total > 0 && red.chars().count() >= chars {
            red = format!("{red}… (+{} more chars)", self.total as usize - chars);
        }
        if let Some(i) = nth_char_index(&red, self.limit as usize) {
            red.truncate(i);
        }
        Cow::Owned(red)
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
        s.serialize_str(&self.shown())
    }
}

impl<'de> serde::Deserialize<'de> for RedactedCut {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Redacted and cut when it was written: shown as it is.
        Ok(RedactedCut::redacted(String::deserialize(d)?))
    }
}

fn replace_shape<'a>(
    text: Cow<'a, str>,
    re: &Regex,
    check: Option<fn(&str) -> bool>,
) -> Cow<'a, str> {
    let replaced = re.replace_all(&text, |c: &Captures<'_>| {
        let whole = c.get(0).expect("group 0");
        let Some(s) = c.name("s") else {
            return MARKER.to_string();
        };
        let keep = s.as_str() == MARKER || check.is_some_and(|f| !f(s.as_str()));
        if keep {
            return whole.as_str().to_string();
        }
        let at = whole.start();
        format!(
            "{}{MARKER}{}",
            &whole.as_str()[..s.start() - at],
            &whole.as_str()[s.end() - at..]
        )
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
fn words(ident: &str) -> Vec<&str> {
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

/// Whether an identifier of these words names a credential, in this context.
fn names_credential(w: &[&str], cx: Context) -> bool {
    KEY_NAMES.iter().any(|(name, scope)| {
        let n = name.split('_').count();
        (0..w.len().saturating_sub(n - 1)).any(|i| {
            let hit = name
                .split('_')
                .zip(&w[i..i + n])
                .all(|(a, b)| a.eq_ignore_ascii_case(b));
            let last = i + n == w.len();
            hit && match scope {
                Scope::Anywhere => !w
                    .get(i + n)
                    .is_some_and(|q| NOT_A_CREDENTIAL.iter().any(|x| x.eq_ignore_ascii_case(q))),
                Scope::Last => last,
                Scope::LastOfSeveral => last && i > 0,
                Scope::Keyed => last && (i > 0 || cx.quoted || cx.flag || cx.equals),
                Scope::Query => cx.query && cx.equals && i == 0 && last,
            }
        })
    })
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
            quoted: matches!(before, Some(b'"' | b'\'')),
            flag,
            query: matches!(before, Some(b'?' | b'&' | b';')),
            equals: sep == b'=',
        };
        let w = words(&s[start..end]);
        if !names_credential(&w, cx) {
            continue;
        }
        let header = w
            .iter()
            .any(|w| w.eq_ignore_ascii_case("authorization") || w.eq_ignore_ascii_case("cookie"));
        // A value that follows its name after a space (a flag's, a setting's) is never a
        // flag itself.
        let Some((vs, ve)) = value_span(b, sep, vs, ve, header, flag || sep == b' ') else {
            continue;
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use toolbrake_testkit::{CREDENTIAL_CASES, ORDINARY_TEXTS};

    /// Every needle of the anchor scan, in its order.
    fn needles() -> Vec<&'static str> {
        let mut all: Vec<&str> = SHAPES
            .iter()
            .flat_map(|s| s.anchors.iter().copied())
            .collect();
        all.extend_from_slice(KEY_NEEDLES);
        all
    }

    /// What [`anchors_present`] must find: every match of an overlapping search.
    fn overlapping(text: &str) -> (u64, bool) {
        let c = &*COMPILED;
        let ac = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(needles())
            .unwrap();
        let (mut rows, mut keys) = (0u64, false);
        for m in ac.find_overlapping_iter(text) {
            match c.anchor_row.get(m.pattern().as_usize()) {
                Some(row) => rows |= 1 << row,
                None => keys = true,
            }
        }
        (rows, keys)
    }

    /// The anchor scan relies on it: at most one needle starts at any position.
    #[test]
    fn no_needle_is_a_prefix_of_another() {
        let all = needles();
        for (i, a) in all.iter().enumerate() {
            for (j, b) in all.iter().enumerate() {
                assert!(
                    i == j || !b.to_ascii_lowercase().starts_with(&a.to_ascii_lowercase()),
                    "{a:?} is a prefix of {b:?}"
                );
            }
        }
    }

    #[test]
    fn the_anchor_scan_finds_what_an_overlapping_search_finds() {
        let c = &*COMPILED;
        let texts = CREDENTIAL_CASES
            .iter()
            .map(|c| c.text)
            .chain(ORDINARY_TEXTS.iter().copied())
            .chain([
                "",
                "sshpassword",
                "PRIVATE KEY",
                "tokenkey@sk-",
                "ééssHPass-p",
            ]);
        for t in texts {
            assert_eq!(anchors_present(c, t), overlapping(t), "{t:?}");
        }
    }

    proptest! {
        /// Needles run into each other, overlap, change case and sit among other bytes.
        #[test]
        fn the_anchor_scan_agrees_on_needle_soup(
            parts in proptest::collection::vec(
                prop_oneof![
                    proptest::sample::select(needles()).prop_map(str::to_string),
                    proptest::sample::select(needles()).prop_map(|n| n.to_ascii_uppercase()),
                    proptest::sample::select(needles()).prop_map(|n| n[..n.len() / 2].to_string()),
                    "[a-zA-Z0-9_ @/.:=é-]{0,4}",
                ],
                0..12,
            )
        ) {
            let text = parts.concat();
            prop_assert_eq!(anchors_present(&COMPILED, &text), overlapping(&text));
        }

        #[test]
        fn nth_char_index_is_char_indices_nth(text in "[a-z\\u{e9}\\u{1F600}]{0,12}", n in 0usize..14) {
            prop_assert_eq!(nth_char_index(&text, n), text.char_indices().nth(n).map(|(i, _)| i));
        }
    }

    /// Every case of the shared table: its secret does not survive, a marker shows where
    /// it was, and redacting again changes nothing.
    #[test]
    fn every_credential_case_is_redacted() {
        for case in CREDENTIAL_CASES {
            let r = redact(case.text);
            assert!(
                !r.contains(case.secret),
                "{} ({}): {:?} → {r:?}",
                case.row,
                case.text,
                case.secret
            );
            assert!(r.contains(MARKER), "{}: {:?} → {r:?}", case.row, case.text);
            assert_eq!(redact(&r), r, "idempotent: {}", case.row);
        }
    }

    /// A result kept as read leaves the state only redacted: stored (serialised), shown,
    /// printed, and read back; and it shows exactly what `redact_cut` of the text shows.
    #[test]
    fn a_kept_cut_leaves_only_redacted() {
        for case in CREDENTIAL_CASES {
            let long = format!("{} {}", case.text, "out ".repeat(400));
            for (text, chars) in [(case.text, 800), (long.as_str(), 800), (long.as_str(), 40)] {
                let kept = RedactedCut::new(text, chars);
                assert_eq!(kept.shown(), redact_cut(text, chars), "{}", case.row);
                let stored = serde_json::to_string(&kept).unwrap();
                let printed = format!("{kept:?}");
                for (surface, t) in [("stored", &stored), ("printed", &printed)] {
                    assert!(!t.contains(case.secret), "{surface} {}: {t}", case.row);
                }
                let back: RedactedCut = serde_json::from_str(&stored).unwrap();
                assert_eq!(back.shown(), kept.shown(), "{}", case.row);
                assert_eq!(back, kept);
            }
        }
    }

    proptest! {
        /// A preview kept as read shows, when it leaves, what redacting the text, cutting it
        /// and marking what was cut shows; cut again as the timeline cuts it, the same cut
        /// of that; and its stored form never holds the secret.
        #[test]
        fn a_kept_preview_shows_the_redacted_preview(
            pre in "[a-z =]{0,40}",
            i in 0..CREDENTIAL_CASES.len(),
            post in "[a-z \u{e9}]{0,300}",
            cap in 1usize..200,
            limit in 1usize..150,
        ) {
            let case = &CREDENTIAL_CASES[i];
            let text = format!("{pre} {} {post}", case.text);
            let red = redact_cut(&text, cap);
            let want = if red.chars().count() < cap || text.chars().nth(cap).is_none() {
                red
            } else {
                format!("{red}… (+{} more chars)", text.chars().count() - cap)
            };
            let kept = RedactedCut::preview(&text, cap);
            prop_assert_eq!(kept.shown(), want.as_str());
            let stored = serde_json::to_string(&kept).unwrap();
            prop_assert!(!stored.contains(case.secret), "{}", stored);
            let cut: String = want.chars().take(limit).collect();
            prop_assert_eq!(kept.clone().limited(limit).shown().into_owned(), cut.clone());
            let back: RedactedCut = serde_json::from_str(&stored).unwrap();
            prop_assert_eq!(back.limited(limit).shown().into_owned(), cut);
        }
    }

    /// Each row of both tables has at least one case of its own name.
    #[test]
    fn every_shape_compiles() {
        // Rows are compiled when first woken; each must compile.
        for shape in SHAPES {
            assert!(Regex::new(shape.pattern).is_ok(), "{}", shape.name);
        }
    }

    #[test]
    fn every_row_has_a_case() {
        let rows = KEY_NAMES
            .iter()
            .map(|(n, _)| *n)
            .chain(SHAPES.iter().map(|s| s.name));
        for row in rows {
            assert!(
                CREDENTIAL_CASES.iter().any(|c| c.row == row),
                "no case for row {row:?} in toolbrake_testkit::CREDENTIAL_CASES"
            );
        }
        for c in CREDENTIAL_CASES {
            assert!(
                KEY_NAMES.iter().any(|(n, _)| *n == c.row)
                    || SHAPES.iter().any(|s| s.name == c.row),
                "case {:?} names no row",
                c.row
            );
        }
    }

    /// Every key name contains a needle, or it could never be found.
    #[test]
    fn every_key_name_has_a_needle() {
        for (name, _) in KEY_NAMES {
            assert!(
                KEY_NEEDLES.iter().any(|n| name.contains(n)),
                "{name} has no needle"
            );
        }
        assert!(SHAPES.len() <= 64, "the anchor mask is a u64");
    }

    #[test]
    fn the_marker_wakes_nothing() {
        // `redact` scans once, before replacing: a marker must never bring in an anchor
        // or a key name that the scan did not see.
        assert_eq!(overlapping(MARKER), (0, false));
        assert_eq!(overlapping(&format!("a{MARKER}b")), (0, false));
    }

    #[test]
    fn ordinary_text_stays() {
        for t in ORDINARY_TEXTS {
            assert_eq!(redact(t), *t);
        }
    }

    #[test]
    fn words_split_at_separators_and_camel_case() {
        assert_eq!(
            words("aws_secret_access_key"),
            ["aws", "secret", "access", "key"]
        );
        assert_eq!(words("XApiKey"), ["X", "Api", "Key"]);
        assert_eq!(words("APIKey"), ["API", "Key"]);
        assert_eq!(words("_authToken"), ["auth", "Token"]);
        assert_eq!(words("--db-password"), ["db", "password"]);
        assert_eq!(words("OPENAI_API_KEY"), ["OPENAI", "API", "KEY"]);
    }

    #[test]
    fn schemes_and_names_stay_visible() {
        assert_eq!(
            redact(r#"{"Authorization": "Bearer abc123def456"}"#),
            r#"{"Authorization": "Bearer [REDACTED]"}"#
        );
        assert_eq!(
            redact("DB_PASSWORD=hunter2 ./run"),
            "DB_PASSWORD=[REDACTED] ./run"
        );
        assert_eq!(
            redact("mysql -u root -phunter2 shop"),
            "mysql -u root -p[REDACTED] shop"
        );
        assert_eq!(
            redact("https://hooks.slack.com/services/T000/B000/XXXX"),
            "https://hooks.slack.com/services/[REDACTED]"
        );
        assert_eq!(
            redact("-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----\nok"),
            "-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----\nok"
        );
    }

    /// Only the secret goes: the command, its flags, the user, the registry and what
    /// follows the password stay readable.
    #[test]
    fn command_line_passwords_and_settings_keep_the_rest() {
        for (text, want) in [
            (
                "docker login -u me -p Pw1 registry.example.com",
                "docker login -u me -p [REDACTED] registry.example.com",
            ),
            (
                "htpasswd -bc .htpasswd admin Pw2 2>/dev/null",
                "htpasswd -bc .htpasswd admin [REDACTED] 2>/dev/null",
            ),
            (
                "htpasswd -B -b -C 10 f admin Pw3",
                "htpasswd -B -b -C 10 f admin [REDACTED]",
            ),
            (
                "htpasswd -nbB admin Pw4 | tee -a users",
                "htpasswd -nbB admin [REDACTED] | tee -a users",
            ),
            (
                "aws configure set aws_secret_access_key Pw5 --profile dev",
                "aws configure set aws_secret_access_key [REDACTED] --profile dev",
            ),
            (
                "npm config set --location=user //r.example.com/:_authToken Pw6",
                "npm config set --location=user //r.example.com/:_authToken [REDACTED]",
            ),
            (
                "machine h.example.com login bob password Pw7 account acme",
                "machine h.example.com login bob password [REDACTED] account acme",
            ),
            // After a line break escaped in a JSON string, a name is still a name.
            (
                r#"{"text":"user: bob\ntoken: Pw8\nport: 1"}"#,
                r#"{"text":"user: bob\ntoken: [REDACTED]\nport: 1"}"#,
            ),
            (
                r#"{"c":"machine h\nlogin bob\npassword Pw9\n"}"#,
                r#"{"c":"machine h\nlogin bob\npassword [REDACTED]\n"}"#,
            ),
            (
                r#"{"a":"{\"c\":\"machine h\\nlogin bob\\npassword Pw10\\n\"}"}"#,
                r#"{"a":"{\"c\":\"machine h\\nlogin bob\\npassword [REDACTED]\\n\"}"}"#,
            ),
        ] {
            assert_eq!(redact(text), want, "{text}");
        }
    }

    proptest::proptest! {
        /// Any text, however its quotes, escapes and multi-byte characters fall around
        /// key names and shapes: no panic, and the result is valid text.
        #[test]
        fn any_text_is_redacted_without_panic(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("[ -~\\n\\té€]{0,12}").unwrap(),
                    proptest::sample::select(vec![
                        "password", "\\\"", "\"", "'", ":", "=", "--token", " ", "\\n", "\\",
                        "Bearer ", "Basic ", "-----BEGIN RSA PRIVATE KEY-----", "mysql -p",
                        "sshpass -p", "https://u:", "@", "?key=", "é", "[REDACTED]",
                        "docker login -p ", "htpasswd -nb ", "htpasswd -b ", "machine h ",
                        "login u ", "password ", "config set ", "\\\\n",
                    ]).prop_map(str::to_string),
                ],
                0..24,
            )
        ) {
            let text = parts.concat();
            let _ = redact(&text);
            let _ = redact_cut(&text, 7);
        }
    }

    #[test]
    fn a_cut_never_half_shows_a_private_key() {
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
            "QUJD".repeat(1000)
        );
        let r = redact_cut(&pem, 200);
        assert!(!r.contains("QUJD"), "{r}");
    }
}
