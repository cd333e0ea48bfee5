//! Self-protection (docs/decisions.md, "Self-protection"): whether a call would lift or
//! edit toolbrake itself, so that the agent being braked cannot take its own brake off.
//!
//! Pure text analysis over the shell words (the unwrapping of `shell_http`: lists,
//! pipelines, substitutions, `sh -c`, `sudo`, `env`, `xargs`, `find -exec`, heredocs) and
//! the paths a file tool writes. What is protected comes in as data ([`Protected`]): the
//! caller fills in the state file, the configuration files, the Redis key prefix and the
//! names its binary goes by; the core reads no disk and no environment.
//!
//! A call *targets toolbrake* when one of the commands it runs is:
//! - toolbrake's own command (`toolbrake`, any path to it, a name in
//!   [`Protected::binaries`], through `npx`/`uvx`/`pipx run`) with a subcommand other than
//!   the read-only ones (`sessions` as a list, `explain`, `tune` without `--write`, `config check`,
//!   `config default`, `completions`, `man`, `--help`, `--version`);
//! - a command that removes, moves, truncates or edits a protected file (`rm`, `mv`,
//!   `truncate`, `shred`, `sed -i`, `tee`, `cp`/`ln`/`install`/`dd` onto it, …), a
//!   redirection `>` onto it, `sqlite3` on it unless read-only, an interpreter whose code
//!   names it, or `rm -r`/`mv` of a folder holding it;
//! - `redis-cli` writing a key under the Redis prefix, or `FLUSHALL`/`FLUSHDB`, a script,
//!   or commands read from its input, when the store is Redis;
//! - a file tool writing a protected file ([`file_target`]).
//!
//! Reading stays allowed: `toolbrake sessions`, `cat` of the configuration, `sqlite3
//! -readonly`, `redis-cli GET`. A protected file's `-wal`, `-shm` and `-journal` are
//! protected with it.

use super::shell::basename_lower;
use super::shell_http::simple_commands;

/// What a call must not change: filled in by whoever knows where toolbrake keeps things.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// Absolute paths of the files toolbrake keeps: the state file and the configuration
    /// files (with `-wal`, `-shm`, `-journal` of each).
    pub files: Vec<String>,
    /// The Redis key prefix, when the store is Redis.
    pub redis_prefix: Option<String>,
    /// Names or paths toolbrake's binary goes by besides `toolbrake`.
    pub binaries: Vec<String>,
    /// Variables a command may name the files by (`HOME`, `XDG_STATE_HOME`,
    /// `TOOLBRAKE_STATE`, …), with their values.
    pub vars: Vec<(String, String)>,
}

/// A call found to target toolbrake itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfTarget {
    /// What it does, in a few words (`toolbrake sessions reset`, `rm on the state file`).
    pub what: String,
}

/// toolbrake's subcommands that change nothing.
const READ_ONLY: &[&str] = &[
    "explain",
    "completions",
    "man",
    "help",
    "--help",
    "-h",
    "--version",
    "-V",
];
/// Commands that remove, move or rewrite any file they name.
const DESTROY: &[&str] = &[
    "rm",
    "unlink",
    "shred",
    "rmdir",
    "mv",
    "truncate",
    "chmod",
    "chown",
    "chattr",
    "srm",
    "trash",
    "trash-put",
    "gio",
    "tee",
    "sponge",
    "ed",
    "ex",
    "patch",
    "ln",
    "touch",
];
/// Commands whose last name is where they write.
const COPIERS: &[&str] = &["cp", "install", "rsync", "scp"];
/// Commands that edit a file in place with `-i`.
const IN_PLACE: &[&str] = &["sed", "perl", "awk", "gawk", "ruby"];
/// Runners of a package's command (`npx toolbrake …`).
const RUNNERS: &[&str] = &["npx", "uvx", "bunx", "pnpx", "pipx", "pnpm", "yarn", "uv"];
/// Redis commands that only read.
const REDIS_READS: &[&str] = &[
    "get",
    "mget",
    "keys",
    "scan",
    "ttl",
    "pttl",
    "type",
    "exists",
    "hget",
    "hgetall",
    "hkeys",
    "hvals",
    "hlen",
    "hmget",
    "smembers",
    "scard",
    "sismember",
    "strlen",
    "info",
    "ping",
    "dbsize",
    "lrange",
    "llen",
    "object",
    "memory",
    "getrange",
    "hscan",
    "sscan",
    "echo",
    "time",
    "role",
    "--scan",
    "--bigkeys",
    "--memkeys",
    "--stat",
    "--latency",
];

/// Whether a shell `command` targets toolbrake itself.
///
/// ```
/// use toolbrake_core::breaker::self_guard::{shell_target, Protected};
/// let p = Protected { files: vec!["/home/u/.local/state/toolbrake/state.db".into()], ..Protected::default() };
/// assert!(shell_target("toolbrake sessions reset abc", &p).is_some());
/// assert!(shell_target("rm -f /home/u/.local/state/toolbrake/state.db-wal", &p).is_some());
/// assert!(shell_target("toolbrake sessions", &p).is_none());
/// assert!(shell_target("cat /home/u/.local/state/toolbrake/state.db", &p).is_none());
/// ```
pub fn shell_target(command: &str, p: &Protected) -> Option<SelfTarget> {
    let files = expanded_files(p);
    simple_commands(command)
        .iter()
        .find_map(|words| command_target(words, p, &files))
}

/// Whether a file tool writing `path` (Write, Edit, …) writes a protected file.
pub fn file_target(path: &str, p: &Protected) -> Option<SelfTarget> {
    let files = expanded_files(p);
    let word = expand(path, p);
    files
        .iter()
        .any(|f| names_file(&word, f))
        .then(|| SelfTarget {
            what: format!("a write to {}", kind_of(&word)),
        })
}

/// The protected files with their SQLite companions.
fn expanded_files(p: &Protected) -> Vec<String> {
    let mut out = Vec::new();
    for f in &p.files {
        let f = f.trim_end_matches('/');
        if f.is_empty() {
            continue;
        }
        for suffix in ["", "-wal", "-shm", "-journal"] {
            out.push(format!("{f}{suffix}"));
        }
    }
    out
}

fn kind_of(word: &str) -> &'static str {
    if word.ends_with(".toml") {
        "toolbrake's configuration"
    } else {
        "toolbrake's state"
    }
}

/// One simple command's verdict.
fn command_target(words: &[String], p: &Protected, files: &[String]) -> Option<SelfTarget> {
    let (first, rest) = words.split_first()?;
    let verb = basename_lower(first.trim_end_matches(".exe"));
    let hit = |what: String| Some(SelfTarget { what });
    // A redirection onto a protected file, whatever the command.
    if let Some(f) = redirect_targets(words)
        .into_iter()
        .find(|t| names_any(&expand(t, p), files))
    {
        return hit(format!("a redirection onto {}", kind_of(&f)));
    }
    if is_toolbrake(first, &verb, p) {
        return toolbrake_cli(rest).map(|what| SelfTarget { what });
    }
    if RUNNERS.contains(&verb.as_str()) {
        let inner: Vec<&String> = rest
            .iter()
            .filter(|a| {
                !a.starts_with('-') && !matches!(a.as_str(), "run" | "exec" | "dlx" | "tool")
            })
            .collect();
        if let Some(pos) = inner
            .first()
            .and_then(|w| rest.iter().position(|r| r == *w))
        {
            let name = basename_lower(&rest[pos]);
            if is_toolbrake(&rest[pos], &name, p) || name.starts_with("toolbrake@") {
                return toolbrake_cli(&rest[pos + 1..]).map(|what| SelfTarget { what });
            }
        }
        return None;
    }
    match verb.as_str() {
        "redis-cli" | "valkey-cli" | "keydb-cli" => redis_target(rest, p),
        "sqlite3" | "sqlite" | "litecli" => sqlite_target(rest, p, files),
        "dd" => rest
            .iter()
            .filter_map(|a| a.strip_prefix("of="))
            .find(|t| names_any(&expand(t, p), files))
            .and_then(|t| hit(format!("dd onto {}", kind_of(t)))),
        "find" if rest.iter().any(|a| a == "-delete") => rest
            .iter()
            .take_while(|a| !a.starts_with('-'))
            .find(|a| holds_any(&expand(a, p), files))
            .and_then(|_| hit("find -delete over toolbrake's files".into())),
        "git" => {
            let sub = rest.iter().find(|a| !a.starts_with('-'))?;
            if !matches!(sub.as_str(), "rm" | "mv" | "checkout" | "restore" | "clean") {
                return None;
            }
            rest.iter()
                .find(|a| names_any(&expand(a, p), files))
                .and_then(|a| hit(format!("git {sub} of {}", kind_of(a))))
        }
        v if DESTROY.contains(&v) => rest
            .iter()
            .filter(|a| !a.starts_with('-') || a.len() == 1)
            .find(|a| {
                let w = expand(a, p);
                names_any(&w, files) || holds_any(&w, files)
            })
            .and_then(|a| hit(format!("{v} on {}", kind_of(a)))),
        v if COPIERS.contains(&v) => {
            let dest = rest.iter().rev().find(|a| !a.starts_with('-'))?;
            let w = expand(dest, p);
            (names_any(&w, files)
                || files
                    .iter()
                    .any(|f| parent_of(f) == w.trim_end_matches('/')))
            .then(|| SelfTarget {
                what: format!("{v} onto {}", kind_of(dest)),
            })
        }
        v if IN_PLACE.contains(&v)
            && rest
                .iter()
                .any(|a| a.starts_with("-i") || a == "--in-place" || a == "inplace") =>
        {
            rest.iter()
                .find(|a| names_any(&expand(a, p), files))
                .and_then(|a| hit(format!("{v} -i on {}", kind_of(a))))
        }
        // Interpreters and shells (the lists the shell-fetch check reads code by): their
        // code is searched for a protected name.
        v if super::shell_http::CODE_VERBS.contains(&v)
            || super::shell_http::SHELLS.contains(&v) =>
        {
            code_target(rest, p, files).then(|| SelfTarget {
                what: format!("{v} code naming toolbrake's files"),
            })
        }
        _ => None,
    }
}

/// Whether a command word is toolbrake's binary.
fn is_toolbrake(word: &str, verb: &str, p: &Protected) -> bool {
    verb == "toolbrake"
        || p.binaries
            .iter()
            .any(|b| b == word || (!b.contains('/') && basename_lower(b) == verb))
}

/// toolbrake's own command line, after the binary: `None` when it changes nothing.
fn toolbrake_cli(args: &[String]) -> Option<String> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--config" {
            i += 2;
            continue;
        }
        if a.starts_with("--config=") {
            i += 1;
            continue;
        }
        if matches!(a, "--help" | "-h" | "help") {
            return None;
        }
        words.push(a);
        i += 1;
    }
    let sub = words.first().copied().unwrap_or("");
    let second = words.get(1).copied().unwrap_or("");
    let read_only = match sub {
        "" => true,
        "sessions" => second.is_empty() || second.starts_with('-') || second == "list",
        "config" => matches!(second, "check" | "default" | ""),
        // `tune --write` merges a calibrated setting into the configuration, calibrated on
        // whatever history the agent hands it.
        "tune" => !words
            .iter()
            .any(|w| *w == "--write" || w.starts_with("--write=")),
        s => READ_ONLY.contains(&s),
    };
    if read_only {
        return None;
    }
    let shown: Vec<&str> = std::iter::once("toolbrake")
        .chain(
            words
                .iter()
                .take(2)
                .copied()
                .filter(|w| !w.starts_with('-')),
        )
        .collect();
    Some(shown.join(" "))
}

/// The targets of redirections (`> f`, `>>f`, `2> f`, `&> f`, `>| f`).
fn redirect_targets(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let Some(pos) = w.find('>') else { continue };
        let head = &w[..pos];
        if !head.is_empty() && !head.chars().all(|c| c.is_ascii_digit() || c == '&') {
            continue;
        }
        let target = w[pos..].trim_start_matches(['>', '|', '&']);
        if target.is_empty() {
            if let Some(next) = words.get(i + 1) {
                out.push(next.clone());
            }
        } else if !target.chars().all(|c| c.is_ascii_digit() || c == '-') {
            out.push(target.to_string());
        }
    }
    out
}

fn redis_target(args: &[String], p: &Protected) -> Option<SelfTarget> {
    let prefix = p.redis_prefix.as_deref()?;
    const WITH_VALUE: &[&str] = &[
        "-h",
        "-p",
        "-s",
        "-a",
        "-u",
        "-n",
        "-r",
        "-i",
        "-d",
        "-D",
        "--user",
        "--pass",
        "--askpass",
        "--sni",
        "--cacert",
        "--cacertdir",
        "--cert",
        "--key",
        "--tls-ciphers",
        "--tls-ciphersuites",
        "--pattern",
        "--count",
        "--quoted-pattern",
        "--eval",
        "--rdb",
        "--functions-rdb",
        "--memkeys-samples",
        "--lru-test",
        "--pipe-timeout",
    ];
    let mut i = 0;
    let mut cmd = None;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--eval" {
            return Some(SelfTarget {
                what: "redis-cli --eval on toolbrake's store".into(),
            });
        }
        if a == "-x" || a == "--pipe" {
            return Some(SelfTarget {
                what: "redis-cli reading commands for toolbrake's store".into(),
            });
        }
        if WITH_VALUE.contains(&a) {
            i += 2;
            continue;
        }
        if a.starts_with('-') {
            i += 1;
            continue;
        }
        cmd = Some(i);
        break;
    }
    let Some(at) = cmd else {
        // No command: it reads commands from its input.
        let scans = args.iter().any(|a| REDIS_READS.contains(&a.as_str()));
        return (!scans).then(|| SelfTarget {
            what: "redis-cli reading commands for toolbrake's store".into(),
        });
    };
    let name = args[at].to_ascii_lowercase();
    let keys = &args[at + 1..];
    if REDIS_READS.contains(&name.as_str())
        || name == "config" && keys.first().is_some_and(|k| k.eq_ignore_ascii_case("get"))
    {
        return None;
    }
    let all = matches!(
        name.as_str(),
        "flushall"
            | "flushdb"
            | "eval"
            | "evalsha"
            | "eval_ro"
            | "fcall"
            | "script"
            | "function"
            | "swapdb"
            | "debug"
            | "restore"
            | "migrate"
            | "move"
            | "multi"
            | "exec"
    );
    let named = keys.is_empty()
        || keys
            .iter()
            .any(|k| k.starts_with(prefix) || k.contains(&format!("{prefix}{{")));
    (all || named).then(|| SelfTarget {
        what: format!(
            "redis-cli {} on toolbrake's keys",
            name.to_ascii_uppercase()
        ),
    })
}

fn sqlite_target(args: &[String], p: &Protected, files: &[String]) -> Option<SelfTarget> {
    let mut positional = args.iter().filter(|a| !a.starts_with('-'));
    let db = positional.next()?;
    if !names_any(&expand(db, p), files) {
        return None;
    }
    if args.iter().any(|a| a == "-readonly") {
        return None;
    }
    // SQL read from input (`< wipe.sql`, a pipe, a heredoc) is unknown: it may write.
    let sql: Vec<&String> = positional
        .take_while(|a| !a.starts_with(['<', '>']) && !a.contains(">&"))
        .collect();
    let from_input = args.iter().any(|a| a.starts_with('<'));
    let writes = from_input || sql.is_empty() || sql.iter().any(|s| writes_sql(s));
    writes.then(|| SelfTarget {
        what: "sqlite3 on toolbrake's state".into(),
    })
}

/// Whether SQL (or a dot-command) may change the database.
fn writes_sql(sql: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .collect();
    words.iter().any(|w| {
        matches!(
            *w,
            "delete"
                | "update"
                | "insert"
                | "drop"
                | "replace"
                | "alter"
                | "create"
                | "vacuum"
                | "attach"
                | "pragma"
                | "reindex"
                | "upsert"
                | ".read"
                | ".restore"
                | ".import"
                | ".load"
                | ".shell"
                | ".system"
                | ".open"
                | ".clone"
                | ".recover"
        )
    })
}

/// Whether interpreter code names a protected file or key.
fn code_target(args: &[String], p: &Protected, files: &[String]) -> bool {
    let home = var(p, "HOME");
    args.iter().any(|a| {
        let text = expand(a, p);
        files.iter().any(|f| {
            text.contains(f.as_str())
                || home
                    .and_then(|h| f.strip_prefix(h))
                    .is_some_and(|rest| rest.len() > 1 && text.contains(&format!("~{rest}")))
        }) || a.contains("TOOLBRAKE_STATE")
            || p.redis_prefix
                .as_deref()
                .is_some_and(|pre| a.contains(pre) && a.to_ascii_lowercase().contains("redis"))
    })
}

fn var<'a>(p: &'a Protected, name: &str) -> Option<&'a str> {
    p.vars
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// A word with `~`, `$NAME` and `${NAME}` replaced by what they stand for.
fn expand(word: &str, p: &Protected) -> String {
    let mut w = word.to_string();
    if let Some(home) = var(p, "HOME") {
        if w == "~" {
            w = home.to_string();
        } else if let Some(rest) = w.strip_prefix("~/") {
            w = format!("{home}/{rest}");
        }
    }
    if w.contains('$') {
        let mut vars: Vec<&(String, String)> = p.vars.iter().collect();
        vars.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
        for (name, value) in vars {
            w = w.replace(&format!("${{{name}}}"), value);
            w = w.replace(&format!("${name}"), value);
        }
    }
    // `a//b`, `a/./b`: one spelling.
    while w.contains("//") {
        w = w.replace("//", "/");
    }
    while w.contains("/./") {
        w = w.replace("/./", "/");
    }
    w.strip_prefix("./").map(str::to_string).unwrap_or(w)
}

fn names_any(word: &str, files: &[String]) -> bool {
    files.iter().any(|f| names_file(word, f))
}

/// Whether a word names a file: its path, a glob matching it, or (relative) its tail.
fn names_file(word: &str, file: &str) -> bool {
    let word = word.trim_end_matches('/');
    if word.is_empty() {
        return false;
    }
    if word == file {
        return true;
    }
    if word.contains(['*', '?', '[']) {
        return if word.starts_with('/') {
            glob(word, file)
        } else {
            let name = file.rsplit('/').next().unwrap_or(file);
            glob(word, name) || (word.contains('/') && tail_glob(word, file))
        };
    }
    !word.starts_with('/') && word != "." && word != ".." && file.ends_with(&format!("/{word}"))
}

fn tail_glob(word: &str, file: &str) -> bool {
    let n = word.matches('/').count() + 1;
    let parts: Vec<&str> = file.rsplit('/').take(n).collect();
    let tail: Vec<&str> = parts.into_iter().rev().collect();
    glob(word, &tail.join("/"))
}

/// Whether a word names a folder holding a protected file: an absolute ancestor (not `/`),
/// or a relative one whose name says toolbrake.
fn holds_any(word: &str, files: &[String]) -> bool {
    let word = word.trim_end_matches('/');
    if word.is_empty() || word == "." || word == ".." {
        return false;
    }
    files.iter().any(|f| {
        let mut dir = parent_of(f);
        while !dir.is_empty() {
            let matches = if word.starts_with('/') {
                word == dir || (word.contains(['*', '?']) && glob(word, dir))
            } else {
                dir.rsplit('/')
                    .next()
                    .is_some_and(|n| n.contains("toolbrake"))
                    && dir.ends_with(&format!("/{word}"))
            };
            if matches {
                return true;
            }
            dir = parent_of(dir);
        }
        false
    })
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "",
        Some(i) => &path[..i],
    }
}

/// A shell glob (`*`, `?`, `[…]` read as one character) over a whole text.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == '[' {
            if let Some(end) = p[pi..].iter().position(|&c| c == ']') {
                if p[pi + 1..pi + end].contains(&t[ti]) {
                    pi += end + 1;
                    ti += 1;
                    continue;
                }
            }
        }
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("*.db", "state.db"));
        assert!(glob("/h/*/state.db*", "/h/x/state.db-wal"));
        assert!(!glob("*.toml", "state.db"));
        assert!(glob("state.[d]b", "state.db"));
    }

    #[test]
    fn redirections() {
        let w = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(redirect_targets(&w("echo x > a")), ["a"]);
        assert_eq!(redirect_targets(&w("echo x >>a 2>&1")), ["a"]);
        assert_eq!(redirect_targets(&w(": &> b")), ["b"]);
        assert!(redirect_targets(&w("a 2>&1")).is_empty());
        assert!(redirect_targets(&w("x=a>b")).is_empty());
    }
}
