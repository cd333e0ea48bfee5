//! The `[breaker]` settings (docs/decisions.md, "Configuration"): [`BreakerConfig`], its
//! defaults, what the engine reads of it and how it is written back. `read` validates the
//! table, `tools` holds the tool classes (`[breaker.tools]`).

mod read;
mod tools;

use crate::table::Table;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tools::strings;
pub use tools::ToolClasses;
pub(crate) use tools::{glob_re, Glob};

/// What happens when a call reaches a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnLimit {
    /// Ask the operator for a turn-scoped exemption; fail closed when nobody answers.
    Ask,
    /// Deny outright.
    Deny,
}

/// What happens to a call that would lift or edit toolbrake itself (`self_protection`,
/// docs/decisions.md, "Self-protection").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SelfProtection {
    /// Not recognised: such a call is judged like any other.
    Off,
    /// Denied before it runs (the default).
    Deny,
}

/// Whether purely local traffic is fingerprinted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LocalHosts {
    /// Local traffic is fingerprinted like any other.
    Deny,
    /// A purely local call emits no target fingerprints.
    Allow,
}

/// Validated breaker configuration; built only through [`BreakerConfig::from_table`] or
/// [`Default`], so an invalid value never reaches a running engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerConfig {
    pub(crate) enabled: bool,
    pub(crate) window: usize,
    pub(crate) on_limit: OnLimit,
    pub(crate) local_hosts: LocalHosts,
    pub(crate) include_local: bool,
    pub(crate) warn_at: Option<u32>,
    pub(crate) summarize_at: Option<u32>,
    pub(crate) fail_warn_at: Option<u32>,
    pub(crate) fail_limit: Option<u32>,
    pub(crate) limits: BTreeMap<String, Option<u32>>,
    pub(crate) exclude: Vec<String>,
    pub(crate) include: Vec<String>,
    pub(crate) ignore_args: BTreeMap<String, Vec<String>>,
    pub(crate) host_aliases: BTreeMap<String, String>,
    pub(crate) preview_chars: usize,
    pub(crate) result_preview_chars: usize,
    pub(crate) progress: bool,
    pub(crate) struggle_warn_at: Option<u32>,
    pub(crate) struggle_ask_at: Option<u32>,
    pub(crate) cycle_limit: Option<u32>,
    pub(crate) unchanged_limit: Option<u32>,
    pub(crate) same_output_limit: Option<u32>,
    pub(crate) tools: ToolClasses,
    pub(crate) block_shell_http: bool,
    pub(crate) block_local_http: bool,
    pub(crate) shell_http_block: Vec<String>,
    pub(crate) fetch_tool: Option<String>,
    pub(crate) self_protection: SelfProtection,
    /// What self-protection protects: filled in by the caller at run time, never read
    /// from a file.
    #[serde(skip)]
    pub(crate) protected: super::self_guard::Protected,
    #[serde(skip)]
    exclude_re: Vec<Glob>,
    #[serde(skip)]
    include_re: Vec<Glob>,
}

const DECOYS_ALL: &[&str] = &[
    "description",
    "timeoutMs",
    "run_in_background",
    "justification",
    "reason",
    "title",
    "comment",
];
const DECOYS_SHELL: &[&str] = &[
    "description",
    "timeoutMs",
    "run_in_background",
    "justification",
];
/// Claude Code's and Gemini's shell tools carry their timeout as `timeout`.
const DECOYS_SHELL_TIMEOUT: &[&str] = &[
    "description",
    "timeout",
    "timeoutMs",
    "run_in_background",
    "justification",
];
/// GitHub Copilot CLI's `bash`: how long to wait for the first output.
const DECOYS_BASH: &[&str] = &[
    "description",
    "timeoutMs",
    "run_in_background",
    "justification",
    "initial_wait",
];
/// Qwen Code's `run_shell_command`: also whether to run it in the background.
const DECOYS_QWEN_SHELL: &[&str] = &[
    "description",
    "timeout",
    "timeoutMs",
    "run_in_background",
    "justification",
    "is_background",
];
/// Factory Droid's `Execute`: the model's summary of the command, its own risk rating and
/// its words for it, a timeout and running it in the background.
const DECOYS_EXECUTE: &[&str] = &[
    "description",
    "summary",
    "timeout",
    "riskLevel",
    "riskLevelReason",
    "fireAndForget",
];

impl Default for BreakerConfig {
    fn default() -> Self {
        let mut limits = BTreeMap::new();
        for (k, v) in [
            ("exact", Some(12)),
            ("cmd", Some(12)),
            ("net", Some(12)),
            ("sink", Some(12)),
            ("host", Some(16)),
            ("site", None),
            ("family:http-fetch", None),
            ("verb:curl", None),
            ("verb:wget", None),
        ] {
            limits.insert(k.to_string(), v);
        }
        let mut ignore_args = BTreeMap::new();
        ignore_args.insert("*".to_string(), strings(DECOYS_ALL));
        for t in ["pwsh", "shell"] {
            ignore_args.insert(t.to_string(), strings(DECOYS_SHELL));
        }
        ignore_args.insert("bash".to_string(), strings(DECOYS_BASH));
        for t in [
            "Bash",
            "PowerShell",
            "execute_bash",
            "exec_command",
            "Shell",
        ] {
            ignore_args.insert(t.to_string(), strings(DECOYS_SHELL_TIMEOUT));
        }
        ignore_args.insert("run_shell_command".to_string(), strings(DECOYS_QWEN_SHELL));
        ignore_args.insert("Execute".to_string(), strings(DECOYS_EXECUTE));
        let mut host_aliases = BTreeMap::new();
        for k in [
            "open-data.canada.ca",
            "www.open.canada.ca",
            "www.open-data.canada.ca",
        ] {
            host_aliases.insert(k.to_string(), "open.canada.ca".to_string());
        }
        let exclude = strings(&["todo_write", "TodoWrite"]);
        BreakerConfig {
            enabled: true,
            window: 16,
            on_limit: OnLimit::Ask,
            local_hosts: LocalHosts::Deny,
            include_local: false,
            warn_at: Some(7),
            summarize_at: Some(11),
            fail_warn_at: Some(3),
            fail_limit: Some(5),
            limits,
            exclude_re: exclude.iter().map(|p| glob_re(p)).collect(),
            exclude,
            include: Vec::new(),
            include_re: Vec::new(),
            ignore_args,
            host_aliases,
            preview_chars: 400,
            result_preview_chars: 800,
            progress: true,
            struggle_warn_at: Some(DEFAULT_STRUGGLE_WARN_AT),
            struggle_ask_at: Some(DEFAULT_STRUGGLE_ASK_AT),
            cycle_limit: Some(DEFAULT_CYCLE_LIMIT),
            unchanged_limit: Some(DEFAULT_UNCHANGED_LIMIT),
            same_output_limit: Some(DEFAULT_SAME_OUTPUT_LIMIT),
            tools: ToolClasses::default(),
            block_shell_http: true,
            block_local_http: false,
            shell_http_block: strings(super::shell_http::DEFAULT_BLOCKED_CLIENTS),
            fetch_tool: None,
            self_protection: SelfProtection::Deny,
            protected: Default::default(),
        }
    }
}

/// Default `struggle_warn_at`: failures of one fingerprint, with changes in between, at
/// which the model is told the edits have not fixed it yet.
pub const DEFAULT_STRUGGLE_WARN_AT: u32 = 6;
/// Default `struggle_ask_at`: when one fingerprint has failed this many times since it last
/// succeeded, each time the same way as the time before (edits or not), the operator is
/// asked. Above the longest run of failing reruns in healthy recorded runs (15).
pub const DEFAULT_STRUGGLE_ASK_AT: u32 = 16;
/// Default `cycle_limit`: the repetition of a no-progress cycle (period 2–4) that is stopped.
pub const DEFAULT_CYCLE_LIMIT: u32 = 3;
/// Default `unchanged_limit`: a call whose failure (or an edit whose result) came back the
/// same this many times in a row, whatever ran in between, is stopped the next time
/// (docs/decisions.md, "Progress"). 2 is what both halves of the development corpus choose
/// when each is held out in turn (EVALUATION.md: no resolved run harmed, 34 of 43 stuck
/// runs caught; 3 caught 30).
pub const DEFAULT_UNCHANGED_LIMIT: u32 = 2;
/// Default `same_output_limit`: a call whose action, however it is spelled, already ran
/// this many times in a row of its tool's calls that all returned the same output is
/// stopped (docs/decisions.md, "Same output, other spelling"; the 3rd run, as the streak
/// brake stops the 3rd identical call).
pub const DEFAULT_SAME_OUTPUT_LIMIT: u32 = 2;
/// The largest `same_output_limit`.
pub const MAX_SAME_OUTPUT_LIMIT: u32 = 64;
/// The largest `unchanged_limit`.
pub const MAX_UNCHANGED_LIMIT: u32 = 64;
/// The largest `cycle_limit` (bounds the call history a session keeps).
pub const MAX_CYCLE_LIMIT: u32 = 8;

/// Every key of `[breaker]`, read off the written-out defaults ([`BreakerConfig::to_value`]),
/// so a key is declared where its value is written and nowhere else.
pub fn keys() -> &'static [String] {
    static KEYS: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| names_of(&BreakerConfig::default().to_value()));
    &KEYS
}

fn names_of(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

impl BreakerConfig {
    /// Whether the engine judges calls at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// What happens at a gate.
    pub fn on_limit(&self) -> OnLimit {
        self.on_limit
    }

    /// The number of committed records counted per session.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Whether the progress signals are on (output memory, mutation resets, struggle and
    /// cycle detection); `false` restores the seed's exact rules.
    pub fn progress(&self) -> bool {
        self.progress
    }

    /// Whether the same-output track judges calls (progress on, `same_output_limit` not
    /// off): only then is a shell call's canonical spelling made.
    pub fn same_output_on(&self) -> bool {
        self.progress && self.same_output_limit.is_some()
    }

    /// The shell-HTTP block in force: the blocked clients, whether local fetches are
    /// blocked too, and the replacement tool. `None` when it is off, or when there is no
    /// replacement to send the model to (it only blocks where a replacement exists).
    pub fn shell_http(&self) -> Option<(&[String], bool, &str)> {
        let fetch = self
            .fetch_tool
            .as_deref()
            .filter(|_| self.block_shell_http)?;
        Some((&self.shell_http_block, self.block_local_http, fetch))
    }

    /// The adapter offers a fetch tool itself (`web_fetch_file`): it becomes the
    /// replacement the shell-HTTP block sends the model to, unless `fetch_tool` names one.
    pub fn offer_fetch_tool(&mut self, name: &str) {
        if self.fetch_tool.is_none() {
            self.fetch_tool = Some(name.to_string());
        }
    }

    /// What a call that targets toolbrake itself meets.
    pub fn self_protection(&self) -> SelfProtection {
        self.self_protection
    }

    /// Sets `self_protection` (a project's file may only tighten it: the caller keeps the
    /// stronger of two).
    pub fn set_self_protection(&mut self, value: SelfProtection) {
        self.self_protection = value;
    }

    /// What self-protection protects: the state file, the configuration files, the Redis
    /// key prefix and the binary's names, as the caller found them at run time.
    pub fn protect(&mut self, protected: super::self_guard::Protected) {
        self.protected = protected;
    }

    /// What self-protection protects ([`BreakerConfig::protect`]).
    pub fn protected(&self) -> &super::self_guard::Protected {
        &self.protected
    }

    /// The configured or offered replacement for shell fetches.
    pub fn fetch_tool(&self) -> Option<&str> {
        self.fetch_tool.as_deref()
    }

    /// The tool classes.
    pub fn tools(&self) -> &ToolClasses {
        &self.tools
    }

    /// This configuration with every setting that only judging reads (the gates, the
    /// window, the stages, what happens at a gate, the previews' lengths) put to one
    /// value: two configurations with equal views prepare every call alike
    /// (`Breaker::prepare`: fingerprints, their ids, whether a call changes the
    /// workspace). Whatever is not listed here counts, so a setting forgotten here only
    /// makes two views differ.
    pub(crate) fn derivation_view(&self) -> BreakerConfig {
        BreakerConfig {
            window: 0,
            on_limit: OnLimit::Ask,
            warn_at: None,
            summarize_at: None,
            fail_warn_at: None,
            fail_limit: None,
            limits: BTreeMap::new(),
            preview_chars: 0,
            result_preview_chars: 0,
            struggle_warn_at: None,
            struggle_ask_at: None,
            cycle_limit: None,
            unchanged_limit: None,
            // Whether the track is on changes what preparing reads (a shell call's
            // spelling); its gate does not.
            same_output_limit: self.same_output_limit.map(|_| DEFAULT_SAME_OUTPUT_LIMIT),
            ..self.clone()
        }
    }

    /// The occurrence gate for a fingerprint: by full fingerprint, else by kind; `None`
    /// means no gate (and no advisory, and no failure tracking) for that measure.
    pub fn limit_for(&self, fp: &str) -> Option<u32> {
        if let Some(v) = self.limits.get(fp) {
            return *v;
        }
        let kind = fp.split(':').next().unwrap_or("");
        self.limits.get(kind).copied().flatten()
    }

    /// Whether a tool's calls are tracked at all (docs/decisions.md, "Tracked tools").
    pub fn tracks(&self, tool: &str) -> bool {
        !tool.is_empty()
            && (self.include_re.is_empty() || self.include_re.iter().any(|r| r.is_match(tool)))
            && !self.exclude_re.iter().any(|r| r.is_match(tool))
    }

    /// The decoy keys removed from a tool's arguments: the `*` list and the tool's own.
    pub fn ignored_keys(&self, tool: &str) -> impl Fn(&str) -> bool + '_ {
        let all = self.ignore_args.get("*");
        let own = self.ignore_args.get(tool);
        move |k: &str| {
            all.is_some_and(|l| l.iter().any(|x| x == k))
                || own.is_some_and(|l| l.iter().any(|x| x == k))
        }
    }
}

/// A stage or gate as written back: its number, or `"off"`.
fn opt(v: Option<u32>) -> Value {
    v.map_or_else(|| json!("off"), |n| json!(n))
}

impl BreakerConfig {
    /// The `breaker` section, every key written out (a stage or gate that is off reads
    /// `"off"`); [`BreakerConfig::from_table`] of it gives the same configuration.
    pub fn to_value(&self) -> Value {
        let limits: Table = self
            .limits
            .iter()
            .map(|(k, v)| (k.clone(), opt(*v)))
            .collect();
        let mutating: Vec<String> = self.tools.mutating.iter().map(|m| m.to_string()).collect();
        json!({
            "enabled": self.enabled,
            "window": self.window,
            "on_limit": self.on_limit,
            "local_hosts": self.local_hosts,
            "include_local": self.include_local,
            "warn_at": opt(self.warn_at),
            "summarize_at": opt(self.summarize_at),
            "fail_warn_at": opt(self.fail_warn_at),
            "fail_limit": opt(self.fail_limit),
            "exclude": self.exclude,
            "include": self.include,
            "preview_chars": self.preview_chars,
            "result_preview_chars": self.result_preview_chars,
            "progress": self.progress,
            "struggle_warn_at": opt(self.struggle_warn_at),
            "struggle_ask_at": opt(self.struggle_ask_at),
            "cycle_limit": opt(self.cycle_limit),
            "unchanged_limit": opt(self.unchanged_limit),
            "same_output_limit": opt(self.same_output_limit),
            "block_shell_http": self.block_shell_http,
            "block_local_http": self.block_local_http,
            "shell_http_block": self.shell_http_block,
            "fetch_tool": self.fetch_tool.as_deref().unwrap_or(""),
            "self_protection": self.self_protection,
            "limits": limits,
            "ignore_args": self.ignore_args,
            "host_aliases": self.host_aliases,
            "tools": {
                "shell": self.tools.shell,
                "shell_command_args": self.tools.shell_command_args,
                "url": self.tools.url,
                "url_pattern": self.tools.url_pattern,
                "url_args": self.tools.url_args,
                "mutating": mutating,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::tools::compile_url_re;
    use super::*;
    use crate::table::ConfigError;
    use regex::Regex;

    fn load(v: Value) -> Result<BreakerConfig, ConfigError> {
        BreakerConfig::from_table(v.as_object())
    }

    proptest::proptest! {
        #[test]
        fn a_word_pattern_matches_what_its_expression_matches(
            words in proptest::collection::vec("[A-Za-z0-9_]{0,4}", 1..4),
            name in "[ -~]{0,12}|[a-zA-Zſ\u{212a}é_]{0,8}",
            pick in proptest::prelude::any::<proptest::sample::Index>(),
            around in ("[ -~]{0,3}", "[ -~]{0,3}"),
        ) {
            let source = words.join("|");
            let p = compile_url_re(&source).unwrap();
            proptest::prop_assert!(p.words.is_some());
            let re = Regex::new(&format!("(?i){source}")).unwrap();
            // One of the words in other case, among other text, and any name at all.
            let flipped: String = pick
                .get(&words)
                .chars()
                .map(|c| if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
                .collect();
            for name in [format!("{}{flipped}{}", around.0, around.1), name] {
                proptest::prop_assert_eq!(p.is_match(&name), re.is_match(&name), "{} on {:?}", source, name);
            }
        }
    }

    #[test]
    fn url_tools_by_the_default_pattern() {
        let t = ToolClasses::default();
        for name in [
            "web_fetch",
            "WebFetch",
            "WebSearch",
            "browser_navigate",
            "mcp__x__FETCH",
            "ſearch",
        ] {
            assert!(t.is_url_tool(name), "{name}");
        }
        for name in ["echo", "Read", "web", "fetc", "bash", "éfetcx"] {
            assert!(!t.is_url_tool(name), "{name}");
        }
        // Not plain words: the expression alone decides.
        let p = compile_url_re("^get_.*url$").unwrap();
        assert!(p.words.is_none());
        assert!(p.is_match("GET_page_URL") && !p.is_match("get_url_x"));
    }

    #[test]
    fn limits_merge_one_level_and_arrays_replace() {
        let c = load(json!({"limits": {"host": 20, "host:api.x.com": 4}, "exclude": ["Read"]}))
            .unwrap();
        assert_eq!(c.limit_for("host:b.com"), Some(20));
        assert_eq!(c.limit_for("host:api.x.com"), Some(4));
        assert_eq!(c.limit_for("exact:x:{}"), Some(12));
        assert_eq!(c.limit_for("verb:ls"), None);
        assert_eq!(c.limit_for("verb:curl"), None);
        assert!(c.tracks("todo_write"));
        assert!(!c.tracks("Read"));
    }

    #[test]
    fn errors_name_key_value_and_rule() {
        let e = load(json!({"window": 3})).unwrap_err();
        assert_eq!((e.key.as_str(), e.value.as_str()), ("breaker.window", "3"));
        let e = load(json!({"windw": 16})).unwrap_err();
        assert!(e.rule.contains("did you mean `breaker.window`"), "{e}");
        let e = load(json!({"deny_after": 3})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`breaker.deny_after` is not a toolbrake setting; it was the original plugin's `denyAfter`, replaced by `limits`, the gate per fingerprint kind."
        );
        let e = load(json!({"local_hosts": "ask"})).unwrap_err();
        assert!(e.rule.contains("on_limit"), "{e}");
        let e = load(json!({"warn_at": 2.5})).unwrap_err();
        assert_eq!(e.rule, "must be an integer");
        let e = load(json!({"limits": {"net": 1}})).unwrap_err();
        assert_eq!(e.key, "breaker.limits.\"net\"");
        let e = load(json!({"tools": {"url_pattern": "("}})).unwrap_err();
        assert_eq!(e.key, "breaker.tools.url_pattern");
        let e = load(json!({"max_bytes": 10})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`breaker.max_bytes` is not a `[breaker]` setting: it is `[fetch] max_bytes`."
        );
        let e = load(json!({"blockShellHttp": false})).unwrap_err();
        assert!(
            e.rule.contains("did you mean `breaker.block_shell_http`"),
            "{e}"
        );
        let e = load(json!({"window": 18446744073709551615u64})).unwrap_err();
        assert_eq!(e.key, "breaker.window");
    }

    #[test]
    fn the_shell_http_block_needs_a_replacement() {
        let mut c = BreakerConfig::default();
        assert!(c.shell_http().is_none(), "no fetch tool: never blocks");
        c.offer_fetch_tool("web_fetch_file");
        assert_eq!(c.shell_http().map(|s| s.2), Some("web_fetch_file"));
        let mut named = load(json!({"fetch_tool": "WebFetch"})).unwrap();
        named.offer_fetch_tool("web_fetch_file");
        assert_eq!(named.shell_http().map(|s| s.2), Some("WebFetch"));
        let mut off = load(json!({"block_shell_http": false})).unwrap();
        off.offer_fetch_tool("web_fetch_file");
        assert!(off.shell_http().is_none());
    }

    #[test]
    fn stages_switch_off_silently() {
        let c = load(json!({"warn_at": 0, "summarize_at": -1, "fail_limit": "off"})).unwrap();
        assert_eq!(
            (c.warn_at, c.summarize_at, c.fail_limit),
            (None, None, None)
        );
    }

    #[test]
    fn the_written_section_reads_back_the_same() {
        let custom = load(json!({"warn_at": 0, "fetch_tool": "WebFetch", "shell_http_block": ["curl"], "limits": {"host:a.b": 3, "site": 30},
            "host_aliases": {"x.y": "z.y"}, "tools": {"mutating": ["Edit", "db[op=insert|drop]"]}}))
        .unwrap();
        for c in [BreakerConfig::default(), custom] {
            assert_eq!(load(c.to_value()).unwrap(), c);
        }
    }
}
