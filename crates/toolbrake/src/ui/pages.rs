//! The dashboard's pages: server-rendered with maud (escaped by construction), then kept
//! live by `app.js`, which polls the JSON API and writes only text into the page.

use super::{find_session, html, session_json, sessions_newest_first, Shared};
use crate::settings::Editable;
use axum::extract::{Path as UrlPath, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use maud::{html as m, Markup, DOCTYPE};
use serde_json::Value;

/// The user's configuration file, as the hooks' lookup names it.
fn user_file() -> Option<std::path::PathBuf> {
    crate::settings::user_file(&crate::settings::process_env)
}

const STYLE: &str = r#"
:root { --fg:#1d2430; --muted:#5b6675; --line:#d9dee5; --bg:#f7f8fa; --allow:#2e7d32; --advise:#b26a00; --ask:#6a4fb3; --deny:#c62828; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); margin: 0; }
header { background: #fff; border-bottom: 1px solid var(--line); padding: .6rem 1.2rem; display: flex; gap: 1.2rem; align-items: baseline; flex-wrap: wrap; }
header h1 { font-size: 1.1rem; margin: 0; }
header nav a { margin-right: 1rem; color: var(--fg); }
main { padding: 1rem 1.2rem; max-width: 1200px; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
.muted { color: var(--muted); }
.warning { color: #b45309; font-weight: 500; }
.bar { display: inline-block; width: 90px; height: 8px; background: var(--line); border-radius: 4px; vertical-align: middle; margin-right: .35rem; }
.bar > span { display: block; height: 100%; border-radius: 4px; background: var(--advise); }
.verdict { font-weight: 600; text-transform: uppercase; font-size: .8rem; }
.v-allow { color: var(--allow); } .v-advise { color: var(--advise); } .v-ask { color: var(--ask); } .v-deny { color: var(--deny); }
.gated { border-left: 4px solid var(--deny); }
code { font-size: .85rem; word-break: break-all; }
form.settings { display: grid; grid-template-columns: minmax(12rem, max-content) minmax(8rem, 16rem) auto; gap: .35rem 1rem; align-items: center; background: #fff; padding: 1rem; border: 1px solid var(--line); }
form.settings h3 { grid-column: 1 / -1; margin: .8rem 0 .2rem; }
button { font: inherit; padding: .3rem .8rem; }
#status { margin: .8rem 0; min-height: 1.5em; }
.error { color: var(--deny); } .ok { color: var(--allow); }
"#;

/// Percent-encodes one path segment (a session key may hold `/`, `#`, spaces).
pub(super) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn layout(title: &str, page: &str, body: Markup) -> Markup {
    m! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · toolbrake" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body data-page=(page) {
                header {
                    h1 { "toolbrake" }
                    nav { a href="/" { "Sessions" } a href="/settings" { "Settings" } }
                    span.muted #store {}
                }
                main { (body) }
                script src="/assets/app.js" {}
            }
        }
    }
}

fn bar(count: u64, limit: u64) -> Markup {
    let pct = (count * 100).checked_div(limit).unwrap_or(0).min(100);
    m! { span.bar { span style=(format!("width:{pct}%")) {} } (count) "/" (limit) }
}

fn session_row(s: &Value) -> Markup {
    let key = s["key"].as_str().unwrap_or("");
    let gated = s["gated"] == true;
    m! {
        tr class=[gated.then_some("gated")] {
            td { a href=(format!("/sessions/{}", segment(key))) { code { (key) } } }
            td.muted { (s["last_activity"].as_str().unwrap_or("")) }
            td { (s["streak"]["count"]) }
            td {
                @for n in s["near"].as_array().into_iter().flatten().take(3) {
                    div { (bar(n["count"].as_u64().unwrap_or(0), n["limit"].as_u64().unwrap_or(0))) " " code { (n["fingerprint"].as_str().unwrap_or("")) } }
                }
            }
            td {
                @for f in s["failure_streaks"].as_array().into_iter().flatten() {
                    div { (f["kind"].as_str().unwrap_or("")) " × " (f["count"]) }
                }
            }
            td { (s["pending_asks"].as_array().map_or(0, Vec::len)) }
            td { (s["exemptions"]) " / " (s["refusals"]) }
            td { (s["stopped"]) }
            td { button data-reset=(key) { "Reset" } }
        }
    }
}

pub(super) fn sessions_table(sessions: &[Value]) -> Markup {
    m! {
        table #sessions {
            thead { tr {
                th { "Session" } th { "Last activity" } th { "In a row" } th { "Nearest gates" }
                th { "Failing" } th { "Asks" } th { "Exemptions / refusals" } th { "Stopped" } th {}
            } }
            tbody {
                @if sessions.is_empty() { tr { td colspan="9" .muted { "No sessions in the store yet." } } }
                @for s in sessions { (session_row(s)) }
            }
        }
    }
}

pub(super) async fn sessions_page(State(ui): State<Shared>) -> Response {
    let rows = match sessions_newest_first(&ui).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    html(layout(
        "Sessions",
        "sessions",
        m! {
            h2 { "Sessions" }
            p.muted { "Every session in " (ui.store.describe()) ", newest first; gated sessions are marked. Updates live." }
            (sessions_table(&rows))
            p #status {}
        },
    ))
}

pub(super) fn timeline(log: &[Value]) -> Markup {
    m! {
        table #timeline {
            thead { tr { th { "Decision" } th { "Tool" } th { "Call" } th { "Nearest gate" } th { "Outcome" } } }
            tbody {
                @if log.is_empty() { tr { td colspan="5" .muted { "No decisions recorded." } } }
                @for e in log.iter().rev() {
                    @let verdict = e["verdict"].as_str().unwrap_or("");
                    tr {
                        td { span class=(format!("verdict v-{verdict}")) { (verdict) } @if let Some(c) = e["code"].as_str() { div.muted { (c) } } }
                        td { (e["tool"].as_str().unwrap_or("")) }
                        td { code { (e["preview"].as_str().unwrap_or("")) } }
                        td { @if let Some(n) = e["near"].as_array() { (bar(n[1].as_u64().unwrap_or(0), n[2].as_u64().unwrap_or(0))) " " code { (n[0].as_str().unwrap_or("")) } } }
                        td { (e["outcome"].as_str().unwrap_or("—")) }
                    }
                }
            }
        }
    }
}

pub(super) async fn session_page(
    State(ui): State<Shared>,
    UrlPath(key): UrlPath<String>,
) -> Response {
    let info = match find_session(&ui, key.clone()).await {
        Ok(i) => i,
        Err(r) => return r,
    };
    let body = match info {
        None => {
            m! { h2 { "Session " code { (key) } } p.muted { "Not in the store (reset, expired, or never seen)." } }
        }
        Some(info) => {
            let s = session_json(&info, true);
            let log: Vec<Value> = s["log"].as_array().cloned().unwrap_or_default();
            m! {
                h2 { "Session " code #key data-key=(key) { (key) } }
                p.muted {
                    "Calls in the window: " (s["window"]) " · in a row: " (s["streak"]["count"])
                    " · stopped: " (s["stopped"]) " · last activity " (s["last_activity"].as_str().unwrap_or(""))
                    " " button data-reset=(key) { "Reset this session" }
                }
                h3 { "Recent decisions" }
                (timeline(&log))
                p #status {}
            }
        }
    };
    html(layout(&key, "session", body))
}

/// The settings the form edits: (section, key, kind). `kind`: `bool`, `int`, `stage`
/// (integer or "off"), `choice:a|b`, `text`.
const FIELDS: &[(&str, &str, &str)] = &[
    ("streak", "enabled", "bool"),
    ("streak", "max_repeats", "int"),
    ("streak", "progress", "bool"),
    ("streak", "progress_limit", "int"),
    ("breaker", "enabled", "bool"),
    ("breaker", "on_limit", "choice:ask|deny"),
    ("breaker", "window", "int"),
    ("breaker", "warn_at", "stage"),
    ("breaker", "summarize_at", "stage"),
    ("breaker", "fail_warn_at", "stage"),
    ("breaker", "fail_limit", "stage"),
    ("breaker", "progress", "bool"),
    ("breaker", "struggle_warn_at", "stage"),
    ("breaker", "struggle_ask_at", "stage"),
    ("breaker", "unchanged_limit", "stage"),
    ("breaker", "cycle_limit", "stage"),
    ("breaker", "block_shell_http", "bool"),
    ("breaker", "block_local_http", "bool"),
    ("breaker", "fetch_tool", "text"),
    ("breaker.limits", "exact", "stage"),
    ("breaker.limits", "cmd", "stage"),
    ("breaker.limits", "net", "stage"),
    ("breaker.limits", "sink", "stage"),
    ("breaker.limits", "host", "stage"),
];

fn lookup<'a>(root: &'a Value, section: &str, key: &str) -> &'a Value {
    let mut v = root;
    for part in section.split('.') {
        v = &v[part];
    }
    &v[key]
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub(super) async fn settings_page(State(ui): State<Shared>) -> Response {
    let view = match super::config::view(&ui.config_path) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let file = view["file"].as_str().unwrap_or("");
    let body = m! {
        h2 { "Settings" }
        p.muted {
            "Editing " code { (file) } @if view["exists"] != true { " (it will be created)" } ". "
            "Saving checks the whole file with the rules of " code { "toolbrake config check" }
            ", keeps its comments and other keys, and replaces it atomically."
        }
        div.muted.readers {
            @match &ui.editable {
                Editable::User(_) => {
                    "Your user configuration. Hooks read it at every call, and "
                    code { "serve" } " and " code { "mcp" } " reload it when it changes, wherever "
                    "they run without a " code { "toolbrake.toml" } " in their working folder "
                    "(a project file shadows it there) and without " code { "--config" } " or "
                    code { "$TOOLBRAKE_CONFIG" } " naming another file."
                }
                Editable::Project { path, shadows } => {
                    "A project file. Hooks, " code { "serve" } " and " code { "mcp" }
                    " read it only when their working folder is "
                    code { (path.parent().map(|p| p.display().to_string()).unwrap_or_default()) }
                    " (and no " code { "--config" } " or " code { "$TOOLBRAKE_CONFIG" }
                    " names another file); elsewhere they read your user configuration"
                    @if let Some(user) = user_file() { " " code { (user.display()) } } "."
                    @if let Some(user) = shadows {
                        p.warning {
                            strong { "Warning: " } "this file shadows your user configuration "
                            code { (user.display()) } " for everything run in that folder: edits here do not reach it."
                        }
                    }
                }
                Editable::Named(_) => {
                    "Named with " code { "--config" } " or " code { "$TOOLBRAKE_CONFIG" }
                    ": hooks, " code { "serve" } " and " code { "mcp" } " read it only when given "
                    "the same name; without it they read the working folder's "
                    code { "toolbrake.toml" } " or your user configuration"
                    @if let Some(user) = user_file() { " " code { (user.display()) } } "."
                }
            }
        }
        form.settings #settings data-version=(view["version"].as_str().unwrap_or("")) {
            @for (i, (section, key, kind)) in FIELDS.iter().enumerate() {
                @if i == 0 || FIELDS[i - 1].0 != *section {
                    h3 { "[" (section) "]" }
                }
                @let effective = lookup(&view["effective"], section, key);
                @let default = lookup(&view["defaults"], section, key);
                @let name = format!("{section}.{key}");
                label for=(name) { code { (key) } }
                @if *kind == "bool" {
                    input type="checkbox" id=(name) name=(name) data-kind=(kind) data-initial=(shown(effective)) checked[effective == &Value::Bool(true)];
                } @else if let Some(choices) = kind.strip_prefix("choice:") {
                    select id=(name) name=(name) data-kind="text" data-initial=(shown(effective)) {
                        @for c in choices.split('|') { option value=(c) selected[shown(effective) == c] { (c) } }
                    }
                } @else {
                    input type="text" id=(name) name=(name) data-kind=(kind) data-initial=(shown(effective)) value=(shown(effective));
                }
                span.muted { "default " code { (shown(default)) } }
            }
            div { button type="submit" { "Save" } }
        }
        p #status {}
    };
    html(layout("Settings", "settings", body))
}

pub(super) async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("app.js"),
    )
        .into_response()
}
