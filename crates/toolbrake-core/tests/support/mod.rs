//! The scenario harness shared by this crate's integration tests: one session driven
//! through the engine's public API, every verdict recorded.
// Each test binary uses a different subset.
#![allow(dead_code)]

use serde_json::Value;
use toolbrake_core::config::no_env;
use toolbrake_core::{Call, Config, Decision, Engine, Outcome, SessionState, Verdict};

/// One session of one engine; calls get ids `c1`, `c2`, ….
pub struct Session {
    pub engine: Engine,
    pub st: SessionState,
    n: u32,
    /// Every verdict, in order.
    pub verdicts: Vec<Verdict>,
}

impl Session {
    /// A session of an engine configured by `config` (`{"streak": {…}, "breaker": {…}}`,
    /// which must be valid).
    pub fn new(config: Value) -> Self {
        Session {
            engine: Engine::new(Config::from_value(&config, &no_env).expect("valid config")),
            st: SessionState::default(),
            n: 0,
            verdicts: Vec::new(),
        }
    }

    /// Judges a call without running it.
    pub fn call(&mut self, tool: &str, args: Value) -> Decision {
        self.n += 1;
        let id = format!("c{}", self.n);
        let d = self
            .engine
            .pre(
                &mut self.st,
                &Call {
                    session: "s1",
                    id: &id,
                    tool,
                    args: &args,
                },
            )
            .unwrap();
        self.verdicts.push(d.verdict);
        d
    }

    /// A call that runs (when allowed) and returns `outcome`; the post's advisories are
    /// returned with the decision's.
    pub fn try_run(
        &mut self,
        tool: &str,
        args: Value,
        outcome: Outcome,
    ) -> (Decision, Vec<String>) {
        let d = self.call(tool, args);
        let mut advisories: Vec<String> = d.advisories.iter().map(|a| a.text.clone()).collect();
        if d.runs() {
            let p = self.engine.post(&mut self.st, &d.id, &outcome).unwrap();
            advisories.extend(p.advisories.iter().map(|a| a.text.clone()));
        }
        (d, advisories)
    }

    /// [`Session::try_run`] without the post's advisories.
    pub fn run(&mut self, tool: &str, args: Value, outcome: Outcome) -> Decision {
        self.try_run(tool, args, outcome).0
    }

    /// [`Session::try_run`] for steps whose decision only the recorded verdicts need.
    pub fn step(&mut self, tool: &str, args: Value, outcome: Outcome) {
        let _ = self.try_run(tool, args, outcome);
    }

    /// The id of the latest call.
    pub fn last_id(&self) -> String {
        format!("c{}", self.n)
    }

    /// How many calls were asked about or denied.
    pub fn stops(&self) -> usize {
        self.verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::Ask | Verdict::Deny))
            .count()
    }

    /// 1-based ordinal of the first call asked about or denied.
    pub fn first_stop(&self) -> Option<usize> {
        self.verdicts
            .iter()
            .position(|v| matches!(v, Verdict::Ask | Verdict::Deny))
            .map(|i| i + 1)
    }
}
