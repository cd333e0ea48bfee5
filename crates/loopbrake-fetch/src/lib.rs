//! `web_fetch_file`: the tool loopbrake offers in place of fetches made from a shell.
//!
//! It fetches an `http`/`https` URL and writes the body to a file under the workspace
//! root (`[fetch] output_dir`, default `fetched/`), and answers with what the model needs to
//! work on that file: `{path, statusCode, bytes, contentType, kind, finalUrl, truncated?}`,
//! never the body. The path is confined to the root, symlinks resolved before the check;
//! bodies are capped (`max_bytes`), redirects counted (`max_redirects`), the whole fetch
//! timed (`timeout`); with `allow_private_hosts = false`, private, loopback and link-local
//! addresses are refused after name resolution, on every redirect hop too. Cookies are
//! kept per session when `cookie_jar` is on.
//!
//! The MCP proxy offers it (`loopbrake mcp --fetch-tool`); an adapter that offers it tells
//! the breaker (`BreakerConfig::offer_fetch_tool`), which then sends shell fetches here.

pub mod settings;

pub use settings::{fetch_table, FetchSettings};

use loopbrake_core::redact::redact;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;

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
    settings: FetchSettings,
    root: PathBuf,
    clients: Mutex<HashMap<String, reqwest::Client>>,
    temp: AtomicU64,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("settings", &self.settings)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher writing under `root` (the workspace: the process's working directory or
    /// the host's `cwd`), which must exist.
    pub fn new(settings: FetchSettings, root: &Path) -> std::io::Result<Self> {
        Ok(Fetcher {
            settings,
            root: root.canonicalize()?,
            clients: Mutex::new(HashMap::new()),
            temp: AtomicU64::new(0),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &FetchSettings {
        &self.settings
    }

    fn client(&self, session: &str) -> Result<reqwest::Client, FetchError> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let key = if self.settings.cookie_jar {
            session
        } else {
            ""
        };
        if let Some(c) = clients.get(key) {
            return Ok(c.clone());
        }
        if clients.len() >= MAX_SESSIONS {
            clients.clear();
        }
        let max = self.settings.max_redirects;
        let allow_private = self.settings.allow_private_hosts;
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
            .timeout(self.settings.timeout)
            .user_agent(self.settings.user_agent.clone())
            .redirect(policy);
        if self.settings.cookie_jar {
            b = b.cookie_provider(Arc::new(reqwest::cookie::Jar::default()));
        }
        if !allow_private {
            b = b.dns_resolver(Arc::new(PublicOnly));
        }
        let c = b.build().map_err(|e| FetchError::Http(e.to_string()))?;
        clients.insert(key.to_string(), c.clone());
        Ok(c)
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
        if !self.settings.allow_private_hosts {
            if let Some(ip) = literal_ip(&url) {
                if is_private(ip) {
                    return Err(FetchError::PrivateHost(ip.to_string()));
                }
            }
        }
        let explicit = match args.get("path") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) if !p.trim().is_empty() && !p.contains('\0') => {
                Some(self.confine(Path::new(p))?)
            }
            Some(_) => return Err(FetchError::BadArguments(
                "`path` must be a non-empty string (a file path relative to the workspace root)"
                    .into(),
            )),
        };
        let client = self.client(session)?;
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
                self.confine(&self.settings.output_dir.join(name))?
            }
        };
        let shown = self.shown(&target);
        let write_err = |source| FetchError::Write {
            path: shown.clone(),
            source,
        };
        let n = self.temp.fetch_add(1, Ordering::Relaxed);
        let tmp = target.with_file_name(format!(
            ".{}.part-{}-{n}",
            target
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
            std::process::id()
        ));
        let mut file = tokio::fs::File::create(&tmp).await.map_err(write_err)?;
        let mut bytes = 0u64;
        let mut truncated = false;
        let body = async {
            while let Some(chunk) = resp.chunk().await.map_err(classify)? {
                let room = self.settings.max_bytes - bytes;
                let take = (chunk.len() as u64).min(room) as usize;
                file.write_all(&chunk[..take]).await.map_err(write_err)?;
                bytes += take as u64;
                if take < chunk.len() {
                    truncated = true;
                    break;
                }
            }
            file.flush().await.map_err(write_err)?;
            drop(file);
            tokio::fs::rename(&tmp, &target).await.map_err(write_err)
        }
        .await;
        if let Err(e) = body {
            let _ = tokio::fs::remove_file(&tmp).await;
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

    /// `target` relative to the root, `/`-separated.
    fn shown(&self, target: &Path) -> String {
        let rel = target.strip_prefix(&self.root).unwrap_or(target);
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The file `rel` names under the root, its directories created; refused when it
    /// leaves the root, lexically or through a symlink.
    fn confine(&self, rel: &Path) -> Result<PathBuf, FetchError> {
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
        // Through the file system: every existing directory resolved, symlinks included.
        let mut cur = self.root.clone();
        for d in dirs {
            let next = cur.join(d);
            match std::fs::symlink_metadata(&next) {
                Ok(_) => {
                    let real = next.canonicalize().map_err(|_| outside())?;
                    if !real.starts_with(&self.root) {
                        return Err(outside());
                    }
                    if !real.is_dir() {
                        return Err(FetchError::Write {
                            path: self.shown(&next),
                            source: std::io::Error::other("not a directory"),
                        });
                    }
                    cur = real;
                }
                Err(_) => {
                    std::fs::create_dir(&next).map_err(|source| FetchError::Write {
                        path: self.shown(&next),
                        source,
                    })?;
                    cur = next;
                }
            }
        }
        let target = cur.join(name);
        if let Ok(meta) = std::fs::symlink_metadata(&target) {
            if meta.file_type().is_symlink() {
                let real = target.canonicalize().map_err(|_| outside())?;
                if !real.starts_with(&self.root) {
                    return Err(outside());
                }
                return Ok(real);
            }
            if meta.is_dir() {
                return Err(FetchError::Write {
                    path: self.shown(&target),
                    source: std::io::Error::other("is a directory"),
                });
            }
        }
        Ok(target)
    }
}

/// A reqwest error, with loopbrake's own refusals told apart.
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
