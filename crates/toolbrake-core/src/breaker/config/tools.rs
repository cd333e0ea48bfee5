//! The tool classes (`[breaker.tools]`): which tools are shell tools and URL tools and
//! where their command or URL is, and the tool-name globs of `include` / `exclude`.

use crate::breaker::mutation::writes::{shell_writes, MutatingTool, DEFAULT_MUTATING};
use regex::Regex;
use serde::Serialize;

/// Owned strings of a constant list.
pub(super) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
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
    pub(super) url_re: LazyPattern,
}

/// The compiled `url_pattern`, built on first use and shared by every clone of the
/// configuration (so cloning an engine never compiles it again). Equality is decided by
/// `url_pattern`.
#[derive(Debug, Clone, Default)]
pub(super) struct LazyPattern(std::sync::Arc<std::sync::OnceLock<Option<Pattern>>>);

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
    pub(super) words: Option<Vec<Box<[u8]>>>,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.re.as_str() == other.re.as_str()
    }
}

impl Pattern {
    pub(super) fn is_match(&self, s: &str) -> bool {
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

pub(super) fn compile_url_re(p: &str) -> Result<Pattern, regex::Error> {
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
    /// whose command writes (see [`shell_writes`]).
    pub fn is_mutating(&self, tool: &str, args: &serde_json::Value) -> bool {
        if self.mutating.iter().any(|m| m.matches(tool, args)) {
            return true;
        }
        if !self.is_shell(tool) {
            return false;
        }
        self.command_line(args)
            .is_some_and(|script| shell_writes(&script))
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

/// A tool-name pattern: `*` means any sequence, everything else is literal; anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob(Vec<String>);

impl Glob {
    pub(super) fn is_match(&self, name: &str) -> bool {
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
