//! The pure decision core of toolbrake: every decision, no I/O.
//!
//! This crate holds the two engines and nothing that touches the world: no files, no
//! clock, no network, no async, no mutable global state. Session state is a plain
//! serialisable value ([`SessionState`]) that callers keep wherever they like (memory,
//! SQLite, Redis); the engines take it by `&mut` and decide.
//!
//! - [`canonical`]: canonical JSON and the call hash (byte-compatible with the original JS).
//! - [`streak`]: the streak brake (consecutive identical calls).
//! - [`budget`]: the run-level stop line (calls plus calls stopped), off by default.
//! - [`breaker`]: semantic fingerprints, the window, stages, the failure track, the gate.
//! - [`progress`]: output memory, the normalised digest of what a call returned.
//! - [`redact`]: credentials replaced in everything shown or stored.
//! - [`engine`]: both engines together, the surface adapters call.
//! - [`config`]: the validated engine configuration.
//! - [`feedback`]: what a person said of a run afterwards (a mistaken stop, a stuck run).
#![deny(missing_docs)]

pub mod breaker;
pub mod budget;
pub mod canonical;
pub mod config;
pub mod engine;
pub mod feedback;
mod outcome;
pub mod progress;
pub mod redact;
pub mod streak;
mod table;

pub use outcome::MAX_OPEN_CALLS;

pub use breaker::{Advisory, Failure, Hit, Outcome, Stage, Track};
pub use config::{Config, ConfigError};
pub use engine::{
    Call, Decision, Engine, EngineError, LogEntry, PostDecision, SessionState, Settled, Signals,
    Verdict,
};
pub use feedback::Feedback;
pub use streak::{StreakBrake, StreakConfig, StreakRefusal, StreakState, StreakVerdict};
