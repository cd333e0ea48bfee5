//! The settings page: each setting with what it means, its default, and where its value
//! comes from (the file and its line, and the layer: defaults, user, project, a named
//! file, the environment); edited as before (locked, versioned, validated: `config.rs`).

use super::charts::{self, Point};
use super::layout::{layout, legend};
use super::{html, Shared};
use crate::settings::{self, Editable};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{html as m, Markup};
use serde_json::Value;

/// The user's configuration file, as the hooks' lookup names it.
fn user_file() -> Option<std::path::PathBuf> {
    settings::user_file(&settings::process_env)
}

/// The settings the form edits: (section, key, kind, meaning). `kind`: `bool`, `int`,
/// `stage` (integer or "off"), `choice:a|b`, `text`.
pub(super) const FIELDS: &[(&str, &str, &str, &str)] = &[
    (
        "streak",
        "enabled",
        "bool",
        "The streak brake: stops the same call made again and again in a row.",
    ),
    (
        "streak",
        "max_repeats",
        "int",
        "The Nth identical call in a row is refused.",
    ),
    (
        "streak",
        "progress",
        "bool",
        "An identical call whose last run returned something new starts the count again.",
    ),
    (
        "streak",
        "progress_limit",
        "int",
        "Identical calls in a row refused even while their output keeps changing.",
    ),
    (
        "breaker",
        "enabled",
        "bool",
        "The breaker: catches loops that vary their spelling, targets and failures.",
    ),
    (
        "breaker",
        "on_limit",
        "choice:ask|deny",
        "At a gate: ask you (ask) or refuse outright (deny).",
    ),
    (
        "breaker",
        "window",
        "int",
        "How many of a session's recent calls the breaker counts.",
    ),
    (
        "breaker",
        "warn_at",
        "stage",
        "A light warning to the agent when a fingerprint has come up this often.",
    ),
    (
        "breaker",
        "summarize_at",
        "stage",
        "The agent is told to stop and summarise at this count.",
    ),
    (
        "breaker",
        "fail_warn_at",
        "stage",
        "A warning after this many failures in a row.",
    ),
    (
        "breaker",
        "fail_limit",
        "stage",
        "After this many failures in a row, the next call is gated.",
    ),
    (
        "breaker",
        "progress",
        "bool",
        "Tells new output from the same output again (turns the tracks below on).",
    ),
    (
        "breaker",
        "struggle_warn_at",
        "stage",
        "A warning when one thing failed this often, with changes in between.",
    ),
    (
        "breaker",
        "struggle_ask_at",
        "stage",
        "You are asked when one thing failed this often the same way.",
    ),
    (
        "breaker",
        "unchanged_limit",
        "stage",
        "Stopped when its failure came back the same this often after edits.",
    ),
    (
        "breaker",
        "cycle_limit",
        "stage",
        "The round at which a cycle of 2 to 4 calls going nowhere is stopped.",
    ),
    (
        "breaker",
        "same_output_limit",
        "stage",
        "A command respelled again and again with the same output is stopped at this count.",
    ),
    (
        "breaker",
        "block_shell_http",
        "bool",
        "A web fetch through the shell is sent to the fetch tool instead.",
    ),
    (
        "breaker",
        "block_local_http",
        "bool",
        "Also block shell fetches of local addresses.",
    ),
    (
        "breaker",
        "fetch_tool",
        "text",
        "The tool the agent is sent to for web fetches (e.g. WebFetch).",
    ),
    (
        "breaker.limits",
        "exact",
        "stage",
        "Gate for the exact same call (after decoys are dropped).",
    ),
    (
        "breaker.limits",
        "cmd",
        "stage",
        "Gate for the same shell command, volatile flags aside.",
    ),
    (
        "breaker.limits",
        "net",
        "stage",
        "Gate for fetches of the same resource.",
    ),
    (
        "breaker.limits",
        "sink",
        "stage",
        "Gate for writes to the same destination.",
    ),
    (
        "breaker.limits",
        "host",
        "stage",
        "Gate for calls to the same host.",
    ),
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

/// The layer the edited file is, by who reads it.
fn file_layer(e: &Editable) -> &'static str {
    match e {
        Editable::User(_) => "user",
        Editable::Project { .. } => "project",
        Editable::Named(_) => "named",
    }
}

/// Where a setting's value comes from: the file's line, the environment, or the default.
pub(super) fn origin(
    text: &str,
    layer: &str,
    dotted: &str,
    effective: &Value,
    default: &Value,
) -> String {
    match settings::line_of(text, dotted) {
        Some(line) => format!("{layer} file, line {line}"),
        None if effective != default => "environment".into(),
        None => "the defaults".into(),
    }
}

fn readers(ui: &Shared) -> Markup {
    m! {
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
    }
}

/// The file a tune result is read from: `toolbrake-tune.json` beside the edited
/// configuration (`toolbrake tune --json … > DIR/toolbrake-tune.json`).
pub(super) fn tune_file(config: &std::path::Path) -> std::path::PathBuf {
    config.with_file_name(TUNE_FILE)
}

/// The tune result's name.
pub(super) const TUNE_FILE: &str = "toolbrake-tune.json";

/// A tune result read from [`tune_file`]: `Ok(None)` when there is none, `Err` naming
/// the file and why when it cannot be read as `toolbrake tune --json` writes it.
pub(super) fn tune_result(config: &std::path::Path) -> Result<Option<Value>, String> {
    let path = tune_file(config);
    let text = match crate::files::read_regular(&path, 16 << 20) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON ({e})", path.display()))?;
    if !v["settings"].is_array() {
        return Err(format!(
            "{}: not a result of `toolbrake tune --json` (no \"settings\" list)",
            path.display()
        ));
    }
    Ok(Some(v))
}

/// A setting's changes as `key = value` pairs: `breaker.fail_limit = 8`.
fn changes_label(changes: &Value) -> String {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, x, out);
                }
            }
            other => out.push(format!("{prefix} = {other}")),
        }
    }
    let mut out = Vec::new();
    walk("", changes, &mut out);
    if out.is_empty() {
        "the base configuration".into()
    } else {
        out.join(", ")
    }
}

fn tune_section(config: &std::path::Path) -> Markup {
    let file = tune_file(config);
    let result = tune_result(config);
    m! {
        section.card #tune aria-labelledby="h-tune" {
            h2 #h-tune { "The tune frontier" }
            @match &result {
                Ok(None) => p.muted {
                    "No tune result at hand. Replay your recorded runs with "
                    code { "toolbrake tune --json HISTORY > " (file.display()) }
                    " and this page shows which settings stop the most waste for the least harm."
                },
                Err(why) => p.error { "The tune result cannot be read: " (why) },
                Ok(Some(v)) => {
                    @let rows = v["settings"].as_array().map_or(&[][..], Vec::as_slice);
                    @let labels: Vec<String> = rows.iter().enumerate().map(|(i, r)| {
                        format!("#{} {}", i + 1, r["name"].as_str().map_or_else(|| changes_label(&r["changes"]), str::to_string))
                    }).collect();
                    @let points: Vec<Point<'_>> = rows.iter().zip(&labels).map(|(r, l)| Point {
                        harmful: r["harmful"].as_u64().unwrap_or(0),
                        waste: r["waste"].as_u64().unwrap_or(0),
                        frontier: r["frontier"] == true,
                        recommended: r["recommended"] == true,
                        label: l,
                    }).collect();
                    @let on_front = points.iter().filter(|p| p.frontier).count();
                    p.muted {
                        (rows.len()) " settings replayed over " (v["calls"]) " calls of " (v["sessions"]) " sessions, from "
                        code { (file.display()) } "."
                    }
                    (charts::frontier("chart-frontier", &format!("{} settings, {on_front} on the frontier: waste stopped against harmful stops.", rows.len()), &points))
                    (legend(&[("saved", "on the frontier"), ("muted", "dominated"), ("allow", "recommended (ringed)")]))
                    @match v["recommended"].as_object() {
                        Some(r) => {
                            @let i = r.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                            p #recommendation {
                                "Recommended: " (labels.get(i).map_or("", String::as_str)) ", "
                                (rows.get(i).map_or(Value::Null, |x| x["waste"].clone())) " waste calls stopped, no harmful stop."
                            }
                            @let changes = r.get("changes").cloned().unwrap_or(Value::Null);
                            @if changes.as_object().is_some_and(|c| !c.is_empty()) {
                                pre { code { (r.get("toml").and_then(Value::as_str).unwrap_or("")) } }
                                div.actions { button type="button" #apply-tune data-edit=(changes.to_string()) { "Use the recommendation" } }
                            } @else {
                                p.muted { "Your configuration is the recommendation: nothing to change." }
                            }
                        }
                        None => p #recommendation { "No setting stops waste without a harmful stop on this history." },
                    }
                }
            }
        }
    }
}

pub(super) async fn settings_page(State(ui): State<Shared>) -> Response {
    let view = match super::config::view(&ui.config_path) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let text = crate::files::read_regular(&ui.config_path, settings::MAX_CONFIG_BYTES)
        .ok()
        .flatten()
        .unwrap_or_default();
    let layer = file_layer(&ui.editable);
    let file = view["file"].as_str().unwrap_or("");
    let body = m! {
        h1 { "Settings" }
        p.muted {
            "Editing " code { (file) } " (the " (layer) " layer)" @if view["exists"] != true { ", which will be created" } ". "
            "Each value comes from that file, from the environment (e.g. " code { "TOOLBRAKE_MAX_REPEATS" } "), or is the default. "
            "Saving checks the whole file with the rules of " code { "toolbrake config check" }
            ", keeps its comments and other keys, and replaces it atomically."
        }
        (readers(&ui))
        form.settings #settings data-version=(view["version"].as_str().unwrap_or("")) {
            @for (i, (section, key, kind, meaning)) in FIELDS.iter().enumerate() {
                @if i == 0 || FIELDS[i - 1].0 != *section {
                    h2 { "[" (section) "]" }
                }
                @let effective = lookup(&view["effective"], section, key);
                @let default = lookup(&view["defaults"], section, key);
                @let name = format!("{section}.{key}");
                @let about = format!("about-{}", name.replace('.', "-"));
                div.setting {
                    label for=(name) { code { (key) } }
                    @if *kind == "bool" {
                        input type="checkbox" id=(name) name=(name) aria-describedby=(about) data-kind=(kind) data-initial=(shown(effective)) checked[effective == &Value::Bool(true)];
                    } @else if let Some(choices) = kind.strip_prefix("choice:") {
                        select id=(name) name=(name) aria-describedby=(about) data-kind="text" data-initial=(shown(effective)) {
                            @for c in choices.split('|') { option value=(c) selected[shown(effective) == c] { (c) } }
                        }
                    } @else {
                        input type="text" id=(name) name=(name) aria-describedby=(about) data-kind=(kind) data-initial=(shown(effective)) value=(shown(effective));
                    }
                    div.about id=(about) {
                        (meaning) " "
                        span.muted { "Default " code { @if shown(default).is_empty() { "\"\" (none)" } @else { (shown(default)) } } "; from " span.origin data-origin=(name) { (origin(&text, layer, &name, effective, default)) } "." }
                    }
                }
            }
            div.actions { button type="submit" { "Save" } }
        }
        p #status aria-live="polite" {}
        (tune_section(&ui.config_path))
    };
    html(layout("Settings", "settings", body))
}
