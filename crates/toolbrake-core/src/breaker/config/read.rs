//! Reading the `[breaker]` table: every key validated over the defaults, retired and
//! moved settings named with where they went, each error naming key, value and rule.

use super::tools::{compile_url_re, glob_re, LazyPattern, ToolClasses};
use super::{
    keys, names_of, BreakerConfig, LocalHosts, OnLimit, SelfProtection, MAX_CYCLE_LIMIT,
    MAX_SAME_OUTPUT_LIMIT, MAX_UNCHANGED_LIMIT,
};
use crate::breaker::mutation::writes::MutatingTool;
use crate::table::{
    as_int, dotted, get_bool, get_int, get_string_list, show, unknown_key, ConfigError, Table,
    KEY_ITSELF,
};
use serde_json::Value;

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
                "self_protection" => {
                    c.self_protection = match v.as_str() {
                        Some("deny") => SelfProtection::Deny,
                        Some("off") => SelfProtection::Off,
                        _ => return Err(ConfigError::new(dotted(P, k), show(v), "must be \"deny\" or \"off\"")),
                    }
                }
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

/// The keys of `[breaker.tools]`, the same way.
fn tool_keys() -> &'static [String] {
    static KEYS: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| names_of(&BreakerConfig::default().to_value()["tools"]));
    &KEYS
}
