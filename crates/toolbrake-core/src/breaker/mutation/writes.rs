//! Whether a call changes the workspace: the configured mutating tools ([`MutatingTool`])
//! and, for shell tools, the command itself ([`shell_writes`]); reads are never mutating.

use crate::breaker::shell::{basename_lower as basename, is_assignment};
use serde_json::Value;

/// One entry of `[breaker.tools] mutating`: `NAME`, or `NAME[ARG=V1|V2|…]` when only calls
/// whose argument `ARG` is one of the values change anything (a file tool whose `command`
/// can be `view` or `create`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutatingTool {
    /// The tool name.
    pub name: String,
    /// The argument and the values that make a call mutating; `None`: every call.
    pub when: Option<(String, Vec<String>)>,
}

impl MutatingTool {
    /// Parses `NAME` or `NAME[ARG=V1|V2]`; the error says what is wrong.
    ///
    /// ```
    /// use toolbrake_core::breaker::mutation::MutatingTool;
    /// let t = MutatingTool::parse("str_replace_editor[command=create|str_replace]").unwrap();
    /// assert_eq!(t.name, "str_replace_editor");
    /// assert!(MutatingTool::parse("x[command]").is_err());
    /// ```
    pub fn parse(spec: &str) -> Result<Self, &'static str> {
        let spec = spec.trim();
        let Some(open) = spec.find('[') else {
            if spec.is_empty() || spec.contains(']') {
                return Err("must be a tool name, or NAME[ARG=VALUE|VALUE…]");
            }
            return Ok(MutatingTool {
                name: spec.to_string(),
                when: None,
            });
        };
        let name = &spec[..open];
        let inner = spec[open + 1..]
            .strip_suffix(']')
            .ok_or("must end its condition with `]`: NAME[ARG=VALUE|VALUE…]")?;
        let (arg, values) = inner
            .split_once('=')
            .ok_or("must have a condition of the form NAME[ARG=VALUE|VALUE…]")?;
        let values: Vec<String> = values
            .split('|')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect();
        if name.is_empty() || arg.trim().is_empty() || values.is_empty() {
            return Err("must be NAME[ARG=VALUE|VALUE…] with a name, an argument and a value");
        }
        Ok(MutatingTool {
            name: name.to_string(),
            when: Some((arg.trim().to_string(), values)),
        })
    }

    /// Whether a call of `tool` with `args` matches this entry.
    pub fn matches(&self, tool: &str, args: &Value) -> bool {
        if self.name != tool {
            return false;
        }
        match &self.when {
            None => true,
            Some((arg, values)) => args
                .get(arg)
                .and_then(Value::as_str)
                .is_some_and(|v| values.iter().any(|x| x == v)),
        }
    }
}

impl std::fmt::Display for MutatingTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.when {
            None => write!(f, "{}", self.name),
            Some((arg, values)) => write!(f, "{}[{}={}]", self.name, arg, values.join("|")),
        }
    }
}

/// The default `[breaker.tools] mutating`: the file-editing tools of the common hosts.
pub const DEFAULT_MUTATING: &[&str] = &[
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "apply_patch",
    "write_file",
    "replace",
    "edit",
    "create",
    "edit_file",
    "str_replace_editor[command=create|str_replace|insert|undo_edit]",
    "str_replace_based_edit_tool[command=create|str_replace|insert|undo_edit]",
    // Factory Droid, Qwen Code, Cline and Cursor.
    "Create",
    "ApplyPatch",
    "notebook_edit",
    "editor",
    "StrReplace",
    "Delete",
];

/// One lexed word of a shell command.
#[derive(Debug, PartialEq)]
pub(super) enum Word {
    /// A plain word, quotes removed.
    Text(String),
    /// A control operator outside quotes: `;`, `|`, `&`, `&&`, `||`, `(`, `)`, newline.
    Op,
    /// A redirection outside quotes (`>`, `>>`, `2>`, `&>`), with its target when attached.
    Redirect(Option<String>),
}

/// Splits a command into words, operators and output redirections. Unlike the
/// fingerprint tokenizer it keeps operators apart from words (`cd x;ls`) and knows which
/// `>` were quoted (`grep '>' f` writes nothing).
pub(super) fn lex(command: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    let flush = |out: &mut Vec<Word>, cur: &mut String, quoted: &mut bool, in_word: &mut bool| {
        if *in_word {
            out.push(Word::Text(std::mem::take(cur)));
        }
        *quoted = false;
        *in_word = false;
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                quoted = true;
                for n in chars.by_ref() {
                    if n == '\'' {
                        break;
                    }
                    cur.push(n);
                }
            }
            '"' => {
                in_word = true;
                quoted = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '\\' => {
                            if let Some(e) = chars.next() {
                                cur.push(e);
                            }
                        }
                        _ => cur.push(n),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    if n != '\n' {
                        cur.push(n);
                    }
                }
            }
            ';' | '|' | '(' | ')' | '\n' => {
                flush(&mut out, &mut cur, &mut quoted, &mut in_word);
                out.push(Word::Op);
            }
            '&' if chars.peek() != Some(&'>') => {
                flush(&mut out, &mut cur, &mut quoted, &mut in_word);
                out.push(Word::Op);
            }
            '>' | '&' => {
                // `N>` and `&>`: the file descriptor belongs to the redirection.
                if c == '&' || (in_word && !quoted && cur.chars().all(|d| d.is_ascii_digit())) {
                    cur.clear();
                    in_word = false;
                    quoted = false;
                } else {
                    flush(&mut out, &mut cur, &mut quoted, &mut in_word);
                }
                if c == '&' {
                    chars.next(); // the `>`
                }
                if chars.peek() == Some(&'>') {
                    chars.next();
                }
                if chars.peek() == Some(&'|') {
                    chars.next();
                }
                let mut target = String::new();
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace()
                        || ";|&<>()".contains(n) && !(n == '&' && target.is_empty())
                    {
                        break;
                    }
                    target.push(n);
                    chars.next();
                }
                out.push(Word::Redirect((!target.is_empty()).then_some(target)));
            }
            c if c.is_whitespace() => flush(&mut out, &mut cur, &mut quoted, &mut in_word),
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    flush(&mut out, &mut cur, &mut quoted, &mut in_word);
    out
}

/// Redirect targets that write nothing to the workspace.
pub(super) fn harmless_target(t: &str) -> bool {
    let t = t.trim_matches(['\'', '"']);
    t.starts_with('&')
        || matches!(
            t,
            "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "-"
        )
        || t.is_empty()
}

const WRAPPERS: &[&str] = &[
    "sudo", "doas", "command", "env", "time", "nice", "nohup", "exec", "timeout", "xargs", "stdbuf",
];
/// Commands that change the filesystem whenever they run.
pub(super) const WRITERS: &[&str] = &[
    "mv",
    "cp",
    "rm",
    "rmdir",
    "mkdir",
    "touch",
    "ln",
    "chmod",
    "chown",
    "install",
    "patch",
    "truncate",
    "unzip",
    "apply_patch",
    "rsync",
];
const GIT_WRITES: &[&str] = &[
    "apply",
    "checkout",
    "stash",
    "reset",
    "commit",
    "restore",
    "switch",
    "merge",
    "rebase",
    "cherry-pick",
    "revert",
    "am",
    "pull",
    "clean",
    "rm",
    "mv",
];
const PACKAGE_MANAGERS: &[&str] = &[
    "pip", "pip3", "uv", "poetry", "npm", "yarn", "pnpm", "cargo", "gem", "apt", "apt-get", "brew",
    "conda", "mamba", "go", "bundle", "composer", "dnf", "yum", "apk",
];
const PACKAGE_WRITES: &[&str] = &[
    "install",
    "add",
    "uninstall",
    "remove",
    "update",
    "upgrade",
    "i",
    "get",
    "sync",
];

/// The index of a simple command's verb: past assignments, options, durations and wrapper
/// words (`FOO=1 sudo timeout 5 touch x`).
pub(super) fn verb_index(words: &[&str]) -> usize {
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if is_assignment(w)
            || w.starts_with('-')
            || (i > 0 && w.chars().all(|c| c.is_ascii_digit() || ".smhd".contains(c)))
            || is_wrapper(w)
        {
            i += 1;
            continue;
        }
        break;
    }
    i
}

/// A command word without its directory (as written: [`basename`] lowercases it too).
pub(super) fn base_name(word: &str) -> &str {
    match word.bytes().rposition(|c| c == b'/' || c == b'\\') {
        Some(i) => &word[i + 1..],
        None => word,
    }
}

fn is_wrapper(word: &str) -> bool {
    let b = base_name(word);
    WRAPPERS.iter().any(|x| x.eq_ignore_ascii_case(b))
}

/// The file of a pytest node id (`t.py::TestA::test_b`), or the word.
pub(super) fn node_file(word: &str) -> &str {
    match word.as_bytes().windows(2).position(|w| w == b"::") {
        Some(i) => &word[..i],
        None => word,
    }
}

/// Whether one simple command (its words, no operators) writes to the workspace.
fn simple_writes(words: &[&str]) -> bool {
    let i = verb_index(words);
    let Some(verb) = words.get(i).map(|w| basename(w)) else {
        return false;
    };
    let rest = &words[i + 1..];
    let short_flag_has = |c: char| {
        rest.iter()
            .any(|w| w.starts_with('-') && !w.starts_with("--") && w[1..].contains(c))
    };
    match verb.as_str() {
        v if WRITERS.contains(&v) => true,
        "sed" | "perl" => short_flag_has('i') || rest.contains(&"--in-place"),
        "tee" => rest
            .iter()
            .any(|w| !w.starts_with('-') && !harmless_target(w)),
        "tar" => rest
            .first()
            .is_some_and(|w| w.trim_start_matches('-').contains(['x', 'c'])),
        "dd" => rest.iter().any(|w| w.starts_with("of=")),
        "git" => {
            let mut j = 0;
            while j < rest.len() && rest[j].starts_with('-') {
                j += if matches!(rest[j], "-C" | "-c") { 2 } else { 1 };
            }
            rest.get(j).is_some_and(|s| GIT_WRITES.contains(s))
        }
        "python" | "python3"
            if rest.len() >= 3 && rest[0] == "-m" && basename(rest[1]).starts_with("pip") =>
        {
            PACKAGE_WRITES.contains(&rest[2])
        }
        v if PACKAGE_MANAGERS.contains(&v) => rest
            .iter()
            .find(|w| !w.starts_with('-'))
            .is_some_and(|s| PACKAGE_WRITES.contains(s)),
        _ => false,
    }
}

/// Whether a shell command changes the workspace: a write redirection (not to
/// `/dev/null`), `tee FILE`, `sed -i` / `perl -i`, `patch`, file commands (`mv cp rm mkdir
/// touch …`), `git apply|checkout|stash|reset|commit|…`, or a package install.
///
/// ```
/// use toolbrake_core::breaker::mutation::shell_writes;
/// assert!(shell_writes("sed -i 's/a/b/' f.py && python t.py"));
/// assert!(shell_writes("cat > fix.py <<'EOF'\nprint(1)\nEOF"));
/// assert!(!shell_writes("python t.py 2>&1 | grep '>' > /dev/null"));
/// assert!(!shell_writes("grep -rn 'a > b' src/"));
/// ```
pub fn shell_writes(command: &str) -> bool {
    lexed_writes(&lex(command))
}

/// [`shell_writes`] of a lexed command.
pub(super) fn lexed_writes(lexed: &[Word]) -> bool {
    let mut words: Vec<&str> = Vec::new();
    let mut after_redirect = false;
    for w in lexed {
        match w {
            Word::Redirect(Some(t)) => {
                if !harmless_target(t) {
                    return true;
                }
            }
            Word::Redirect(None) => {
                after_redirect = true;
                continue;
            }
            Word::Op => {
                if simple_writes(&words) {
                    return true;
                }
                words.clear();
            }
            Word::Text(text) => {
                if after_redirect {
                    if !harmless_target(text) {
                        return true;
                    }
                } else {
                    words.push(text);
                }
            }
        }
        after_redirect = false;
    }
    simple_writes(&words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes() {
        for c in [
            "echo x > out.txt",
            "echo x >> log",
            "python gen.py 1>out.json",
            "cmd &> all.log",
            "sed -i.bak 's/x/y/' a.py",
            "perl -pi -e 's/a/b/' f",
            "printf x | tee -a notes.md",
            "cd repo && git apply fix.diff",
            "git -C repo checkout -- a.py",
            "git stash",
            "mkdir -p a/b",
            "sudo rm -rf build",
            "pip install -e .",
            "python -m pip install requests",
            "npm i left-pad",
            "patch -p1 < fix.patch",
            "cat <<EOF > f.py\nx\nEOF",
            "tar -xzf a.tgz",
            "FOO=1 timeout 5 touch x",
            "cd x;rm y",
        ] {
            assert!(shell_writes(c), "{c}");
        }
    }

    #[test]
    fn reads() {
        for c in [
            "cat a.py",
            "grep -rn 'x > y' .",
            "grep '>' f",
            "python reproduce.py 2>&1",
            "pytest -x 2>/dev/null",
            "ls -la > /dev/null",
            "git status && git diff",
            "git log --oneline",
            "sed -n '1,20p' a.py",
            "perl -ne 'print' f",
            "find . -name '*.py'",
            "pip list",
            "echo 'a >> b'",
            "tee",
            "",
        ] {
            assert!(!shell_writes(c), "{c}");
        }
    }

    #[test]
    fn tool_entries() {
        let t = MutatingTool::parse("str_replace_editor[command=create|str_replace]").unwrap();
        assert!(t.matches(
            "str_replace_editor",
            &serde_json::json!({"command": "create"})
        ));
        assert!(!t.matches(
            "str_replace_editor",
            &serde_json::json!({"command": "view"})
        ));
        assert!(!t.matches("str_replace_editor", &serde_json::json!({})));
        assert_eq!(
            t.to_string(),
            "str_replace_editor[command=create|str_replace]"
        );
        assert!(MutatingTool::parse("Edit")
            .unwrap()
            .matches("Edit", &Value::Null));
        for bad in ["", "x[", "x[a=]", "[a=b]", "x]"] {
            assert!(MutatingTool::parse(bad).is_err(), "{bad}");
        }
    }
}
