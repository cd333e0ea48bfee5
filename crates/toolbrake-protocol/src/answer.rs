//! The protocol's output lines: each answer (a decision, a result, a session event, an
//! error) as the one JSON line written for it, and the wording of the errors about call ids.

use serde::Serialize;
use toolbrake_core::{Advisory, Decision, Hit, Settled, Verdict};

#[derive(Serialize)]
pub(crate) struct HitOut<'a> {
    pub(crate) fingerprint: &'a str,
    pub(crate) count: u32,
    pub(crate) limit: u32,
    pub(crate) track: &'static str,
}

#[derive(Serialize)]
pub(crate) struct SettledOut<'a> {
    pub(crate) id: &'a str,
    pub(crate) verdict: &'static str,
}

#[derive(Serialize)]
pub(crate) struct DecisionOut<'a> {
    pub(crate) id: &'a str,
    pub(crate) verdict: &'static str,
    pub(crate) engine: Option<&'static str>,
    pub(crate) code: Option<&'static str>,
    pub(crate) message: Option<&'a str>,
    pub(crate) hits: Vec<HitOut<'a>>,
    pub(crate) advisories: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) settled: Vec<SettledOut<'a>>,
    /// Present when toolbrake could not judge the call (its store failed) and let it run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) degraded: Option<&'a str>,
}

#[derive(Serialize)]
pub(crate) struct FailureOut<'a> {
    pub(crate) reason: &'static str,
    pub(crate) detail: Option<&'a str>,
}

#[derive(Serialize)]
pub(crate) struct ResultOut<'a> {
    pub(crate) id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ignored: Option<&'static str>,
    pub(crate) advisories: Vec<&'a str>,
    pub(crate) failure: Option<FailureOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) settled: Vec<SettledOut<'a>>,
}

#[derive(Serialize)]
pub(crate) struct SessionOut<'a> {
    pub(crate) session: &'a str,
    pub(crate) ok: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) settled: Vec<SettledOut<'a>>,
}

#[derive(Serialize)]
pub(crate) struct ErrorBody<'a> {
    pub(crate) line: u64,
    pub(crate) message: &'a str,
}

#[derive(Serialize)]
pub(crate) struct ErrorOut<'a> {
    pub(crate) error: ErrorBody<'a>,
}

pub(crate) fn hits_out(hits: &[Hit]) -> Vec<HitOut<'_>> {
    hits.iter()
        .map(|h| HitOut {
            fingerprint: &h.fingerprint,
            count: h.count,
            limit: h.limit,
            track: h.track.as_str(),
        })
        .collect()
}

pub(crate) fn settled_out(s: &[Settled]) -> Vec<SettledOut<'_>> {
    s.iter()
        .map(|x| SettledOut {
            id: &x.id,
            verdict: x.verdict.as_str(),
        })
        .collect()
}

pub(crate) fn texts(a: &[Advisory]) -> Vec<&str> {
    a.iter().map(|x| x.text.as_str()).collect()
}

pub(crate) fn to_line<T: Serialize>(v: &T) -> String {
    // Most answers are 100 to 250 bytes: one allocation, not a first one of 128 grown.
    let mut out = Vec::with_capacity(256);
    serde_json::to_writer(&mut out, v).expect("output structs always serialise");
    // serde_json writes only valid UTF-8.
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

pub(crate) fn session_line(session: &str, settled: &[Settled]) -> String {
    to_line(&SessionOut {
        session,
        ok: true,
        settled: settled_out(settled),
    })
}

pub(crate) fn decision_line(d: &Decision) -> String {
    to_line(&DecisionOut {
        id: &d.id,
        verdict: d.verdict.as_str(),
        engine: if d.verdict == Verdict::Allow {
            None
        } else {
            d.engine
        },
        code: d.code,
        message: d.message.as_deref(),
        hits: hits_out(&d.hits),
        advisories: texts(&d.advisories),
        settled: settled_out(&d.settled),
        degraded: None,
    })
}

/// "call id … is open in N sessions (…)": the sessions listed in sorted order, so that the
/// message does not depend on how the sessions were spread over processors.
pub(crate) fn ambiguous(id: &str, keys: &[&String]) -> String {
    let mut sorted = keys.to_vec();
    sorted.sort();
    format!(
        "call id {:?} is open in {} sessions ({}); name the session: add \"session\" to this event",
        clip(id),
        keys.len(),
        sorted
            .iter()
            .take(4)
            .map(|k| format!("{:?}", clip(k)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

pub(crate) fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}
