//! The neutral event a host's payload reads as ([`Event`]), the call it names
//! ([`HostCall`]) and what the session service makes of it ([`judge`], [`record`]); with the
//! pieces hosts share to read a payload and write an answer (a call's arguments, a result's
//! text, a clipped string, a file the payload names).

use crate::HookError;
use serde_json::{json, Value};
use toolbrake_core::{Call, EngineError, Outcome, Verdict};
use toolbrake_session::{SessionError, Sessions};
use toolbrake_store::Store;

/// The session service a host's events go to, over whichever store this invocation has.
pub(crate) type Service<'a> = Sessions<'a, dyn Store + 'a>;

/// What reading one event gives: the neutral event, or why the payload cannot be used.
pub(crate) type Reading<'p> = Result<Event<'p>, HookError<'static>>;

/// Host limit on a hook's output strings (Claude Code caps them at 10,000 characters).
const MAX_OUTPUT_CHARS: usize = 9_500;

/// What a host's event means, in no host's words.
pub(crate) enum Event<'p> {
    /// A call about to run: judge it.
    Pre(HostCall<'p>),
    /// A call that ran, and what it did: record it (an ask still pending was approved).
    Post(HostCall<'p>, Outcome),
    /// A human's new message: the session and its sub-agents start afresh.
    UserMessage,
    /// Calls that never got an outcome are closed; `turn_over`: the agent stopped.
    Close {
        /// Whether the whole turn is over (not only a batch or a sub-agent).
        turn_over: bool,
    },
    /// The session is over: it is forgotten.
    End,
    /// Nothing toolbrake acts on.
    Other,
}

/// What the session service decided about a call, with the text each verdict carries
/// (advisories joined), for a host to word in its answer.
pub(crate) enum Judged {
    Allow,
    Advise(String),
    Ask(String),
    Deny(String),
}

/// One tool call as a host names it: its session key, the host's call id when it sends
/// one, the tool and its arguments. Each host builds these from its payloads; what to do
/// with them is the session service's.
pub(crate) struct HostCall<'p> {
    pub(crate) key: String,
    pub(crate) id: Option<&'p str>,
    pub(crate) tool: &'p str,
    pub(crate) args: std::borrow::Cow<'p, Value>,
    /// Without `id`: ids the host's own records give this call, most likely first (Factory
    /// Droid's transcript); the first (pre) or the first still open (post) is used.
    pub(crate) alt_ids: Vec<String>,
}

/// The id of a call whose payload carries none: the call's hash prefix, so its post event
/// can find it, plus what makes this invocation unique (identical calls are still counted
/// one by one).
fn derived_prefix(tool: &str, args: &Value) -> String {
    let h = toolbrake_core::canonical::call_hash(tool, args).unwrap_or_default();
    format!("h-{}-", toolbrake_core::canonical::hash_prefix(&h))
}

impl HostCall<'_> {
    /// The call id of a pre event: the host's, else a fresh derived one.
    fn pre_id(&self) -> String {
        match self
            .id
            .filter(|i| !i.is_empty())
            .or(self.alt_ids.first().map(String::as_str))
        {
            Some(id) => id.to_string(),
            None => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                format!(
                    "{}{nanos:x}.{:x}",
                    derived_prefix(self.tool, &self.args),
                    std::process::id()
                )
            }
        }
    }

    /// The call id of a post event: the host's, else the oldest open call derived from
    /// the same tool and arguments.
    fn post_id(&self, st: &toolbrake_core::SessionState) -> String {
        match self.id.filter(|i| !i.is_empty()) {
            Some(id) => id.to_string(),
            None => {
                if let Some(id) = self
                    .alt_ids
                    .iter()
                    .find(|a| st.open_call_ids().any(|o| o == a.as_str()))
                {
                    return id.clone();
                }
                let prefix = derived_prefix(self.tool, &self.args);
                st.open_call_ids()
                    .find(|id| id.starts_with(&prefix))
                    .map(str::to_string)
                    .unwrap_or(prefix)
            }
        }
    }
}

/// Judges a call before it runs.
pub(crate) fn judge(
    sessions: &Service<'_>,
    c: &HostCall<'_>,
) -> Result<Judged, HookError<'static>> {
    let id = c.pre_id();
    let call = Call {
        session: &c.key,
        id: &id,
        tool: c.tool,
        args: &c.args,
    };
    let d = sessions.pre(&c.key, &call)?;
    let message = d.message.unwrap_or_default();
    Ok(match d.verdict {
        Verdict::Allow => Judged::Allow,
        Verdict::Advise => Judged::Advise(
            d.advisories
                .iter()
                .map(|a| a.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n"),
        ),
        Verdict::Ask => Judged::Ask(message),
        Verdict::Deny => Judged::Deny(message),
    })
}

/// Records what a call that ran did (an ask still pending for it was approved); returns
/// the advisories for the model, joined, if any.
pub(crate) fn record(
    sessions: &Service<'_>,
    c: &HostCall<'_>,
    outcome: &Outcome,
) -> Result<Option<String>, HookError<'static>> {
    let post = match sessions.post_ran(&c.key, |st| c.post_id(st), outcome) {
        Ok(p) => p,
        // A call this hook never saw (installed mid-call, or already closed): nothing to do.
        Err(SessionError::Engine(EngineError::UnknownCall(_))) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if post.advisories.is_empty() {
        return Ok(None);
    }
    let text: Vec<&str> = post.advisories.iter().map(|a| a.text.as_str()).collect();
    Ok(Some(text.join("\n\n")))
}

/// A text cut to what the hosts show (with a mark saying it was cut).
pub(crate) fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_OUTPUT_CHARS {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX_OUTPUT_CHARS).collect();
        t.push_str("… (cut)");
        t
    }
}

/// A string field of a payload; an empty one counts as missing.
pub(crate) fn str_field<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Arguments a host may send as a JSON text instead of an object.
pub(crate) fn args_of(v: Option<&Value>) -> std::borrow::Cow<'_, Value> {
    match v {
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(parsed) if parsed.is_object() => std::borrow::Cow::Owned(parsed),
            _ => std::borrow::Cow::Owned(json!({ "input": s })),
        },
        Some(v) if !v.is_null() => std::borrow::Cow::Borrowed(v),
        _ => std::borrow::Cow::Owned(json!({})),
    }
}

/// The text a tool's result shows the model, from the shapes hosts report it in.
pub(crate) fn response_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => {
            if let Some(content) = o.get("content") {
                return response_text(content);
            }
            let known = ["stdout", "stderr", "output", "error"];
            if !known.iter().any(|k| o.contains_key(*k)) {
                // A structured result with no text field (a file read, a search): its
                // whole JSON is what the model saw, and what tells new output from old.
                return v.to_string();
            }
            let parts: Vec<&str> = known
                .iter()
                .filter_map(|k| o.get(*k).and_then(Value::as_str))
                .filter(|s| !s.is_empty())
                .collect();
            parts.join("\n")
        }
        _ => String::new(),
    }
}

/// Opens a file the payload names, for reading, only if it is a regular file. Never blocks:
/// a FIFO, a socket or a device in its place is refused (opened without waiting for a
/// writer, then checked on the open handle, so a swap between check and open cannot hang
/// the hook).
pub fn open_regular(path: &std::path::Path) -> Option<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let f = opts.open(path).ok()?;
    f.metadata().ok().filter(|m| m.is_file())?;
    Some(f)
}
