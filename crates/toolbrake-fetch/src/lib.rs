//! `web_fetch_file`: the tool toolbrake offers in place of fetches made from a shell.
//!
//! It fetches an `http`/`https` URL and writes the body to a file under the workspace
//! root (`[fetch] output_dir`, default `fetched/`), and answers with what the model needs to
//! work on that file: `{path, statusCode, bytes, contentType, kind, finalUrl, truncated?}`,
//! never the body. The path is confined to the root, symlinks resolved before the check;
//! when the body is written, the directories are opened again from a handle on the root,
//! none through a symlink, and the body goes to a new file of an unpredictable name
//! (created exclusively, never through a symlink) renamed over the target within its
//! directory: nothing swapped in meanwhile sends it outside the root. Bodies are capped
//! (`max_bytes`), redirects counted (`max_redirects`), the whole fetch timed (`timeout`);
//! with `allow_private_hosts = false`, private, loopback and link-local
//! addresses are refused after name resolution, on every redirect hop too. Cookies are
//! kept per session when `cookie_jar` is on.
//!
//! The MCP proxy offers it (`toolbrake mcp --fetch-tool`); an adapter that offers it tells
//! the breaker (`BreakerConfig::offer_fetch_tool`), which then sends shell fetches here.

// Linux and macOS are the platforms toolbrake builds for (docs/install.md, "Platforms"):
// this crate writes fetched files with openat(2) below a directory handle (rustix), which
// Windows lacks. Said plainly instead of a cascade of errors.
#[cfg(not(unix))]
compile_error!(
    "toolbrake-fetch needs a Unix platform (Linux or macOS); see docs/install.md, \"Platforms\""
);

pub mod settings;

pub use settings::{fetch_table, FetchSettings};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use toolbrake_core::redact::redact;

/// The tool's name.
pub const TOOL_NAME: &str = "web_fetch_file";

/// Sessions whose HTTP client (and cookie jar) are kept at once.
const MAX_SESSIONS: usize = 256;

/// The MCP tool definition (`tools/list` entry).
pub fn tool_definition() -> Value {
    json!({
        "name": TOOL_NAME,
        "title": "Fetch a URL to a file",
        "description": "Fetches an http(s) URL and saves the response body to a file in the workspace. Returns the file's path, the HTTP status code, the size, the content type and the final URL after redirects, never the body: read the file with your usual tools (jq, grep, python3). Use it instead of curl or wget in a shell.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http:// or https:// URL to fetch."},
                "path": {"type": "string", "description": "Where to save the body, relative to the workspace root (default: a file named after the URL in the fetch output directory)."}
            },
            "required": ["url"]
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "statusCode": {"type": "integer"},
                "bytes": {"type": "integer"},
                "contentType": {"type": ["string", "null"]},
                "kind": {"type": "string"},
                "finalUrl": {"type": "string"},
                "truncated": {"type": "boolean"}
            },
            "required": ["path", "statusCode", "bytes", "kind", "finalUrl"]
        }
    })
}

/// A finished fetch: the file written and what the server said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The file, relative to the workspace root (`/`-separated).
    pub path: String,
    /// The HTTP status of the final response.
    pub status_code: u16,
    /// Bytes written.
    pub bytes: u64,
    /// The `Content-Type` header, when sent.
    pub content_type: Option<String>,
    /// `json`, `html`, `xml`, `text`, `pdf`, `image`, `binary` or `unknown`.
    pub kind: &'static str,
    /// The URL after redirects (redacted).
    pub final_url: String,
    /// Whether the body was cut at `max_bytes`.
    pub truncated: bool,
}

impl Fetched {
    /// The tool's structured result.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "path": self.path,
            "statusCode": self.status_code,
            "bytes": self.bytes,
            "contentType": self.content_type,
            "kind": self.kind,
            "finalUrl": self.final_url,
        });
        if self.truncated {
            v["truncated"] = json!(true);
        }
        v
    }

    /// The MCP `tools/call` result: the structured result, as text too; an HTTP error
    /// status is a tool error (the model should read it as one).
    pub fn to_mcp_result(&self) -> Value {
        let structured = self.to_json();
        json!({
            "content": [{"type": "text", "text": structured.to_string()}],
            "structuredContent": structured,
            "isError": self.status_code >= 400,
        })
    }
}

/// Why a fetch did not produce a file.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The arguments are not `{url, path?}`.
    #[error("{0}")]
    BadArguments(String),
    /// The URL is not http/https, or not a URL.
    #[error("{0}")]
    BadUrl(String),
    /// The path leaves the workspace root.
    #[error("refusing to write outside the workspace root ({0})")]
    OutsideRoot(String),
    /// The target is a private address and `allow_private_hosts` is off.
    #[error("refusing to fetch {0}: it is a private, loopback or link-local address ([fetch] allow_private_hosts = false)")]
    PrivateHost(String),
    /// More redirects than `max_redirects`.
    #[error("stopped after {0} redirects ([fetch] max_redirects)")]
    TooManyRedirects(usize),
    /// The request failed (connection, timeout, TLS, protocol).
    #[error("the fetch failed: {0}")]
    Http(String),
    /// The file could not be written.
    #[error("could not write {path}: {source}")]
    Write {
        /// The file (relative to the root).
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl FetchError {
    /// The MCP `tools/call` result of a failed fetch.
    pub fn to_mcp_result(&self) -> Value {
        json!({
            "content": [{"type": "text", "text": format!("web_fetch_file: {self}")}],
            "isError": true,
        })
    }
}

/// Refusal markers carried through reqwest's error chain.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("private address {0}")]
    Private(String),
    #[error("too many redirects")]
    Redirects(usize),
}

/// Fetches for every session of one workspace.
pub struct Fetcher {
    root: PathBuf,
    /// The root, opened once: every file is created below this handle.
    root_dir: OwnedFd,
    state: Mutex<State>,
}

/// The settings in force and the HTTP clients built from them.
struct State {
    settings: Arc<FetchSettings>,
    /// Per session (one shared entry without a cookie jar); rebuilt when the settings change.
    clients: HashMap<String, reqwest::Client>,
    /// Per session: its cookies, kept across a change of settings.
    jars: HashMap<String, Arc<reqwest::cookie::Jar>>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("settings", &self.settings())
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// How a directory on the way to a file is opened: never through a symlink.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl Fetcher {
    /// A fetcher writing under `root` (the workspace: the process's working directory or
    /// the host's `cwd`), which must exist.
    pub fn new(settings: FetchSettings, root: &Path) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        let root_dir = rustix::fs::open(&root, DIR_FLAGS, Mode::empty())?;
        Ok(Fetcher {
            root,
            root_dir,
            state: Mutex::new(State {
                settings: Arc::new(settings),
                clients: HashMap::new(),
                jars: HashMap::new(),
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The settings in force.
    pub fn settings(&self) -> Arc<FetchSettings> {
        self.state().settings.clone()
    }

    /// Takes new `[fetch]` settings into use (a reloaded configuration): the next fetch
    /// follows them; a fetch under way finishes under the old ones. Sessions keep their
    /// cookies unless `cookie_jar` is now off. Whether anything changed.
    pub fn reconfigure(&self, settings: FetchSettings) -> bool {
        let mut state = self.state();
        if *state.settings == settings {
            return false;
        }
        if !settings.cookie_jar {
            state.jars.clear();
        }
        state.settings = Arc::new(settings);
        state.clients.clear();
        true
    }

    /// The settings in force and `session`'s client, built from them.
    fn client(&self, session: &str) -> Result<(Arc<FetchSettings>, reqwest::Client), FetchError> {
        let mut state = self.state();
        let settings = state.settings.clone();
        let key = if settings.cookie_jar { session } else { "" };
        if let Some(c) = state.clients.get(key) {
            return Ok((settings, c.clone()));
        }
        if state.clients.len() >= MAX_SESSIONS {
            state.clients.clear();
        }
        if state.jars.len() >= MAX_SESSIONS {
            state.jars.clear();
        }
        let max = settings.max_redirects;
        let allow_private = settings.allow_private_hosts;
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max {
                return attempt.error(Refusal::Redirects(max));
            }
            if !matches!(attempt.url().scheme(), "http" | "https") {
                return attempt.stop();
            }
            if !allow_private {
                if let Some(ip) = literal_ip(attempt.url()) {
                    if is_private(ip) {
                        return attempt.error(Refusal::Private(ip.to_string()));
                    }
                }
            }
            attempt.follow()
        });
        let mut b = reqwest::Client::builder()
            .timeout(settings.timeout)
            .user_agent(settings.user_agent.clone())
            .redirect(policy);
        if settings.cookie_jar {
            let jar = state.jars.entry(key.to_string()).or_default().clone();
            b = b.cookie_provider(jar);
        }
        if !allow_private {
            b = b.dns_resolver(Arc::new(PublicOnly));
        }
        let c = b.build().map_err(|e| FetchError::Http(e.to_string()))?;
        state.clients.insert(key.to_string(), c.clone());
        Ok((settings, c))
    }

    /// Runs the tool for `session` with its arguments `{url, path?}`.
    pub async fn call(&self, session: &str, args: &Value) -> Result<Fetched, FetchError> {
        let raw_url = args
            .get("url")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                FetchError::BadArguments(
                    "`url` is required: a string starting with http:// or https://".into(),
                )
            })?;
        let url = reqwest::Url::parse(raw_url).map_err(|e| {
            FetchError::BadUrl(format!("{} is not a valid URL ({e})", redact(raw_url)))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::BadUrl(format!(
                "only http and https URLs are fetched, not {}:",
                url.scheme()
            )));
        }
        let (settings, client) = self.client(session)?;
        if !settings.allow_private_hosts {
            if let Some(ip) = literal_ip(&url) {
                if is_private(ip) {
                    return Err(FetchError::PrivateHost(ip.to_string()));
                }
            }
        }
        let explicit = match args.get("path") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) if !p.trim().is_empty() && !p.contains('\0') => {
                Some(self.resolve(Path::new(p))?)
            }
            Some(_) => return Err(FetchError::BadArguments(
                "`path` must be a non-empty string (a file path relative to the workspace root)"
                    .into(),
            )),
        };
        let mut resp = client.get(url.clone()).send().await.map_err(classify)?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let kind = kind_of(content_type.as_deref());
        let final_url = resp.url().clone();
        let target = match explicit {
            Some(t) => t,
            None => {
                let name = default_name(&url, kind, content_type.as_deref());
                self.resolve(&settings.output_dir.join(name))?
            }
        };
        let shown = shown(&target);
        let write_err = |source: std::io::Error| FetchError::Write {
            path: shown.clone(),
            source,
        };
        // Now, not when the path was checked (the response may have taken until the
        // timeout): the directories are opened from the root's handle, none through a
        // symlink, and the body goes to a new file of an unpredictable name in the last
        // one, renamed over the target within that directory.
        let (dir, name) = self.open_parent(&target)?;
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| write_err(std::io::Error::other(e)))?;
        let tmp = format!(".web_fetch_file-{}.part", hex::encode(nonce));
        let fd = rustix::fs::openat(
            &dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR | Mode::RGRP | Mode::WGRP | Mode::ROTH | Mode::WOTH,
        )
        .map_err(|e| write_err(e.into()))?;
        let mut file = tokio::fs::File::from_std(std::fs::File::from(fd));
        let mut bytes = 0u64;
        let mut truncated = false;
        let body = async {
            while let Some(chunk) = resp.chunk().await.map_err(classify)? {
                let room = settings.max_bytes - bytes;
                let take = (chunk.len() as u64).min(room) as usize;
                file.write_all(&chunk[..take]).await.map_err(write_err)?;
                bytes += take as u64;
                if take < chunk.len() {
                    truncated = true;
                    break;
                }
            }
            file.flush().await.map_err(write_err)?;
            file.sync_all().await.map_err(write_err)?;
            drop(file);
            rustix::fs::renameat(&dir, &tmp, &dir, name).map_err(|e| write_err(e.into()))
        }
        .await;
        if let Err(e) = body {
            let _ = rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty());
            return Err(e);
        }
        Ok(Fetched {
            path: shown,
            status_code: status,
            bytes,
            content_type,
            kind,
            final_url: redact(final_url.as_str()).into_owned(),
            truncated,
        })
    }

    /// The file `rel` names, relative to the root with every symlink that exists now
    /// resolved; refused when it leaves the root, lexically or through a symlink. Creates
    /// nothing: [`Fetcher::open_parent`] makes the directories when the body is written.
    fn resolve(&self, rel: &Path) -> Result<PathBuf, FetchError> {
        let outside = || FetchError::OutsideRoot(rel.display().to_string());
        let joined = if rel.is_absolute() {
            rel.to_path_buf()
        } else {
            self.root.join(rel)
        };
        // Lexical: `..` may not climb out of the root.
        let mut norm = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::ParentDir => {
                    if !norm.pop() {
                        return Err(outside());
                    }
                }
                Component::CurDir => {}
                other => norm.push(other),
            }
        }
        let inside = norm.strip_prefix(&self.root).map_err(|_| outside())?;
        let parts: Vec<&std::ffi::OsStr> = inside.iter().collect();
        let Some((name, dirs)) = parts.split_last() else {
            return Err(outside());
        };
        // Through the file system: every existing directory resolved, symlinks included;
        // past the first missing one, the rest is made at write time.
        let mut cur = self.root.clone();
        let mut exists = true;
        for d in dirs {
            let next = cur.join(d);
            if exists && std::fs::symlink_metadata(&next).is_ok() {
                let real = next.canonicalize().map_err(|_| outside())?;
                if !real.starts_with(&self.root) {
                    return Err(outside());
                }
                if !real.is_dir() {
                    return Err(FetchError::Write {
                        path: self.relative(&next),
                        source: std::io::Error::other("not a directory"),
                    });
                }
                cur = real;
            } else {
                exists = false;
                cur = next;
            }
        }
        let target = cur.join(name);
        if let Ok(meta) = std::fs::symlink_metadata(&target) {
            if meta.file_type().is_symlink() {
                let real = target.canonicalize().map_err(|_| outside())?;
                return real
                    .strip_prefix(&self.root)
                    .map(Path::to_path_buf)
                    .map_err(|_| outside());
            }
            if meta.is_dir() {
                return Err(FetchError::Write {
                    path: self.relative(&target),
                    source: std::io::Error::other("is a directory"),
                });
            }
        }
        Ok(target
            .strip_prefix(&self.root)
            .map(Path::to_path_buf)
            .unwrap_or(target))
    }

    /// The directory that will hold `target` (relative to the root), opened from the
    /// root's handle one component at a time without following a symlink, missing ones
    /// created; and the file's name in it. A directory that turned into a symlink since
    /// [`Fetcher::resolve`] is refused, wherever it points.
    fn open_parent<'t>(
        &self,
        target: &'t Path,
    ) -> Result<(OwnedFd, &'t std::ffi::OsStr), FetchError> {
        let parts: Vec<&std::ffi::OsStr> = target.iter().collect();
        let Some((name, dirs)) = parts.split_last() else {
            return Err(FetchError::OutsideRoot(shown(target)));
        };
        let mut dir = self
            .root_dir
            .try_clone()
            .map_err(|source| FetchError::Write {
                path: shown(target),
                source,
            })?;
        let mut walked = PathBuf::new();
        for d in dirs {
            walked.push(d);
            let opened = match rustix::fs::openat(&dir, *d, DIR_FLAGS, Mode::empty()) {
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&dir, *d, Mode::RWXU | Mode::RWXG | Mode::RWXO) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => {
                            return Err(FetchError::Write {
                                path: shown(&walked),
                                source: e.into(),
                            })
                        }
                    }
                    rustix::fs::openat(&dir, *d, DIR_FLAGS, Mode::empty())
                }
                other => other,
            };
            dir = match opened {
                Ok(fd) => fd,
                Err(e) => {
                    let is_link = rustix::fs::statat(&dir, *d, AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                    return Err(if is_link {
                        FetchError::OutsideRoot(format!(
                            "{}: {} became a symlink during the fetch",
                            shown(target),
                            shown(&walked)
                        ))
                    } else {
                        FetchError::Write {
                            path: shown(&walked),
                            source: e.into(),
                        }
                    });
                }
            };
        }
        Ok((dir, name))
    }

    /// `path` (under the root) relative to the root, `/`-separated.
    fn relative(&self, path: &Path) -> String {
        shown(path.strip_prefix(&self.root).unwrap_or(path))
    }
}

/// A path relative to the root, `/`-separated.
fn shown(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A reqwest error, with toolbrake's own refusals told apart.
fn classify(e: reqwest::Error) -> FetchError {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = src {
        if let Some(r) = s.downcast_ref::<Refusal>() {
            return match r {
                Refusal::Private(host) => FetchError::PrivateHost(host.clone()),
                Refusal::Redirects(n) => FetchError::TooManyRedirects(*n),
            };
        }
        src = s.source();
    }
    let e = e.without_url();
    let mut text = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        text.push_str(&format!(": {s}"));
        src = s.source();
    }
    FetchError::Http(redact(&text).into_owned())
}

fn literal_ip(url: &reqwest::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    }
}

/// Loopback, private, link-local, shared, unspecified, broadcast and unique-local addresses.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (o[0] == 100 && (64..=127).contains(&o[1]))
                || o[0] == 0
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_private(IpAddr::V4(v4)))
        }
    }
}

/// Resolves names to their public addresses only.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> =
                addrs.into_iter().filter(|a| !is_private(a.ip())).collect();
            if public.is_empty() {
                return Err(
                    Box::new(Refusal::Private(host)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// What a content type holds.
fn kind_of(content_type: Option<&str>) -> &'static str {
    let Some(ct) = content_type else {
        return "unknown";
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime == "application/json" || mime.ends_with("+json") {
        "json"
    } else if mime == "text/html" || mime == "application/xhtml+xml" {
        "html"
    } else if mime.ends_with("/xml") || mime.ends_with("+xml") {
        "xml"
    } else if mime.starts_with("text/") {
        "text"
    } else if mime == "application/pdf" {
        "pdf"
    } else if mime.starts_with("image/") {
        "image"
    } else {
        "binary"
    }
}

/// `api.example.com-1a2b3c4d.json`: the host, a digest of the URL, and an extension for
/// its kind. The same URL lands in the same file.
fn default_name(url: &reqwest::Url, kind: &str, content_type: Option<&str>) -> String {
    let host: String = url
        .host_str()
        .unwrap_or("fetch")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = hex::encode(&Sha256::digest(url.as_str().as_bytes())[..4]);
    let ext = match kind {
        "json" => "json",
        "html" => "html",
        "xml" => "xml",
        "text" => {
            if content_type.is_some_and(|c| c.contains("csv")) {
                "csv"
            } else {
                "txt"
            }
        }
        "pdf" => "pdf",
        "image" => match content_type
            .and_then(|c| c.split(';').next())
            .and_then(|m| m.trim().strip_prefix("image/"))
        {
            Some("png") => "png",
            Some("jpeg") | Some("jpg") => "jpg",
            Some("gif") => "gif",
            Some("webp") => "webp",
            Some("svg+xml") => "svg",
            _ => "img",
        },
        _ => "bin",
    };
    format!("{host}-{digest}.{ext}")
}
