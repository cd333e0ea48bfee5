//! The coding-agent hook adapter: one hook event (Claude Code's, Codex's or Gemini CLI's
//! command-hook JSON on stdin) in, the host's answer out. Also [`init`]: installing the
//! hooks into a host's settings file.
//!
//! Mapping (docs/decisions.md, "Hosts"):
//! - `PreToolUse` → [`Engine::pre`]. Deny: `permissionDecision: "deny"` with the model's
//!   text as the reason. Ask: `permissionDecision: "ask"` with the operator's reason.
//!   Advise: `additionalContext` only. Allow: no output (never `"allow"`, which would skip
//!   the user's own permission prompt).
//! - `PostToolUse` / `PostToolUseFailure` → [`Engine::post`] (an asked call that ran was
//!   approved); failure advisories as `additionalContext`.
//! - `UserPromptSubmit` → a new turn: the session and its sub-agents start afresh.
//! - `Stop`, `PostToolBatch`, `SubagentStop` → calls that never got an outcome are closed.
//! - `SessionEnd` → the session is forgotten. `SessionStart` and others: nothing.
//!
//! Gemini CLI's dialect maps the same way: `BeforeTool` (deny: `{"decision": "deny",
//! "reason"}`; an ask cannot be asked there, so it is refused fail-closed saying so;
//! advise: `additionalContext`), `AfterTool` (`tool_response` = `{llmContent,
//! returnDisplay, error?}`; advisories as `additionalContext`), `BeforeAgent` (a new
//! prompt), `AfterAgent` (the turn is over), `SessionEnd`. Its payloads carry no call id:
//! one is derived per invocation, and `AfterTool` pairs with the oldest open call of the
//! same tool and arguments, so parallel and identical calls are still counted one by one.
//!
//! The other hosts each have a small module translating their shapes onto the same
//! session service: [`copilot`] (GitHub Copilot CLI's camelCase hooks), [`cursor`]
//! (Cursor's `hooks.json`), [`cline`] (Cline's hook files, which can only cancel the
//! whole task). Qwen Code and Factory Droid speak Claude Code's dialect: Qwen Code reports
//! a tool's result as `{llmContent, returnDisplay}` (Gemini CLI's shape) and sends
//! `UserPromptSubmit` with an empty prompt between its own turns (not a human message);
//! Factory Droid's payloads are Claude Code's, without call ids or any event after a failed
//! call: both are read from its transcript (`factory.rs`).
//!
//! Session key: `session_id`, plus `#agent:<agent_id>` when a sub-agent calls.
//! When toolbrake itself fails, the hook never blocks by accident: no output (the host's
//! normal flow applies) and a warning, unless `fail_closed` is set, in which case a
//! `PreToolUse` is denied with a message saying why.
#![deny(missing_docs)]

pub mod cline;
pub mod copilot;
pub mod cursor;
mod factory;
pub mod former;
pub mod init;
mod salvage;

use serde_json::{json, Value};
use std::io::{Read, Seek, SeekFrom};
use toolbrake_core::{Call, Engine, EngineError, Outcome, Verdict};
use toolbrake_session::{Observer, SessionError, Sessions};
use toolbrake_store::Store;

/// The largest hook payload read (a `Write` of a large file arrives whole).
pub const MAX_PAYLOAD: usize = 64 << 20;
/// Host limit on a hook's output strings (Claude Code caps them at 10,000 characters).
const MAX_OUTPUT_CHARS: usize = 9_500;

/// Which host's dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Claude Code.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// Google Gemini CLI.
    Gemini,
    /// GitHub Copilot CLI (its documented camelCase hooks).
    Copilot,
    /// Qwen Code (Claude Code's dialect, Gemini CLI's tool results).
    Qwen,
    /// Cursor (`.cursor/hooks.json`).
    Cursor,
    /// Cline (hook files named by event).
    Cline,
    /// Factory Droid (Claude Code's dialect).
    Factory,
}

impl Dialect {
    /// The name on the command line: `claude`, `codex`, `gemini`, `copilot`, `qwen`,
    /// `cursor`, `cline` or `factory`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Claude => "claude",
            Dialect::Codex => "codex",
            Dialect::Gemini => "gemini",
            Dialect::Copilot => "copilot",
            Dialect::Qwen => "qwen",
            Dialect::Cursor => "cursor",
            Dialect::Cline => "cline",
            Dialect::Factory => "factory",
        }
    }

    /// Whether `event` judges a call before it runs (an empty event: not known).
    fn is_pre_event(self, event: &str) -> bool {
        match self {
            Dialect::Gemini => event == "BeforeTool",
            Dialect::Copilot => event == "preToolUse",
            Dialect::Cursor => cursor::PRE_EVENTS.contains(&event),
            Dialect::Cline => event == "tool_call" || event == "PreToolUse",
            _ => event == "PreToolUse",
        }
    }
}

/// What the hook process prints and logs. It always exits 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// The JSON to print on stdout, if any.
    pub stdout: Option<String>,
    /// Problems to report on stderr and in the log (never argument values).
    pub warnings: Vec<String>,
}

/// What the adapter needs.
pub struct Context<'a> {
    /// The engines.
    pub engine: &'a Engine,
    /// The store, or why there is none for this invocation.
    pub store: Result<&'a dyn Store, &'a Unavailable>,
    /// Refuse `PreToolUse` calls when toolbrake itself fails.
    pub fail_closed: bool,
    /// Told what the hook's event became (metrics, traces, logs).
    pub observer: Option<&'a dyn Observer>,
    /// The W3C `traceparent` of the agent's own trace (the hook's `TRACEPARENT`
    /// environment variable), for the observer.
    pub traceparent: Option<&'a str>,
}

/// Why a hook payload could not be used. Messages never quote the payload: it may
/// carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Reading stdin failed.
    #[error("cannot read the hook payload: {0}")]
    Unreadable(#[source] std::io::Error),
    /// More than [`MAX_PAYLOAD`] bytes arrived.
    #[error("the hook payload exceeds {MAX_PAYLOAD} bytes")]
    TooLarge,
    /// The bytes are not UTF-8.
    #[error("the hook payload is not valid UTF-8")]
    NotUtf8,
    /// The JSON nests deeper than the parser allows.
    #[error("the hook payload nests deeper than 128 levels")]
    TooDeep,
    /// The text is not JSON.
    #[error("the hook payload is not JSON (line {line}, column {column})")]
    NotJson {
        /// 1-based line of the first error.
        line: usize,
        /// 1-based column of the first error.
        column: usize,
    },
    /// A field every event carries is missing or empty.
    #[error("the payload has no session_id")]
    NoSessionId,
    /// A `PreToolUse` payload names no tool.
    #[error("PreToolUse without tool_name")]
    NoToolName,
    /// The payload does not name its event, and no event was given on the command line
    /// (GitHub Copilot CLI's hooks).
    #[error("the payload does not name its event: give it on the command line (`toolbrake hook copilot preToolUse`), as `toolbrake init copilot` does")]
    NoEvent,
}

/// Why this invocation has no store to judge with; the failure policy
/// (`[store] fail_closed`) decides what the host is told.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    /// The configuration file is broken (the message names the key, value and rule).
    #[error("configuration: {0}")]
    Configuration(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The payload was not read, so the store was not opened.
    #[error("the payload was not read")]
    PayloadUnread,
    /// The store could not be opened (its message, credentials never included).
    #[error(transparent)]
    Store(#[from] toolbrake_store::StoreError),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum HookError<'a> {
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error(transparent)]
    Store(&'a Unavailable),
    /// The session service failed: the store, or the engines.
    #[error(transparent)]
    Session(#[from] SessionError),
}

pub(crate) fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_OUTPUT_CHARS {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX_OUTPUT_CHARS).collect();
        t.push_str("… (cut)");
        t
    }
}

pub(crate) fn str_field<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Handles one hook invocation's stdin.
pub fn handle(dialect: Dialect, input: &[u8], ctx: &Context<'_>) -> Reply {
    handle_event(dialect, None, input, ctx)
}

/// Handles one hook invocation's stdin, for hosts whose payload does not name its event
/// (GitHub Copilot CLI's camelCase hooks): `event` is the name the hook was installed
/// under (`toolbrake hook copilot preToolUse`). A payload that names its event
/// (`hook_event_name`, Cline's `hookName`) is read by that name when `event` is `None`.
pub fn handle_event(
    dialect: Dialect,
    event: Option<&str>,
    input: &[u8],
    ctx: &Context<'_>,
) -> Reply {
    let mut salvaged = 0;
    let payload: Result<Value, PayloadError> = std::str::from_utf8(input)
        .map_err(|_| PayloadError::NotUtf8)
        .and_then(|t| {
            serde_json::from_str(t).or_else(|e| {
                // Well-formed text with parts no value can hold (a lone surrogate, deep
                // nesting): read the rest, and count those parts by their hash.
                if let Some((v, n)) = salvage::salvage(t) {
                    salvaged = n;
                    return Ok(v);
                }
                Err(if e.to_string().starts_with("recursion limit exceeded") {
                    PayloadError::TooDeep
                } else {
                    PayloadError::NotJson {
                        line: e.line(),
                        column: e.column(),
                    }
                })
            })
        });
    let event = event
        .filter(|e| !e.is_empty())
        .or_else(|| {
            payload
                .as_ref()
                .ok()
                .and_then(|p| str_field(p, "hook_event_name").or_else(|| str_field(p, "hookName")))
        })
        .unwrap_or("")
        .to_string();
    let result = match (payload, ctx.store) {
        (Err(e), _) => Err(HookError::Payload(e)),
        (Ok(_), Err(e)) => Err(HookError::Store(e)),
        (Ok(mut p), Ok(store)) => {
            salvage::cut_long_strings(&mut p);
            dispatch(dialect, &event, &p, ctx, store)
        }
    };
    let mut reply = Reply::default();
    if salvaged > 0 {
        reply.warnings.push(format!(
            "{salvaged} part(s) of the hook payload cannot be read as JSON values (a lone surrogate escape, or nesting deeper than 128 levels): judged by a hash of their bytes"
        ));
    }
    if let Ok(store) = &ctx.store {
        reply.warnings.extend(store.take_warnings());
    }
    answer(dialect, reply, &event, result, ctx)
}

/// The answer to a payload that could not be read at all (larger than [`MAX_PAYLOAD`],
/// or stdin failed): the failure policy applies, and the warning says why.
pub fn handle_unreadable(dialect: Dialect, reason: PayloadError, ctx: &Context<'_>) -> Reply {
    handle_unreadable_event(dialect, None, reason, ctx)
}

/// [`handle_unreadable`] for a hook installed under a named event (see [`handle_event`]).
pub fn handle_unreadable_event(
    dialect: Dialect,
    event: Option<&str>,
    reason: PayloadError,
    ctx: &Context<'_>,
) -> Reply {
    answer(
        dialect,
        Reply::default(),
        event.unwrap_or(""),
        Err(HookError::Payload(reason)),
        ctx,
    )
}

fn answer(
    dialect: Dialect,
    mut reply: Reply,
    event: &str,
    result: Result<Option<String>, HookError<'_>>,
    ctx: &Context<'_>,
) -> Reply {
    match result {
        Ok(stdout) => reply.stdout = stdout,
        Err(e) => {
            let what = if event.is_empty() {
                "a hook event".to_string()
            } else {
                event.to_string()
            };
            reply.warnings.push(format!("could not handle {what}: {e}"));
            // Fail closed only where there is something to refuse, and only when asked.
            let policy = toolbrake_session::unjudged(&e.to_string(), ctx.fail_closed);
            // The store still works when the payload was the problem: it counts the policy
            // applied (best effort: the host's answer never waits on it).
            let readable_store = matches!(
                e,
                HookError::Payload(_) | HookError::Session(SessionError::Engine(_))
            );
            if let (true, Ok(store)) = (readable_store, ctx.store) {
                let _ = Sessions::new(ctx.engine, store).count_unjudged(&policy);
            }
            if policy.refuse && (dialect.is_pre_event(event) || event.is_empty()) {
                reply.stdout = Some(pre_output(dialect, event, "deny", &policy.refusal));
            }
        }
    }
    reply
}

/// What Gemini CLI's model reads when a call needed the operator's approval: its hooks
/// cannot ask, so the call is refused (fail-closed), saying why.
pub const GEMINI_CANNOT_ASK: &str = "This call needs the operator's approval, and Gemini CLI hooks cannot ask for it, so it was refused. The operator can raise the limit in toolbrake.toml, or answer in a new message.\n\n";

fn pre_output(dialect: Dialect, event: &str, decision: &str, reason: &str) -> String {
    match dialect {
        Dialect::Copilot => copilot::pre_output(decision, reason),
        Dialect::Cursor => cursor::pre_output(event, decision, reason),
        Dialect::Cline => cline::pre_output(decision, reason),
        Dialect::Gemini => {
            let reason = if decision == "ask" {
                format!("{GEMINI_CANNOT_ASK}{reason}")
            } else {
                reason.to_string()
            };
            json!({"decision": "deny", "reason": clip(&reason)}).to_string()
        }
        _ => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": clip(reason),
        }})
        .to_string(),
    }
}

fn context_output(dialect: Dialect, event: &str, text: &str) -> String {
    match dialect {
        Dialect::Copilot => return copilot::context_output(text),
        Dialect::Cursor => return cursor::context_output(text),
        Dialect::Cline => return cline::context_output(text),
        _ => {}
    }
    json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": clip(text)}})
        .to_string()
}

fn session_key(p: &Value) -> Result<String, PayloadError> {
    let session = str_field(p, "session_id").ok_or(PayloadError::NoSessionId)?;
    Ok(toolbrake_session::key(session, str_field(p, "agent_id")))
}

/// The id of a call whose payload carries none: the call's hash prefix, so its post event
/// can find it, plus what makes this invocation unique (identical calls are still counted
/// one by one).
fn derived_prefix(tool: &str, args: &Value) -> String {
    let h = toolbrake_core::canonical::call_hash(tool, args).unwrap_or_default();
    format!("h-{}-", toolbrake_core::canonical::hash_prefix(&h))
}

/// One tool call as a host names it: its session key, the host's call id when it sends
/// one, the tool and its arguments. Each dialect builds these from its payloads; what to
/// do with them is the session service's.
pub(crate) struct HostCall<'p> {
    pub(crate) key: String,
    pub(crate) id: Option<&'p str>,
    pub(crate) tool: &'p str,
    pub(crate) args: std::borrow::Cow<'p, Value>,
    /// Without `id`: ids the host's own records give this call, most likely first (Factory
    /// Droid's transcript); the first (pre) or the first still open (post) is used.
    pub(crate) alt_ids: Vec<String>,
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

/// What the session service decided about a call, with the text each verdict carries
/// (advisories joined), for a dialect to word in its host's answer.
pub(crate) enum Judged {
    Allow,
    Advise(String),
    Ask(String),
    Deny(String),
}

/// Judges a call before it runs.
pub(crate) fn judge<S: Store + ?Sized>(
    sessions: &Sessions<'_, S>,
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
pub(crate) fn record<S: Store + ?Sized>(
    sessions: &Sessions<'_, S>,
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

fn dispatch(
    dialect: Dialect,
    event: &str,
    p: &Value,
    ctx: &Context<'_>,
    store: &dyn Store,
) -> Result<Option<String>, HookError<'static>> {
    let sessions = Sessions::new(ctx.engine, store)
        .with_observer(ctx.observer)
        .with_traceparent(ctx.traceparent);
    match dialect {
        Dialect::Copilot => return copilot::dispatch(event, p, &sessions),
        Dialect::Cursor => return cursor::dispatch(event, p, &sessions),
        Dialect::Cline => return cline::dispatch(event, p, &sessions),
        Dialect::Gemini => {
            return match event {
                "BeforeTool" => pre_tool_use(dialect, event, p, &sessions, None),
                "AfterTool" => post_tool_use(dialect, event, p, &sessions, None),
                "BeforeAgent" => {
                    sessions.user_message(&session_key(p)?)?;
                    Ok(None)
                }
                "AfterAgent" => {
                    sessions.close_open_calls(&session_key(p)?, true)?;
                    Ok(None)
                }
                "SessionEnd" => {
                    sessions.end(&session_key(p)?)?;
                    Ok(None)
                }
                _ => Ok(None),
            }
        }
        _ => {}
    }
    // Factory Droid: call ids and unreported failures from its transcript.
    let transcript = (dialect == Dialect::Factory)
        .then(|| factory::Transcript::of(p))
        .flatten();
    if let Some(t) = &transcript {
        if matches!(event, "PreToolUse" | "Stop" | "SubagentStop") {
            settle_from_transcript(p, t, &sessions, store)?;
        }
    }
    let transcript = transcript.as_ref();
    match event {
        "PreToolUse" => pre_tool_use(dialect, event, p, &sessions, transcript),
        "PostToolUse" | "PostToolUseFailure" => {
            post_tool_use(dialect, event, p, &sessions, transcript)
        }
        // Qwen Code also sends UserPromptSubmit, with an empty prompt, when it continues its
        // own turn after a batch of tool results: not a human message.
        "UserPromptSubmit"
            if dialect == Dialect::Qwen
                && p.get("prompt")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty() =>
        {
            Ok(None)
        }
        "UserPromptSubmit" => {
            sessions.user_message(&session_key(p)?)?;
            Ok(None)
        }
        "Stop" | "PostToolBatch" | "SubagentStop" => {
            sessions.close_open_calls(&session_key(p)?, event == "Stop")?;
            Ok(None)
        }
        "SessionEnd" => {
            sessions.end(&session_key(p)?)?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Records the outcomes a host's transcript holds for the session's open calls: Factory
/// Droid runs no hook after a call that failed.
fn settle_from_transcript<S: Store + ?Sized>(
    p: &Value,
    t: &factory::Transcript,
    sessions: &Sessions<'_, S>,
    store: &dyn Store,
) -> Result<(), HookError<'static>> {
    let key = session_key(p)?;
    let Some(st) = store.get(&key).map_err(SessionError::from)? else {
        return Ok(());
    };
    let found: Vec<(String, Outcome)> = st
        .open_call_ids()
        .filter_map(|id| t.outcome(id).map(|o| (id.to_string(), o)))
        .collect();
    for (id, outcome) in found {
        match sessions.post_ran(&key, |_| id.clone(), &outcome) {
            Ok(_) | Err(SessionError::Engine(EngineError::UnknownCall(_))) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Claude Code's `PreToolUse` (and the dialects that share it, and Gemini CLI's
/// `BeforeTool`).
fn pre_tool_use<S: Store + ?Sized>(
    dialect: Dialect,
    event: &str,
    p: &Value,
    sessions: &Sessions<'_, S>,
    transcript: Option<&factory::Transcript>,
) -> Result<Option<String>, HookError<'static>> {
    let mut call = HostCall {
        key: session_key(p)?,
        id: str_field(p, "tool_use_id"),
        tool: str_field(p, "tool_name").ok_or(PayloadError::NoToolName)?,
        args: args_of(p.get("tool_input")),
        alt_ids: Vec::new(),
    };
    if let Some(t) = transcript {
        call.alt_ids.extend(t.pending_id(call.tool, &call.args));
    }
    Ok(match judge(sessions, &call)? {
        Judged::Allow => None,
        Judged::Advise(text) => Some(context_output(dialect, event, &text)),
        Judged::Ask(reason) => Some(pre_output(dialect, event, "ask", &reason)),
        Judged::Deny(reason) => Some(pre_output(dialect, event, "deny", &reason)),
    })
}

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

/// Gemini CLI's `tool_response`: `{llmContent, returnDisplay, error?}`. The shell tool
/// reports its exit code in the text (`Exit Code: 1`).
fn gemini_outcome(p: &Value) -> Outcome {
    let mut o = Outcome::default();
    let resp = p.get("tool_response").unwrap_or(&Value::Null);
    let error = resp.get("error").filter(|e| !e.is_null());
    let text = match resp.get("llmContent") {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|x| x.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(v) => response_text(v),
        None => response_text(resp),
    };
    if let Some(e) = error {
        o.is_error = Some(true);
        let message = e
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| response_text(e));
        o.error_code = e.get("type").and_then(Value::as_str).map(str::to_string);
        o.text = Some(if text.is_empty() { message } else { text });
        return o;
    }
    o.exit_code = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Exit Code:")
            .and_then(|n| n.trim().parse().ok())
    });
    o.text = Some(text);
    o
}

/// The outcome a post event reports.
pub fn outcome_of(dialect: Dialect, event: &str, p: &Value) -> Outcome {
    match dialect {
        Dialect::Gemini => return gemini_outcome(p),
        // Qwen Code reports a result as Gemini CLI does, a failure as Claude Code does.
        Dialect::Qwen if event != "PostToolUseFailure" => return gemini_outcome(p),
        Dialect::Copilot => return copilot::outcome(event, p),
        Dialect::Cursor => return cursor::outcome(event, p),
        Dialect::Cline => return cline::outcome(p),
        _ => {}
    }
    let mut o = Outcome::default();
    if event == "PostToolUseFailure" {
        let err = p.get("error").map(response_text).unwrap_or_default();
        if p.get("is_interrupt") == Some(&Value::Bool(true)) {
            o.aborted = Some(true);
        } else if let Some(code) = err
            .lines()
            .next()
            .and_then(|l| l.trim().strip_prefix("Exit code "))
            .and_then(|n| n.trim().parse().ok())
        {
            o.exit_code = Some(code);
        } else {
            o.is_error = Some(true);
        }
        o.text = Some(err);
        return o;
    }
    let resp = p.get("tool_response").cloned().unwrap_or(Value::Null);
    if resp.get("interrupted") == Some(&Value::Bool(true)) {
        o.aborted = Some(true);
    }
    if resp.get("isError") == Some(&Value::Bool(true))
        || resp.get("is_error") == Some(&Value::Bool(true))
    {
        o.is_error = Some(true);
    }
    let text = response_text(&resp);
    if dialect == Dialect::Codex {
        // Codex reports no exit code in the hook payload: look for it in the rollout
        // transcript (the same function_call_output the model saw), then in the text.
        let id = str_field(p, "tool_use_id");
        o.exit_code = id
            .and_then(|id| {
                str_field(p, "transcript_path")
                    .and_then(|t| codex_exit_code(std::path::Path::new(t), id))
            })
            .or_else(|| toolbrake_import::codex::exit_code_in_text(&text));
    }
    if dialect == Dialect::Factory {
        // Factory Droid's Execute ends its result with `[Process exited with code N]`.
        o.exit_code = toolbrake_import::codex::exit_code_in_text(&text);
    }
    o.text = Some(text);
    o
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

/// Reads the tail of a Codex rollout file for the output of call `id` and returns its exit
/// code. Bounded: at most the last 4 MiB are read. Best effort: `None` when not found.
pub fn codex_exit_code(path: &std::path::Path, id: &str) -> Option<i64> {
    const TAIL: u64 = 4 << 20;
    let mut f = open_regular(path)?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut buf = Vec::new();
    f.take(TAIL).read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    for line in text.lines().rev() {
        if !line.contains(id) || !line.contains("output") {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let payload = v.get("payload")?;
        if payload.get("call_id").and_then(Value::as_str) != Some(id) {
            continue;
        }
        let out =
            toolbrake_import::codex::output_outcome(payload.get("output").unwrap_or(&Value::Null));
        return out.get("exit_code").and_then(Value::as_i64);
    }
    None
}

fn post_tool_use<S: Store + ?Sized>(
    dialect: Dialect,
    event: &str,
    p: &Value,
    sessions: &Sessions<'_, S>,
    transcript: Option<&factory::Transcript>,
) -> Result<Option<String>, HookError<'static>> {
    let mut call = HostCall {
        key: session_key(p)?,
        id: str_field(p, "tool_use_id"),
        tool: str_field(p, "tool_name").unwrap_or(""),
        args: args_of(p.get("tool_input")),
        alt_ids: Vec::new(),
    };
    if let Some(t) = transcript {
        call.alt_ids = t.ids_of(call.tool, &call.args);
    }
    let outcome = outcome_of(dialect, event, p);
    Ok(record(sessions, &call, &outcome)?.map(|text| context_output(dialect, event, &text)))
}
