//! The coding-agent hook adapter: one hook event (a host's command-hook JSON on stdin) in,
//! the host's answer out. Also [`init`]: installing the hooks into a host's settings file.
//!
//! This file is the driver: it reads the payload, asks the host's module what the event
//! means (a neutral `Event`), has the session service act on it, and asks the module
//! to word the answer. Each host is one module implementing `Host`: how its payloads
//! read, its answer shapes, its session key and what `init` installs for it; `Dialect::host`
//! is the table of them, so adding a host is one new file and one line there. Mapping
//! (docs/decisions.md, "Hosts"): a call before it runs is judged (deny, ask, advise, or no
//! output to allow); a call that ran is recorded (an asked call that ran was approved); a
//! human's message starts a new turn; the end of a turn closes calls that never got an
//! outcome; the end of a session forgets it.
//!
//! When toolbrake itself fails, the hook never blocks by accident: no output (the host's
//! normal flow applies) and a warning, unless `fail_closed` is set, in which case a call
//! about to run is refused with a message saying why.
#![deny(missing_docs)]

mod claude;
pub mod cline;
mod codex;
pub mod copilot;
pub mod cursor;
mod event;
mod factory;
pub mod former;
mod gemini;
mod host;
pub mod init;
mod lenient;
mod payload;
mod qwen;
mod salvage;

pub use codex::codex_exit_code;
pub use event::open_regular;
pub use gemini::GEMINI_CANNOT_ASK;

use event::{judge, record, str_field, Event};
use host::Host;
use serde_json::Value;
use toolbrake_core::{Engine, Outcome};
use toolbrake_session::{Observer, SessionError, Sessions};
use toolbrake_store::Store;

/// The largest hook payload read (a `Write` of a large file arrives whole).
pub const MAX_PAYLOAD: usize = 64 << 20;

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
    /// The table of hosts, one line each: the name on the command line (`toolbrake hook
    /// NAME`) and the host's module.
    fn entry(self) -> (&'static str, &'static dyn Host) {
        match self {
            Dialect::Claude => ("claude", &claude::Claude),
            Dialect::Codex => ("codex", &codex::Codex),
            Dialect::Gemini => ("gemini", &gemini::Gemini),
            Dialect::Copilot => ("copilot", &copilot::Copilot),
            Dialect::Qwen => ("qwen", &qwen::Qwen),
            Dialect::Cursor => ("cursor", &cursor::Cursor),
            Dialect::Cline => ("cline", &cline::Cline),
            Dialect::Factory => ("factory", &factory::Factory),
        }
    }

    /// The host this dialect is.
    fn host(self) -> &'static dyn Host {
        self.entry().1
    }

    /// Where `toolbrake init` puts this host's hooks.
    pub fn place(self) -> init::Place {
        self.host().place()
    }

    /// The name on the command line: `claude`, `codex`, `gemini`, `copilot`, `qwen`,
    /// `cursor`, `cline` or `factory`.
    pub fn as_str(self) -> &'static str {
        self.entry().0
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
    /// The bytes are not UTF-8, and cannot be read as JSON with those bytes as `\xNN`.
    #[error("the hook payload is not valid UTF-8, and cannot be read as JSON")]
    NotUtf8,
    /// The JSON nests deeper than the parser allows.
    #[error("the hook payload nests deeper than 128 levels")]
    TooDeep,
    /// The text is not JSON, even read leniently (a byte-order mark, UTF-16, single quotes,
    /// trailing commas, `NaN`, control characters, text after the object).
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
    let payload = payload::read(input);
    let mut reply = Reply::default();
    let payload = payload.map(|p| {
        reply.warnings = p.warnings;
        p.value
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
        (Ok(p), Ok(store)) => dispatch(dialect, &event, &p, ctx, store),
    };
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
            let host = dialect.host();
            if policy.refuse && (host.is_pre_event(event) || event.is_empty()) {
                reply.stdout = Some(host.decision(event, "deny", &policy.refusal));
            }
        }
    }
    reply
}

/// Has the session service act on one event, as `dialect`'s module reads it, and returns
/// the host's answer, if any.
fn dispatch(
    dialect: Dialect,
    event: &str,
    p: &Value,
    ctx: &Context<'_>,
    store: &dyn Store,
) -> Result<Option<String>, HookError<'static>> {
    let host = dialect.host();
    let sessions = Sessions::new(ctx.engine, store)
        .with_observer(ctx.observer)
        .with_traceparent(ctx.traceparent);
    match host.read(event, p, &sessions)? {
        Event::Pre(call) => Ok(host.verdict(event, judge(&sessions, &call)?)),
        Event::Post(call, outcome) => {
            Ok(record(&sessions, &call, &outcome)?.map(|text| host.context(event, &text)))
        }
        Event::UserMessage => {
            sessions.user_message(&host.session_key(p)?)?;
            Ok(None)
        }
        Event::Close { turn_over } => {
            sessions.close_open_calls(&host.session_key(p)?, turn_over)?;
            Ok(None)
        }
        Event::End => {
            sessions.end(&host.session_key(p)?)?;
            Ok(None)
        }
        Event::Other => Ok(None),
    }
}

/// The outcome a post event reports.
pub fn outcome_of(dialect: Dialect, event: &str, p: &Value) -> Outcome {
    dialect.host().outcome(event, p)
}
