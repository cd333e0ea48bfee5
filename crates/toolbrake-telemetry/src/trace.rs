//! OpenTelemetry spans of every decision, exported over OTLP/HTTP (protobuf): an
//! [`Observer`] of the session service ([`TraceObserver`]) and its configuration (the
//! standard `OTEL_*` environment, or the `[telemetry]` table of `toolbrake.toml`).
//!
//! Off unless an endpoint is configured: without one no exporter is built, no thread is
//! started and nothing touches the network ([`Tracing::resolve`] returns `None`).
//!
//! A judged call is a span named `execute_tool {tool}` (the GenAI semantic conventions for
//! tool execution), kind INTERNAL, with `gen_ai.operation.name = execute_tool`,
//! `gen_ai.tool.name`, `gen_ai.tool.call.id` (both redacted and cut, as the log and the
//! metrics show them) and toolbrake's attributes (`toolbrake.*`: the verdict, the engine,
//! the nearest gate's track, fingerprint kind, count and limit; the session only as a
//! hash). Asks, answers and outcomes are events on it. Never an argument value, a preview
//! or an output, unless `record_arguments = true`, and then the canonical arguments
//! redacted and cut. A denial is a successful judgement (status unset); a tool that failed
//! sets the status to error with `error.type` = the failure's reason and a status saying
//! only what kind of failure it was (and its exit code or HTTP status), never text the
//! output carried.
//!
//! An endpoint is shown to people (errors, logs, `config check`) only through
//! [`endpoint_for_people`]: no user or password, no query value.
//!
//! Where a span starts and ends ([`Mode`]): in a long-running process (`serve`, `mcp`) it
//! covers the call from its judgement to its recorded outcome (open spans are kept in a
//! bounded map, ended when evicted); in a hook (one process per event) the judgement span
//! ends in the pre hook, and the post hook's outcome is a short child span of it: both
//! processes derive the judgement span's id from the session and the call id (and the
//! trace id too when the host sent no `traceparent`), so the two meet in one trace.

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, Span};
use opentelemetry_sdk::Resource;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};
use toolbrake_core::breaker::failure::Failure;
use toolbrake_core::engine::{Decision, Verdict};
use toolbrake_core::redact::redact_cut;
use toolbrake_core::{Outcome, PostDecision};
use toolbrake_session::{Observed, ObservedKind, Observer};

mod settings;

pub use settings::{
    endpoint_for_people, telemetry_table, TelemetrySettings, Tracing, MAX_ARGUMENT_CHARS,
};

/// Where spans begin and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A long-running process (`serve`, `mcp`): a span covers its call from judgement to
    /// outcome.
    Process,
    /// One process per event (hooks): the judgement span ends at once; the outcome is its
    /// own short child span, found by the ids both processes derive.
    Event,
}

/// Open spans a long-running process keeps (the oldest is ended when a new one needs room).
pub const MAX_OPEN_SPANS: usize = 4096;

/// Characters of a tool name kept in a span's name and attribute.
const MAX_TOOL_CHARS: usize = 128;

/// Characters of a call id kept in a span's attribute.
const MAX_CALL_ID_CHARS: usize = 256;

/// A call id as a span carries it: redacted (an id is the host's text, and may be a
/// credential) and cut.
fn call_id_value(id: &str) -> String {
    redact_cut(id, MAX_CALL_ID_CHARS)
}

/// What a failed call's span status says: the kind of failure, with its exit code or
/// HTTP status when it has one (`the command exited 2`), never text the output carried
/// (a signal's or an exception's name, a description): outputs are never recorded.
fn failure_status(f: &Failure) -> String {
    let number = f.detail.as_deref().filter(|d| {
        let digits = d.strip_prefix('-').unwrap_or(d);
        !digits.is_empty() && digits.len() <= 20 && digits.bytes().all(|b| b.is_ascii_digit())
    });
    Failure {
        reason: f.reason,
        detail: number.map(str::to_string),
    }
    .to_string()
}

/// Characters of an error or failure description kept in a span's status.
const MAX_STATUS_CHARS: usize = 256;

#[derive(Default)]
struct Open {
    spans: HashMap<(String, String), (u64, Span)>,
    order: VecDeque<((String, String), u64)>,
    next: u64,
}

/// An [`Observer`] that makes an OpenTelemetry span of every judged call and exports it
/// over OTLP/HTTP from the SDK's batch thread (no async runtime needed).
pub struct TraceObserver {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    mode: Mode,
    record_arguments: bool,
    open: Mutex<Open>,
}

impl std::fmt::Debug for TraceObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceObserver")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl TraceObserver {
    /// Builds the exporter and the SDK's batch processor (a thread). `export_timeout`
    /// bounds one export request (hooks: short). An error names what is wrong (a bad
    /// endpoint), never a header value.
    pub fn new(tracing: &Tracing, mode: Mode, export_timeout: Duration) -> Result<Self, String> {
        let headers: HashMap<String, String> = tracing.headers.clone().into_iter().collect();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(tracing.traces_endpoint.clone())
            .with_timeout(export_timeout)
            .with_headers(headers)
            .build()
            .map_err(|e| {
                let endpoint = &tracing.traces_endpoint;
                let shown = endpoint_for_people(endpoint);
                // The exporter's own text names the endpoint whole: never shown.
                let why = match e {
                    opentelemetry_otlp::ExporterBuildError::InvalidUri(_, why) => {
                        format!("not a valid URL ({why})")
                    }
                    e => redact_cut(&e.to_string().replace(endpoint.as_str(), &shown), 512),
                };
                format!("cannot export traces to {shown}: {why}")
            })?;
        let resource = Resource::builder()
            .with_service_name(tracing.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("toolbrake");
        Ok(TraceObserver {
            provider,
            tracer,
            mode,
            record_arguments: tracing.record_arguments,
            open: Mutex::new(Open::default()),
        })
    }

    /// Ends the spans still open (marked `toolbrake.span.unfinished`) and exports what is
    /// left, waiting at most `deadline`; what is not sent by then is dropped.
    pub fn shutdown(&self, deadline: Duration) {
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, (_, mut span)) in open.spans {
            span.set_attribute(KeyValue::new("toolbrake.span.unfinished", true));
            span.end();
        }
        let _ = self.provider.shutdown_with_timeout(deadline);
    }

    fn judged(&self, ev: &Observed<'_>, call: &toolbrake_core::Call<'_>, decision: &Decision) {
        let now = SystemTime::now();
        let start = now.checked_sub(ev.elapsed).unwrap_or(now);
        // Redacted as the log and the metrics show it (a tool may be named by its host
        // after anything), then cut.
        let tool = redact_cut(call.tool, MAX_TOOL_CHARS);
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.clone()),
            KeyValue::new("gen_ai.tool.call.id", call_id_value(call.id)),
            KeyValue::new("toolbrake.session.hash", session_hash(ev.session)),
        ];
        attrs.extend(decision_attributes(decision));
        if self.record_arguments {
            if let Ok(json) = toolbrake_core::canonical::canonical_json(call.args) {
                attrs.push(KeyValue::new(
                    "gen_ai.tool.call.arguments",
                    redact_cut(&json, MAX_ARGUMENT_CHARS),
                ));
            }
        }
        let host = parse_traceparent(ev.traceparent);
        let mut builder = self
            .tracer
            .span_builder(format!("execute_tool {tool}"))
            .with_kind(SpanKind::Internal)
            .with_start_time(start)
            .with_attributes(attrs);
        if self.mode == Mode::Event {
            let trace = host
                .as_ref()
                .map(|h| h.trace_id())
                .unwrap_or_else(|| derived_trace_id(ev.session, call.id));
            builder = builder
                .with_trace_id(trace)
                .with_span_id(derived_span_id(trace, ev.session, call.id));
        }
        let parent = host.map_or_else(Context::new, |h| Context::new().with_remote_span_context(h));
        let mut span = builder.start_with_context(&self.tracer, &parent);
        if decision.verdict == Verdict::Ask {
            span.add_event(
                "toolbrake.ask",
                decision
                    .engine
                    .map(|e| vec![KeyValue::new("toolbrake.engine", e)])
                    .unwrap_or_default(),
            );
        }
        if decision.verdict == Verdict::Deny || self.mode == Mode::Event {
            span.end_with_timestamp(now);
            return;
        }
        self.keep(ev.session, call.id, span);
    }

    /// Keeps a span open until its call's outcome, ending the oldest when full.
    fn keep(&self, session: &str, call_id: &str, span: Span) {
        let key = (session.to_string(), call_id.to_string());
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let seq = open.next;
        open.next += 1;
        if let Some((_, mut old)) = open.spans.insert(key.clone(), (seq, span)) {
            old.set_attribute(KeyValue::new("toolbrake.span.unfinished", true));
            old.end();
        }
        open.order.push_back((key, seq));
        while open.spans.len() > MAX_OPEN_SPANS {
            let Some((k, s)) = open.order.pop_front() else {
                break;
            };
            if open.spans.get(&k).is_some_and(|(seq, _)| *seq == s) {
                if let Some((_, mut span)) = open.spans.remove(&k) {
                    span.set_attribute(KeyValue::new("toolbrake.span.evicted", true));
                    span.end();
                }
            }
        }
        // Entries of spans already ended (or replaced) are dropped from the front.
        while let Some((k, s)) = open.order.front() {
            if open.spans.get(k).is_some_and(|(seq, _)| seq == s) {
                break;
            }
            open.order.pop_front();
        }
    }

    fn take(&self, session: &str, call_id: &str) -> Option<Span> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.spans
            .remove(&(session.to_string(), call_id.to_string()))
            .map(|(_, s)| s)
    }

    fn put_back(&self, session: &str, call_id: &str, span: Span) {
        self.keep(session, call_id, span);
    }

    /// A short span of its own for an event whose judgement span is not open here (a
    /// hook's post, or a span evicted): a child of the judgement span in hook mode, else
    /// of the host's trace.
    fn detached(&self, ev: &Observed<'_>, name: &'static str, call_id: &str) -> Span {
        let now = SystemTime::now();
        let host = parse_traceparent(ev.traceparent);
        let parent = match self.mode {
            Mode::Event => {
                let trace = host
                    .as_ref()
                    .map(|h| h.trace_id())
                    .unwrap_or_else(|| derived_trace_id(ev.session, call_id));
                let flags = host
                    .as_ref()
                    .map(|h| h.trace_flags())
                    .unwrap_or(TraceFlags::SAMPLED);
                Some(SpanContext::new(
                    trace,
                    derived_span_id(trace, ev.session, call_id),
                    flags,
                    true,
                    TraceState::default(),
                ))
            }
            Mode::Process => host,
        };
        let parent =
            parent.map_or_else(Context::new, |p| Context::new().with_remote_span_context(p));
        self.tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(now.checked_sub(ev.elapsed).unwrap_or(now))
            .with_attributes(vec![
                KeyValue::new("gen_ai.tool.call.id", call_id_value(call_id)),
                KeyValue::new("toolbrake.session.hash", session_hash(ev.session)),
            ])
            .start_with_context(&self.tracer, &parent)
    }

    fn answered(&self, ev: &Observed<'_>, call_id: &str, approved: bool, decision: &Decision) {
        let mut span = self
            .take(ev.session, call_id)
            .unwrap_or_else(|| self.detached(ev, "toolbrake.answer", call_id));
        span.add_event(
            "toolbrake.answer",
            vec![
                KeyValue::new("toolbrake.approved", approved),
                KeyValue::new("toolbrake.verdict", decision.verdict.as_str()),
            ],
        );
        if decision.runs() && self.mode == Mode::Process {
            self.put_back(ev.session, call_id, span);
        } else {
            span.end();
        }
    }

    fn recorded(&self, ev: &Observed<'_>, call_id: &str, outcome: &Outcome, post: &PostDecision) {
        let open = self.take(ev.session, call_id);
        if open.is_none() && post.ignored.is_some() {
            // A denied call's result: its span ended at the denial.
            return;
        }
        let mut span = open.unwrap_or_else(|| self.detached(ev, "toolbrake.outcome", call_id));
        let (result, failure) = if outcome.is_aborted() {
            ("aborted", None)
        } else if let Some(f) = &post.failure {
            ("failed", Some(f))
        } else {
            ("ok", None)
        };
        let mut attrs = vec![KeyValue::new("toolbrake.outcome", result)];
        if let Some(f) = failure {
            attrs.push(KeyValue::new("toolbrake.failure.reason", f.reason.as_str()));
            span.set_attribute(KeyValue::new("error.type", f.reason.as_str()));
            span.set_status(Status::error(failure_status(f)));
        }
        if let Some(a) = post.advisories.first() {
            attrs.push(KeyValue::new("toolbrake.advisory.stage", stage_name(a)));
        }
        span.add_event("toolbrake.outcome", attrs);
        span.end();
    }

    fn settled(&self, ev: &Observed<'_>, settled: &[toolbrake_core::Settled]) {
        for s in settled {
            if let Some(mut span) = self.take(ev.session, &s.id) {
                span.add_event(
                    "toolbrake.answer",
                    vec![
                        KeyValue::new("toolbrake.approved", false),
                        KeyValue::new("toolbrake.verdict", s.verdict.as_str()),
                        KeyValue::new("toolbrake.settled", true),
                    ],
                );
                span.end();
            }
        }
    }

    /// A short error span for what toolbrake itself could not do.
    fn trouble(&self, ev: &Observed<'_>, name: String, attrs: Vec<KeyValue>, text: &str) {
        let host = parse_traceparent(ev.traceparent);
        let parent = host.map_or_else(Context::new, |h| Context::new().with_remote_span_context(h));
        let now = SystemTime::now();
        let mut span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(now.checked_sub(ev.elapsed).unwrap_or(now))
            .with_attributes(attrs)
            .start_with_context(&self.tracer, &parent);
        span.set_status(Status::error(redact_cut(text, MAX_STATUS_CHARS)));
        span.end();
    }
}

impl Observer for TraceObserver {
    fn observe(&self, ev: &Observed<'_>) {
        match &ev.kind {
            ObservedKind::Judged { call, decision } => self.judged(ev, call, decision),
            ObservedKind::Answered {
                call_id,
                approved,
                decision,
            } => self.answered(ev, call_id, *approved, decision),
            ObservedKind::Recorded {
                call_id,
                outcome,
                post,
            } => self.recorded(ev, call_id, outcome, post),
            ObservedKind::Settled { settled } => self.settled(ev, settled),
            ObservedKind::Failed { operation, error } => {
                let kind = match error {
                    toolbrake_session::SessionError::Store(_) => "store",
                    toolbrake_session::SessionError::Engine(_) => "engine",
                };
                self.trouble(
                    ev,
                    format!("toolbrake {operation}"),
                    vec![
                        KeyValue::new("toolbrake.operation", *operation),
                        KeyValue::new("error.type", kind),
                    ],
                    &error.to_string(),
                );
            }
            ObservedKind::Unjudged { unjudged } => self.trouble(
                ev,
                "toolbrake unjudged".into(),
                vec![
                    KeyValue::new("toolbrake.unjudged.refused", unjudged.refuse),
                    KeyValue::new("error.type", "unjudged"),
                ],
                &unjudged.note,
            ),
        }
    }
}

/// The first 16 hex characters of the session key's SHA-256: correlates a session's spans
/// without showing its key.
fn session_hash(session: &str) -> String {
    hex::encode(&Sha256::digest(session.as_bytes())[..8])
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// The trace of a call whose host sent no `traceparent`, the same in every process.
fn derived_trace_id(session: &str, call_id: &str) -> TraceId {
    let d = digest(&[b"toolbrake trace", session.as_bytes(), call_id.as_bytes()]);
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[15] |= 1; // never the invalid all-zero id
    TraceId::from_bytes(b)
}

/// The judgement span's id of a call in a trace, the same in every process.
fn derived_span_id(trace: TraceId, session: &str, call_id: &str) -> SpanId {
    let d = digest(&[
        b"toolbrake span",
        &trace.to_bytes(),
        session.as_bytes(),
        call_id.as_bytes(),
    ]);
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    b[7] |= 1;
    SpanId::from_bytes(b)
}

/// A W3C `traceparent` as the remote parent, or `None` when absent or invalid (the W3C
/// rule: an invalid header is ignored and a new trace starts).
pub fn parse_traceparent(tp: Option<&str>) -> Option<SpanContext> {
    let tp = tp?.trim();
    let mut parts = tp.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex_lower = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !hex_lower(version, 2)
        || version == "ff"
        || !hex_lower(trace, 32)
        || !hex_lower(span, 16)
        || !hex_lower(flags, 2)
    {
        return None;
    }
    // Version 00 has exactly four fields; a later version may append more.
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ))
}

fn stage_name(a: &toolbrake_core::breaker::Advisory) -> &'static str {
    match a.stage {
        toolbrake_core::breaker::Stage::Warn => "warn",
        toolbrake_core::breaker::Stage::Summarize => "summarize",
        toolbrake_core::breaker::Stage::Failure => "failure",
        toolbrake_core::breaker::Stage::Struggle => "struggle",
    }
}

/// The verdict, the engine, and the gate nearest to closing ([`crate::nearest_gate`]).
fn decision_attributes(d: &Decision) -> Vec<KeyValue> {
    let mut attrs = vec![KeyValue::new("toolbrake.verdict", d.verdict.as_str())];
    if let Some(e) = d.engine {
        attrs.push(KeyValue::new("toolbrake.engine", e));
    }
    if let Some(c) = d.code {
        attrs.push(KeyValue::new("toolbrake.code", c));
    }
    if let Some(g) = crate::nearest_gate(d) {
        attrs.push(KeyValue::new("toolbrake.track", g.track));
        if let Some(k) = g.kind {
            attrs.push(KeyValue::new("toolbrake.fingerprint.kind", k.as_str()));
        }
        attrs.push(KeyValue::new("toolbrake.gate.count", i64::from(g.count)));
        if let Some(limit) = g.limit {
            attrs.push(KeyValue::new("toolbrake.gate.limit", i64::from(limit)));
        }
    }
    if let Some(a) = d.advisories.first() {
        attrs.push(KeyValue::new("toolbrake.advisory.stage", stage_name(a)));
    }
    attrs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_traceparent_is_ignored() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = parse_traceparent(Some(good)).unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(sc.is_sampled() && sc.is_remote());
        for bad in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(Some(bad)).is_none(), "{bad}");
        }
        assert!(parse_traceparent(Some(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later"
        ))
        .is_some());
    }
}
