//! toolbrake: a circuit breaker for AI agents' tool calls.
//!
//! This crate is the library front door and the home of the `toolbrake` command. The
//! decisions themselves live in [`toolbrake_core`] (re-exported here); this crate adds
//! what touches the process: finding and loading `toolbrake.toml` ([`settings`]) and an
//! in-memory [`Brake`] with guards for tool bodies ([`Brake::guard`],
//! [`Brake::guard_async`], [`Brake::wrap`], [`decorate`]).
//!
//! ```
//! use toolbrake::{Brake, GuardError};
//! use serde_json::json;
//!
//! let brake = Brake::default();
//! let args = json!({"q": "weather"});
//! let run = || Ok::<_, String>("sunny");
//! assert!(brake.guard("session-1", "search", &args, run).is_ok());
//! assert!(brake.guard("session-1", "search", &args, run).is_ok());
//! match brake.guard("session-1", "search", &args, run) {
//!     Err(GuardError::Refused(r)) => assert!(r.message.starts_with("loop brake: tool \"search\" called 3 times")),
//!     other => panic!("expected a refusal, got {other:?}"),
//! }
//! ```
#![deny(missing_docs)]

pub mod brake;
pub mod files;
pub mod settings;
pub mod ui;

pub use brake::{
    decorate, Approver, Brake, Braked, GuardError, Guarded, Refusal, Tool, ToolOutput,
};
pub use toolbrake_core as core;
pub use toolbrake_core::{
    breaker, canonical, config, engine, progress, redact, streak, Call, Config, ConfigError,
    Decision, Engine, EngineError, Failure, Hit, Outcome, PostDecision, SessionState,
    StreakRefusal, Verdict,
};
