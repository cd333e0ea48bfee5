//! What a call emits (docs/decisions.md, "Fingerprints"): `exact:` always; for shell tools
//! `verb:`, `family:`, `cmd:`, the URL measures and `sink:`; for URL tools the URL
//! measures and `family:`.

use super::config::{BreakerConfig, LocalHosts};
use super::shell::{sink_of, strip_tokens, tokenize, verb_of, GENERIC_SINKS};
use super::url::{extract_urls, is_local_host, norm_url};
use crate::canonical::{canonical_args_without, CanonicalError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

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
            Kind::Family | Kind::Verb => 6,
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
    /// use loopbrake_core::breaker::Kind;
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
        }
    }
}

/// A compact identity of a fingerprint: the first 8 bytes of its SHA-256. Session state
/// stores only these, never the fingerprint text (which can carry argument values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FpId(pub u64);

impl FpId {
    /// The id of a fingerprint text.
    pub fn of(text: &str) -> Self {
        let d = Sha256::digest(text.as_bytes());
        FpId(u64::from_be_bytes(d[..8].try_into().expect("8 bytes")))
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

/// Everything a call emits, with the reasons `loopbrake explain` shows.
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
}

impl FingerprintSet {
    fn push(&mut self, cfg: &BreakerConfig, text: String) {
        if self.fps.iter().any(|f| f.text == text) {
            return;
        }
        let kind = Kind::of(&text);
        let limit = cfg.limit_for(&text);
        let id = FpId::of(&text);
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
pub(crate) fn shell_command(cfg: &BreakerConfig, args: &Value) -> String {
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

/// [`fingerprints`], given the canonical text of object arguments that hold none of the
/// decoy keys when the caller has written it already (`canonical_json(args)`): nothing is
/// then stripped, and the decoy keys are not looked for again.
pub(crate) fn fingerprints_with(
    cfg: &BreakerConfig,
    tool: &str,
    args: &Value,
    exact: Option<&str>,
) -> Result<FingerprintSet, CanonicalError> {
    let mut set = FingerprintSet {
        class: "other",
        ..FingerprintSet::default()
    };
    let written;
    let exact = match exact {
        Some(text) => text,
        None => {
            let ignored = cfg.ignored_keys(tool);
            if let Value::Object(map) = args {
                set.stripped = map.keys().filter(|k| ignored(k)).cloned().collect();
            }
            written = canonical_args_without(args, &ignored)?;
            &written
        }
    };
    set.push(cfg, format!("exact:{tool}:{exact}"));

    if cfg.tools().is_shell(tool) {
        set.class = "shell";
        let command = shell_command(cfg, args);
        let toks = tokenize(&command);
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
                set.push(cfg, format!("net:{}", u.href));
                set.push(cfg, format!("site:{}", u.site));
                if cfg.include_local || !local {
                    set.push(cfg, format!("host:{}", u.host));
                }
                set.push(cfg, "family:http-fetch".to_string());
            }
            set.local = local && !relax;
            set.relaxed = relax;
        }
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
        assert_eq!(texts("web_search", json!({"query": "q"})).len(), 1);
        assert_eq!(
            texts("Read", json!({"file_path": "/x"})),
            [r#"exact:Read:{"file_path":"/x"}"#]
        );
        assert_eq!(texts("t", json!(null)), ["exact:t:{}"]);
        assert_eq!(texts("t", json!("s")), [r#"exact:t:{"value":"s"}"#]);
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
