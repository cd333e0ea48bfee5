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
//!   set`, `git config`), a `.netrc` entry's `password value` and an XML element
//!   (`<password>value</password>`). A word naming something else right after the name
//!   keeps the value (`token_count`, `password_reset`, `--token-file`: see
//!   [`NOT_A_CREDENTIAL`]); `key`, which names too many things, only a value that looks
//!   like a credential ([`Scope::Vague`]);
//! - [`SHAPES`]: credentials recognisable by their form wherever they appear: PEM private
//!   keys, `Bearer`/`Basic` credentials, provider tokens (`sk-…`, `ghp_…`, `hf_…`,
//!   `rk_live_…`, `xoxb-…`, `AKIA…`, `pypi-…`, `123456789:AA…`, `hvs.…`, JWTs…), webhook
//!   URLs (Slack, Discord, Teams; with or without their scheme: a `net:` fingerprint names
//!   a URL without it), URL user info, and passwords given on a command line (`mysql
//!   -pPASS`, `sshpass -p PASS`, `docker login -p PASS`, `htpasswd -b FILE USER PASS`,
//!   `curl -u user:PASS`, `sqlcmd -P PASS`, `openssl -k PASS`, `ldapsearch -w PASS`…).
//!
//! Both tables are scanned for literal anchors first (one Aho-Corasick pass each), so a
//! text holding none of them costs two scans and no regular expression.

mod cut;
mod scan;
mod tables;

pub use cut::{json_len, log_line, redact_cut, RedactedCut, CUT_MARGIN};
pub use scan::redact;
pub use tables::{Scope, Shape, KEY_NAMES, MARKER, NOT_A_CREDENTIAL, SHAPES};

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::AhoCorasick;
    use aho_corasick::AhoCorasickKind;
    use cut::nth_char_index;
    use proptest::prelude::*;
    use regex::Regex;
    use scan::{all_needles, anchor_automaton, anchors_with, words, COMPILED, DFA_AFTER_BYTES};
    use tables::KEY_NEEDLES;
    use toolbrake_testkit::{CREDENTIAL_CASES, ORDINARY_TEXTS};

    /// Every needle of the anchor scan, in its order.
    fn needles() -> Vec<&'static str> {
        all_needles().0
    }

    /// The anchor scan with each automaton a process may use (the NFA first, the DFA
    /// after [`DFA_AFTER_BYTES`]): each must give what the overlapping search gives.
    fn anchors_both(text: &str) -> [(u64, bool); 2] {
        static BOTH: std::sync::LazyLock<[AhoCorasick; 2]> = std::sync::LazyLock::new(|| {
            [
                anchor_automaton(AhoCorasickKind::NoncontiguousNFA, &needles()),
                anchor_automaton(AhoCorasickKind::DFA, &needles()),
            ]
        });
        let rows = &COMPILED.anchor_row;
        [
            anchors_with(&BOTH[0], rows, text),
            anchors_with(&BOTH[1], rows, text),
        ]
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
            let want = overlapping(t);
            assert_eq!(anchors_both(t), [want, want], "{t:?}");
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
            let want = overlapping(&text);
            prop_assert_eq!(anchors_both(&text), [want, want]);
        }

        #[test]
        fn nth_char_index_is_char_indices_nth(text in "[a-z\\u{e9}\\u{1F600}]{0,12}", n in 0usize..14) {
            prop_assert_eq!(nth_char_index(&text, n), text.char_indices().nth(n).map(|(i, _)| i));
        }
    }

    /// Measuring a state redacts nothing and leaves no trace: serialising it afterwards
    /// still redacts, and a text already shown is counted as shown.
    #[test]
    fn json_len_counts_without_redacting_and_serialising_still_redacts() {
        let text = "curl -H 'Authorization: Bearer abcdefghijklmnop0123' https://x";
        let cut = RedactedCut::new(text, 100);
        assert_eq!(json_len(&cut), text.len() as u64 + 2);
        let json = serde_json::to_string(&cut).unwrap();
        assert!(!json.contains("abcdefghijklmnop0123"), "{json}");
        assert_eq!(json_len(&cut), json.len() as u64);
        let fresh = RedactedCut::new(text, 100);
        let _ = json_len(&[&fresh]);
        assert!(!serde_json::to_string(&fresh)
            .unwrap()
            .contains("abcdefghijklmnop0123"));
    }

    /// A process that has scanned much scans with the DFA from then on, and redacts the
    /// same.
    #[test]
    fn after_the_switch_to_the_dfa_every_credential_is_still_redacted() {
        let mut scanned = 0;
        while scanned <= DFA_AFTER_BYTES {
            for t in ORDINARY_TEXTS {
                assert_eq!(redact(t), *t);
                scanned += t.len();
            }
        }
        assert!(COMPILED.any_leftmost_dfa.get().is_some());
        for case in CREDENTIAL_CASES {
            let r = redact(case.text);
            assert!(!r.contains(case.secret), "{}: {r:?}", case.row);
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

    /// The neighbours added in issue 53 take only the secret: a bot's id, a webhook's host,
    /// openssl's `pass:`, a command's every password; and `key` only a credential-like value.
    #[test]
    fn new_shapes_keep_the_rest() {
        for (text, want) in [
            (
                "curl https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ/getMe",
                "curl https://api.telegram.org/bot123456789:[REDACTED]/getMe",
            ),
            (
                "net:acme.webhook.office.com/webhookb2/g@t/IncomingWebhook/abc/o 3/3",
                "net:acme.webhook.office.com/webhookb2/[REDACTED] 3/3",
            ),
            (
                "openssl pkcs12 -passin pass:Pw1 -passout pass:Pw2 -passin env:PW -passout file:pw.txt",
                "openssl pkcs12 -passin pass:[REDACTED] -passout pass:[REDACTED] -passin env:PW -passout file:pw.txt",
            ),
            (
                "ssh-keygen -p -f k -P 'old pw' -N NewPw3 && ls",
                "ssh-keygen -p -f k -P [REDACTED] -N [REDACTED] && ls",
            ),
            (
                "<user>bob</user><password>Pw4</password>",
                "<user>bob</user><password>[REDACTED]</password>",
            ),
            (
                r#"{"key": "Enter", "Key": "a/b.json", "pwd": "/srv", "api": {"key": "0123456789abcdefABCDEF"}}"#,
                r#"{"key": "Enter", "Key": "a/b.json", "pwd": "/srv", "api": {"key": "[REDACTED]"}}"#,
            ),
            (
                "DRIVER={ODBC};SERVER=db;UID=sa;PWD=Pw5;",
                "DRIVER={ODBC};SERVER=db;UID=sa;PWD=[REDACTED];",
            ),
            (
                "smbclient //srv/s -U 'CORP\\bob%Pw6' -c ls",
                "smbclient //srv/s -U 'CORP\\bob%[REDACTED]' -c ls",
            ),
            (
                "git clone https://0123456789abcdefghijklmn@github.com/o/r && cd r",
                "git clone https://[REDACTED]@github.com/o/r && cd r",
            ),
        ] {
            assert_eq!(redact(text), want, "{text}");
            assert_eq!(redact(want), want, "idempotent: {want}");
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
