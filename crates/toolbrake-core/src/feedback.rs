//! What a person said of a run after the fact: a stop was mistaken, or the run was stuck.
//!
//! Kept with the session's state ([`crate::SessionState::feedback`]) and read by
//! calibration (`toolbrake tune --calibrate`): a run marked mistaken counts as a good run
//! whatever toolbrake did in it (a run-level line calibrated on it can only move up), a run
//! marked stuck never counts as a good one.

use serde::{Deserialize, Serialize};

/// A person's verdict on a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feedback {
    /// A stop in this run was wrong: the run was a good one.
    Mistaken,
    /// The run was stuck (looping, wasting calls): not a good run, stopped or not.
    Stuck,
}

impl Feedback {
    /// The stored and shown name: `mistaken` or `stuck`.
    pub fn as_str(self) -> &'static str {
        match self {
            Feedback::Mistaken => "mistaken",
            Feedback::Stuck => "stuck",
        }
    }

    /// The feedback a name gives (`mistaken`, `stuck`), for readers of text.
    pub fn parse(name: &str) -> Option<Feedback> {
        match name {
            "mistaken" => Some(Feedback::Mistaken),
            "stuck" => Some(Feedback::Stuck),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_json() {
        for f in [Feedback::Mistaken, Feedback::Stuck] {
            let text = serde_json::to_string(&f).unwrap();
            assert_eq!(text, format!("\"{}\"", f.as_str()));
            assert_eq!(serde_json::from_str::<Feedback>(&text).unwrap(), f);
            assert_eq!(Feedback::parse(f.as_str()), Some(f));
        }
        assert_eq!(Feedback::parse("wrong"), None);
    }
}
