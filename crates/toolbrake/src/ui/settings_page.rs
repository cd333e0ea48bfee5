//! The settings page: each setting with what it means, its default, and where its value
//! comes from (the file and its line, and the layer: defaults, user, project, a named
//! file, the environment); edited as before (locked, versioned, validated: `config.rs`).

use super::layout::layout;
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
        None => "default".into(),
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
                        span.muted { "Default " code { (shown(default)) } "; from " span.origin data-origin=(name) { (origin(&text, layer, &name, effective, default)) } "." }
                    }
                }
            }
            div.actions { button type="submit" { "Save" } }
        }
        p #status aria-live="polite" {}
    };
    html(layout("Settings", "settings", body))
}
