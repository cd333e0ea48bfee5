//! Which files a call changes and which files its output depends on, as ids: the
//! unchanged track's mechanisms (docs/decisions.md, "Progress", "Unchanged").

use super::writes::{
    base_name, harmless_target, lex, lexed_writes, node_file, verb_index, Word, WRITERS,
};
use crate::breaker::config::ToolClasses;
use serde_json::Value;

/// Files kept per call and per list at most (writes, reads): the rest are not named.
pub const MAX_FILES: usize = 4;

/// A file as a call names it, as two 8-byte ids: its normalised path ([`normalise`]) and
/// its last component (64-bit FNV-1a: a file id is compared within one session only, and
/// is made for most calls, where two SHA-256 were a tenth of a decision). Two names are the same file when both paths are absolute and
/// equal, or, when either is relative (toolbrake does not know where the command runs),
/// when their last components are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileId {
    /// The normalised path.
    #[serde(rename = "p")]
    pub path: u64,
    /// Its last component.
    #[serde(rename = "b")]
    pub base: u64,
    /// The path is absolute.
    #[serde(rename = "a", default, skip_serializing_if = "std::ops::Not::not")]
    pub absolute: bool,
}

impl FileId {
    /// The id of a normalised path ([`normalise`]).
    pub fn of(path: &str) -> FileId {
        let base = path.rsplit('/').next().unwrap_or(path);
        FileId {
            path: fnv1a(path),
            base: fnv1a(base),
            absolute: path.starts_with('/'),
        }
    }

    /// Whether two names are the same file (see [`FileId`]).
    ///
    /// ```
    /// use toolbrake_core::breaker::mutation::{normalise, FileId};
    /// let id = |cwd, name| FileId::of(&normalise(cwd, name).unwrap());
    /// assert!(id(Some("/w"), "./a/b.py").same_file(&id(None, "/w/a/../a/b.py")));
    /// assert!(id(None, "b.py").same_file(&id(None, "/w/a/b.py")));
    /// assert!(!id(None, "/site-packages/a/b.py").same_file(&id(None, "/w/a/b.py")));
    /// ```
    pub fn same_file(&self, other: &FileId) -> bool {
        if self.absolute && other.absolute {
            self.path == other.path
        } else {
            self.base == other.base
        }
    }
}

/// 64-bit FNV-1a of a text.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A file name as a command running in `cwd` (when known) names it, normalised: joined to
/// `cwd` when relative, `.` and `..` resolved, repeated and trailing slashes dropped.
/// `None` for what names no file toolbrake can compare: an option, a glob, a variable, a
/// URL, a device, a directory's `..`.
///
/// ```
/// use toolbrake_core::breaker::mutation::normalise;
/// assert_eq!(normalise(None, "./src/../a//b.py").as_deref(), Some("a/b.py"));
/// assert_eq!(normalise(Some("/w/x"), "../b.py").as_deref(), Some("/w/b.py"));
/// assert_eq!(normalise(None, "tests/t.py::TestA::test_b").as_deref(), Some("tests/t.py"));
/// assert_eq!(normalise(None, "*.py"), None);
/// assert_eq!(normalise(None, "/dev/null"), None);
/// ```
pub fn normalise(cwd: Option<&str>, name: &str) -> Option<String> {
    // A pytest node id names its file first.
    let name = node_file(name);
    if name.is_empty() || rejected(name) {
        return None;
    }
    let joined;
    let full = match cwd {
        Some(dir) if !name.starts_with('/') && !name.starts_with('~') => {
            joined = format!("{dir}/{name}");
            joined.as_str()
        }
        _ => name,
    };
    let absolute = full.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for p in full.split('/') {
        match p {
            "" | "." => {}
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            _ => parts.push(p),
        }
    }
    if parts.last().is_none_or(|l| *l == "..") {
        return None;
    }
    let mut path = String::with_capacity(full.len() + 1);
    for p in &parts {
        if absolute || !path.is_empty() {
            path.push('/');
        }
        path.push_str(p);
    }
    Some(path)
}

/// The files a call names, normalised ([`normalise`]), at most [`MAX_FILES`] each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Files {
    /// It changes the workspace ([`ToolClasses::is_mutating`]).
    pub mutating: bool,
    /// The files it writes, creates, moves or deletes, when it names them (only for a call
    /// that changes the workspace).
    pub writes: Vec<String>,
    /// The files its output depends on, as its arguments name them: the script it runs
    /// (`python x.py`, `bash x.sh`, `./x`, `node x.js`, `python -m pkg.mod`), the test
    /// files and modules and the other files on its command line (`pytest tests/t.py`,
    /// `python -m django test app.tests.test_x`, `pylint x.py`). Only shell commands are
    /// read for it; a command that writes (`rm`, `sed -i`, `cp`) does not read its own
    /// operands.
    pub reads: Vec<String>,
}

/// What a call does, as [`FileId`]s: what the engine keeps of [`Files`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// It changes the workspace.
    pub mutating: bool,
    /// The files it changes.
    pub writes: Vec<FileId>,
    /// The files its output depends on.
    pub reads: Vec<FileId>,
}

/// [`files`] as ids, made without writing the names out (the engine does this for every
/// call of a shell or mutating tool).
pub fn effects(tools: &ToolClasses, tool: &str, args: &Value) -> Effects {
    let mut fx = Effects::default();
    fx.mutating = analyse(tools, tool, args, &mut fx.writes, &mut fx.reads);
    fx
}

/// Where the files a call names go: their normalised names ([`files`]) or their ids
/// ([`effects`]), at most [`MAX_FILES`], each once.
trait Collect {
    /// The file `name` names, read in `cwd` when relative and `cwd` is known.
    fn add(&mut self, cwd: Option<&str>, name: &str);
    /// Forgets them all.
    fn clear_all(&mut self);
}

impl Collect for Vec<String> {
    fn add(&mut self, cwd: Option<&str>, name: &str) {
        if self.len() < MAX_FILES {
            if let Some(n) = normalise(cwd, name) {
                if !self.contains(&n) {
                    self.push(n);
                }
            }
        }
    }

    fn clear_all(&mut self) {
        self.clear();
    }
}

impl Collect for Vec<FileId> {
    fn add(&mut self, cwd: Option<&str>, name: &str) {
        if self.len() < MAX_FILES {
            let id = if is_normal(cwd, name) {
                Some(FileId::of(name.strip_suffix('/').unwrap_or(name)))
            } else {
                normalise(cwd, name).map(|n| FileId::of(&n))
            };
            if let Some(id) = id.filter(|id| !self.contains(id)) {
                self.push(id);
            }
        }
    }

    fn clear_all(&mut self) {
        self.clear();
    }
}

/// Whether [`normalise`] would return `name` as it is (less one trailing slash): the
/// common case, hashed without writing a new name.
fn is_normal(cwd: Option<&str>, name: &str) -> bool {
    if !(cwd.is_none() || name.starts_with('/') || name.starts_with('~'))
        || name.is_empty()
        || name == "/"
        || rejected(name)
        || node_file(name).len() != name.len()
    {
        return false;
    }
    // No empty, `.` or `..` component (a trailing slash aside).
    let body = name.strip_suffix('/').unwrap_or(name);
    let body = body.strip_prefix('/').unwrap_or(body);
    body.split('/')
        .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Names [`normalise`] refuses: an option, a glob, a variable, a URL, a device.
fn rejected(name: &str) -> bool {
    name.starts_with('-')
        || name.starts_with("/dev/")
        || name.starts_with("/proc/")
        || name.contains("://")
        || name.contains(['$', '*', '?', '`', '{', '[', '<', '>', '=', '\n', '\\'])
}

/// Argument keys that name the file of a file tool's call.
pub const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filepath",
    "filename",
    "file",
    "file_name",
    "target_file",
    "notebook_path",
    "absolute_path",
];

/// What a call does to files ([`Files`]). A configured mutating tool writes the file of
/// its path argument ([`PATH_KEYS`]), the files a patch names (`*** Update File: a.py`),
/// or the files on its own command line (`create reproduce.py`); a shell tool's command is
/// read for both
/// ([`ToolClasses::is_mutating`] decides `mutating` exactly as before).
///
/// ```
/// use toolbrake_core::breaker::mutation::files;
/// use toolbrake_core::breaker::BreakerConfig;
/// let cfg = BreakerConfig::default();
/// let f = files(cfg.tools(), "Bash", &serde_json::json!({"command": "cd /w && python3 t.py"}));
/// assert_eq!(f.reads, ["/w/t.py"]);
/// let f = files(cfg.tools(), "Bash", &serde_json::json!({"command": "sed -i 's/a/b/' t.py"}));
/// assert!(f.mutating && f.writes == ["t.py"] && f.reads.is_empty());
/// let f = files(cfg.tools(), "Edit", &serde_json::json!({"file_path": "/w/t.py"}));
/// assert!(f.mutating && f.writes == ["/w/t.py"]);
/// ```
pub fn files(tools: &ToolClasses, tool: &str, args: &Value) -> Files {
    let mut f = Files::default();
    f.mutating = analyse(tools, tool, args, &mut f.writes, &mut f.reads);
    f
}

/// [`files`] into any [`Collect`]; returns whether the call changes the workspace.
fn analyse<C: Collect>(
    tools: &ToolClasses,
    tool: &str,
    args: &Value,
    writes: &mut C,
    reads: &mut C,
) -> bool {
    if tools.mutating.iter().any(|m| m.matches(tool, args)) {
        tool_files(tool, args, writes);
        return true;
    }
    if !tools.is_shell(tool) {
        return false;
    }
    let Some(command) = tools.command_line(args) else {
        return false;
    };
    let lexed = lex(&command);
    let mutating = lexed_writes(&lexed);
    match strip_heredocs(&command) {
        // Lexed once when there is no here-document (nearly always).
        std::borrow::Cow::Borrowed(_) => shell_files(&lexed, mutating, writes, reads),
        std::borrow::Cow::Owned(body_less) => {
            shell_files(&lex(&body_less), mutating, writes, reads)
        }
    }
    if mutating && command.contains("*** ") {
        // `apply_patch <<'EOF'` (Codex's shell): the patch names its files.
        patch_files(&command, writes);
    }
    if !mutating {
        writes.clear_all();
    }
    mutating
}

/// The files a mutating file tool's call names: its path argument, else the files of a
/// patch or of its own command line.
fn tool_files(tool: &str, args: &Value, out: &mut impl Collect) {
    let Value::Object(map) = args else { return };
    let mut named = false;
    for (_, v) in map.iter().filter(|(k, _)| PATH_KEYS.contains(&k.as_str())) {
        match v {
            Value::String(p) => {
                named = true;
                out.add(None, p);
            }
            Value::Array(items) => {
                for p in items.iter().filter_map(Value::as_str) {
                    named = true;
                    out.add(None, p);
                }
            }
            _ => {}
        }
    }
    if named {
        return;
    }
    for v in map.values() {
        let Some(text) = v.as_str() else { continue };
        patch_files(text, out);
        // A command line of the tool itself (`create reproduce.py`, `open a.py`: SWE-agent).
        let first = text.lines().next().unwrap_or("");
        let mut words = first.split_whitespace();
        if words.next() == Some(tool) {
            for w in words.take_while(|w| !w.starts_with('#')) {
                if has_extension(w) {
                    out.add(None, w);
                }
            }
        }
    }
}

/// The files a patch in apply_patch's format names (`*** Update File: a.py`).
fn patch_files(text: &str, out: &mut impl Collect) {
    for line in text.lines() {
        for head in [
            "*** Update File: ",
            "*** Add File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ] {
            if let Some(p) = line.strip_prefix(head) {
                out.add(None, p.trim());
            }
        }
    }
}

/// Whether a word's last component has a file extension (`a/b.py`, `x.tar.gz`): a name, a
/// dot, one to eight letters or digits with at least one letter.
fn has_extension(word: &str) -> bool {
    let base = match word.bytes().rposition(|c| c == b'/') {
        Some(i) => &word[i + 1..],
        None => word,
    };
    let dot = base.bytes().rposition(|c| c == b'.');
    dot.map(|i| (&base[..i], &base[i + 1..]))
        .is_some_and(|(name, ext)| {
            !name.is_empty()
                && (1..=8).contains(&ext.len())
                && ext.bytes().all(|b| b.is_ascii_alphanumeric())
                && ext.bytes().any(|b| b.is_ascii_alphabetic())
        })
}

/// Extensions that make a dotted word a file name, not a Python module (`t.py`).
const FILE_EXTENSIONS: &[&str] = &[
    "py", "pyi", "txt", "json", "yaml", "yml", "toml", "cfg", "ini", "sh", "md", "rst", "csv",
    "xml", "html", "js", "ts", "java", "c", "h", "go", "rb", "rs", "log", "out",
];

/// The file a command-line word names ([`Files::reads`]): a path with an extension, or,
/// where Python code runs, a dotted module: `tests.admin.test_x` is `tests/admin/test_x.py`,
/// `pkg.mod.TestCase.test_a` is `pkg/mod.py` (a test id: the module ends before the first
/// capitalised part).
fn named_file(out: &mut impl Collect, word: &str, python: bool, cwd: Option<&str>) {
    let word = node_file(word);
    let dotted = python
        && !word.contains('/')
        && word.contains('.')
        && word.split('.').all(|p| {
            p.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
        && !FILE_EXTENSIONS.contains(&word.rsplit('.').next().unwrap_or(""));
    if dotted {
        let parts: Vec<&str> = word
            .split('.')
            .take_while(|p| !p.starts_with(|c: char| c.is_ascii_uppercase()))
            .collect();
        if !parts.is_empty() {
            out.add(cwd, &format!("{}.py", parts.join("/")));
        }
    } else if has_extension(word) {
        out.add(cwd, word);
    }
}

/// The command without the bodies of its here-documents: data, not commands (borrowed
/// when it has none).
fn strip_heredocs(command: &str) -> std::borrow::Cow<'_, str> {
    if !command.contains("<<") {
        return std::borrow::Cow::Borrowed(command);
    }
    let mut out = String::with_capacity(command.len());
    // The delimiters still open, first first, and whether tabs before them are stripped.
    let mut open: Vec<(String, bool)> = Vec::new();
    for line in command.split('\n') {
        if let Some((delim, tabs)) = open.first() {
            let l = if *tabs {
                line.trim_start_matches('\t')
            } else {
                line
            };
            if l.trim_end() == delim {
                open.remove(0);
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
        let mut rest = line;
        while let Some(i) = rest.find("<<") {
            rest = &rest[i + 2..];
            if let Some(r) = rest.strip_prefix('<') {
                // `<<<`: a here-string, on its line.
                rest = r;
                continue;
            }
            let tabs = rest.starts_with('-');
            let r = rest.trim_start_matches('-').trim_start();
            let r = r.trim_start_matches(['\'', '"', '\\']);
            let end = r
                .find(|c: char| c.is_whitespace() || "'\";&|)<>".contains(c))
                .unwrap_or(r.len());
            if end > 0 {
                open.push((r[..end].to_string(), tabs));
            }
            rest = &r[end..];
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Interpreters and runners whose operands are what they run or read (besides any verb
/// written as a path, `./x`, and the Python family, matched by prefix).
const INTERPRETERS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "node", "nodejs", "ts-node", "tsx", "deno", "bun", "ruby",
    "perl", "php", "rscript", "lua", "julia", "groovy", "source", ".", "java", "kotlin", "scala",
    "swift", "elixir", "javac", "gcc", "g++", "cc", "clang", "rustc", "go",
];
/// Options that take a value (`python -W ignore x.py`, `pytest -k name`).
const VALUE_OPTS: &[&str] = &[
    "-W",
    "-X",
    "-cp",
    "-classpath",
    "--class-path",
    "-k",
    "-o",
    "-p",
    "-n",
    "--rootdir",
    "-d",
    "-I",
    "-L",
    "--settings",
    "-t",
    "--tests",
    "-C",
];
/// Options after which an interpreter's code is inline (`python -c CODE`, `node -e CODE`).
const INLINE_OPTS: &[&str] = &["-c", "-e", "-E", "--eval", "--print", "-lc", "-ic"];

/// The files one simple command reads and writes; a `cd` moves `cwd`.
fn simple_files<C: Collect>(
    words: &[&str],
    writes: bool,
    cwd: &mut Option<String>,
    out_writes: &mut C,
    out_reads: &mut C,
) {
    let i = verb_index(words);
    let Some(&verb_word) = words.get(i) else {
        return;
    };
    // Read without allocating: most calls' commands are read here and nowhere else.
    let verb = base_name(verb_word);
    let rest = || {
        words[i + 1..]
            .iter()
            .copied()
            .filter(|w| !w.starts_with('<'))
    };
    if verb == "cd" || verb == "pushd" {
        if let Some(dir) = rest().next().filter(|d| !d.starts_with('-')) {
            *cwd = match (dir.starts_with('/'), cwd.as_deref()) {
                (true, _) => Some(dir.to_string()),
                (false, Some(c)) => Some(format!("{c}/{dir}")),
                (false, None) => None,
            };
        }
        return;
    }
    let here = cwd.as_deref();
    let in_place = matches!(verb, "sed" | "perl")
        && rest().any(|w| {
            w == "--in-place" || (w.starts_with('-') && !w.starts_with("--") && w.contains('i'))
        });
    let writer = in_place
        || WRITERS.contains(&verb)
        || matches!(verb, "tee" | "dd" | "git" | "unlink" | "shred");
    if !writer {
        // What it reads: a verb written as a path runs that file; the operands of any
        // other command name its inputs (the script, test files and modules, files).
        if verb_word.contains('/') {
            out_reads.add(here, verb_word);
        }
        let python = verb.starts_with("python")
            || verb.starts_with("pypy")
            || matches!(verb, "pytest" | "py.test")
            || verb.ends_with(".py");
        let interpreter = python || INTERPRETERS.contains(&verb);
        let mut ws = rest();
        while let Some(w) = ws.next() {
            if interpreter && INLINE_OPTS.contains(&w) {
                break;
            }
            if w == "-m" && python {
                // `python -m pkg.mod`: the module's file.
                if let Some(m) = ws.next() {
                    named_file(out_reads, m, true, here);
                }
            } else if w.starts_with('-') {
                if VALUE_OPTS.contains(&w) {
                    ws.next();
                }
            } else {
                named_file(out_reads, w, python, here);
            }
        }
    }
    if !writes {
        return;
    }
    // What it writes.
    let rest: Vec<&str> = rest().collect();
    let operands = |skip_values: &[&str]| -> Vec<&str> {
        let mut out = Vec::new();
        let mut j = 0;
        while j < rest.len() {
            let w = rest[j];
            if w == "--" {
                out.extend(rest[j + 1..].iter().copied());
                break;
            }
            if w.starts_with('-') && w.len() > 1 {
                j += if skip_values.contains(&w) { 2 } else { 1 };
                continue;
            }
            out.push(w);
            j += 1;
        }
        out
    };
    match verb {
        "cp" | "mv" | "install" | "ln" | "rsync" => {
            let ops = operands(&["-t", "-S", "--target-directory", "-m", "-o", "-g"]);
            if let Some((dest, srcs)) = ops.split_last() {
                out_writes.add(here, dest);
                for s in srcs {
                    if verb == "mv" {
                        out_writes.add(here, s);
                    }
                    // A destination directory receives the file under its own name.
                    if let Some(b) = s.rsplit('/').next() {
                        out_writes.add(here, &format!("{dest}/{b}"));
                    }
                }
            }
        }
        "rm" | "touch" | "truncate" | "unlink" | "shred" => {
            for w in operands(&["-s", "--size", "--reference"]) {
                out_writes.add(here, w);
            }
        }
        "chmod" | "chown" => {
            for w in operands(&["--reference"]).iter().skip(1) {
                out_writes.add(here, w);
            }
        }
        "tee" => {
            for w in operands(&[]) {
                if !harmless_target(w) {
                    out_writes.add(here, w);
                }
            }
        }
        "sed" | "perl" if in_place => {
            // The script is the first operand unless `-e` or `-f` gave it.
            let scripted = rest
                .iter()
                .any(|w| matches!(*w, "-e" | "-f" | "--expression" | "--file"));
            let ops = operands(&["-e", "-f", "--expression", "--file", "-l"]);
            for w in ops.iter().skip(usize::from(!scripted)) {
                out_writes.add(here, w);
            }
        }
        "dd" => {
            for w in &rest {
                if let Some(target) = w.strip_prefix("of=") {
                    out_writes.add(here, target);
                }
            }
        }
        "git" => {
            // `git checkout -- a.py`, `git restore a.py`: the files it names.
            let ops = operands(&["-C", "-c", "-s", "--source", "-b", "-B"]);
            if ops
                .first()
                .is_some_and(|s| matches!(*s, "checkout" | "restore" | "rm" | "mv"))
            {
                for w in ops[1..].iter().filter(|w| has_extension(w)) {
                    out_writes.add(here, w);
                }
            }
        }
        _ => {}
    }
}

/// The files a lexed shell command reads and, when it writes, writes: redirection targets,
/// `tee`, `sed -i`, `cp`/`mv` destinations, `rm`, `touch`…; a relative name is read in the
/// directory a `cd` of the same command moved to, when it names one.
fn shell_files<C: Collect>(lexed: &[Word], writes: bool, out_writes: &mut C, out_reads: &mut C) {
    let mut cwd: Option<String> = None;
    let mut words: Vec<&str> = Vec::new();
    let mut after_redirect = false;
    for w in lexed {
        match w {
            Word::Redirect(Some(t)) => {
                if writes && !harmless_target(t) {
                    out_writes.add(cwd.as_deref(), t);
                }
            }
            Word::Redirect(None) => {
                after_redirect = true;
                continue;
            }
            Word::Op => {
                simple_files(&words, writes, &mut cwd, out_writes, out_reads);
                words.clear();
            }
            Word::Text(text) => {
                if after_redirect {
                    if writes && !harmless_target(text) {
                        out_writes.add(cwd.as_deref(), text);
                    }
                } else {
                    words.push(text);
                }
            }
        }
        after_redirect = false;
    }
    simple_files(&words, writes, &mut cwd, out_writes, out_reads);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_ids_of_the_normalised_names() {
        let names = [
            "a.py",
            "/w/a.py",
            "./a.py",
            "a//b.py",
            "/w/./a.py",
            "/w/x/../a.py",
            "../a.py",
            "a/",
            "/",
            ".",
            "..",
            "x/..",
            "~/.bashrc",
            "t.py::T::a",
            "*.py",
            "$F",
            "-x",
            "/dev/null",
            "https://x.io/a.py",
            "a/b/c.py/",
            "/w/a.py/.",
        ];
        for cwd in [None, Some("/w"), Some("rel")] {
            for n in names {
                let mut ids: Vec<FileId> = Vec::new();
                ids.add(cwd, n);
                let want: Vec<FileId> = normalise(cwd, n).iter().map(|p| FileId::of(p)).collect();
                assert_eq!(ids, want, "{cwd:?} {n}");
            }
        }
    }

    #[test]
    fn files_read_and_written() {
        let cfg = crate::breaker::config::BreakerConfig::default();
        let f = |tool: &str, args: Value| files(cfg.tools(), tool, &args);
        let sh = |c: &str| f("bash", serde_json::json!({ "command": c }));
        let x = sh("cd /w && PYTHONPATH=. python3 -m pytest tests/t.py::A -k b");
        assert_eq!(
            (x.mutating, x.reads, x.writes),
            (false, vec!["/w/tests/t.py".to_string()], vec![])
        );
        let x = sh("rm -f db.sqlite3 && python reproduce.py");
        assert_eq!(
            (x.mutating, x.reads, x.writes),
            (
                true,
                vec!["reproduce.py".to_string()],
                vec!["db.sqlite3".to_string()]
            )
        );
        let x = sh("cat > /w/r.py <<'EOF'\nimport os > x\nEOF\npython /w/r.py");
        assert_eq!(
            (x.reads, x.writes),
            (vec!["/w/r.py".to_string()], vec!["/w/r.py".to_string()])
        );
        let x = sh(
            "cp a.py b.py && mv c.py d/ && sed -i -e 's/a/b/' e.py f.py && echo x | tee -a g.log",
        );
        // Four at most: the destination directory's file and the rest are not named.
        assert_eq!(x.writes, ["b.py", "b.py/a.py", "d", "c.py"]);
        let x = sh("git checkout -- src/a.py && touch t.txt");
        assert_eq!(x.writes, ["src/a.py", "t.txt"]);
        let x = sh(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/m.py\n*** End Patch\nEOF",
        );
        assert_eq!(x.writes, ["src/m.py"]);
        let x = sh("python -c 'import a.b' x.py && node -e 'x' y.js && grep -n foo z.py");
        assert_eq!(x.reads, ["z.py"]);
        let x = sh("python manage.py test app.tests.TestX.test_y");
        assert_eq!(x.reads, ["manage.py", "app/tests.py"]);
        // A read-only command writes nothing, whatever it names.
        let x = sh("diff a.py b.py > /dev/null");
        assert!(!x.mutating && x.writes.is_empty() && x.reads == ["a.py", "b.py"]);
        let x = f(
            "create",
            serde_json::json!({"command": "create reproduce.java"}),
        );
        assert_eq!(
            (x.mutating, x.writes),
            (true, vec!["reproduce.java".to_string()])
        );
        let x = f("Read", serde_json::json!({"file_path": "/w/a.py"}));
        assert!(!x.mutating && x.writes.is_empty() && x.reads.is_empty());
        let x = f(
            "MultiEdit",
            serde_json::json!({"file_path": "/w/./a.py", "edits": []}),
        );
        assert_eq!(x.writes, ["/w/a.py"]);
    }
}
