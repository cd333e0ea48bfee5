//! The `[breaker]` table (docs/decisions.md, "Configuration"), and the tool classes
//! (`[breaker.tools]`) that tell shell tools and URL tools apart by configuration.

use super::mutation::writes::{MutatingTool, DEFAULT_MUTATING};
use crate::table::{
    as_int, dotted, get_bool, get_int, get_string_list, show, unknown_key, ConfigError, Table,
    KEY_ITSELF,
};
use regex::Regex;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What happens when a call reaches a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnLimit {
    /// Ask the operator for a turn-scoped exemption; fail closed when nobody answers.
    Ask,
    /// Deny outright.
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

/// Which tools are shell tools and URL tools, and where their command / URL is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolClasses {
    /// Exact names of shell tools.
    pub shell: Vec<String>,
    /// Argument keys holding a shell tool's command, first present wins.
    pub shell_command_args: Vec<String>,
    /// Exact names of URL tools (besides those matching `url_pattern`).
    pub url: Vec<String>,
    /// Case-insensitive regular expression: a tool name matching it is a URL tool.
    pub url_pattern: String,
    /// Argument keys holding a URL tool's URL, first present wins.
    pub url_args: Vec<String>,
    /// Tools whose calls change the workspace (`NAME` or `NAME[ARG=V1|V2]`); shell tools
    /// are judged by their command as well.
    #[serde(skip)]
    pub mutating: Vec<MutatingTool>,
    /// Compiled on first use (most processes never judge a URL tool).
    #[serde(skip)]
    url_re: LazyPattern,
}

/// The compiled `url_pattern`, built on first use and shared by every clone of the
/// configuration (so cloning an engine never compiles it again). Equality is decided by
/// `url_pattern`.
#[derive(Debug, Clone, Default)]
struct LazyPattern(std::sync::Arc<std::sync::OnceLock<Option<Pattern>>>);

impl PartialEq for LazyPattern {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Default for ToolClasses {
    fn default() -> Self {
        let url_pattern = "fetch|search|browse|web_".to_string();
        ToolClasses {
            shell: strings(&[
                "bash",
                "pwsh",
                "shell",
                "Bash",
                "PowerShell",
                "run_shell_command",
                "execute_bash",
                "exec_command",
                "Execute",
                "Shell",
                "run_commands",
            ]),
            shell_command_args: strings(&["command", "cmd", "commands"]),
            url: Vec::new(),
            url_re: LazyPattern::default(),
            url_pattern,
            url_args: strings(&["url", "href", "uri", "prompt"]),
            mutating: DEFAULT_MUTATING
                .iter()
                .map(|s| MutatingTool::parse(s).expect("valid default"))
                .collect(),
        }
    }
}

/// A compiled pattern; equal when its source is equal.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    re: Regex,
    /// When the pattern is an alternation of plain words (ASCII letters, digits, `_`), as
    /// the default is: the words in lower case. An ASCII name matches the case-insensitive
    /// expression exactly when it contains one of them, ASCII case ignored (the words'
    /// other case variants, such as `ſ` for `s` or the Kelvin sign for `k`, are not ASCII),
    /// so an ASCII name is matched without running the expression: a proxy judges one call
    /// at a time with cold caches, and the regular expression engine was 8% of a judgement
    /// there. Any other name is matched by the expression.
    words: Option<Vec<Box<[u8]>>>,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.re.as_str() == other.re.as_str()
    }
}

impl Pattern {
    fn is_match(&self, s: &str) -> bool {
        match &self.words {
            Some(words) if s.is_ascii() => {
                let s = s.as_bytes();
                words.iter().any(|w| {
                    w.is_empty() || s.windows(w.len()).any(|part| part.eq_ignore_ascii_case(w))
                })
            }
            _ => self.re.is_match(s),
        }
    }
}

fn compile_url_re(p: &str) -> Result<Pattern, regex::Error> {
    let re = Regex::new(&format!("(?i){p}"))?;
    let plain = p
        .bytes()
        .all(|b| b == b'|' || b == b'_' || b.is_ascii_alphanumeric());
    let words = plain.then(|| {
        p.split('|')
            .map(|w| w.to_ascii_lowercase().into_bytes().into_boxed_slice())
            .collect()
    });
    Ok(Pattern { re, words })
}

impl ToolClasses {
    /// Whether `tool` is a shell tool.
    pub fn is_shell(&self, tool: &str) -> bool {
        self.shell.iter().any(|s| s == tool)
    }

    /// Whether a call changes the workspace: a configured mutating tool, or a shell tool
    /// whose command writes (see [`super::mutation::shell_writes`]).
    pub fn is_mutating(&self, tool: &str, args: &serde_json::Value) -> bool {
        if self.mutating.iter().any(|m| m.matches(tool, args)) {
            return true;
        }
        if !self.is_shell(tool) {
            return false;
        }
        self.command_line(args)
            .is_some_and(|script| super::mutation::writes::shell_writes(&script))
    }

    /// The command line of a shell tool's arguments: the first configured argument that is
    /// a string, or a list of strings: an argv array (`["bash", "-lc", "…"]`) is reduced to
    /// its script, or joined with spaces; a `commands` list (Cline's `run_commands`: one
    /// complete command per item) is joined line by line.
    ///
    /// Borrowed from the arguments when it is one string (the common case: a call's
    /// command is read three times, by the fingerprints, the shell-HTTP check and the
    /// mutation check).
    pub fn command_line<'a>(
        &self,
        args: &'a serde_json::Value,
    ) -> Option<std::borrow::Cow<'a, str>> {
        use serde_json::Value;
        use std::borrow::Cow;
        self.shell_command_args
            .iter()
            .find_map(|key| match args.get(key) {
                Some(Value::String(s)) => Some(Cow::Borrowed(s.as_str())),
                Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                    let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                    Some(Cow::Owned(if key == "commands" {
                        words.join("\n")
                    } else if words.len() >= 3 && matches!(words[1], "-c" | "-lc" | "-ic") {
                        words[2..].join(" ")
                    } else {
                        words.join(" ")
                    }))
                }
                _ => None,
            })
    }

    /// Whether `tool` is a URL tool.
    pub fn is_url_tool(&self, tool: &str) -> bool {
        self.url.iter().any(|s| s == tool)
            || self
                .url_re
                .0
                .get_or_init(|| {
                    (!self.url_pattern.is_empty())
                        .then(|| compile_url_re(&self.url_pattern).ok())
                        .flatten()
                })
                .as_ref()
                .is_some_and(|re| re.is_match(tool))
    }
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
    #[serde(skip)]
    exclude_re: Vec<Glob>,
    #[serde(skip)]
    include_re: Vec<Glob>,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
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
/// (docs/decisions.md, "Progress", and EVALUATION.md for the measurement behind it).
pub const DEFAULT_UNCHANGED_LIMIT: u32 = 3;
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

/// The keys of `[breaker.tools]`, the same way.
fn tool_keys() -> &'static [String] {
    static KEYS: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| names_of(&BreakerConfig::default().to_value()["tools"]));
    &KEYS
}

fn names_of(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Settings of the original JavaScript plugin (dsh-repeat-tool-breaker) that it retired
/// before toolbrake existed, in snake_case and camelCase, with what replaced them: someone
/// porting an old configuration is told where the setting went.
const REMOVED: &[(&str, &str, &str)] = &[
    (
        "shell_http_allow",
        "shellHttpAllow",
        "replaced by its `shellHttpBlock` list",
    ),
    (
        "deny_after",
        "denyAfter",
        "replaced by `limits`, the gate per fingerprint kind",
    ),
    ("warn_after", "warnAfter", "replaced by `warn_at`"),
    (
        "register_advisory",
        "registerAdvisory",
        "advisories are always delivered: tune `warn_at` and `summarize_at`",
    ),
    (
        "max_same_path",
        "maxSamePath",
        "path counters are gone: file actions are identified by `exact:`",
    ),
    (
        "read_tools",
        "readTools",
        "path counters are gone: file actions are identified by `exact:`",
    ),
    (
        "match_read_by_substring",
        "matchReadBySubstring",
        "path counters are gone: file actions are identified by `exact:`",
    ),
];

/// Settings of the original's fetch tool that belong to `[fetch]` here, or that
/// toolbrake's own HTTP client makes unnecessary, with where they went.
const MOVED: &[(&str, &str)] = &[
    ("output_dir", "it is `[fetch] output_dir`"),
    ("max_bytes", "it is `[fetch] max_bytes`"),
    ("max_redirects", "it is `[fetch] max_redirects`"),
    ("user_agent", "it is `[fetch] user_agent`"),
    ("allow_private_hosts", "it is `[fetch] allow_private_hosts`"),
    ("cookie_jar", "it is `[fetch] cookie_jar`"),
    ("timeout_ms", "it is `[fetch] timeout`, a duration such as \"30s\""),
    ("embed_fetch_file", "toolbrake offers `web_fetch_file` itself (`toolbrake mcp --fetch-tool`), or names the host's fetch tool with `fetch_tool`"),
    ("fetch_with_curl", "toolbrake fetches with its own HTTP client; offer the tool with `toolbrake mcp --fetch-tool`"),
    ("curl_path", "toolbrake fetches with its own HTTP client; there is no curl to point at"),
];

/// A tool-name pattern: `*` means any sequence, everything else is literal; anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob(Vec<String>);

impl Glob {
    fn is_match(&self, name: &str) -> bool {
        let parts = &self.0;
        if parts.len() == 1 {
            return name == parts[0];
        }
        let (first, last) = (&parts[0], &parts[parts.len() - 1]);
        if name.len() < first.len() + last.len()
            || !name.starts_with(first.as_str())
            || !name.ends_with(last.as_str())
        {
            return false;
        }
        let mut rest = &name[first.len()..name.len() - last.len()];
        for mid in &parts[1..parts.len() - 1] {
            match rest.find(mid.as_str()) {
                Some(i) => rest = &rest[i + mid.len()..],
                None => return false,
            }
        }
        true
    }
}

pub(crate) fn glob_re(pattern: &str) -> Glob {
    Glob(pattern.split('*').map(str::to_string).collect())
}

const P: &str = "breaker";

impl BreakerConfig {
    /// Reads and validates the `[breaker]` table over the defaults.
    pub fn from_table(table: Option<&Table>) -> Result<Self, ConfigError> {
        let mut c = BreakerConfig::default();
        let Some(t) = table else { return Ok(c) };
        for (k, v) in t {
            if let Some((_, camel, hint)) =
                REMOVED.iter().find(|(s, camel, _)| k == s || k == camel)
            {
                return Err(ConfigError::new(
                    dotted(P, k),
                    KEY_ITSELF,
                    format!("is not a toolbrake setting; it was the original plugin's `{camel}`, {hint}"),
                ));
            }
            if let Some((_, hint)) = MOVED.iter().find(|(s, _)| k == s) {
                return Err(ConfigError::new(
                    dotted(P, k),
                    KEY_ITSELF,
                    format!("is not a `[breaker]` setting: {hint}"),
                ));
            }
            match k.as_str() {
                "enabled" => c.enabled = get_bool(P, k, v)?,
                "window" => {
                    let n = get_int(P, k, v)?;
                    if !(4..=4096).contains(&n) {
                        return Err(ConfigError::new(dotted(P, k), show(v), "must be an integer from 4 to 4096"));
                    }
                    c.window = n as usize;
                }
                "on_limit" => {
                    c.on_limit = match v.as_str() {
                        Some("ask") => OnLimit::Ask,
                        Some("deny") => OnLimit::Deny,
                        _ => return Err(ConfigError::new(dotted(P, k), show(v), "must be \"ask\" or \"deny\"")),
                    }
                }
                "local_hosts" => {
                    c.local_hosts = match v.as_str() {
                        Some("deny") => LocalHosts::Deny,
                        Some("allow") => LocalHosts::Allow,
                        Some("ask") => {
                            return Err(ConfigError::new(
                                dotted(P, k),
                                show(v),
                                "must be \"deny\" or \"allow\"; \"ask\" was the original plugin's local-only ask, replaced by on_limit = \"ask\", which applies to every measure",
                            ))
                        }
                        _ => return Err(ConfigError::new(dotted(P, k), show(v), "must be \"deny\" or \"allow\"")),
                    }
                }
                "include_local" => c.include_local = get_bool(P, k, v)?,
                "warn_at" => c.warn_at = stage(k, v)?,
                "summarize_at" => c.summarize_at = stage(k, v)?,
                "fail_warn_at" => c.fail_warn_at = stage(k, v)?,
                "fail_limit" => c.fail_limit = cap(&dotted(P, k), v)?,
                "limits" => {
                    let lt = sub_table(k, v)?;
                    for (lk, lv) in lt {
                        c.limits.insert(lk.clone(), cap(&format!("{P}.limits.\"{lk}\""), lv)?);
                    }
                }
                "exclude" => {
                    c.exclude = get_string_list(P, k, v)?;
                    c.exclude_re = c.exclude.iter().map(|p| glob_re(p)).collect();
                }
                "include" => {
                    c.include = get_string_list(P, k, v)?;
                    c.include_re = c.include.iter().map(|p| glob_re(p)).collect();
                }
                "ignore_args" => {
                    let it = sub_table(k, v)?;
                    for (tool, list) in it {
                        let list = get_string_list(&format!("{P}.ignore_args"), tool, list)?;
                        c.ignore_args.insert(tool.clone(), list);
                    }
                }
                "host_aliases" => {
                    let ht = sub_table(k, v)?;
                    for (from, to) in ht {
                        let to = to.as_str().filter(|s| !s.is_empty()).ok_or_else(|| {
                            ConfigError::new(format!("{P}.host_aliases.\"{from}\""), show(to), "must be a non-empty string (a host name)")
                        })?;
                        c.host_aliases.insert(from.to_lowercase(), to.to_lowercase());
                    }
                }
                "preview_chars" => c.preview_chars = positive(k, v)?,
                "result_preview_chars" => c.result_preview_chars = positive(k, v)?,
                "progress" => c.progress = get_bool(P, k, v)?,
                "struggle_warn_at" => c.struggle_warn_at = stage(k, v)?,
                "struggle_ask_at" => c.struggle_ask_at = cap(&dotted(P, k), v)?,
                "cycle_limit" => {
                    c.cycle_limit = cap(&dotted(P, k), v)?;
                    if c.cycle_limit.is_some_and(|n| n > MAX_CYCLE_LIMIT) {
                        return Err(ConfigError::new(
                            dotted(P, k),
                            show(v),
                            format!("must be an integer from 2 to {MAX_CYCLE_LIMIT}, or \"off\""),
                        ));
                    }
                }
                "unchanged_limit" => {
                    c.unchanged_limit = match (v, as_int(v)) {
                        (Value::Bool(false), _) => None,
                        (Value::String(s), _) if s == "off" => None,
                        (_, Some(i)) if (1..=i64::from(MAX_UNCHANGED_LIMIT)).contains(&i) => {
                            Some(i as u32)
                        }
                        _ => {
                            return Err(ConfigError::new(
                                dotted(P, k),
                                show(v),
                                format!("must be an integer from 1 to {MAX_UNCHANGED_LIMIT}, or \"off\""),
                            ))
                        }
                    }
                }
                "same_output_limit" => {
                    c.same_output_limit = match (v, as_int(v)) {
                        (Value::Bool(false), _) => None,
                        (Value::String(s), _) if s == "off" => None,
                        (_, Some(i)) if (2..=i64::from(MAX_SAME_OUTPUT_LIMIT)).contains(&i) => {
                            Some(i as u32)
                        }
                        _ => {
                            return Err(ConfigError::new(
                                dotted(P, k),
                                show(v),
                                format!("must be an integer from 2 to {MAX_SAME_OUTPUT_LIMIT}, or \"off\""),
                            ))
                        }
                    }
                }
                "tools" => c.tools = tool_classes(sub_table(k, v)?)?,
                "block_shell_http" => c.block_shell_http = get_bool(P, k, v)?,
                "block_local_http" => c.block_local_http = get_bool(P, k, v)?,
                "shell_http_block" => c.shell_http_block = get_string_list(P, k, v)?,
                "fetch_tool" => {
                    let name = v.as_str().ok_or_else(|| {
                        ConfigError::new(dotted(P, k), show(v), "must be a string (a tool name; \"\" for none)")
                    })?;
                    c.fetch_tool = (!name.trim().is_empty()).then(|| name.trim().to_string());
                }
                _ => return Err(unknown_key(P, k, keys())),
            }
        }
        Ok(c)
    }

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

fn sub_table<'a>(k: &str, v: &'a Value) -> Result<&'a Table, ConfigError> {
    v.as_object()
        .ok_or_else(|| ConfigError::new(dotted(P, k), show(v), "must be a table"))
}

/// A stage: a positive integer turns it on; `0` or a negative number turns it off;
/// `"off"` or `false` too. A non-integer is an error (thresholds are integers).
fn stage(k: &str, v: &Value) -> Result<Option<u32>, ConfigError> {
    match (v, as_int(v)) {
        (Value::Bool(false), _) => Ok(None),
        (Value::String(s), _) if s == "off" => Ok(None),
        (_, Some(i)) if i <= 0 => Ok(None),
        (_, Some(i)) if i <= u32::MAX as i64 => Ok(Some(i as u32)),
        (Value::Number(n), None) if n.is_f64() => Err(ConfigError::new(dotted(P, k), show(v), "must be an integer")),
        _ => Err(ConfigError::new(
            dotted(P, k),
            show(v),
            format!("must be a number (a positive integer up to {} turns the stage on; 0, a negative number or \"off\" turns it off)", u32::MAX),
        )),
    }
}

/// A gate: an integer >= 2, or `"off"` / `false` for no gate.
fn cap(key: &str, v: &Value) -> Result<Option<u32>, ConfigError> {
    match (v, as_int(v)) {
        (Value::Bool(false), _) => Ok(None),
        (Value::String(s), _) if s == "off" => Ok(None),
        (_, Some(i)) if (2..=u32::MAX as i64).contains(&i) => Ok(Some(i as u32)),
        _ => Err(ConfigError::new(
            key,
            show(v),
            format!("must be an integer from 2 to {}, or \"off\" (no gate for this measure on either track)", u32::MAX),
        )),
    }
}

fn positive(k: &str, v: &Value) -> Result<usize, ConfigError> {
    let n = get_int(P, k, v)?;
    if !(1..=1_000_000).contains(&n) {
        return Err(ConfigError::new(
            dotted(P, k),
            show(v),
            "must be an integer from 1 to 1000000",
        ));
    }
    Ok(n as usize)
}

fn tool_classes(t: &Table) -> Result<ToolClasses, ConfigError> {
    let mut c = ToolClasses::default();
    let p = "breaker.tools";
    for (k, v) in t {
        match k.as_str() {
            "shell" => c.shell = get_string_list(p, k, v)?,
            "shell_command_args" => c.shell_command_args = get_string_list(p, k, v)?,
            "url" => c.url = get_string_list(p, k, v)?,
            "url_args" => c.url_args = get_string_list(p, k, v)?,
            "mutating" => {
                c.mutating = get_string_list(p, k, v)?
                    .iter()
                    .map(|spec| {
                        MutatingTool::parse(spec).map_err(|rule| {
                            ConfigError::new(dotted(p, k), format!("{spec:?}"), rule)
                        })
                    })
                    .collect::<Result<_, _>>()?;
            }
            "url_pattern" => {
                let s = v.as_str().ok_or_else(|| {
                    ConfigError::new(
                        dotted(p, k),
                        show(v),
                        "must be a string (a regular expression)",
                    )
                })?;
                if !s.is_empty() {
                    // Validated here; compiled again lazily on first use.
                    compile_url_re(s).map_err(|e| {
                        ConfigError::new(
                            dotted(p, k),
                            show(v),
                            format!("must be a valid regular expression ({e})"),
                        )
                    })?;
                }
                c.url_pattern = s.to_string();
                c.url_re = LazyPattern::default();
            }
            _ => return Err(unknown_key(p, k, tool_keys())),
        }
    }
    Ok(c)
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
    use super::*;

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
