//! The shell-HTTP block (docs/decisions.md, "Shell-HTTP block"): whether a shell command
//! fetches over HTTP, so that the model can be sent to the fetch-to-file tool instead.
//!
//! Pure text analysis, no DNS: a command is *blocked* when one of the commands it runs
//! (after unwrapping lists, pipelines, subshells, command substitutions, shell hosts such
//! as `sh -c`, `sudo`, `env`, `timeout`, `xargs`, `find -exec`, and heredocs fed to a shell
//! or an interpreter) is a listed HTTP client with an argument, or an interpreter whose code
//! calls a request API (`requests.get(`, `fetch(`, `urlopen(`, `Invoke-WebRequest`, …),
//! unless every address it names is local (and local traffic is not blocked). A client
//! with no provable address (`curl "$URL"`) is blocked: it cannot be shown to be local.
//! Passed: name lookups (`which curl`, `command -v curl`), remote shells to another host
//! (`ssh other 'curl …'`: it fetches from there), text that merely mentions a client
//! (`grep curl`, `git commit -m "curl …"`).
//!
//! Known hole, by design: a fetch inside a script file (`bash fetch.sh`, `python3 x.py`)
//! is invisible; reading files is not this module's business.

use super::shell::{basename_lower, is_assignment, tokenize};
use super::url::{extract_urls, is_local_host};
use regex::Regex;
use std::collections::HashSet;
use std::sync::OnceLock;

/// The default `shell_http_block`: clients whose calls with an argument are fetches.
pub const DEFAULT_BLOCKED_CLIENTS: &[&str] = &[
    "curl",
    "wget",
    "httpie",
    "aria2c",
    "rclone",
    "yt-dlp",
    "youtube-dl",
];

/// A shell command found to fetch over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellFetch {
    /// The client (`curl`) or request API (`requests.get`) that fetches.
    pub what: String,
    /// The first non-local address it names, when it names one (unredacted: the caller
    /// redacts before showing it).
    pub url: Option<String>,
}

/// How deep wrappers and substitutions are unwrapped.
const MAX_DEPTH: usize = 6;

/// Shells: their `-c` argument is a command line.
pub(super) const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"];
/// Interpreters: their code is searched for request APIs and addresses.
pub(super) const CODE_VERBS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "node",
    "nodejs",
    "deno",
    "bun",
    "ruby",
    "perl",
    "php",
    "pwsh",
    "powershell",
    "lua",
    "rscript",
    "osascript",
];
/// Remote clients: what they run happens on their target host.
const REMOTE_CLIENTS: &[&str] = &[
    "ssh",
    "sshpass",
    "mosh",
    "scp",
    "sftp",
    "rsync",
    "ssh-copy-id",
];
/// Name lookups: `which curl` runs no curl.
const LOOKUPS: &[&str] = &[
    "which", "type", "whereis", "hash", "whatis", "man", "apropos",
];
/// Leading shell words that are not the command.
const TRIVIA: &[&str] = &[
    "do", "then", "else", "elif", "if", "while", "until", "for", "{", "}", "(", ")", "!", "time",
];
/// Flags whose value is data, not an address (blanked before addresses are read).
const DATA_FLAGS: &[&str] = &[
    "-d",
    "--data",
    "--data-raw",
    "--data-binary",
    "--data-urlencode",
    "--data-ascii",
    "--json",
    "-H",
    "--header",
    "-w",
    "--write-out",
    "-F",
    "--form",
    "--form-string",
    "-A",
    "--user-agent",
    "-e",
    "--referer",
    "-u",
    "--user",
    "-b",
    "--cookie",
    "-c",
    "--cookie-jar",
    "--post-data",
    "--body-data",
];
/// Client options whose value is a file, a number or a method (never the address).
const VALUE_FLAGS: &[&str] = &[
    "-o",
    "--output",
    "-O",
    "--output-document",
    "-D",
    "--dump-header",
    "-T",
    "--upload-file",
    "-K",
    "--config",
    "-X",
    "--request",
    "-m",
    "--max-time",
    "--connect-timeout",
    "--retry",
    "-r",
    "--range",
    "--cacert",
    "--cert",
    "--key",
    "-P",
    "--directory-prefix",
    "-a",
    "--append-output",
    "-i",
    "--input-file",
    "-t",
    "--tries",
    "--timeout",
    "--limit-rate",
    "--output-dir",
    "--stderr",
    "--trace",
];

/// The request APIs of interpreters and PowerShell.
fn request_api() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)\burlopen\s*\(|\brequests\.(?:get|post|put|patch|delete|head|options|request|session)\b|\bhttpx\.\w+|\baiohttp\.\w+|\bhttp\.client\b|\burllib3\.\w+|\bfetch\s*\(|\baxios\b|\bgot\s*\(|\bhttps?\.(?:get|request)\s*\(|\binvoke-webrequest\b|\binvoke-restmethod\b|\biwr\b|\birm\b|\bnet::http\b|\blwp::|\bhttp::tiny\b|\bfile_get_contents\s*\(\s*['\x22]https?:|\bcurl_exec\b|\bwebclient\b|\bhttpclient\b|\bopen-uri\b|\bURI\.open\b",
        )
        .expect("static pattern")
    })
}

/// Whether `command`, run by a shell tool, fetches over HTTP. `clients` is
/// `shell_http_block` (an empty list leaves only the request-API arm); `block_local`
/// also blocks fetches whose addresses are all local.
///
/// ```
/// use toolbrake_core::breaker::shell_http::shell_fetch;
/// let clients = ["curl".to_string()];
/// let hit = shell_fetch("cd /tmp && curl -s https://api.example.com/v1 | jq .", &clients, false);
/// assert_eq!(hit.unwrap().what, "curl");
/// assert!(shell_fetch("curl -s http://localhost:8000/health", &clients, false).is_none());
/// assert!(shell_fetch("which curl", &clients, false).is_none());
/// ```
pub fn shell_fetch(command: &str, clients: &[String], block_local: bool) -> Option<ShellFetch> {
    let mut scan = Scan {
        clients,
        candidates: Vec::new(),
        seen: HashSet::new(),
        commands: Vec::new(),
        fetches: true,
    };
    let (text, snippets) = split_heredocs(&command.replace("\\\r\n", " ").replace("\\\n", " "));
    let text = substitute(&text);
    scan.unwrap_text(&text, 0);
    for (verb, code) in snippets {
        scan.candidates
            .push(Candidate::code(&verb, substitute(&code)));
    }
    let all: Vec<&String> = scan.candidates.iter().flat_map(|c| &c.addresses).collect();
    if !block_local && !all.is_empty() && all.iter().all(|u| is_local_address(u)) {
        return None;
    }
    scan.candidates
        .iter()
        .find_map(|c| c.fetch(clients, block_local))
}

/// A command the shell would run, with what is needed to judge it.
#[derive(Debug)]
struct Candidate {
    /// The command's name, lower case, without its directory.
    verb: String,
    /// Whether it has arguments beyond help/version flags.
    has_args: bool,
    /// The request API its code calls, for interpreters.
    api: Option<String>,
    /// The addresses it names (data-flag values excluded).
    addresses: Vec<String>,
}

impl Candidate {
    fn from_words(verb: &str, args: &[String]) -> Candidate {
        let verb = basename(verb);
        let code = CODE_VERBS.contains(&verb.as_str()) || is_api_verb(&verb);
        let mut addresses = Vec::new();
        let mut api = None;
        if code {
            let text = args.join(" ");
            api = request_api()
                .find(&format!("{verb} {text}"))
                .map(|m| m.as_str().trim_end_matches(['(', ' ']).to_string());
            addresses = extract_urls(&text);
        } else {
            let mut skip = false;
            let mut bare = Vec::new();
            for a in args {
                if skip {
                    skip = false;
                    continue;
                }
                if DATA_FLAGS.contains(&a.as_str()) || VALUE_FLAGS.contains(&a.as_str()) {
                    skip = true;
                    continue;
                }
                if is_attached_data_flag(a) {
                    continue;
                }
                let urls = extract_urls(a);
                if urls.is_empty() && !a.starts_with('-') && looks_like_host(a) {
                    bare.push(format!("http://{a}"));
                }
                addresses.extend(urls);
            }
            if addresses.is_empty() {
                addresses = bare;
            }
        }
        let has_args = args.iter().any(|a| {
            !matches!(
                a.as_str(),
                "--version" | "-V" | "--help" | "-h" | "--manual"
            )
        });
        Candidate {
            verb,
            has_args,
            api,
            addresses,
        }
    }

    fn code(verb: &str, code: String) -> Candidate {
        Candidate::from_words(verb, &[code])
    }

    fn local_only(&self) -> bool {
        !self.addresses.is_empty() && self.addresses.iter().all(|u| is_local_address(u))
    }

    fn fetch(&self, clients: &[String], block_local: bool) -> Option<ShellFetch> {
        let listed = self.has_args && is_listed(&self.verb, clients);
        let what = if listed {
            self.verb.clone()
        } else {
            self.api.clone()?
        };
        if !block_local && self.local_only() {
            return None;
        }
        Some(ShellFetch {
            what,
            url: self
                .addresses
                .iter()
                .find(|u| block_local || !is_local_address(u))
                .cloned(),
        })
    }
}

fn is_listed(verb: &str, clients: &[String]) -> bool {
    clients.iter().any(|c| {
        let c = c.to_ascii_lowercase();
        c == verb || (c == "httpie" && matches!(verb, "http" | "https" | "xh" | "xhs"))
    })
}

/// PowerShell's fetch cmdlets, run as commands themselves.
fn is_api_verb(verb: &str) -> bool {
    matches!(
        verb,
        "invoke-webrequest" | "invoke-restmethod" | "iwr" | "irm"
    )
}

fn is_attached_data_flag(a: &str) -> bool {
    DATA_FLAGS
        .iter()
        .chain(VALUE_FLAGS)
        .any(|f| f.starts_with("--") && a.starts_with(f) && a[f.len()..].starts_with('='))
        || (a.len() > 2
            && !a.starts_with("--")
            && ["-d", "-H", "-F", "-A", "-e", "-u", "-b", "-w", "-o", "-X"]
                .iter()
                .any(|f| a.starts_with(f)))
}

/// `localhost:8000/x`, `10.0.0.2`, `api.example.com/v1`: an address written without a scheme.
fn looks_like_host(a: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^(?:[\w.-]+@)?(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})(?::\d+)?(?:/\S*)?$")
            .expect("static pattern")
    })
    .is_match(a)
}

fn is_local_address(u: &str) -> bool {
    url::Url::parse(u)
        .ok()
        .and_then(|p| p.host_str().map(is_local_host))
        .unwrap_or(false)
}

/// A command word's name: no directory, no `.exe`, lowercased.
fn basename(word: &str) -> String {
    basename_lower(word.trim_end_matches(".exe"))
}

fn is_local_target(host: &str) -> bool {
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host.split(':').next().unwrap_or(host);
    matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]") || host.starts_with("127.")
}

struct Scan<'a> {
    clients: &'a [String],
    candidates: Vec<Candidate>,
    seen: HashSet<String>,
    /// Every simple command found, its words as written (the self-protection reads them).
    commands: Vec<Vec<String>>,
    /// Whether fetch candidates are read (not when only the commands are wanted: reading
    /// addresses compiles patterns a hook need not pay for).
    fetches: bool,
}

/// Every simple command a command line runs, after the unwrapping [`shell_fetch`] does
/// (lists, pipelines, substitutions, `sh -c`, `sudo`, `env`, `xargs`, `find -exec`, …):
/// each one's words, quotes removed, its first word as written. A heredoc fed to an
/// interpreter is one command `[interpreter, code]`.
pub(crate) fn simple_commands(command: &str) -> Vec<Vec<String>> {
    let mut scan = Scan {
        clients: &[],
        candidates: Vec::new(),
        seen: HashSet::new(),
        commands: Vec::new(),
        fetches: false,
    };
    let (text, snippets) = split_heredocs(&command.replace("\\\r\n", " ").replace("\\\n", " "));
    scan.unwrap_text(&substitute(&text), 0);
    for (verb, code) in snippets {
        scan.commands.push(vec![verb, code]);
    }
    scan.commands
}

impl Scan<'_> {
    /// Every command a command line runs.
    fn unwrap_text(&mut self, text: &str, depth: usize) {
        if depth > MAX_DEPTH || !self.seen.insert(text.to_string()) {
            return;
        }
        for body in substitutions(text) {
            self.unwrap_text(&body, depth + 1);
        }
        for segment in segments(text) {
            let words = tokenize(&segment);
            self.unwrap_words(&words, depth);
        }
    }

    /// One simple command, its words with quotes removed.
    fn unwrap_words(&mut self, words: &[String], depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let mut i = 0;
        while i < words.len() {
            let w = words[i].trim_start_matches(['(', '{']);
            if w.is_empty()
                || TRIVIA.contains(&w)
                || w.starts_with("$(")
                || w.starts_with('`')
                || is_assignment(w)
            {
                i += 1;
                continue;
            }
            break;
        }
        let words: Vec<String> = words[i.min(words.len())..]
            .iter()
            .map(|w| {
                w.trim_start_matches(['(', '{'])
                    .trim_end_matches([')', '}'])
                    .to_string()
            })
            .collect();
        let Some(first) = words.first() else { return };
        let verb = basename(first);
        let rest = &words[1..];
        if LOOKUPS.contains(&verb.as_str()) {
            return;
        }
        match verb.as_str() {
            "command" if rest.first().is_some_and(|a| a == "-v" || a == "-V") => {}
            "ssh" | "mosh" | "sshpass" => self.remote(&verb, rest, depth),
            v if REMOTE_CLIENTS.contains(&v) => self.commands.push(words.clone()),
            v if SHELLS.contains(&v) => {
                if let Some(pos) = rest.iter().position(|a| is_c_flag(a)) {
                    if let Some(script) = rest.get(pos + 1) {
                        self.unwrap_text(script, depth + 1);
                    }
                }
                // `bash script.sh`: the known hole.
            }
            "eval" | "watch" => {
                let skip = rest
                    .iter()
                    .position(|a| !a.starts_with('-') && a.parse::<f64>().is_err())
                    .unwrap_or(rest.len());
                self.unwrap_text(&rest[skip..].join(" "), depth + 1);
            }
            "busybox" | "exec" | "nohup" | "command" | "builtin" => {
                let skip = rest.iter().take_while(|a| a.starts_with('-')).count();
                self.unwrap_words(&rest[skip..], depth + 1);
            }
            "sudo" | "doas" | "nice" | "stdbuf" | "ionice" | "chroot" | "su" => self.unwrap_words(
                &skip_options(
                    rest,
                    &["-u", "-g", "-p", "-C", "-h", "-r", "-t", "-U", "-n", "-c"],
                ),
                depth + 1,
            ),
            "env" => {
                let rest = skip_options(rest, &["-u", "--unset", "-C", "--chdir", "-S"]);
                let skip = rest.iter().take_while(|a| is_assignment(a)).count();
                self.unwrap_words(&rest[skip..], depth + 1);
            }
            "timeout" => {
                let rest = skip_options(rest, &["-s", "--signal", "-k", "--kill-after"]);
                self.unwrap_words(rest.get(1..).unwrap_or_default(), depth + 1);
            }
            "xargs" | "parallel" => {
                let rest = skip_options(
                    rest,
                    &[
                        "-I", "-i", "-n", "-P", "-d", "-L", "-s", "-E", "-a", "-j", "--jobs",
                    ],
                );
                self.unwrap_words(&rest, depth + 1);
            }
            "find" => {
                self.commands.push(words.clone());
                if let Some(pos) = rest
                    .iter()
                    .position(|a| matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
                {
                    let cmd: Vec<String> = rest[pos + 1..]
                        .iter()
                        .take_while(|a| !matches!(a.as_str(), ";" | "\\;" | "+"))
                        .cloned()
                        .collect();
                    self.unwrap_words(&cmd, depth + 1);
                }
            }
            _ => {
                self.commands.push(words.clone());
                if self.fetches {
                    self.candidates.push(Candidate::from_words(&verb, rest));
                }
                if CODE_VERBS.contains(&verb.as_str())
                    && (!self.clients.is_empty() || !self.fetches)
                {
                    // `python3 -c "import os; os.system('curl …')"` runs a shell too.
                    for a in rest.iter().filter(|a| a.contains(char::is_whitespace)) {
                        if let Some(inner) = quoted_shell_call(a) {
                            self.unwrap_text(&inner, depth + 1);
                        }
                    }
                }
            }
        }
    }

    /// `ssh host 'cmd'`: opened only when the host is this machine.
    fn remote(&mut self, verb: &str, rest: &[String], depth: usize) {
        if verb == "sshpass" {
            let rest = skip_options(rest, &["-p", "-f", "-d", "-P"]);
            self.unwrap_words(&rest, depth + 1);
            return;
        }
        let rest = skip_options(
            rest,
            &[
                "-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-E", "-e", "-m",
                "-O", "-Q", "-S", "-W", "-w", "-B", "-I",
            ],
        );
        let Some((host, cmd)) = rest.split_first() else {
            return;
        };
        if is_local_target(host) && !cmd.is_empty() {
            self.unwrap_text(&cmd.join(" "), depth + 1);
        }
    }
}

fn is_c_flag(a: &str) -> bool {
    a.starts_with('-') && !a.starts_with("--") && a.len() > 1 && a[1..].contains('c')
}

/// The words after leading options (`with_value` options take the next word).
fn skip_options(words: &[String], with_value: &[&str]) -> Vec<String> {
    let mut i = 0;
    while i < words.len() && words[i].starts_with('-') && words[i] != "-" {
        if words[i] == "--" {
            i += 1;
            break;
        }
        i += if with_value.contains(&words[i].as_str()) {
            2
        } else {
            1
        };
    }
    words.get(i..).unwrap_or_default().to_vec()
}

/// `os.system('curl …')`, `subprocess.run("curl …", shell=True)`, `` `curl …` ``,
/// `execSync('curl …')`: the shell command inside interpreter code.
fn quoted_shell_call(code: &str) -> Option<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r#"(?:os\.system|os\.popen|subprocess\.\w+|check_output|execSync|exec|spawnSync|system|popen|shell_exec|passthru)\s*\(\s*\[?\s*['"]([^'"]+)['"]"#)
            .expect("static pattern")
    });
    let found: Vec<String> = re
        .captures_iter(code)
        .filter_map(|c| c.get(1).map(|m| m.as_str().to_string()))
        .collect();
    (!found.is_empty()).then(|| found.join("\n"))
}

/// Splits a command line into simple commands at `;`, `&&`, `||`, `|`, `&` and newlines
/// outside quotes (redirections such as `2>&1` and `&>` are not separators).
fn segments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == '\\' && q == '"' {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '\\' => {
                    cur.push(c);
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                '&' if prev == '>' || chars.peek() == Some(&'>') => cur.push(c),
                // `>|`: a redirection that overwrites, not a pipe.
                '|' if prev == '>' => cur.push(c),
                ';' | '|' | '&' | '\n' => {
                    out.push(std::mem::take(&mut cur));
                    if matches!(chars.peek(), Some('|') | Some('&')) && c != '\n' {
                        chars.next();
                    }
                }
                _ => cur.push(c),
            },
        }
        prev = c;
    }
    out.push(cur);
    out.retain(|s| !s.trim().is_empty());
    out
}

/// The bodies of `$(…)` and `` `…` `` outside single quotes.
fn substitutions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut single = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            single = !single;
        } else if !single && c == '\\' {
            i += 1;
        } else if !single && c == '$' && chars.get(i + 1) == Some(&'(') {
            let mut depth = 0;
            let start = i + 2;
            let mut j = i + 1;
            while j < chars.len() {
                match chars[j] {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            out.push(chars[start..j.min(chars.len())].iter().collect());
            i = j;
        } else if !single && c == '`' {
            let end = chars[i + 1..]
                .iter()
                .position(|&d| d == '`')
                .map_or(chars.len(), |p| i + 1 + p);
            out.push(chars[i + 1..end].iter().collect());
            i = end;
        }
        i += 1;
    }
    out
}

/// Substitutes simple assignments (`URL=https://x`, `export H="a.b"`) into `$URL` and
/// `${URL}`, one pass; values holding `$` or `(` are left alone.
fn substitute(text: &str) -> String {
    if !text.contains('=') {
        // No assignment to substitute (and no pattern to compile).
        return text.to_string();
    }
    static ASSIGN: OnceLock<Regex> = OnceLock::new();
    static USE: OnceLock<Regex> = OnceLock::new();
    let assign = ASSIGN.get_or_init(|| {
        Regex::new(r#"(?:^|[\s;&|(])([A-Za-z_][A-Za-z0-9_]*)=(?:"([^"$()`]*)"|'([^'$()]*)'|([^\s;&|'"$()`<>]+))"#)
            .expect("static pattern")
    });
    let mut vars: Vec<(String, String)> = Vec::new();
    for c in assign.captures_iter(text) {
        let value = c
            .get(2)
            .or(c.get(3))
            .or(c.get(4))
            .map_or("", |m| m.as_str());
        vars.push((c[1].to_string(), value.to_string()));
    }
    if vars.is_empty() {
        return text.to_string();
    }
    let uses = USE.get_or_init(|| {
        Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
            .expect("static pattern")
    });
    uses.replace_all(text, |c: &regex::Captures<'_>| {
        let name = c.get(1).or(c.get(2)).map_or("", |m| m.as_str());
        vars.iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or_else(|| c[0].to_string(), |(_, v)| v.clone())
    })
    .into_owned()
}

/// Removes heredoc bodies from a command line. A body fed to a shell stays (as
/// commands); a body fed to an interpreter becomes a code snippet `(verb, code)`; any
/// other body (`cat > f <<EOF`) is inert data and is dropped.
fn split_heredocs(text: &str) -> (String, Vec<(String, String)>) {
    if !text.contains("<<") {
        // No heredoc (and no pattern to compile).
        return (text.to_string(), Vec::new());
    }
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r#"(^|[^<])<<(-?)\s*(?:'([^']+)'|"([^"]+)"|\\?([A-Za-z_][A-Za-z0-9_]*))"#)
            .expect("static pattern")
    });
    let mut out = String::new();
    let mut snippets = Vec::new();
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        for c in re.captures_iter(line) {
            let Some(tag) = c.get(3).or(c.get(4)).or(c.get(5)) else {
                continue;
            };
            let tag = tag.as_str();
            let before = &line[..c.get(0).map_or(0, |m| m.start())];
            let owner = segments(before)
                .last()
                .map(|s| tokenize(s))
                .and_then(|w| {
                    w.into_iter()
                        .find(|w| !TRIVIA.contains(&w.as_str()) && !is_assignment(w))
                })
                .map(|w| basename(&w))
                .unwrap_or_default();
            let mut body = String::new();
            for l in lines.by_ref() {
                if l.trim() == tag {
                    break;
                }
                body.push_str(l);
                body.push('\n');
            }
            if SHELLS.contains(&owner.as_str()) {
                out.push_str(&body);
            } else if CODE_VERBS.contains(&owner.as_str()) {
                snippets.push((owner, body));
            } else if owner == "ssh" {
                let host = tokenize(before)
                    .into_iter()
                    .skip_while(|w| basename(w) != "ssh")
                    .skip(1)
                    .find(|w| !w.starts_with('-'));
                if host.is_some_and(|h| is_local_target(&h)) {
                    out.push_str(&body);
                }
            }
        }
    }
    (out, snippets)
}
