//! The native addon of the `toolbrake` npm package: the Rust core and the session service,
//! for JavaScript hosts (napi-rs).
//!
//! It only translates: JSON text in (the JavaScript side serialises arguments, refusing
//! values JSON cannot hold), the session service decides, JSON text out. Every decision,
//! hash and message is the one every other adapter gets. Nothing unwinds across the FFI
//! boundary: a panic (a bug) becomes a JavaScript error, and so does any input the core
//! rejects (invalid JSON, nesting deeper than it reads, an unknown call id).

use napi::{Error, Result, Status};
use napi_derive::napi;
use serde_json::{json, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use toolbrake_core::config::{no_env, Config, ConfigError};
use toolbrake_core::{Call, Decision, Engine, Outcome, PostDecision};
use toolbrake_session::{SessionError, Sessions};
use toolbrake_store::{MemoryStore, Store};

/// Runs `f`, turning a panic into an error instead of unwinding into Node.
fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(Error::new(
            Status::GenericFailure,
            "toolbrake: internal error (a bug in toolbrake; nothing was decided)",
        ))
    })
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, message.into())
}

fn parse(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        if e.to_string().starts_with("recursion limit exceeded") {
            invalid(format!(
                "toolbrake: {what} nest deeper than toolbrake reads (128 levels); the call cannot be judged"
            ))
        } else {
            invalid(format!("toolbrake: {what} is not JSON ({e})"))
        }
    })
}

/// A configuration error as JSON (`{key, value, rule, message}`) for the JavaScript side
/// to rethrow with its own names.
fn config_error(e: &ConfigError) -> Error {
    invalid(
        json!({"key": e.key, "value": e.value, "rule": e.rule, "message": e.to_string()})
            .to_string(),
    )
}

/// The SHA-256 of the tool name, a newline and the canonical JSON of the arguments, in hex.
#[napi]
pub fn call_hash(tool: String, args_json: String) -> Result<String> {
    guarded(|| {
        let args = parse(&args_json, "the arguments")?;
        toolbrake_core::canonical::call_hash(&tool, &args).map_err(|e| invalid(e.to_string()))
    })
}

/// The canonical JSON of a value: object keys sorted at every level, nothing else changed.
#[napi]
pub fn canonical_json(value_json: String) -> Result<String> {
    guarded(|| {
        let value = parse(&value_json, "the value")?;
        toolbrake_core::canonical::canonical_json(&value).map_err(|e| invalid(e.to_string()))
    })
}

/// The session a call counts in: the explicit key, else the calling agent's id, else
/// `default`.
#[napi]
pub fn session_key(explicit: Option<String>, agent: Option<String>) -> String {
    toolbrake_core::streak::session_key(explicit.as_deref(), agent.as_deref()).to_string()
}

/// Validates a configuration document (`{"streak": {…}, "breaker": {…}}`, snake_case) and
/// returns the effective one, every key written out.
#[napi]
pub fn check_config(config_json: String) -> Result<String> {
    guarded(|| {
        let doc = parse(&config_json, "the configuration")?;
        let cfg = Config::from_value(&doc, &no_env).map_err(|e| config_error(&e))?;
        Ok(cfg.to_value().to_string())
    })
}

/// Both engines over in-memory sessions, through the session service.
#[napi]
pub struct NativeEngine {
    engine: Engine,
    store: MemoryStore,
}

fn session_error(e: SessionError) -> Error {
    invalid(format!("toolbrake: {e}"))
}

fn decision_json(d: &Decision) -> String {
    json!({
        "verdict": d.verdict.as_str(),
        "engine": d.engine,
        "code": d.code,
        "message": d.message,
        "hits": d.hits,
        "advisories": d.advisories,
        "streak": d.streak_refusal,
        "settled": d.settled.iter().map(|s| &s.id).collect::<Vec<_>>(),
    })
    .to_string()
}

fn post_json(p: &PostDecision) -> String {
    json!({
        "ignored": p.ignored,
        "advisories": p.advisories,
        "failure": p.failure,
    })
    .to_string()
}

#[napi]
impl NativeEngine {
    /// Engines for a configuration document (snake_case, validated; an invalid one throws
    /// an error whose message is `{key, value, rule, message}` as JSON). `offer_fetch_tool`
    /// names a fetch tool the host offers, for the shell-HTTP block.
    #[napi(constructor)]
    pub fn new(config_json: String, offer_fetch_tool: Option<String>) -> Result<Self> {
        guarded(|| {
            let doc = parse(&config_json, "the configuration")?;
            let mut cfg = Config::from_value(&doc, &no_env).map_err(|e| config_error(&e))?;
            if let Some(name) = offer_fetch_tool.filter(|n| !n.is_empty()) {
                cfg.breaker.offer_fetch_tool(&name);
            }
            Ok(NativeEngine {
                engine: Engine::new(cfg),
                store: MemoryStore::new(),
            })
        })
    }

    fn sessions(&self) -> Sessions<'_, MemoryStore> {
        Sessions::new(&self.engine, &self.store)
    }

    /// Judges a call before it runs: a decision as JSON.
    #[napi]
    pub fn pre(
        &self,
        session: String,
        call_id: String,
        tool: String,
        args_json: String,
    ) -> Result<String> {
        guarded(|| {
            let args = parse(&args_json, "the arguments")?;
            let call = Call {
                session: &session,
                id: &call_id,
                tool: &tool,
                args: &args,
            };
            let d = self
                .sessions()
                .pre(&session, &call)
                .map_err(session_error)?;
            Ok(decision_json(&d))
        })
    }

    /// The operator's answer to an ask: the call's final decision as JSON.
    #[napi]
    pub fn answer(&self, session: String, call_id: String, approved: bool) -> Result<String> {
        guarded(|| {
            let d = self
                .sessions()
                .answer(&session, &call_id, approved)
                .map_err(session_error)?;
            Ok(decision_json(&d))
        })
    }

    /// What a call did (an outcome as JSON: `{is_error, exit_code, status_code, text, …}`):
    /// the advisories and failure as JSON.
    #[napi]
    pub fn post(&self, session: String, call_id: String, outcome_json: String) -> Result<String> {
        guarded(|| {
            let outcome: Outcome = serde_json::from_value(parse(&outcome_json, "the outcome")?)
                .map_err(|e| invalid(format!("toolbrake: the outcome is not valid ({e})")))?;
            let p = self
                .sessions()
                .post(&session, &call_id, &outcome)
                .map_err(session_error)?;
            Ok(post_json(&p))
        })
    }

    /// One Claude Code hook event (the payload the Claude Agent SDK hands its hook
    /// callbacks, as JSON), answered exactly as `toolbrake hook claude` answers it: `{"output":
    /// <the hook's JSON output, or null for no opinion>, "warnings": [...]}`. With
    /// `fail_closed`, a `PreToolUse` toolbrake cannot judge (a payload it cannot read) is
    /// denied, saying why; otherwise it is let through with a warning.
    #[napi]
    pub fn claude_hook(&self, payload_json: String, fail_closed: bool) -> Result<String> {
        guarded(|| {
            let ctx = toolbrake_hooks::Context {
                engine: &self.engine,
                store: Ok(&self.store),
                fail_closed,
                observer: None,
                traceparent: None,
            };
            let reply = toolbrake_hooks::handle(
                toolbrake_hooks::Dialect::Claude,
                payload_json.as_bytes(),
                &ctx,
            );
            let output = match reply.stdout.as_deref().map(serde_json::from_str::<Value>) {
                Some(Ok(v)) => v,
                Some(Err(e)) => return Err(invalid(format!("toolbrake: internal error: {e}"))),
                None => Value::Null,
            };
            Ok(json!({"output": output, "warnings": reply.warnings}).to_string())
        })
    }

    /// A real human message: the session starts afresh.
    #[napi]
    pub fn user_message(&self, session: String) -> Result<()> {
        guarded(|| {
            self.sessions()
                .user_message(&session)
                .map(|_| ())
                .map_err(session_error)
        })
    }

    /// The session is over: its state is forgotten.
    #[napi]
    pub fn end(&self, session: String) -> Result<()> {
        guarded(|| {
            self.sessions()
                .end(&session)
                .map(|_| ())
                .map_err(session_error)
        })
    }

    /// Forgets every session.
    #[napi]
    pub fn forget_all(&mut self) {
        self.store = MemoryStore::new();
    }

    /// Sessions held.
    #[napi]
    pub fn session_count(&self) -> Result<u32> {
        guarded(|| {
            self.store
                .list()
                .map(|l| l.len() as u32)
                .map_err(|e| invalid(e.to_string()))
        })
    }

    /// The effective configuration as JSON.
    #[napi]
    pub fn config(&self) -> String {
        json!({
            "streak": self.engine.streak().config().to_value(),
            "breaker": self.engine.breaker().config().to_value(),
        })
        .to_string()
    }
}

/// `web_fetch_file` for JavaScript hosts: fetches a URL to a file under the workspace root.
#[napi]
pub struct NativeFetcher {
    inner: std::sync::Arc<toolbrake_fetch::Fetcher>,
}

#[napi]
impl NativeFetcher {
    /// A fetcher writing under `root`, with the `[fetch]` settings as JSON (snake_case;
    /// invalid ones throw `{key, value, rule, message}` as JSON).
    #[napi(constructor)]
    pub fn new(root: String, settings_json: String) -> Result<Self> {
        guarded(|| {
            let doc = parse(&settings_json, "the fetch settings")?;
            let table = toolbrake_config::toml_of_json(&doc);
            let settings =
                toolbrake_fetch::fetch_table(table.as_ref()).map_err(|e| config_error(&e))?;
            let fetcher = toolbrake_fetch::Fetcher::new(settings, std::path::Path::new(&root))
                .map_err(|e| {
                    invalid(format!(
                        "toolbrake: cannot use {root} as the workspace root: {e}"
                    ))
                })?;
            Ok(NativeFetcher {
                inner: std::sync::Arc::new(fetcher),
            })
        })
    }

    /// Runs the tool for `session` with its arguments `{url, path?}`: `{"ok": {path,
    /// statusCode, bytes, contentType, kind, finalUrl, truncated?}}` or `{"error": text}`.
    #[napi]
    pub async fn fetch(&self, session: String, args_json: String) -> Result<String> {
        let args = parse(&args_json, "the arguments")?;
        let inner = self.inner.clone();
        Ok(match inner.call(&session, &args).await {
            Ok(f) => json!({"ok": f.to_json()}),
            Err(e) => json!({"error": format!("web_fetch_file: {e}")}),
        }
        .to_string())
    }
}
