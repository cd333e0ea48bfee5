//! Where spans go and what they carry: the `[telemetry]` table of `toolbrake.toml`, checked
//! key by key, and the standard `OTEL_*` environment over it ([`Tracing::resolve`]); an
//! endpoint is shown to people only through [`endpoint_for_people`].

use std::collections::BTreeMap;
use toolbrake_config::show;
use toolbrake_core::config::{unknown_key, ConfigError};
use toolbrake_core::redact::{redact_cut, MARKER};

/// The `[telemetry]` table of `toolbrake.toml`. The standard environment wins over it, key
/// by key ([`Tracing::resolve`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// The OTLP/HTTP base URL (`http://collector:4318`); `/v1/traces` is appended, as for
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`. `None`: no traces (unless the environment sets one).
    pub endpoint: Option<String>,
    /// `service.name` of toolbrake's spans (default `toolbrake`).
    pub service_name: Option<String>,
    /// Headers sent with every export (an API key of a hosted backend). Never shown.
    pub headers: BTreeMap<String, String>,
    /// Record the call's arguments (`gen_ai.tool.call.arguments`): the canonical JSON,
    /// redacted and cut to [`MAX_ARGUMENT_CHARS`]. Off by default.
    pub record_arguments: bool,
}

const KEYS: &[&str] = &["endpoint", "service_name", "headers", "record_arguments"];

/// Characters of the redacted arguments a span keeps with `record_arguments = true`.
pub const MAX_ARGUMENT_CHARS: usize = 2048;

fn err(key: &str, v: &toml::Value, rule: impl Into<String>) -> ConfigError {
    ConfigError::new(format!("telemetry.{key}"), show(v), rule)
}

/// Characters of an endpoint as [`endpoint_for_people`] shows it.
const MAX_ENDPOINT_CHARS: usize = 256;

/// An OTLP endpoint as people may read it, in every error, log line and printed setting
/// that names one: without its user and password, each query value shown as redacted
/// (`token=[REDACTED]`; a query name that is not a plain word too), without a
/// fragment, redacted and cut. A URL that does not parse loses everything between the
/// scheme and the last `@` before its path, and its query values, all the same.
///
/// ```
/// use toolbrake_telemetry::trace::endpoint_for_people;
/// assert_eq!(
///     endpoint_for_people("https://bob:pw@otel.example/v1/traces?token=t0k&x"),
///     "https://otel.example/v1/traces?token=[REDACTED]&x=[REDACTED]"
/// );
/// assert_eq!(
///     endpoint_for_people("http://bob:pw@h:99999/?k=v"),
///     "http://h:99999/?k=[REDACTED]"
/// );
/// ```
pub fn endpoint_for_people(endpoint: &str) -> String {
    let (without_fragment, _) = endpoint.split_once('#').unwrap_or((endpoint, ""));
    let shown = match url::Url::parse(without_fragment) {
        Ok(mut u) if u.has_host() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            let query = u.query().map(hidden_query_values);
            u.set_query(None);
            let mut shown = u.to_string();
            if let Some(q) = query {
                shown.push('?');
                shown.push_str(&q);
            }
            shown
        }
        _ => {
            // By hand: the scheme, then whatever follows the last `@` before the path.
            let (scheme, rest) = match without_fragment.split_once("://") {
                Some((scheme, rest)) => (format!("{scheme}://"), rest),
                None => (String::new(), without_fragment),
            };
            let path_at = rest.find(['/', '\\']).unwrap_or(rest.len());
            let rest = match rest[..path_at].rfind('@') {
                Some(at) => &rest[at + 1..],
                None => rest,
            };
            match rest.split_once('?') {
                Some((head, query)) => format!("{scheme}{head}?{}", hidden_query_values(query)),
                None => format!("{scheme}{rest}"),
            }
        }
    };
    redact_cut(&shown, MAX_ENDPOINT_CHARS)
}

/// A query with every value redacted; a name that is not a plain word too.
fn hidden_query_values(query: &str) -> String {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let name = pair.split_once('=').map_or(pair, |(n, _)| n);
            let plain = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            if plain {
                format!("{name}={MARKER}")
            } else {
                MARKER.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Whether `endpoint` is an absolute `http`/`https` URL with a host and no credentials.
fn endpoint_ok(endpoint: &str) -> bool {
    url::Url::parse(endpoint).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host_str().is_some_and(|h| !h.is_empty())
            && u.username().is_empty()
            && u.password().is_none()
    })
}

/// Whether `name` is an HTTP header name (an RFC 9110 token).
fn header_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Reads and validates the `[telemetry]` table (absent: the defaults, traces off).
pub fn telemetry_table(v: Option<&toml::Value>) -> Result<TelemetrySettings, ConfigError> {
    let mut s = TelemetrySettings::default();
    let Some(v) = v else { return Ok(s) };
    let t = v
        .as_table()
        .ok_or_else(|| ConfigError::new("telemetry", show(v), "must be a table"))?;
    for (k, val) in t {
        match k.as_str() {
            "endpoint" => {
                let e = val.as_str().filter(|e| endpoint_ok(e)).ok_or_else(|| {
                    // A string is shown as people may read an endpoint: it may hold a
                    // password or a token.
                    let shown = match val.as_str() {
                        Some(e) => show(&toml::Value::String(endpoint_for_people(e))),
                        None => show(val),
                    };
                    ConfigError::new(
                        format!("telemetry.{k}"),
                        shown,
                        "must be an http:// or https:// URL with a host and no user or password, such as \"http://127.0.0.1:4318\" (credentials go in `headers`)",
                    )
                })?;
                s.endpoint = Some(e.to_string());
            }
            "service_name" => {
                let n = val
                    .as_str()
                    .filter(|n| {
                        !n.trim().is_empty() && n.chars().count() <= 255 && !n.contains('\0')
                    })
                    .ok_or_else(|| {
                        err(
                            k,
                            val,
                            "must be a non-empty string of at most 255 characters",
                        )
                    })?;
                s.service_name = Some(n.to_string());
            }
            "headers" => {
                let h = val.as_table().ok_or_else(|| {
                    err(
                        k,
                        val,
                        "must be a table of header names to string values, such as { authorization = \"Bearer …\" }",
                    )
                })?;
                for (name, value) in h {
                    let key = format!("telemetry.headers.{name}");
                    if !header_name_ok(name) {
                        return Err(ConfigError::new(
                            key,
                            "(hidden)",
                            "must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
                        ));
                    }
                    // The value is never quoted: it is usually a credential.
                    let value = value
                        .as_str()
                        .filter(|x| {
                            x.len() <= 8192
                                && x.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
                        })
                        .ok_or_else(|| {
                            ConfigError::new(
                                key,
                                "(hidden)",
                                "must be a string of printable ASCII, at most 8192 bytes",
                            )
                        })?;
                    s.headers
                        .insert(name.to_ascii_lowercase(), value.to_string());
                }
            }
            "record_arguments" => {
                s.record_arguments = val
                    .as_bool()
                    .ok_or_else(|| err(k, val, "must be a boolean (true or false)"))?
            }
            _ => return Err(unknown_key("telemetry", k, KEYS)),
        }
    }
    Ok(s)
}

impl TelemetrySettings {
    /// The table as `toolbrake.toml` text; header values are shown as `hidden`, the
    /// endpoint as [`endpoint_for_people`] shows it.
    pub fn to_toml(&self) -> String {
        let mut out = String::from("[telemetry]\n");
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        if let Some(e) = &self.endpoint {
            out.push_str(&format!("endpoint = {}\n", q(&endpoint_for_people(e))));
        }
        if let Some(n) = &self.service_name {
            out.push_str(&format!("service_name = {}\n", q(n)));
        }
        if !self.headers.is_empty() {
            let shown: Vec<String> = self
                .headers
                .keys()
                .map(|k| {
                    let bare = k
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                    let k = if bare { k.clone() } else { q(k) };
                    format!("{k} = \"hidden\"")
                })
                .collect();
            out.push_str(&format!("headers = {{ {} }}\n", shown.join(", ")));
        }
        out.push_str(&format!("record_arguments = {}\n", self.record_arguments));
        out
    }
}

/// Tracing, resolved from the environment and the `[telemetry]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracing {
    /// Where spans are posted (the full URL, `/v1/traces` included).
    pub traces_endpoint: String,
    /// `service.name`.
    pub service_name: String,
    /// Headers from the table (the crate adds `OTEL_EXPORTER_OTLP_HEADERS` and
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS` over them).
    pub headers: BTreeMap<String, String>,
    /// Record the redacted arguments.
    pub record_arguments: bool,
}

fn set(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `base` with `/v1/traces` appended to its path, before its query
/// (`http://h:4318/?k=v` → `http://h:4318/v1/traces?k=v`).
fn with_traces_path(base: &str) -> String {
    match url::Url::parse(base) {
        Ok(mut u) if !u.cannot_be_a_base() => {
            let path = format!("{}/v1/traces", u.path().trim_end_matches('/'));
            u.set_path(&path);
            u.to_string()
        }
        // Not a URL (the exporter will say so): the path still goes before the query.
        _ => {
            let at = base.find(['?', '#']).unwrap_or(base.len());
            let (head, tail) = base.split_at(at);
            format!("{}/v1/traces{tail}", head.trim_end_matches('/'))
        }
    }
}

impl Tracing {
    /// What to trace with, or `None` when traces are off: `OTEL_SDK_DISABLED=true`,
    /// `OTEL_TRACES_EXPORTER=none`, or no endpoint anywhere. The environment wins over the
    /// table: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is), then
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended), then the table's `endpoint`
    /// (appended too); `OTEL_SERVICE_NAME`, then `service_name`, then `toolbrake`.
    pub fn resolve(
        table: &TelemetrySettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Tracing> {
        if set(env, "OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        if set(env, "OTEL_TRACES_EXPORTER")
            .is_some_and(|v| v.split(',').all(|e| e.trim().eq_ignore_ascii_case("none")))
        {
            return None;
        }
        let traces_endpoint = set(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| set(env, "OTEL_EXPORTER_OTLP_ENDPOINT").map(|e| with_traces_path(&e)))
            .or_else(|| table.endpoint.as_deref().map(with_traces_path))?;
        Some(Tracing {
            traces_endpoint,
            service_name: set(env, "OTEL_SERVICE_NAME")
                .or_else(|| table.service_name.clone())
                .unwrap_or_else(|| "toolbrake".into()),
            headers: table.headers.clone(),
            record_arguments: table.record_arguments,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn traces_are_off_without_an_endpoint_and_the_environment_wins() {
        let none = TelemetrySettings::default();
        assert_eq!(Tracing::resolve(&none, &env(&[])), None);
        let table = telemetry_table(Some(
            &toml::toml! {
                endpoint = "http://table:4318/"
                service_name = "from-table"
            }
            .into(),
        ))
        .unwrap();
        let t = Tracing::resolve(&table, &env(&[])).unwrap();
        assert_eq!(t.traces_endpoint, "http://table:4318/v1/traces");
        assert_eq!(t.service_name, "from-table");
        let e = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_SERVICE_NAME", "from-env"),
        ];
        let t = Tracing::resolve(&table, &env(&e)).unwrap();
        assert_eq!(t.traces_endpoint, "http://env:4318/v1/traces");
        assert_eq!(t.service_name, "from-env");
        let e = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces/x"),
        ];
        assert_eq!(
            Tracing::resolve(&table, &env(&e)).unwrap().traces_endpoint,
            "http://traces/x"
        );
        for off in [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(Tracing::resolve(&table, &env(&[off])), None, "{off:?}");
        }
    }

    #[test]
    fn the_traces_path_goes_before_the_query() {
        for (base, full) in [
            ("http://h:4318", "http://h:4318/v1/traces"),
            ("http://h:4318/", "http://h:4318/v1/traces"),
            ("http://h:4318/?k=v", "http://h:4318/v1/traces?k=v"),
            (
                "https://h/otlp/?k=v&w=x",
                "https://h/otlp/v1/traces?k=v&w=x",
            ),
            // Not a URL (the exporter refuses it): by hand, the same.
            ("http://h:99999/?k=v", "http://h:99999/v1/traces?k=v"),
        ] {
            assert_eq!(with_traces_path(base), full, "{base}");
        }
    }

    #[test]
    fn an_endpoint_for_people_has_no_credential() {
        for (endpoint, shown) in [
            ("http://collector:4318", "http://collector:4318/"),
            (
                "http://bob:pw@collector:4318/v1/traces?token=abc&&=x#frag",
                "http://collector:4318/v1/traces?token=[REDACTED]&[REDACTED]",
            ),
            // What does not parse: everything before the last `@` of the authority goes.
            ("http://bob:p?w@host:99999/x", "http://host:99999/x"),
            ("bob:pw@host:99999?t=s", "host:99999?t=[REDACTED]"),
            (
                "http://h/sk-proj-FakeOpenAi0123456789abcdef/v1",
                "http://h/[REDACTED]/v1",
            ),
        ] {
            assert_eq!(endpoint_for_people(endpoint), shown, "{endpoint}");
        }
        let long = format!("http://h/{}", "p".repeat(10_000));
        assert_eq!(
            endpoint_for_people(&long).chars().count(),
            MAX_ENDPOINT_CHARS
        );
    }

    #[test]
    fn the_table_is_validated_and_never_shows_a_header_value() {
        let bad = |t: toml::Table| telemetry_table(Some(&t.into())).unwrap_err();
        let e = bad(toml::toml! { endpoint = "ftp://x" });
        assert_eq!(e.key, "telemetry.endpoint");
        let e = bad(toml::toml! { endpoint = "https://user:pw@x" });
        assert!(!e.to_string().is_empty());
        let e = bad(toml::toml! { record_arguments = "yes" });
        assert_eq!(e.key, "telemetry.record_arguments");
        let e = bad(toml::toml! { endpont = "http://x" });
        assert!(e.to_string().contains("endpoint"), "{e}");
        let e = bad(toml::toml! { headers = { authorization = "Bearer sk-secret\n" } });
        assert_eq!(e.key, "telemetry.headers.authorization");
        assert!(!e.to_string().contains("sk-secret"), "{e}");
        let ok = telemetry_table(Some(
            &toml::toml! { headers = { Authorization = "Bearer sk-secret" } }.into(),
        ))
        .unwrap();
        assert!(!ok.to_toml().contains("sk-secret"));
        assert!(ok.to_toml().contains("authorization = \"hidden\""));
    }
}
