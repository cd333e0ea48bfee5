//! Workspace mutation: whether a call changes the workspace (an edit, a write, a move, an
//! install). A successful mutating call between two failures of a fingerprint is progress
//! on it: the agent changed something before it ran the failing thing again.
//!
//! Two sources: configured tool classes (`[breaker.tools] mutating`, see
//! [`MutatingTool`]) and, for shell tools, the command itself ([`shell_writes`]). Reads
//! (`cat`, `grep`, a file viewer) are never mutating.
//!
//! `writes` says whether a call changes the workspace, `files` which files it changes and reads.

mod files;
pub(super) mod writes;

pub use files::{effects, files, normalise, Effects, FileId, Files, MAX_FILES, PATH_KEYS};
pub use writes::{shell_writes, MutatingTool, DEFAULT_MUTATING};
