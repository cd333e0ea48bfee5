//! What a call emits (docs/decisions.md, "Fingerprints"): `exact:` always; for shell tools
//! `verb:`, `family:`, `cmd:`, the URL measures and `sink:`; for URL tools the URL
//! measures and `family:`.

use super::config::{BreakerConfig, LocalHosts};
use super::shell::{
    canonical_into, normalise_dir, sink_of, strip_tokens, tokenize_cow, verb_of, Sink,
    SpellingHash, GENERIC_SINKS,
};
use super::url::{extract_urls, is_local_host, norm_url};
use crate::canonical::{canonical_args_without_after, digest_of_canonical, CanonicalError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// The kind of a fingerprint: the text before its first `:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Target host.
    Host,
    /// Same resource.
    Net,
    /// Last two labels.
    Site,
    /// Output destination.
    Sink,
    /// Shell command modulo volatile flags.
    Cmd,
    /// Byte-identical action after decoy removal.
    Exact,
    /// Any HTTP fetch.
    Family,
    /// The command word.
    Verb,
    /// The tool itself, for a tool with no URL and no shell command (`tool:get_order`): a
    /// failure target only, so that one tool failing the same way with ever-different
    /// arguments is stopped like a failing host (it has no window gate unless
    /// `limits.tool` sets one).
    Tool,
}

impl Kind {
    /// Preference when several fingerprints qualify: lower names the more actionable one.
    pub fn rank(self) -> u8 {
        match self {
            Kind::Host => 0,
            Kind::Net => 1,
            Kind::Site => 2,
            Kind::Sink => 3,
            Kind::Cmd => 4,
            Kind::Exact => 5,
            Kind::Family | Kind::Verb | Kind::Tool => 6,
        }
    }

    /// The kind a fingerprint's text names (the text before its first `:`); `verb` for
    /// a text that names none (see [`Kind::named`]).
    pub fn of(text: &str) -> Kind {
        Kind::named(text).unwrap_or(Kind::Verb)
    }

    /// Whether an occurrence that returned new output leaves the window count (with the
    /// progress signal on): the identities of one action (`exact:`, `cmd:`, `net:`). A
    /// target measure (`host:`, `site:`, `sink:`, `family:`, `verb:`) counts every call,
    /// whatever it returned.
    pub fn new_output_uncounted(self) -> bool {
        matches!(self, Kind::Exact | Kind::Cmd | Kind::Net)
    }

    /// The kind a fingerprint's text names by its prefix (`exact:…`, `host:…`), if it
    /// names one.
    ///
    /// ```
    /// use toolbrake_core::breaker::Kind;
    /// assert_eq!(Kind::named("host:api.example.com"), Some(Kind::Host));
    /// assert_eq!(Kind::named("Bearer abc:def"), None);
    /// ```
    pub fn named(text: &str) -> Option<Kind> {
        match text.split(':').next()? {
            "host" => Some(Kind::Host),
            "net" => Some(Kind::Net),
            "site" => Some(Kind::Site),
            "sink" => Some(Kind::Sink),
            "cmd" => Some(Kind::Cmd),
            "exact" => Some(Kind::Exact),
            "family" => Some(Kind::Family),
            "verb" => Some(Kind::Verb),
            "tool" => Some(Kind::Tool),
            _ => None,
        }
    }

    /// The prefix name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::Net => "net",
            Kind::Site => "site",
            Kind::Sink => "sink",
            Kind::Cmd => "cmd",
            Kind::Exact => "exact",
            Kind::Family => "family",
            Kind::Verb => "verb",
            Kind::Tool => "tool",
        }
    }
}

/// A compact identity of a fingerprint: the first 8 bytes of its SHA-256 (for `exact:`,
/// of the call hash of the same arguments, [`FpId::of_exact`]). Session state stores only
/// these, never the fingerprint text (which can carry argument values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FpId(pub u64);

impl FpId {
    /// The id of a fingerprint text.
    pub fn of(text: &str) -> Self {
        let d = Sha256::digest(text.as_bytes());
        FpId(u64::from_be_bytes(d[..8].try_into().expect("8 bytes")))
    }

    /// A quick id of a text that only session state compares, never shown as a
    /// fingerprint's (a spelling, a directory: [`Spelling`]): FNV-1a, 64 bits. Stable
    /// across processes and builds, as stored state needs.
    pub fn quick(text: &str) -> Self {
        let mut h = SpellingHash::new();
        h.put(text);
        FpId(h.0)
    }

    /// The id of the `exact:` fingerprint `exact:{tool}:{canonical}`: the first 8 bytes of
    /// its call hash, `sha256(tool + "\n" + canonical)`
    /// ([`crate::canonical::digest_of_canonical`]). The engine has that hash already for
    /// the streak brake, so the arguments, the longest text of a call, are hashed once.
    pub fn of_exact(call_hash: &[u8; 32]) -> Self {
        FpId(u64::from_be_bytes(
            call_hash[..8].try_into().expect("8 bytes"),
        ))
    }
}

/// The text of a call's `exact:` fingerprint, `exact:{tool}:` and the canonical JSON of its
/// arguments, written once: the engine hashes the canonical part for the call hash, and the
/// breaker keeps the whole as the fingerprint's text, without a copy.
#[derive(Debug)]
pub(crate) struct ExactText {
    text: String,
    /// Where the canonical arguments start.
    at: usize,
}

impl ExactText {
    /// The text for `tool` and its arguments as they are (no decoy key left out): for
    /// object arguments, the canonical part is `canonical_json(args)`.
    pub(crate) fn of(tool: &str, args: &Value) -> Result<Self, CanonicalError> {
        ExactText::without(tool, args, |_| false)
    }

    /// The text for `tool` and its arguments with the keys `skip` answers true for left
    /// out ([`crate::canonical::canonical_args_without`]).
    fn without(
        tool: &str,
        args: &Value,
        skip: impl Fn(&str) -> bool,
    ) -> Result<Self, CanonicalError> {
        let prefix = ["exact:", tool, ":"].concat();
        let at = prefix.len();
        Ok(ExactText {
            text: canonical_args_without_after(prefix, args, skip)?,
            at,
        })
    }

    /// The canonical arguments.
    pub(crate) fn canonical(&self) -> &str {
        &self.text[self.at..]
    }
}

/// One fingerprint of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The full text, e.g. `net:api.example.com/v1/items?page=1`.
    pub text: String,
    /// Its kind.
    pub kind: Kind,
    /// Its compact id.
    pub id: FpId,
    /// Its occurrence gate (`None`: no gate, no advisory, no failure tracking).
    pub limit: Option<u32>,
}

/// Everything a call emits, with the reasons `toolbrake explain` shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FingerprintSet {
    /// De-duplicated, in emission order.
    pub fps: Vec<Fingerprint>,
    /// Every URL of the call is local.
    pub local: bool,
    /// Local traffic relaxed under `local_hosts = "allow"`: no target fingerprints.
    pub relaxed: bool,
    /// The tool's class: `shell`, `url` or `other`.
    pub class: &'static str,
    /// The top-level argument keys removed as decoys.
    pub stripped: Vec<String>,
    /// For a shell call, its canonical spelling (with the progress signal and the
    /// same-output track on).
    pub spelling: Option<Spelling>,
    /// The page this call fetches, when its URL holds a paging parameter (the first such
    /// URL of a shell command): see [`PageStep`].
    pub page: Option<PageStep>,
}

/// One page of a listing fetched through a URL ([`super::url::is_paging_key`]): the series
/// (the URL without its paging parameters) and the page (their values), as ids. A page
/// whose series advanced to a value not seen before and whose body differs from the
/// previous page's is progress for the `net:` and `host:` gates (docs/decisions.md,
/// "Paging through a URL").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageStep {
    /// The id of the URL without its paging pairs.
    pub series: FpId,
    /// The id of the paging pairs.
    pub at: FpId,
}

impl PageStep {
    fn of(u: &super::url::NormUrl) -> Option<PageStep> {
        let (series, at) = u.paging.as_ref()?;
        Some(PageStep {
            series: FpId::of(&["page:", series].concat()),
            at: FpId::of(at),
        })
    }
}

/// A shell call's canonical spelling ([`canonical`]; docs/decisions.md, "Same output,
/// other spelling"): the id of its canonical command without a leading `cd`, and where it
/// runs. The same-output track resolves a relative directory against the session's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spelling {
    /// The target of its leading `cd`, resolved against the call's own working directory
    /// argument (`workdir`, `cwd`) when it has one; that argument when there is no `cd`.
    pub cd: Option<String>,
    /// The id of the rest of the canonical command ([`FpId::quick`]).
    pub rest: FpId,
}

/// Arguments of a shell tool naming the directory its command runs in (Codex's `workdir`).
const WORKDIR_ARGS: &[&str] = &["workdir", "cwd"];

impl Spelling {
    /// The spelling of a shell tool's command, with its arguments for the directory.
    pub fn of(command: &str, args: &Value) -> Spelling {
        // The canonical command is hashed as it is written, never kept.
        let mut rest = SpellingHash::new();
        let cd = canonical_into(command, &mut rest);
        let base = WORKDIR_ARGS
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
            .filter(|b| !b.is_empty())
            .map(normalise_dir);
        let cd = match (cd, base) {
            (Some(d), Some(b)) if !d.starts_with(['/', '~']) => {
                Some(format!("{}/{d}", b.trim_end_matches('/')))
            }
            (Some(d), _) => Some(d),
            (None, b) => b,
        };
        Spelling {
            cd,
            rest: FpId(rest.0),
        }
    }
}

impl FingerprintSet {
    fn push(&mut self, cfg: &BreakerConfig, text: String) {
        if self.fps.iter().any(|f| f.text == text) {
            return;
        }
        let id = FpId::of(&text);
        self.push_with_id(cfg, text, id);
    }

    /// The `exact:` fingerprint, always the first (nothing to de-duplicate against).
    fn push_exact(&mut self, cfg: &BreakerConfig, exact: ExactText, hash: &[u8; 32]) {
        self.push_with_id(cfg, exact.text, FpId::of_exact(hash));
    }

    fn push_with_id(&mut self, cfg: &BreakerConfig, text: String, id: FpId) {
        let kind = Kind::of(&text);
        let limit = cfg.limit_for(&text);
        self.fps.push(Fingerprint {
            text,
            kind,
            id,
            limit,
        });
    }
}

/// The shell command of a shell tool's arguments ([`super::config::ToolClasses::command_line`]),
/// or nothing.
pub(crate) fn shell_command<'a>(cfg: &BreakerConfig, args: &'a Value) -> Cow<'a, str> {
    cfg.tools().command_line(args).unwrap_or_default()
}

fn url_arg<'a>(cfg: &BreakerConfig, args: &'a Value) -> Option<&'a str> {
    cfg.tools()
        .url_args
        .iter()
        .find_map(|k| args.get(k).filter(|v| !v.is_null()))
        .and_then(Value::as_str)
}

/// Every fingerprint a call emits.
pub fn fingerprints(
    cfg: &BreakerConfig,
    tool: &str,
    args: &Value,
) -> Result<FingerprintSet, CanonicalError> {
    fingerprints_with(cfg, tool, args, None)
}

/// [`fingerprints`], given the `exact:` text of object arguments that hold none of the
/// decoy keys when the caller has written it already ([`ExactText::of`]), with its call
/// hash (`digest_of_canonical(tool, exact.canonical())`): nothing is then stripped, the
/// decoy keys are not looked for again, and the text is neither hashed nor copied again.
pub(crate) fn fingerprints_with(
    cfg: &BreakerConfig,
    tool: &str,
    args: &Value,
    exact: Option<(ExactText, &[u8; 32])>,
) -> Result<FingerprintSet, CanonicalError> {
    let mut set = FingerprintSet {
        class: "other",
        ..FingerprintSet::default()
    };
    match exact {
        Some((text, hash)) => set.push_exact(cfg, text, hash),
        None => {
            let ignored = cfg.ignored_keys(tool);
            if let Value::Object(map) = args {
                set.stripped = map.keys().filter(|k| ignored(k)).cloned().collect();
            }
            let text = ExactText::without(tool, args, &ignored)?;
            let hash = digest_of_canonical(tool, text.canonical());
            set.push_exact(cfg, text, &hash);
        }
    }

    let mut plain = false;
    if cfg.tools().is_shell(tool) {
        set.class = "shell";
        let command = shell_command(cfg, args);
        if cfg.same_output_on() {
            set.spelling = Some(Spelling::of(&command, args));
        }
        let toks = tokenize_cow(&command);
        let urls: Vec<_> = extract_urls(&command)
            .iter()
            .filter_map(|u| norm_url(u, &cfg.host_aliases))
            .collect();
        let local = !urls.is_empty() && urls.iter().all(|u| is_local_host(&u.host));
        let relax = local && cfg.local_hosts == LocalHosts::Allow;
        let verb = verb_of(&toks);
        if !verb.is_empty() && !relax {
            set.push(cfg, format!("verb:{verb}"));
            if matches!(verb.as_str(), "curl" | "wget" | "http" | "httpie") {
                set.push(cfg, "family:http-fetch".to_string());
            }
        }
        if !verb.is_empty() {
            let stripped = strip_tokens(&toks);
            if !stripped.is_empty() {
                set.push(cfg, format!("cmd:{verb}:{stripped}"));
            }
        }
        if !relax {
            set.page = urls.iter().find_map(PageStep::of);
            for u in &urls {
                set.push(cfg, format!("net:{}", u.href));
                set.push(cfg, format!("site:{}", u.site));
                if cfg.include_local || !is_local_host(&u.host) {
                    set.push(cfg, format!("host:{}", u.host));
                }
            }
            if let Some(sink) = sink_of(&toks).filter(|s| !GENERIC_SINKS.contains(&s.as_str())) {
                set.push(cfg, format!("sink:{sink}"));
            }
        }
        set.local = local && !relax;
        set.relaxed = relax;
    } else if cfg.tools().is_url_tool(tool) {
        set.class = "url";
        // The argument is a URL, or text holding one (Gemini CLI's `web_fetch` takes a
        // `prompt` that names the URLs): the first URL in it.
        let url = url_arg(cfg, args).and_then(|raw| {
            norm_url(raw, &cfg.host_aliases).or_else(|| {
                extract_urls(raw)
                    .first()
                    .and_then(|u| norm_url(u, &cfg.host_aliases))
            })
        });
        if let Some(u) = url {
            let local = is_local_host(&u.host);
            let relax = local && cfg.local_hosts == LocalHosts::Allow;
            if !relax {
                set.page = PageStep::of(&u);
                set.push(cfg, format!("net:{}", u.href));
                set.push(cfg, format!("site:{}", u.site));
                if cfg.include_local || !local {
                    set.push(cfg, format!("host:{}", u.host));
                }
                set.push(cfg, "family:http-fetch".to_string());
            }
            set.local = local && !relax;
            set.relaxed = relax;
        } else {
            // A search, or a fetch whose argument holds no URL: a plain tool.
            plain = true;
        }
    } else {
        plain = true;
    }
    // Nothing but the tool names what a plain call acts on: its failure target is the tool
    // (docs/decisions.md, "Failure target of a plain tool"); not for a call that changes
    // the workspace, whose arguments are the change itself.
    if plain && cfg.progress && !cfg.tools().is_mutating(tool, args) {
        set.push(cfg, format!("tool:{tool}"));
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(tool: &str, args: Value) -> Vec<String> {
        fingerprints(&BreakerConfig::default(), tool, &args)
            .unwrap()
            .fps
            .into_iter()
            .map(|f| f.text)
            .collect()
    }

    proptest::proptest! {
        /// The `exact:` id the engine passes in (from the call hash it has already) is the
        /// id of the same fingerprint made from the arguments alone: the set is the same
        /// either way, so the breaker's counts and output memory agree with `explain` and
        /// with the stopped-call judgement (which look fingerprints up from the arguments).
        #[test]
        fn the_engines_exact_id_is_the_exact_id(
            tool in proptest::sample::select(vec!["bash", "WebFetch", "Read", "shell", "t"]),
            entries in proptest::collection::vec(
                ("[a-z_]{1,8}", "[ -~]{0,40}"),
                0..5,
            ),
        ) {
            let cfg = BreakerConfig::default();
            let ignored = cfg.ignored_keys(tool);
            let args = Value::Object(
                entries
                    .into_iter()
                    .filter(|(k, _)| !ignored(k))
                    .map(|(k, v)| (k, Value::String(format!("curl https://a.example/{v}"))))
                    .collect(),
            );
            let exact = ExactText::of(tool, &args).unwrap();
            proptest::prop_assert_eq!(
                exact.canonical(),
                crate::canonical::canonical_json(&args).unwrap()
            );
            let hash = digest_of_canonical(tool, exact.canonical());
            let given = fingerprints_with(&cfg, tool, &args, Some((exact, &hash))).unwrap();
            let alone = fingerprints(&cfg, tool, &args).unwrap();
            proptest::prop_assert_eq!(&given, &alone);
            proptest::prop_assert_eq!(given.fps[0].id, FpId::of_exact(&hash));
        }
    }

    #[test]
    fn a_spelling_is_the_quick_id_of_the_canonical_command() {
        for c in [
            "ls -la src",
            "cd /w && FOO=1 pytest -x | head -50 # again",
            "echo 'a b' > out.txt 2>&1 &",
            "a ; ; b ;",
            "python3 - <<'EOF'\nprint(1)\nEOF",
            "line one\nline two",
            "",
        ] {
            let s = Spelling::of(c, &Value::Null);
            let canon = super::super::shell::canonical(c);
            assert_eq!(s.rest, FpId::quick(&canon.rest), "{c:?}");
            assert_eq!(s.cd, canon.cd, "{c:?}");
        }
        let s = Spelling::of("cd src && make", &serde_json::json!({"workdir": "/w/"}));
        assert_eq!(s.cd.as_deref(), Some("/w/src"));
        let s = Spelling::of("make", &serde_json::json!({"cwd": "./w"}));
        assert_eq!(s.cd.as_deref(), Some("w"));
    }

    #[test]
    fn curl_emits_every_measure() {
        let fps = texts(
            "bash",
            json!({"command": "timeout 30 curl -s -o out.bin https://open-data.canada.ca/x?utm_source=a", "description": "1st"}),
        );
        assert_eq!(
            fps,
            [
                r#"exact:bash:{"command":"timeout 30 curl -s -o out.bin https://open-data.canada.ca/x?utm_source=a"}"#,
                "verb:curl",
                "family:http-fetch",
                "cmd:curl:curl -o out.bin https://open-data.canada.ca/x?utm_source=a",
                "net:open.canada.ca/x",
                "site:canada.ca",
                "host:open.canada.ca",
                "sink:out.bin",
            ]
        );
    }

    #[test]
    fn url_tools_and_others() {
        assert_eq!(
            texts(
                "WebFetch",
                json!({"url": "https://a.com/p/", "prompt": "x"})
            ),
            [
                r#"exact:WebFetch:{"prompt":"x","url":"https://a.com/p/"}"#,
                "net:a.com/p",
                "site:a.com",
                "host:a.com",
                "family:http-fetch"
            ]
        );
        assert_eq!(
            texts("web_search", json!({"query": "q"})),
            [r#"exact:web_search:{"query":"q"}"#, "tool:web_search"]
        );
        assert_eq!(
            texts("Read", json!({"file_path": "/x"})),
            [r#"exact:Read:{"file_path":"/x"}"#, "tool:Read"]
        );
        assert_eq!(texts("t", json!(null)), ["exact:t:{}", "tool:t"]);
        assert_eq!(
            texts("t", json!("s")),
            [r#"exact:t:{"value":"s"}"#, "tool:t"]
        );
    }

    #[test]
    fn local_hosts_have_no_host_measure_by_default() {
        let fps = texts("bash", json!({"command": "curl http://127.0.0.1:8080/x"}));
        assert!(fps.contains(&"net:127.0.0.1/x".to_string()));
        assert!(!fps.iter().any(|f| f.starts_with("host:")));
    }

    #[test]
    fn codex_argv_commands() {
        let fps = texts(
            "shell",
            json!({"command": ["bash", "-lc", "curl https://a.com/x"]}),
        );
        assert!(fps.contains(&"net:a.com/x".to_string()), "{fps:?}");
    }

    #[test]
    fn a_url_tool_whose_argument_is_text_counts_by_its_first_url() {
        let fps = texts(
            "web_fetch",
            json!({"prompt": "Summarize https://docs.example.com/guide?utm_source=x and https://b.example.org"}),
        );
        assert!(
            fps.contains(&"net:docs.example.com/guide".to_string()),
            "{fps:?}"
        );
        assert!(
            fps.contains(&"host:docs.example.com".to_string()),
            "{fps:?}"
        );
    }
}
