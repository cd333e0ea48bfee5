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
//! Session key: `session_id`, plus `#agent:<agent_id>` when a sub-agent calls.
//! When loopbrake itself fails, the hook never blocks by accident: no output (the host's
//! normal flow applies) and a warning, unless `fail_closed` is set, in which case a
//! `PreToolUse` is denied with a message saying why.
#![deny(missing_docs)]

pub mod init;

use loopbrake_core::{Call, Engine, EngineError, Outcome, Verdict};
use loopbrake_session::{SessionError, Sessions};
use loopbrake_store::Store;
use serde_json::{json, Value};
use std::io::{Read, Seek, SeekFrom};

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
}

impl Dialect {
    /// `claude`, `codex` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Claude => "claude",
            Dialect::Codex => "codex",
            Dialect::Gemini => "gemini",
        }
    }

    /// The event that judges a call before it runs.
    fn pre_event(self) -> &'static str {
        match self {
            Dialect::Gemini => "BeforeTool",
            _ => "PreToolUse",
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
    /// Refuse `PreToolUse` calls when loopbrake itself fails.
    pub fail_closed: bool,
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
    Store(#[from] loopbrake_store::StoreError),
}

#[derive(Debug, thiserror::Error)]
enum HookError<'a> {
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error(transparent)]
    Store(&'a Unavailable),
    /// The session service failed: the store, or the engines.
    #[error(transparent)]
    Session(#[from] SessionError),
}

fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_OUTPUT_CHARS {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX_OUTPUT_CHARS).collect();
        t.push_str("… (cut)");
        t
    }
}

fn str_field<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Handles one hook invocation's stdin.
pub fn handle(dialect: Dialect, input: &[u8], ctx: &Context<'_>) -> Reply {
    let payload: Result<Value, PayloadError> = std::str::from_utf8(input)
        .map_err(|_| PayloadError::NotUtf8)
        .and_then(|t| {
            serde_json::from_str(t).map_err(|e| {
                if e.to_string().starts_with("recursion limit exceeded") {
                    PayloadError::TooDeep
                } else {
                    PayloadError::NotJson {
                        line: e.line(),
                        column: e.column(),
                    }
                }
            })
        });
    let event = payload
        .as_ref()
        .ok()
        .and_then(|p| str_field(p, "hook_event_name"))
        .unwrap_or("")
        .to_string();
    let result = match (payload, ctx.store) {
        (Err(e), _) => Err(HookError::Payload(e)),
        (Ok(_), Err(e)) => Err(HookError::Store(e)),
        (Ok(p), Ok(store)) => dispatch(dialect, &event, &p, ctx.engine, store),
    };
    let mut reply = Reply::default();
    if let Ok(store) = &ctx.store {
        reply.warnings.extend(store.take_warnings());
    }
    answer(dialect, reply, &event, result, ctx)
}

/// The answer to a payload that could not be read at all (larger than [`MAX_PAYLOAD`],
/// or stdin failed): the failure policy applies, and the warning says why.
pub fn handle_unreadable(dialect: Dialect, reason: PayloadError, ctx: &Context<'_>) -> Reply {
    answer(
        dialect,
        Reply::default(),
        "",
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
            let policy = loopbrake_session::unjudged(&e.to_string(), ctx.fail_closed);
            if policy.refuse && (event == dialect.pre_event() || event.is_empty()) {
                reply.stdout = Some(pre_output(dialect, "deny", &policy.refusal));
            }
        }
    }
    reply
}

/// What Gemini CLI's model reads when a call needed the operator's approval: its hooks
/// cannot ask, so the call is refused (fail-closed), saying why.
pub const GEMINI_CANNOT_ASK: &str = "This call needs the operator's approval, and Gemini CLI hooks cannot ask for it, so it was refused. The operator can raise the limit in loopbrake.toml, or answer in a new message.\n\n";

fn pre_output(dialect: Dialect, decision: &str, reason: &str) -> String {
    match dialect {
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

fn context_output(event: &str, text: &str) -> String {
    json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": clip(text)}})
        .to_string()
}

fn session_key(p: &Value) -> Result<String, PayloadError> {
    let session = str_field(p, "session_id").ok_or(PayloadError::NoSessionId)?;
    Ok(loopbrake_session::key(session, str_field(p, "agent_id")))
}

/// The call id: the host's `tool_use_id`, or, without one, an id derived from the call
/// itself so that its pre and post events still pair.
/// The id of a call whose payload carries none: the call's hash prefix, so its post event
/// can find it, plus what makes this invocation unique (identical calls are still counted
/// one by one).
fn derived_prefix(tool: &str, args: &Value) -> String {
    let h = loopbrake_core::canonical::call_hash(tool, args).unwrap_or_default();
    format!("h-{}-", loopbrake_core::canonical::hash_prefix(&h))
}

/// The call id of a `PreToolUse`: the host's `tool_use_id`, else a fresh derived one.
fn pre_call_id(p: &Value, tool: &str, args: &Value) -> String {
    match str_field(p, "tool_use_id") {
        Some(id) => id.to_string(),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!(
                "{}{nanos:x}.{:x}",
                derived_prefix(tool, args),
                std::process::id()
            )
        }
    }
}

/// The call id of a post event: the host's `tool_use_id`, else the oldest open call that
/// was derived from the same tool and arguments.
fn post_call_id(p: &Value, tool: &str, args: &Value, st: &loopbrake_core::SessionState) -> String {
    match str_field(p, "tool_use_id") {
        Some(id) => id.to_string(),
        None => {
            let prefix = derived_prefix(tool, args);
            st.open_call_ids()
                .find(|id| id.starts_with(&prefix))
                .map(str::to_string)
                .unwrap_or(prefix)
        }
    }
}

fn dispatch(
    dialect: Dialect,
    event: &str,
    p: &Value,
    engine: &Engine,
    store: &dyn Store,
) -> Result<Option<String>, HookError<'static>> {
    let sessions = Sessions::new(engine, store);
    if dialect == Dialect::Gemini {
        return match event {
            "BeforeTool" => pre_tool_use(dialect, p, &sessions),
            "AfterTool" => post_tool_use(dialect, event, p, &sessions),
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
        };
    }
    match event {
        "PreToolUse" => pre_tool_use(dialect, p, &sessions),
        "PostToolUse" | "PostToolUseFailure" => post_tool_use(dialect, event, p, &sessions),
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

fn pre_tool_use<S: Store + ?Sized>(
    dialect: Dialect,
    p: &Value,
    sessions: &Sessions<'_, S>,
) -> Result<Option<String>, HookError<'static>> {
    let key = session_key(p)?;
    let tool = str_field(p, "tool_name").ok_or(PayloadError::NoToolName)?;
    let empty = json!({});
    let args = p.get("tool_input").unwrap_or(&empty);
    let id = pre_call_id(p, tool, args);
    let call = Call {
        session: &key,
        id: &id,
        tool,
        args,
    };
    let d = sessions.pre(&key, &call)?;
    Ok(match d.verdict {
        Verdict::Allow => None,
        Verdict::Advise => {
            let text: Vec<&str> = d.advisories.iter().map(|a| a.text.as_str()).collect();
            Some(context_output(dialect.pre_event(), &text.join("\n\n")))
        }
        Verdict::Ask => Some(pre_output(
            dialect,
            "ask",
            d.message.as_deref().unwrap_or_default(),
        )),
        Verdict::Deny => Some(pre_output(
            dialect,
            "deny",
            d.message.as_deref().unwrap_or_default(),
        )),
    })
}

fn response_text(v: &Value) -> String {
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
    if dialect == Dialect::Gemini {
        return gemini_outcome(p);
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
            .or_else(|| loopbrake_import::codex::exit_code_in_text(&text));
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
            loopbrake_import::codex::output_outcome(payload.get("output").unwrap_or(&Value::Null));
        return out.get("exit_code").and_then(Value::as_i64);
    }
    None
}

fn post_tool_use<S: Store + ?Sized>(
    dialect: Dialect,
    event: &str,
    p: &Value,
    sessions: &Sessions<'_, S>,
) -> Result<Option<String>, HookError<'static>> {
    let key = session_key(p)?;
    let tool = str_field(p, "tool_name").unwrap_or("");
    let empty = json!({});
    let args = p.get("tool_input").unwrap_or(&empty);
    let outcome = outcome_of(dialect, event, p);
    // A post event means the call ran: an ask still pending for it was approved.
    let post = match sessions.post_ran(&key, |st| post_call_id(p, tool, args, st), &outcome) {
        Ok(p) => p,
        // A call this hook never saw (installed mid-call, or already closed): nothing to do.
        Err(SessionError::Engine(EngineError::UnknownCall(_))) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if post.advisories.is_empty() {
        return Ok(None);
    }
    let text: Vec<&str> = post.advisories.iter().map(|a| a.text.as_str()).collect();
    Ok(Some(context_output(event, &text.join("\n\n"))))
}
