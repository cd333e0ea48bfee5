//! A session's page: its calls as a picture, what it kept doing in plain words, the
//! fingerprints near their gates, its recent decisions, and the buttons (reset, and the
//! feedback calibration reads: "it wasn't stuck", "it was stuck"), each confirmed first.

use super::charts::{self, Mark};
use super::layout::{bar, layout, legend};
use super::words::{kept_doing, reason};
use super::{find_session, html, session_json, Shared};
use axum::extract::{Path as UrlPath, State};
use axum::response::Response;
use maud::{html as m, Markup};
use serde_json::Value;
use toolbrake_core::breaker::ToolClasses;

/// The arguments an `exact:Tool:{json}` preview holds, when it was not cut.
fn preview_args(preview: &str) -> Value {
    preview
        .strip_prefix("exact:")
        .and_then(|r| r.split_once(':'))
        .and_then(|(_, a)| serde_json::from_str(a).ok())
        .unwrap_or(Value::Null)
}

/// The picture's marks, oldest first.
fn marks(log: &[Value]) -> Vec<Mark<'_>> {
    let classes = ToolClasses::default();
    log.iter()
        .map(|e| {
            let tool = e["tool"].as_str().unwrap_or("");
            let verdict = e["verdict"].as_str().unwrap_or("allow");
            let outcome = e["outcome"].as_str();
            let preview = e["preview"].as_str().unwrap_or("");
            let edit = classes.is_mutating(tool, &preview_args(preview));
            let returned = e["returned"].as_str();
            let approved = e["answer"] == "approved";
            let title = format!(
                "{tool}: {verdict}{}{}{}{}",
                answer_words(e),
                outcome.map(|o| format!(", {o}")).unwrap_or_default(),
                returned.map(returned_words).unwrap_or_default(),
                if edit { ", an edit" } else { "" }
            );
            Mark {
                verdict,
                approved,
                outcome,
                edit,
                returned,
                title,
            }
        })
        .collect()
}

/// An ask's answer, in words (`answer` of a log entry).
fn answer_words(e: &Value) -> &'static str {
    match e["answer"].as_str() {
        Some("approved") => " (asked, you approved)",
        Some("declined") => " (asked, not approved)",
        _ => "",
    }
}

/// What a call returned, in words (`returned` of a log entry).
fn returned_words(r: &str) -> &'static str {
    match r {
        "same" => ", returned the same as last time (waste)",
        "new" => ", returned something new",
        _ => "",
    }
}

fn picture_words(log: &[Value]) -> String {
    let count = |v: &str| log.iter().filter(|e| e["verdict"] == v).count();
    let failed = log.iter().filter(|e| e["outcome"] == "failed").count();
    let returned = |r: &str| log.iter().filter(|e| e["returned"] == r).count();
    let approved = log.iter().filter(|e| e["answer"] == "approved").count();
    format!(
        "The last {} calls, oldest first: {} allowed, {} advised, {} asked ({} approved), {} stopped; {} failed; {} returned the same as last time (waste), {} something new.",
        log.len(),
        count("allow") - approved,
        count("advise"),
        count("ask") + log.iter().filter(|e| e["answer"].is_string()).count(),
        approved,
        count("deny"),
        failed,
        returned("same"),
        returned("new"),
    )
}

/// The decisions, newest first (`app.js` rewrites the rows).
pub(super) fn timeline(log: &[Value]) -> Markup {
    m! {
        div.scroll { table #timeline {
            thead { tr { th { "Decision" } th { "Tool" } th { "Call" } th { "Nearest gate" } th { "Outcome" } } }
            tbody {
                @if log.is_empty() { tr { td colspan="5" .muted { "No decisions recorded." } } }
                @for e in log.iter().rev() {
                    @let verdict = e["verdict"].as_str().unwrap_or("");
                    tr {
                        td { span class=(format!("verdict v-{verdict}")) { (verdict) } @if let Some(c) = e["code"].as_str() { div.muted { (c) } } @if let Some(a) = e["answer"].as_str() { div.muted { "asked, " (a) } } }
                        td { (e["tool"].as_str().unwrap_or("")) }
                        td { code { (e["preview"].as_str().unwrap_or("")) } }
                        td { @if let Some(n) = e["near"].as_array() { (bar(n[1].as_u64().unwrap_or(0), n[2].as_u64().unwrap_or(0))) " " code { (n[0].as_str().unwrap_or("")) } } }
                        td { (e["outcome"].as_str().unwrap_or("—")) @if let Some(r) = e["returned"].as_str() { div.muted { (outcome_note(r)) } } }
                    }
                }
            }
        } }
    }
}

/// The timeline's note under an outcome (`app.js` says the same).
fn outcome_note(r: &str) -> &'static str {
    match r {
        "same" => "same as last time (waste)",
        _ => "new information",
    }
}

fn feedback_words(f: &Value) -> &'static str {
    match f.as_str() {
        Some("mistaken") => {
            "You said it wasn't stuck: its stops count as mistaken when toolbrake is calibrated."
        }
        Some("stuck") => {
            "You said it was stuck: it never counts as a good run when toolbrake is calibrated."
        }
        _ => "No feedback yet.",
    }
}

fn body(key: &str, s: &Value) -> Markup {
    let log: Vec<Value> = s["log"].as_array().cloned().unwrap_or_default();
    let near: Vec<Value> = s["near"].as_array().cloned().unwrap_or_default();
    let doing = kept_doing(&log, &near);
    let stops: Vec<String> = log
        .iter()
        .rev()
        .filter(|e| matches!(e["verdict"].as_str(), Some("deny" | "ask")))
        .filter_map(|e| reason(e, s["streak"]["count"].as_u64()))
        .take(3)
        .collect();
    m! {
        h1 { "Session " code #key data-key=(key) { (key) } }
        p.muted {
            "Calls in the window: " (s["window"]) " · in a row: " (s["streak"]["count"])
            " · stopped: " (s["stopped"]) " · last activity " (s["last_activity"].as_str().unwrap_or(""))
        }
        div.grid {
            section.card aria-labelledby="h-doing" {
                h2 #h-doing { "What it kept doing" }
                @if doing.is_empty() { p.muted { "Nothing came near a gate." } }
                ul #kept-doing { @for d in &doing { li { (d) } } }
                @if !stops.is_empty() {
                    h2 { "Why it was stopped" }
                    ul #stop-reasons { @for r in &stops { li { (r) } } }
                }
            }
            section.card aria-labelledby="h-feedback" {
                h2 #h-feedback { "Was it stuck?" }
                p #feedback data-feedback=(s["feedback"].as_str().unwrap_or("")) aria-live="polite" { (feedback_words(&s["feedback"])) }
                p.muted { "Your answer is kept with the session and read by " code { "toolbrake tune --calibrate" } "." }
                div.actions {
                    button type="button" data-feedback="mistaken" data-key=(key) { "It wasn't stuck" }
                    button type="button" data-feedback="stuck" data-key=(key) { "It was stuck" }
                    button.danger type="button" data-reset=(key) { "Reset this session" }
                }
            }
        }
        section.card aria-labelledby="h-calls" {
            h2 #h-calls { "Its calls over time" }
            (charts::strip("chart-calls", &picture_words(&log), &marks(&log)))
            (legend(&[("allow", "allowed (circle)"), ("advise", "advised (diamond)"), ("ask", "asked (square; green once you approved)"), ("deny", "stopped (cross)"), ("edit", "an edit (triangle above)"), ("muted", "waste: returned the same as last time (grey bar below)"), ("saved", "new information (blue dot below)")]))
            p.muted { "A green ring: the call ran fine; a dashed red ring: it failed. Below a call, where its output is known: a grey bar, it returned the same as the last time the same call ran (waste); a blue dot, something new (or the first time). The store keeps a session's last " (toolbrake_core::engine::MAX_LOG) " decisions." }
        }
        section.card aria-labelledby="h-near" {
            h2 #h-near { "Fingerprints near their gates" }
            @if near.is_empty() { p.muted { "None." } }
            ul #near {
                @for n in &near {
                    li { (bar(n["count"].as_u64().unwrap_or(0), n["limit"].as_u64().unwrap_or(0))) " " (n["doing"].as_str().unwrap_or("")) ": " code { (n["fingerprint"].as_str().unwrap_or("")) } }
                }
            }
        }
        h2 { "Recent decisions" }
        (timeline(&log))
        p #status aria-live="polite" {}
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
    let content = match info {
        None => {
            m! { h1 { "Session " code { (key) } } p.muted { "Not in the store (reset, expired, or never seen)." } }
        }
        Some(info) => body(&key, &session_json(&info, true)),
    };
    html(layout(&key, "session", content))
}
