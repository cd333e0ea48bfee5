//! The breaker: semantic fingerprints counted over a sliding window per session,
//! escalating warn → summary demand → gate, a failure track, and a gate that asks the
//! operator for a turn-scoped exemption (docs/decisions.md, "Breaker" and "Progress").
//!
//! The four moments ("Four moments") are [`Breaker::pre`], [`Breaker::answer`], [`Breaker::post`]
//! and [`Breaker::user_message`]. Each takes the session's [`BreakerState`] by `&mut`:
//! the engine is pure, the caller (a store) decides where the state lives.
//!
//! The files: `verdict` the answers, `state` what a session remembers, `gate` the
//! judging before a call, `post` what is remembered after it; the tracks and fingerprints
//! in their own modules, which import one another and never this one.

pub mod config;
pub mod failure;
pub mod fingerprint;
mod gate;
pub mod messages;
pub mod mutation;
mod post;
pub mod same_output;
pub mod self_guard;
pub mod shell;
pub mod shell_http;
mod state;
pub mod url;
mod verdict;

pub use config::{BreakerConfig, LocalHosts, OnLimit, SelfProtection, ToolClasses};
pub use failure::{classify, Failure, Outcome, Reason};
pub use fingerprint::{fingerprints, Fingerprint, FingerprintSet, FpId, Kind, PageStep};
pub use gate::Breaker;
pub use mutation::FileId;
pub(crate) use state::PreparedCall;
pub use state::{BreakerState, MAX_EDITED_FILES, MAX_RECENT, MAX_TRACKED, MAX_UNCHANGED};
pub use verdict::{
    Advisory, BreakerSignals, BreakerSummary, BreakerVerdict, FingerprintSignal, Gauge, Hit, Kept,
    KeptGauge, PostReport, Stage, Track, UnchangedView, CODE, ENGINE, SELF_PROTECTION_CODE,
    SHELL_HTTP_CODE,
};
