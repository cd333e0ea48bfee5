//! The long-running commands' log on stderr: their text lines, or with `--log-format json`
//! one JSON object per line: those same lines (`level`, `message`) and, as an
//! [`Observer`], one line per event of the session service (`event`, the tool redacted,
//! the call id, verdict, engine, track, fingerprint kind, nearest gate and its count,
//! `elapsed_ms`, and the trace id of the host's `traceparent`). Never an argument value, a
//! preview or an output. Every line is redacted, a tool's name it quotes included; a text
//! line also has its control characters escaped ([`log_line`]), so that no name can end it
//! or forge the next. A closed or broken stderr is ignored, never a panic.

use serde_json::{json, Map, Value};
use std::io::Write;
use std::sync::Mutex;
use std::time::SystemTime;
use toolbrake_core::redact::{log_line, redact};
use toolbrake_core::Decision;
use toolbrake_session::{Observed, ObservedKind, Observer, SessionError};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Plain text lines (`toolbrake: …`), and no line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// How much a line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// What happened, as it should.
    Info,
    /// Something an operator may want to act on (an invalid configuration kept out, a
    /// call that could not be judged).
    Warn,
    /// The command cannot go on as asked.
    Error,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// Writes a text line to stderr as the text log does ([`log_line`]: redacted, control
/// characters escaped), ignoring a closed stderr.
pub fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", log_line(line));
}

/// The log of a long-running command.
pub struct Log {
    format: Format,
    out: Mutex<Box<dyn Write + Send>>,
}

impl Log {
    /// A log on stderr.
    pub fn stderr(format: Format) -> Self {
        Self::to_writer(format, Box::new(std::io::stderr()))
    }

    /// A log written to `out` (each line written whole, then flushed).
    pub fn to_writer(format: Format, out: Box<dyn Write + Send>) -> Self {
        Log {
            format,
            out: Mutex::new(out),
        }
    }

    /// The format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// One of the command's own lines (`message` as its text form prints it, e.g.
    /// `toolbrake: reloaded …`), redacted (a tool's name or a server's error in it too)
    /// and, as text, with its control characters escaped: always one line.
    pub fn line(&self, level: Level, message: &str) {
        match self.format {
            Format::Text => self.write(&log_line(message)),
            Format::Json => {
                let mut m = Map::new();
                m.insert("level".into(), level.as_str().into());
                m.insert("message".into(), redact(message).into());
                self.write_json(m);
            }
        }
    }

    fn write_json(&self, fields: Map<String, Value>) {
        let mut m = Map::new();
        m.insert("ts".into(), timestamp().into());
        m.extend(fields);
        self.write(&Value::Object(m).to_string());
    }

    fn write(&self, line: &str) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        // A closed stderr (the reader went away) is not the command's failure.
        let _ = out.write_all(&buf).and_then(|()| out.flush());
    }
}

/// Now, RFC 3339 in UTC with milliseconds.
fn timestamp() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// The trace id of a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`), read by the
/// same rule the spans follow ([`crate::trace::parse_traceparent`]): an invalid one names
/// no trace.
pub fn trace_id(traceparent: &str) -> Option<String> {
    crate::trace::parse_traceparent(Some(traceparent)).map(|c| c.trace_id().to_string())
}

/// What a decision says of the gate nearest to stopping the call ([`crate::nearest_gate`]):
/// its track, the kind of its fingerprint, the gate and the count that reached it.
fn nearest(decision: &Decision, m: &mut Map<String, Value>) {
    let Some(g) = crate::nearest_gate(decision) else {
        return;
    };
    m.insert("track".into(), g.track.into());
    if let Some(k) = g.kind {
        m.insert("fingerprint_kind".into(), k.as_str().into());
    }
    if let Some(limit) = g.limit {
        m.insert("gate".into(), limit.into());
    }
    m.insert("count".into(), g.count.into());
}

impl Observer for Log {
    fn observe(&self, event: &Observed<'_>) {
        if self.format != Format::Json {
            return;
        }
        let mut m = Map::new();
        let mut level = Level::Info;
        let name = match &event.kind {
            ObservedKind::Judged { call, decision } => {
                m.insert("tool".into(), redact(call.tool).into());
                m.insert("call_id".into(), redact(call.id).into());
                m.insert("verdict".into(), decision.verdict.as_str().into());
                if let Some(e) = decision.engine {
                    m.insert("engine".into(), e.into());
                }
                nearest(decision, &mut m);
                "judged"
            }
            ObservedKind::Answered {
                call_id,
                approved,
                decision,
            } => {
                m.insert("call_id".into(), redact(call_id).into());
                m.insert("approved".into(), (*approved).into());
                m.insert("verdict".into(), decision.verdict.as_str().into());
                if let Some(e) = decision.engine {
                    m.insert("engine".into(), e.into());
                }
                "answered"
            }
            ObservedKind::Recorded { call_id, post, .. } => {
                m.insert("call_id".into(), redact(call_id).into());
                m.insert("failed".into(), post.failure.is_some().into());
                if let Some(why) = post.ignored {
                    m.insert("ignored".into(), why.into());
                }
                "recorded"
            }
            ObservedKind::Settled { settled } => {
                let ids: Vec<Value> = settled.iter().map(|s| redact(&s.id).into()).collect();
                m.insert("call_ids".into(), ids.into());
                m.insert("verdict".into(), "deny".into());
                "settled"
            }
            ObservedKind::Failed { operation, error } => {
                level = Level::Warn;
                m.insert("operation".into(), (*operation).into());
                let cause = match error {
                    SessionError::Store(_) => "store",
                    SessionError::Engine(_) => "engine",
                };
                m.insert("cause".into(), cause.into());
                m.insert("error".into(), redact(&error.to_string()).into());
                "failed"
            }
            ObservedKind::Unjudged { unjudged } => {
                level = Level::Warn;
                m.insert("refused".into(), unjudged.refuse.into());
                m.insert("message".into(), redact(&unjudged.note).into());
                "unjudged"
            }
        };
        m.insert(
            "elapsed_ms".into(),
            json!((event.elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0),
        );
        if let Some(t) = event.traceparent.and_then(trace_id) {
            m.insert("trace_id".into(), t.into());
        }
        let mut head = Map::new();
        head.insert("level".into(), level.as_str().into());
        head.insert("event".into(), name.into());
        head.extend(m);
        self.write_json(head);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A writer whose reader went away.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
    }

    #[test]
    fn kinds_and_trace_ids() {
        use toolbrake_core::breaker::Kind;
        assert_eq!(
            Kind::named("exact:bash:{\"command\":\"ls\"}").map(Kind::as_str),
            Some("exact")
        );
        assert_eq!(
            Kind::named("host:example.com").map(Kind::as_str),
            Some("host")
        );
        assert_eq!(Kind::named("no kind here").map(Kind::as_str), None);
        assert_eq!(Kind::named("Bearer abc:def").map(Kind::as_str), None);
        assert_eq!(
            trace_id("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(trace_id("garbage"), None);
    }

    /// A line quoting a name that holds a line break, terminal escapes and a secret: as
    /// text it stays one line with its controls escaped, and the secret shows in neither
    /// format.
    #[test]
    fn a_quoted_name_can_neither_break_a_line_nor_show_a_secret() {
        let message = "toolbrake mcp: could not judge a call of x\ntoolbrake: reloaded /etc/t.toml\u{1b}[2J\u{202e} ghp_FakeGithub0123456789abcdefghijkl: locked";
        let buf = Buf::default();
        Log::to_writer(Format::Text, Box::new(buf.clone())).line(Level::Warn, message);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "toolbrake mcp: could not judge a call of x\\ntoolbrake: reloaded /etc/t.toml\\u{1b}[2J\\u{202e} [REDACTED]: locked\n"
        );
        let buf = Buf::default();
        Log::to_writer(Format::Json, Box::new(buf.clone())).line(Level::Warn, message);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let v: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(
            v["message"],
            "toolbrake mcp: could not judge a call of x\ntoolbrake: reloaded /etc/t.toml\u{1b}[2J\u{202e} [REDACTED]: locked"
        );
    }

    #[test]
    fn json_lines_and_a_closed_stderr() {
        let buf = Buf::default();
        let log = Log::to_writer(Format::Json, Box::new(buf.clone()));
        log.line(Level::Warn, "toolbrake: something \"quoted\"\nand more");
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let v: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["message"], "toolbrake: something \"quoted\"\nand more");
        assert!(v["ts"].as_str().unwrap().ends_with('Z'));

        let text_log = Log::to_writer(Format::Text, Box::new(buf.clone()));
        text_log.line(Level::Info, "toolbrake: plain");
        let all = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(all.ends_with("\ntoolbrake: plain\n"), "{all}");

        // Nothing to read it: no panic, nothing else happens.
        Log::to_writer(Format::Json, Box::new(Closed)).line(Level::Error, "gone");
    }
}
