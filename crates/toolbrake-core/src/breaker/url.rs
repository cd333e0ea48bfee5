//! URL primitives (docs/decisions.md, "Shell and URL primitives"): extraction from shell text, WHATWG
//! normalisation into a target identity, the coarse site, and local-host detection.
//! Pure: no DNS.

use crate::canonical::utf16_cmp;
use std::collections::BTreeMap;

/// Finds `http://` and `https://` URLs (lowercase schemes only) in shell text, in
/// first-seen order, de-duplicated by spelling. A backslash before `. : / ? & = # % ~ -`
/// is removed first (regex-escaped URLs in grep patterns).
///
/// ```
/// use toolbrake_core::breaker::url::extract_urls;
/// assert_eq!(extract_urls("see https://a.com/x, and https://a.com/x again"), ["https://a.com/x"]);
/// assert_eq!(extract_urls(r"http://127\.0\.0\.1:3080/\?token=abc"), ["http://127.0.0.1:3080/?token=abc"]);
/// assert!(extract_urls(r"cd C:\dir\file.txt; ls").is_empty());
/// ```
pub fn extract_urls(command: &str) -> Vec<String> {
    let mut text = String::with_capacity(command.len());
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&n) = chars.peek() {
                if ".:/?&=#%~-".contains(n) {
                    continue;
                }
            }
        }
        text.push(c);
    }
    let mut out: Vec<String> = Vec::new();
    let mut rest = text.as_str();
    while let Some(pos) = find_scheme(rest) {
        let tail = &rest[pos..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '<' | '>' | '`'))
            .unwrap_or(tail.len());
        let raw =
            tail[..end].trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '}', '\'', '"']);
        let after_scheme = raw.split_once("://").map(|(_, r)| r).unwrap_or("");
        if !after_scheme.is_empty() && !out.iter().any(|u| u == raw) {
            out.push(raw.to_string());
        }
        rest = &tail[end.max(1)..];
    }
    out
}

fn find_scheme(s: &str) -> Option<usize> {
    let a = s.find("http://");
    let b = s.find("https://");
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// A URL reduced to the parts that identify a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormUrl {
    /// Lowercased host, brackets and one trailing dot and one `www.` removed, aliases folded.
    pub host: String,
    /// The path, trailing slashes removed (`/` when empty).
    pub path: String,
    /// [`site_of`] the host.
    pub site: String,
    /// `host + path` plus `?query` (decoded, tracking keys dropped, pairs sorted).
    pub href: String,
    /// When the query holds a paging parameter ([`is_paging_key`]): the `href` without
    /// the paging pairs (the series of pages), and the paging pairs (which page).
    pub paging: Option<(String, String)>,
}

/// Whether a query key advances through a listing (`page`, `cursor`, `offset`, `since`,
/// `pageToken`, `page[after]`, …): a URL that differs from the previous one only there,
/// returning a different body, is the next page (docs/decisions.md, "Paging through a
/// URL").
///
/// ```
/// use toolbrake_core::breaker::url::is_paging_key;
/// assert!(is_paging_key("page") && is_paging_key("pageToken") && is_paging_key("page[cursor]"));
/// assert!(!is_paging_key("state") && !is_paging_key("per_page"));
/// ```
pub fn is_paging_key(k: &str) -> bool {
    let base = k.split('[').next().unwrap_or(k).to_ascii_lowercase();
    let base: String = base.chars().filter(|c| *c != '_' && *c != '-').collect();
    matches!(
        base.as_str(),
        "page"
            | "pagenumber"
            | "pageno"
            | "pagetoken"
            | "nextpagetoken"
            | "cursor"
            | "nextcursor"
            | "offset"
            | "since"
            | "sinceid"
            | "maxid"
            | "until"
            | "start"
            | "startindex"
            | "startat"
            | "after"
            | "before"
            | "startingafter"
            | "endingbefore"
            | "from"
            | "skip"
            | "next"
            | "nexttoken"
            | "continuation"
            | "continuationtoken"
            | "marker"
    )
}

fn is_tracking_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    k.starts_with("utm_")
        && k.len() > 4
        && k[4..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        || matches!(
            k.as_str(),
            "fbclid" | "gclid" | "msclkid" | "mc_eid" | "_ga" | "ref_src" | "igshid"
        )
}

fn has_scheme(s: &str) -> bool {
    let Some(pos) = s.find("://") else {
        return false;
    };
    let scheme = &s[..pos];
    let mut c = scheme.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic())
        && c.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
}

/// Drops a non-numeric port (`:$PORT`) from the authority so the parser accepts it.
fn drop_symbolic_port(url: &str) -> String {
    let Some(sep) = url.find("://") else {
        return url.to_string();
    };
    let auth_start = sep + 3;
    let auth_end = url[auth_start..]
        .find(['/', '?', '#'])
        .map(|i| auth_start + i)
        .unwrap_or(url.len());
    let authority = &url[auth_start..auth_end];
    let host_start = authority.rfind('@').map(|i| i + 1).unwrap_or(0);
    let hostport = &authority[host_start..];
    let colon = if hostport.starts_with('[') {
        hostport
            .find(']')
            .and_then(|b| hostport[b..].find(':').map(|c| b + c))
    } else {
        hostport.find(':')
    };
    if let Some(c) = colon {
        let port = &hostport[c + 1..];
        if !port.is_empty() && !port.bytes().all(|b| b.is_ascii_digit()) {
            let cut_at = auth_start + host_start + c;
            return format!("{}{}", &url[..cut_at], &url[auth_end..]);
        }
    }
    url.to_string()
}

/// Normalises a URL into its target identity, or `None` when it does not parse.
///
/// ```
/// use toolbrake_core::breaker::url::norm_url;
/// use std::collections::BTreeMap;
/// let u = norm_url("https://Example.COM:443/a/b/?q=1#frag", &BTreeMap::new()).unwrap();
/// assert_eq!((u.host.as_str(), u.path.as_str(), u.href.as_str()), ("example.com", "/a/b", "example.com/a/b?q=1"));
/// ```
pub fn norm_url(raw: &str, host_aliases: &BTreeMap<String, String>) -> Option<NormUrl> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return None;
    }
    let with_scheme = if has_scheme(trimmed) {
        trimmed.to_string()
    } else {
        format!("https://{trimmed}")
    };
    let fixed = drop_symbolic_port(&with_scheme);
    let parsed = url::Url::parse(&fixed).ok()?;
    let mut host = parsed.host_str()?.to_lowercase();
    if host.starts_with('[') && host.ends_with(']') {
        host = host[1..host.len() - 1].to_string();
    }
    if let Some(h) = host.strip_suffix('.') {
        host = h.to_string();
    }
    if let Some(h) = host.strip_prefix("www.") {
        host = h.to_string();
    }
    if host.is_empty() {
        return None;
    }
    if let Some(alias) = host_aliases.get(&host) {
        host = alias.clone();
    }
    let mut path = parsed.path().to_string();
    if path.len() > 1 {
        path = path.trim_end_matches('/').to_string();
    }
    if path.is_empty() {
        path = "/".to_string();
    }
    let mut pairs: Vec<String> = parsed
        .query_pairs()
        .filter(|(k, _)| !is_tracking_key(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    pairs.sort_by(|a, b| utf16_cmp(a, b));
    let query = pairs.join("&");
    let mut href = format!("{host}{path}");
    let paged = |p: &String| is_paging_key(p.split('=').next().unwrap_or(""));
    let paging = pairs.iter().any(paged).then(|| {
        let rest: Vec<&str> = pairs
            .iter()
            .filter(|p| !paged(p))
            .map(String::as_str)
            .collect();
        let at: Vec<&str> = pairs
            .iter()
            .filter(|p| paged(p))
            .map(String::as_str)
            .collect();
        let mut series = href.clone();
        if !rest.is_empty() {
            series.push('?');
            series.push_str(&rest.join("&"));
        }
        (series, at.join("&"))
    });
    if !query.is_empty() {
        href.push('?');
        href.push_str(&query);
    }
    let site = site_of(&host);
    Some(NormUrl {
        host,
        path,
        site,
        href,
        paging,
    })
}

fn is_dotted_quad(h: &str) -> bool {
    let parts: Vec<&str> = h.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The last two labels of a host (or the host itself for IP addresses and short names).
///
/// ```
/// use toolbrake_core::breaker::url::site_of;
/// assert_eq!(site_of("api.weather.gc.ca"), "gc.ca");
/// assert_eq!(site_of("192.168.111.90"), "192.168.111.90");
/// ```
pub fn site_of(host: &str) -> String {
    if is_dotted_quad(host) || host.contains(':') {
        return host.to_string();
    }
    let labels: Vec<&str> = host.split('.').filter(|l| !l.is_empty()).collect();
    if labels.len() <= 2 {
        host.to_string()
    } else {
        labels[labels.len() - 2..].join(".")
    }
}

/// Whether a host is local: loopback, RFC 1918, link-local, `localhost`, IPv6 ULA.
/// Pure prefix matching, no DNS.
///
/// ```
/// use toolbrake_core::breaker::url::is_local_host;
/// assert!(is_local_host("[::1]") && is_local_host("172.16.0.1") && is_local_host("dev.localhost"));
/// assert!(!is_local_host("172.32.0.1") && !is_local_host("8.8.8.8"));
/// ```
pub fn is_local_host(host: &str) -> bool {
    let h = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    if h == "localhost"
        || h.ends_with(".localhost")
        || h == "::1"
        || h == "0:0:0:0:0:0:0:1"
        || h == "0.0.0.0"
    {
        return true;
    }
    if h.starts_with("127.")
        || h.starts_with("10.")
        || h.starts_with("192.168.")
        || h.starts_with("169.254.")
    {
        return true;
    }
    if let Some(rest) = h.strip_prefix("172.") {
        if let Some(second) = rest.split('.').next() {
            if let Ok(n) = second.parse::<u8>() {
                if rest.len() > second.len() && (16..=31).contains(&n) {
                    return true;
                }
            }
        }
    }
    let b = h.as_bytes();
    if b.len() >= 5
        && b[0] == b'f'
        && (b[1] == b'c' || b[1] == b'd')
        && b[2].is_ascii_hexdigit()
        && b[3].is_ascii_hexdigit()
        && b[4] == b':'
    {
        return true;
    }
    h.starts_with("fe80:")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(raw: &str) -> Option<String> {
        let mut aliases = BTreeMap::new();
        aliases.insert(
            "open-data.canada.ca".to_string(),
            "open.canada.ca".to_string(),
        );
        norm_url(raw, &aliases).map(|u| u.href)
    }

    #[test]
    fn normalisation_examples_from_the_spec() {
        assert_eq!(n("https://example.com").as_deref(), Some("example.com/"));
        assert_eq!(
            n("https://api.github.com/repos/o/r/commits?per_page=100&page=1"),
            n("https://api.github.com/repos/o/r/commits?page=1&per_page=100&utm_source=x")
        );
        assert_eq!(
            n("https://api.github.com/repos/o/r/commits?page=1&per_page=100").as_deref(),
            Some("api.github.com/repos/o/r/commits?page=1&per_page=100")
        );
        assert_ne!(n("https://a.com/x?page=1"), n("https://a.com/x?page=2"));
        assert_eq!(
            n("https://open-data.canada.ca/x").as_deref(),
            Some("open.canada.ca/x")
        );
        assert_eq!(
            n("https://www.open-data.canada.ca/x").as_deref(),
            Some("open.canada.ca/x")
        );
        assert_eq!(
            norm_url("http://[::1]:3080/x", &BTreeMap::new())
                .unwrap()
                .host,
            "::1"
        );
        assert_eq!(
            n("http://localhost:$PORT/x").as_deref(),
            Some("localhost/x")
        );
        assert_eq!(n("not a url"), None);
        assert_eq!(n("http://0x7f.1/").as_deref(), Some("127.0.0.1/"));
        assert_eq!(n("a.com/p?q=%20x").as_deref(), Some("a.com/p?q= x"));
    }

    #[test]
    fn sites() {
        assert_eq!(site_of("www.open-data.canada.ca"), "canada.ca");
        assert_eq!(site_of("2001:db8::1"), "2001:db8::1");
        assert_eq!(site_of("localhost"), "localhost");
    }

    #[test]
    fn local_hosts() {
        for h in [
            "localhost",
            "127.0.0.5",
            "10.1.2.3",
            "192.168.1.1",
            "169.254.1.1",
            "0.0.0.0",
            "fd12:3456::1",
            "fe80::1",
            "0:0:0:0:0:0:0:1",
        ] {
            assert!(is_local_host(h), "{h}");
        }
        for h in [
            "8.8.8.8",
            "172.15.0.1",
            "172.32.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "2001:db8::1",
            "example.com",
        ] {
            assert!(!is_local_host(h), "{h}");
        }
    }
}
