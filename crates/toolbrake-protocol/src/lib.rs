//! The JSON-lines event protocol (docs/protocol.md): one job, turning a stream of events
//! into a stream of verdicts, for `toolbrake replay` and `toolbrake serve --stdio`.
//!
//! - [`event`]: parsing input events, with an error for every missing or mistyped field.
//! - [`processor`]: the state machine (engines + a [`toolbrake_store::Store`]).
//! - [`parallel`]: the same stream on several cores (sessions spread over processors),
//!   with the output of one.
//! - [`reader`]: input lines with a bound on their length.
//! - [`record`]: what one handled event did, as the processor makes it and reports read it.
//! - [`import`]: recorded runs (trajectories, Claude Code, Codex) turned into events.
//! - [`report`]: the replay report (text and HTML).
//! - [`calibrate`]: split-conformal calibration of a stop line, in exact arithmetic.
//! - [`tune`]: one history replayed under many settings, judged by the report, the
//!   frontier and the recommendation (`toolbrake tune`).
#![deny(missing_docs)]

mod answer;
pub mod calibrate;
pub mod event;
/// The importers of recorded runs (the `toolbrake-import` crate).
pub use toolbrake_import as import;
pub mod parallel;
pub mod processor;
pub mod reader;
pub mod record;
pub mod report;
pub mod settings;
mod stream;
pub mod tune;

pub use parallel::run_sharded;
pub use processor::{Handled, Processor, Record};
pub use stream::{run, LineWriter, Sink};

/// The protocol's version, printed by `toolbrake --version` beside the crate's.
pub const PROTOCOL_VERSION: u32 = 1;
