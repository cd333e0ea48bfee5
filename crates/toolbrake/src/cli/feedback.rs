//! `toolbrake feedback SESSION --mistaken|--stuck`: a person's verdict on a stored run,
//! kept with the session's state (`toolbrake_session::record_feedback`). Calibration
//! (`toolbrake tune --calibrate --store`) counts a run marked mistaken as a good run and
//! one marked stuck as never good.

use super::CliError;
use std::path::Path;
use std::process::ExitCode;
use toolbrake::settings::{self, process_env, StoreKind};
use toolbrake_core::Feedback;

/// The verdict flags: exactly one.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct Verdict {
    /// A stop in this run was wrong: the run was a good one (calibration counts it as good,
    /// so a line calibrated on it can only move up).
    #[arg(long)]
    mistaken: bool,
    /// The run was stuck (looping, wasting calls): calibration never counts it as good.
    #[arg(long)]
    stuck: bool,
}

impl Verdict {
    fn feedback(&self) -> Feedback {
        if self.mistaken {
            Feedback::Mistaken
        } else {
            Feedback::Stuck
        }
    }
}

pub fn run(config: Option<&Path>, session: &str, verdict: &Verdict) -> Result<ExitCode, CliError> {
    let s = settings::load(config)?;
    let store = s.store.open(StoreKind::Sqlite, &process_env)?;
    let feedback = verdict.feedback();
    let from_agent = settings::agent_environment(&process_env);
    let kept = match from_agent {
        // Kept in the session's timeline too, so a person sees it on the dashboard.
        Some(var) => {
            toolbrake_session::record_feedback_noted(store.as_ref(), session, feedback, var)?
        }
        None => toolbrake_session::record_feedback(store.as_ref(), session, feedback)?,
    };
    if let (Some(var), true) = (from_agent, kept) {
        warn!("toolbrake: this command runs inside an agent's environment ({var} is set): the verdict is recorded in the session's history on the dashboard");
    }
    for w in store.take_warnings() {
        warn!("toolbrake: {w}");
    }
    if kept {
        outln!(
            "Session {session} marked {} in {}.",
            feedback.as_str(),
            store.describe()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        warn!(
            "toolbrake: no stored session {session:?} in {} (an ended session is forgotten; `toolbrake sessions` lists those kept)",
            store.describe()
        );
        Ok(ExitCode::from(1))
    }
}
