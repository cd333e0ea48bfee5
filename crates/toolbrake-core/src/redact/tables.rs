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
    /// (`"pass": …`, `pass=…`, `--pass …`, `;Pwd=…`; not a test runner's `PASS: test_x`).
    /// Alone, a value that is a path or a variable (`/…`, `~…`, `$…`: the shell's
    /// `PWD=/home/bob`) is kept.
    Keyed,
    /// As the identifier's last word, alone or not (`"key": …`, `AZURE_OPENAI_KEY=…`,
    /// `Ocp-Apim-Subscription-Key: …`), when the value looks like a credential (one word of
    /// 16 or more letters and digits: not `"key": "Enter"`, `"Key": "logs/a.json"`) and
    /// no word of [`IDENTIFYING_KEYS`] comes before it (`primary_key`, `public_key`).
    Vague,
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
    ("pwd", Scope::Keyed),
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
    ("key", Scope::Vague),
    // `openssl … -passin pass:…`, `keytool … -storepass … -keypass …`: a flag's value.
    ("passin", Scope::Anywhere),
    ("passout", Scope::Anywhere),
    ("storepass", Scope::Anywhere),
    ("keypass", Scope::Anywhere),
    ("srcstorepass", Scope::Anywhere),
    ("deststorepass", Scope::Anywhere),
    ("srckeypass", Scope::Anywhere),
    ("destkeypass", Scope::Anywhere),
    // A personal access token: `GITHUB_PAT`, `AZURE_DEVOPS_EXT_PAT`.
    ("pat", Scope::LastOfSeveral),
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
    "fd",
];

/// Words that, right before `key`, say it identifies a record, not a secret
/// ([`Scope::Vague`]).
pub const IDENTIFYING_KEYS: &[&str] = &[
    "public",
    "primary",
    "foreign",
    "sort",
    "partition",
    "range",
    "hash",
    "row",
    "cache",
    "idempotency",
    "dedup",
    "dedupe",
    "object",
    "routing",
    "lookup",
    "unique",
    "composite",
    "group",
    "index",
];

/// Whether the value of a [`Scope::Vague`] name looks like a credential: one word of 16
/// or more characters of a token's alphabet, with letters and digits, and not a path to a
/// file (a `/` and a `.`).
pub(super) fn looks_like_credential(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() >= 16
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"+/=_.~-".contains(c))
        && b.iter().any(u8::is_ascii_digit)
        && b.iter().any(u8::is_ascii_alphabetic)
        && !(b.contains(&b'/') && b.contains(&b'.'))
}

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
    "pat",
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
        anchors: &[
            "glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "glft-", "glimt-", "glagent-",
            "gloas-", "glsoat-",
        ],
        pattern: r"\bgl(?:pat|ptt|dt|rt|cbt|ft|imt|agent|oas|soat)-[A-Za-z0-9_-]{16,}",
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
        // An incoming webhook of Microsoft Teams (Office 365 connectors): the path after
        // `webhookb2/` (group, tenant, connector id, owner, and its secret) is the key.
        name: "teams webhook",
        anchors: &[
            "webhook.office.com/",
            "outlook.office.com/webhook",
            "outlook.office365.com/webhook",
        ],
        pattern: r"(?i:webhook\.office\.com/webhookb2/|outlook\.office(?:365)?\.com/webhook/)(?P<s>[A-Za-z0-9@/_.=-]+)",
        check: None,
    },
    Shape {
        // `123456789:AA…`, alone or in `api.telegram.org/bot…/sendMessage`: the bot's id
        // stays.
        name: "telegram bot token",
        anchors: &[":aa"],
        pattern: r"(?:\b|bot)[0-9]{6,12}:(?P<s>AA[A-Za-z0-9_-]{30,})",
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
        name: "google oauth",
        anchors: &["ya29.", "gocspx-"],
        pattern: r"\b(?:ya29\.[A-Za-z0-9_-]{20,}|GOCSPX-[A-Za-z0-9_-]{20,})",
        check: None,
    },
    Shape {
        name: "npm token",
        anchors: &["npm_"],
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        check: None,
    },
    Shape {
        name: "pypi",
        anchors: &["pypi-"],
        pattern: r"\bpypi-(?P<s>[A-Za-z0-9_-]{40,})",
        check: None,
    },
    Shape {
        // A Twilio API key's SID (`SK` and 32 hex digits); the account's SID (`AC…`) names
        // the account, as a user name does, and its secrets have names (`TWILIO_AUTH_TOKEN`).
        name: "twilio",
        anchors: &[
            "sk0", "sk1", "sk2", "sk3", "sk4", "sk5", "sk6", "sk7", "sk8", "sk9", "ska", "skb",
            "skc", "skd", "ske", "skf",
        ],
        pattern: r"\bSK[0-9a-fA-F]{32}\b",
        check: None,
    },
    Shape {
        name: "sendgrid",
        anchors: &["sg."],
        pattern: r"\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",
        check: None,
    },
    Shape {
        // `key-` and 32 hex digits. The anchor leaves out the `k`: `key` is a key needle,
        // and no needle may begin another.
        name: "mailgun",
        anchors: &["ey-"],
        pattern: r"\bkey-[0-9a-f]{32}\b",
        check: None,
    },
    Shape {
        name: "shopify",
        anchors: &["shpat_", "shpss_", "shpca_", "shppa_"],
        pattern: r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
        check: None,
    },
    Shape {
        name: "digitalocean",
        anchors: &["dop_v1_", "doo_v1_", "dor_v1_"],
        pattern: r"\bdo[por]_v1_[a-fA-F0-9]{64}",
        check: None,
    },
    Shape {
        name: "doppler",
        anchors: &["dp."],
        pattern: r"\bdp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9_.-]{20,}",
        check: None,
    },
    Shape {
        name: "linear",
        anchors: &["lin_api_", "lin_oauth_"],
        pattern: r"\blin_(?:api|oauth)_[A-Za-z0-9]{32,}",
        check: None,
    },
    Shape {
        // `secret_` and 43 or more letters or digits (the anchor leaves out the `s` of the key
        // needle `secret`), or `ntn_`.
        name: "notion",
        anchors: &["ecret_", "ntn_"],
        pattern: r"\b(?:secret_[A-Za-z0-9]{43,}|ntn_[A-Za-z0-9]{40,})\b",
        check: None,
    },
    Shape {
        // Atlassian API tokens (`ATATT…`, `ATCTT…`) and Bitbucket app passwords (`ATBB…`).
        name: "atlassian",
        anchors: &["atatt", "atctt", "atbb"],
        pattern: r"\b(?:AT[AC]TT[A-Za-z0-9_=-]{20,}|ATBB[A-Za-z0-9]{28,})",
        check: None,
    },
    Shape {
        name: "databricks",
        anchors: &["dapi"],
        pattern: r"\bdapi[0-9a-f]{32}(?:-[0-9]+)?\b",
        check: None,
    },
    Shape {
        name: "vault",
        anchors: &["hvs.", "hvb.", "hvr."],
        pattern: r"\bhv[sbr]\.[A-Za-z0-9_-]{20,}",
        check: None,
    },
    Shape {
        // Groq, Replicate, Perplexity, xAI.
        name: "ai provider token",
        anchors: &["gsk_", "r8_", "pplx-", "xai-"],
        pattern: r"\b(?:gsk_|r8_|pplx-|xai-)[A-Za-z0-9]{30,}",
        check: None,
    },
    Shape {
        // Grafana, Postman, New Relic, Tailscale, Sentry, Supabase, Heroku, Pulumi,
        // Terraform Cloud, Figma, Contentful, Fly.io, Square, 1Password service accounts,
        // age, Mapbox.
        name: "service token",
        anchors: &[
            "glsa_",
            "glc_",
            "pmak-",
            "nrak-",
            "tskey-",
            "sntrys_",
            "sntryu_",
            "sbp_",
            "hrku-",
            "pul-",
            ".atlasv1.",
            "figd_",
            "cfpat-",
            "fo1_",
            "sq0atp-",
            "sq0csp-",
            "ops_ey",
            "age-secret-key-1",
            "sk.eyj",
        ],
        pattern: concat!(
            r"\b(?:glsa_[A-Za-z0-9_]{32,}|glc_[A-Za-z0-9+/=_-]{32,}|PMAK-[A-Za-z0-9-]{40,}",
            r"|NRAK-[A-Z0-9]{20,}|tskey-[a-z]+-[A-Za-z0-9-]{20,}|sntry[su]_[A-Za-z0-9+/=_-]{30,}",
            r"|sbp_[a-f0-9]{40}|HRKU-[A-Za-z0-9_-]{30,}|pul-[a-f0-9]{40}",
            r"|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{30,}|figd_[A-Za-z0-9_-]{30,}",
            r"|CFPAT-[A-Za-z0-9_-]{40,}|fo1_[A-Za-z0-9_-]{30,}|sq0(?:atp|csp)-[A-Za-z0-9_-]{20,}",
            r"|ops_eyJ[A-Za-z0-9+/=_-]{30,}|AGE-SECRET-KEY-1[0-9A-Z]{50,}",
            r"|sk\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",
        ),
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
        // A password (`https://bob:PASS@`), or a token given as the user
        // (`https://TOKEN@github.com`: 20 or more letters, digits, `_` or `-`).
        pattern: r#"[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^/\s:@'"\\]*:(?P<s>[^/\s@'"\\]+)|(?P<t>[A-Za-z0-9_-]{20,}))@"#,
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
        // the second (`htpasswd -nb USER PASS`); `sqlcmd -P PASS` (bcp, osql), `openssl
        // … -k PASS` (and `-K HEXKEY`), `smbclient -U user%PASS`, `ldapsearch -w PASS` (and
        // the other ldap tools), `mongo -p PASS` (mongosh, mongodump…), `zip -P PASS`,
        // `7z -pPASS`, `ssh-keygen -N PASS` / `-P PASS`, `lftp -u user,PASS`, `twine
        // upload -p PASS`, `net use … /user:USER PASS`, and `az`/`oc`/`cf login -p PASS`.
        // Words are split at spaces and tabs. A bare secret never begins with `-` (a
        // flag: `mongo -u admin -p --authenticationDatabase admin` prompts).
        name: "command-line password",
        anchors: &[
            "mysql",
            "mariadb",
            "sshpass",
            "redis-cli",
            "curl",
            "login",
            "htpasswd",
            "sqlcmd",
            "bcp",
            "osql",
            "openssl",
            "smbclient",
            "rpcclient",
            "ldap",
            "mongo",
            "zip",
            "7z",
            "ssh-keygen",
            "lftp",
            "twine",
            "net use",
        ],
        pattern: concat!(
            r"(?:\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)\b[^|;&\n]*?[ \t]-p",
            r"|\bsshpass(?:[ \t]+-[^p \t\n][^ \t\n]*)*[ \t]+-p[ \t]*",
            r"|\bredis-cli\b[^|;&\n]*?[ \t]-a[ \t]+",
            r#"|\bcurl\b[^|;&\n]*?[ \t](?:-u|--user|--proxy-user)(?:[ \t]+|=)?['"]?(?:\\")?[^ \t\n:'"\\]*:"#,
            r"|\b(?:docker|podman|nerdctl|buildah|skopeo|oras|finch|helm[ \t]+registry|az(?:[ \t]+acr)?|oc|cf)[ \t]+login\b[^|;&\n]*?[ \t](?:-p[ \t]*|-p=|--password(?:[ \t]+|=))",
            r"|\b(?:sqlcmd|bcp|osql)\b[^|;&\n]*?[ \t]-P[ \t]*",
            r"|\bopenssl\b[^|;&\n]*?[ \t]-[kK][ \t]+",
            r#"|\b(?:smbclient|rpcclient)\b[^|;&\n]*?[ \t](?:-U|--user)(?:[ \t]+|=)['"]?[^ \t\n%'"]*%"#,
            r"|\bldap(?:search|add|modify|delete|whoami|compare|modrdn|passwd|exop)\b[^|;&\n]*?[ \t]-w[ \t]*",
            r"|\bmongo(?:sh|dump|restore|export|import|stat|top|files)?\b[^|;&\n]*?[ \t]-p(?:[ \t]+|=)",
            r"|\b(?:zip|unzip|zipcloak)\b[^|;&\n]*?[ \t]-P[ \t]+",
            r"|\b7z[ar]?\b[^|;&\n]*?[ \t]-p",
            // ssh-keygen's old and new pass phrases (`-p -P OLD -N NEW`): the first is `u`.
            r#"|\bssh-keygen\b[^|;&\n]*?[ \t]-[NP][ \t]*(?:(?P<u>'[^']+'|"[^"]+"|[^ \t\r\n'"\\-][^ \t\r\n'"\\]*)[^|;&\n]*?[ \t]-[NP][ \t]*)?"#,
            r#"|\blftp\b[^|;&\n]*?[ \t]-u[ \t]+['"]?[^ \t\n,'"]*,"#,
            r"|\btwine\b[^|;&\n]*?[ \t]-p(?:[ \t]+|=)",
            r"|\bnet[ \t]+use\b[^|;&\n]*?[ \t]/user:[^ \t\n]+[ \t]+",
            // htpasswd: flags (and the numbers `-C` and `-r` take), one of them with b and
            // none with n, then the file; or flags, one of them with n. Then the user.
            r"|\bhtpasswd(?:(?:[ \t]+(?:-[A-Za-mo-z0-9]+|[0-9]+))*?[ \t]+-[A-Za-mo-z0-9]*b[A-Za-mo-z0-9]*(?:[ \t]+(?:-[A-Za-mo-z0-9]+|[0-9]+))*[ \t]+[^ \t\n|;&<>]+",
            r"|(?:[ \t]+(?:-[A-Za-z0-9]+|[0-9]+))*?[ \t]+-[A-Za-z0-9]*n[A-Za-z0-9]*(?:[ \t]+(?:-[A-Za-z0-9]+|[0-9]+))*)[ \t]+[^ \t\n|;&<>]+[ \t]+)",
            r#"(?P<s>'[^']+'|"[^"]+"|\\"(?:[^"\\]|\\[^"])+\\"|[^ \t\r\n'"\\-][^ \t\r\n'"\\]*)"#,
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
