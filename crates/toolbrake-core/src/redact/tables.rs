//! The detector's two tables: [`KEY_NAMES`] (names whose value is a credential, with the
//! words that keep it, [`NOT_A_CREDENTIAL`]) and [`SHAPES`] (credentials known by their
//! form), and the anchors each is scanned for.

use base64::Engine as _;

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
pub(super) const KEY_NEEDLES: &[&str] = &[
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
    pub(super) anchors: &'static [&'static str],
    /// The pattern; its group `s`, when it has one, is the secret (the rest is kept).
    pub(super) pattern: &'static str,
    /// A further check of the secret, where the pattern alone would catch prose.
    pub(super) check: Option<fn(&str) -> bool>,
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
