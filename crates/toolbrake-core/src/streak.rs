//! The streak brake: the Nth consecutive identical call of a session is refused
//! (docs/decisions.md, "Streak brake").
//!
//! One slot per session: the current call hash, its count, and the last
//! [`crate::outcome::MAX_OPEN_CALLS`] call ids (so a call seen through two seams is counted once).
//! The brake itself holds only its configuration; session state is a plain value the
//! caller keeps (in memory, or in a store).

use crate::canonical::{call_digest, hash_prefix, CanonicalError};
use crate::progress::OutputDigest;
use crate::table::{
    as_int, dotted, get_bool, get_int, show, unknown_key, ConfigError, EnvLookup, Table,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::VecDeque;
use std::fmt;

/// The refusal code carried by every streak refusal.
pub const CODE: &str = "LOOP_BRAKE";
/// The engine name carried by every streak refusal.
pub const ENGINE: &str = "streak";
/// Default `max_repeats`.
pub const DEFAULT_MAX_REPEATS: u32 = 3;
/// Default `progress_limit`: consecutive identical calls refused even while their output
/// keeps changing (a runaway poll). Above the longest healthy run of new output seen in
/// recorded runs (an agent paging a file 47 times).
pub const DEFAULT_PROGRESS_LIMIT: u32 = 64;
/// Environment variables read when `max_repeats` is missing from the file, in order
/// (docs/decisions.md, "Configuration and environment").
pub const ENV_VARS: &[&str] = &["TOOLBRAKE_MAX_REPEATS", "DSH_LOOP_BRAKE_MAX_REPEATS"];

/// Every key of the `streak` section, read off the written-out defaults
/// ([`StreakConfig::to_value`]), so a key is declared where its value is written.
pub fn keys() -> &'static [String] {
    static KEYS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        StreakConfig::default()
            .to_value()
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    });
    &KEYS
}

/// Validated streak-brake configuration. It can only be built valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StreakConfig {
    enabled: bool,
    max_repeats: u32,
    progress: bool,
    progress_limit: u32,
}

impl Default for StreakConfig {
    fn default() -> Self {
        StreakConfig {
            enabled: true,
            max_repeats: DEFAULT_MAX_REPEATS,
            progress: true,
            progress_limit: DEFAULT_PROGRESS_LIMIT,
        }
    }
}

impl StreakConfig {
    /// This configuration with what only judging reads (the refusal count and the
    /// progress limit) put to one value: equal views hash every call alike.
    pub(crate) fn derivation_view(&self) -> StreakConfig {
        StreakConfig {
            max_repeats: 0,
            progress_limit: 0,
            ..*self
        }
    }

    /// A configuration refusing the `max_repeats`-th consecutive identical call.
    ///
    /// ```
    /// use toolbrake_core::streak::StreakConfig;
    /// assert!(StreakConfig::new(0).is_err());
    /// assert_eq!(StreakConfig::new(5).unwrap().max_repeats(), 5);
    /// ```
    pub fn new(max_repeats: i64) -> Result<Self, ConfigError> {
        Ok(StreakConfig {
            max_repeats: validate_max_repeats(
                "streak.max_repeats",
                &max_repeats.to_string(),
                Some(max_repeats),
            )?,
            ..StreakConfig::default()
        })
    }

    /// The same configuration with the progress signal on or off (`false`: the seeds'
    /// exact rule, every identical consecutive call counts whatever it returned).
    pub fn with_progress(mut self, progress: bool) -> Self {
        self.progress = progress;
        self
    }

    /// Whether an identical call whose previous identical call returned new output
    /// restarts the streak.
    pub fn progress(&self) -> bool {
        self.progress
    }

    /// Consecutive identical calls refused even while their output keeps changing (as
    /// configured; it never applies below `max_repeats`).
    pub fn progress_limit(&self) -> u32 {
        self.progress_limit
    }

    /// The ceiling in force: `progress_limit`, or `max_repeats` when that is higher.
    fn ceiling(&self) -> u32 {
        self.progress_limit.max(self.max_repeats)
    }

    /// The same configuration, switched on or off.
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Whether the engine judges calls at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The streak length at which a call is refused.
    pub fn max_repeats(&self) -> u32 {
        self.max_repeats
    }

    /// Reads the `[streak]` table; `max_repeats` falls back to the environment.
    pub fn from_table(table: Option<&Table>, env: EnvLookup<'_>) -> Result<Self, ConfigError> {
        let mut cfg = StreakConfig::default();
        let mut have_max = false;
        if let Some(t) = table {
            for (k, v) in t {
                match k.as_str() {
                    "enabled" => cfg.enabled = get_bool("streak", k, v)?,
                    "progress" => cfg.progress = get_bool("streak", k, v)?,
                    "progress_limit" => {
                        let n = get_int("streak", k, v)?;
                        if !(2..=1_000_000).contains(&n) {
                            return Err(ConfigError::new(
                                dotted("streak", k),
                                show(v),
                                "must be an integer from 2 to 1000000",
                            ));
                        }
                        cfg.progress_limit = n as u32;
                    }
                    "max_repeats" => {
                        let n = as_int(v);
                        cfg.max_repeats = validate_max_repeats(&dotted("streak", k), &show(v), n)?;
                        have_max = true;
                    }
                    _ => return Err(unknown_key("streak", k, keys())),
                }
            }
        }
        if !have_max {
            for var in ENV_VARS {
                if let Some(raw) = env(var) {
                    // Digits only, as documented: " 3" or "3\n" is a mistake worth naming.
                    let parsed = if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
                        raw.parse::<i64>().ok()
                    } else {
                        None
                    };
                    cfg.max_repeats = validate_max_repeats(var, &format!("{raw:?}"), parsed)?;
                    break;
                }
            }
        }
        Ok(cfg)
    }

    /// The `streak` section, every key written out.
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "enabled": self.enabled,
            "max_repeats": self.max_repeats,
            "progress": self.progress,
            "progress_limit": self.progress_limit,
        })
    }
}

fn validate_max_repeats(key: &str, shown: &str, n: Option<i64>) -> Result<u32, ConfigError> {
    match n {
        Some(n) if n >= 1 && n <= u32::MAX as i64 => Ok(n as u32),
        _ => Err(ConfigError::new(
            key,
            shown,
            format!("must be a whole number from 1 to {}", u32::MAX),
        )),
    }
}

/// One remembered call id and how it was judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    id: String,
    count: u32,
    refused: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    by_limit: bool,
}

/// A session's streak: one slot, whatever the session's length.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreakState {
    /// Hex digest of the current streak's call (never the arguments).
    hash: Option<String>,
    /// Length of the current streak, counting refused attempts.
    count: u32,
    /// The last [`crate::outcome::MAX_OPEN_CALLS`] call ids.
    seen: VecDeque<Seen>,
    /// Consecutive identical calls, whatever they returned (for `progress_limit`).
    #[serde(default, skip_serializing_if = "is_zero")]
    run: u32,
    /// The id of the latest call counted in the current streak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<String>,
    /// The digest of the latest outcome reported in the current streak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outcome: Option<OutputDigest>,
    /// How many outcomes in a row of the current streak were the same.
    #[serde(default, skip_serializing_if = "is_zero")]
    same: u32,
}

/// A digest as lowercase hex, on the stack: compared with the stored hash without an
/// allocation, copied only when a new streak starts.
struct Hex([u8; 64]);

impl Hex {
    fn of(digest: &[u8; 32]) -> Hex {
        let mut buf = [0u8; 64];
        hex::encode_to_slice(digest, &mut buf).expect("64 bytes hold 32 in hex");
        Hex(buf)
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex is ASCII")
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl StreakState {
    /// What the latest call of the current streak returned, when the streak is the call
    /// with this digest and an outcome was reported.
    pub fn outcome_of(&self, digest: &[u8; 32]) -> Option<OutputDigest> {
        match &self.hash {
            Some(h) if *h == Hex::of(digest).as_str() => self.outcome,
            _ => None,
        }
    }

    /// Identical calls in a row so far (refused attempts included) and, of their reported
    /// outcomes, how many in a row were the same, when the current streak is the call with
    /// this digest; `(0, 0)` otherwise.
    pub fn run_of(&self, digest: &[u8; 32]) -> (u32, u32) {
        match &self.hash {
            Some(h) if *h == Hex::of(digest).as_str() => (self.count, self.same),
            _ => (0, 0),
        }
    }

    /// The current streak length.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The current streak's hash prefix, if any call was seen.
    pub fn current_prefix(&self) -> Option<&str> {
        self.hash.as_deref().map(hash_prefix)
    }
}

/// A refused call: everything needed to find it in logs, and never its arguments.
///
/// Its text is the seeds' message; with the progress signal on it also says how many of
/// the identical calls returned the same result, or that the progress limit was reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct StreakRefusal {
    /// Always [`CODE`].
    pub code: String,
    /// The tool that was called.
    pub tool: String,
    /// This call's position in the streak, counting it.
    pub count: u32,
    /// The configured limit.
    pub max_repeats: u32,
    /// The first 12 hex characters of the call hash.
    pub hash_prefix: String,
    /// The session whose streak tripped.
    pub session: String,
    /// Always [`ENGINE`].
    pub engine: String,
    /// How many of the identical calls before this one returned the same result, when
    /// their outcomes were reported (progress signal on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_results: Option<u32>,
    /// Set when the call was refused by `progress_limit` although its output kept
    /// changing; `count` is then the whole run of identical calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_limit: Option<u32>,
}

impl fmt::Display for StreakRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = match self.progress_limit {
            Some(l) => format!("limit {l} even while the output changes"),
            None => format!("limit {}", self.max_repeats),
        };
        write!(
            f,
            "loop brake: tool \"{}\" called {} times in a row with identical arguments (call {}…, {limit}); the call was denied before it ran.",
            self.tool, self.count, self.hash_prefix
        )?;
        if let Some(n) = self.same_results.filter(|n| *n >= 2) {
            write!(f, " The last {n} identical calls returned the same result.")?;
        }
        write!(f, " Change the arguments, call a different tool, or stop.")
    }
}

/// The streak brake's verdict on one call.
#[must_use = "a refused call must not run"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreakVerdict {
    /// Run it; `count` is its position in the current streak (0 when the engine is off).
    Allow {
        /// Position in the streak, counting this call.
        count: u32,
    },
    /// Do not run it.
    Refuse(StreakRefusal),
}

impl StreakVerdict {
    /// `Ok(())` to run the call, or the refusal.
    // The refusal is the cold path and carries every field the seeds name; boxing it
    // would only make the common `Ok` case no cheaper.
    #[allow(clippy::result_large_err)]
    pub fn into_result(self) -> Result<(), StreakRefusal> {
        match self {
            StreakVerdict::Allow { .. } => Ok(()),
            StreakVerdict::Refuse(e) => Err(e),
        }
    }
}

/// The streak brake engine: pure decisions over a [`StreakState`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreakBrake {
    config: StreakConfig,
}

impl fmt::Display for StreakBrake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "streak brake (max_repeats {})", self.config.max_repeats)
    }
}

impl StreakBrake {
    /// A brake with a validated configuration.
    pub fn new(config: StreakConfig) -> Self {
        StreakBrake { config }
    }

    /// The configuration.
    pub fn config(&self) -> &StreakConfig {
        &self.config
    }

    /// Judges one call of `session` and records it in `state`.
    ///
    /// A call whose `id` was already counted in this session is judged again as it was
    /// the first time, and not counted twice ("Call ids counted once").
    ///
    /// ```
    /// use toolbrake_core::streak::{StreakBrake, StreakConfig, StreakState, StreakVerdict};
    /// use serde_json::json;
    /// let brake = StreakBrake::new(StreakConfig::default());
    /// let mut s = StreakState::default();
    /// let args = json!({"q": "weather"});
    /// assert!(matches!(brake.check(&mut s, "s1", None, "search", &args)?, StreakVerdict::Allow { count: 1 }));
    /// assert!(matches!(brake.check(&mut s, "s1", None, "search", &args)?, StreakVerdict::Allow { count: 2 }));
    /// assert!(matches!(brake.check(&mut s, "s1", None, "search", &args)?, StreakVerdict::Refuse(_)));
    /// # Ok::<(), toolbrake_core::canonical::CanonicalError>(())
    /// ```
    pub fn check(
        &self,
        state: &mut StreakState,
        session: &str,
        call_id: Option<&str>,
        tool: &str,
        args: &Value,
    ) -> Result<StreakVerdict, CanonicalError> {
        if !self.config.enabled {
            return Ok(StreakVerdict::Allow { count: 0 });
        }
        let digest = call_digest(tool, args)?;
        Ok(self.check_hashed(state, session, call_id, tool, &digest))
    }

    /// [`StreakBrake::check`] for a call whose digest ([`call_digest`]) the caller already
    /// has: the engine hashes each call once for both this brake and its id checks.
    pub(crate) fn check_hashed(
        &self,
        state: &mut StreakState,
        session: &str,
        call_id: Option<&str>,
        tool: &str,
        digest: &[u8; 32],
    ) -> StreakVerdict {
        if !self.config.enabled {
            return StreakVerdict::Allow { count: 0 };
        }
        let hex = Hex::of(digest);
        let hash = hex.as_str();
        if let Some(id) = call_id {
            if let Some(seen) = state.seen.iter().find(|s| s.id == id) {
                let (refused, count, by_limit) = (seen.refused, seen.count, seen.by_limit);
                return self.verdict(state, refused, count, by_limit, tool, hash, session);
            }
        }
        if state.hash.as_deref() == Some(hash) {
            state.count = state.count.saturating_add(1);
            state.run = state.run.saturating_add(1);
        } else {
            state.hash = Some(hash.to_string());
            state.count = 1;
            state.run = 1;
            state.outcome = None;
            state.same = 0;
        }
        state.last = call_id.map(str::to_string);
        let ceiling = self.config.progress && state.run >= self.config.ceiling();
        let refused = state.count >= self.config.max_repeats || ceiling;
        // The ceiling speaks unless the outcomes themselves show the loop.
        let by_limit = ceiling && state.same.saturating_add(1) < self.config.max_repeats;
        let count = if by_limit { state.run } else { state.count };
        if let Some(id) = call_id {
            if state.seen.len() >= crate::outcome::MAX_OPEN_CALLS {
                state.seen.pop_front();
            }
            state.seen.push_back(Seen {
                id: id.to_string(),
                count,
                refused,
                by_limit,
            });
        }
        self.verdict(state, refused, count, by_limit, tool, hash, session)
    }

    /// The outcome of a call this brake counted (progress signal). When it is the latest
    /// call of the current streak and its outcome differs from the previous identical
    /// call's, the call brought new information: the streak restarts with it. An unknown
    /// outcome (`None`) changes nothing, so the seeds' count applies.
    ///
    /// ```
    /// use toolbrake_core::streak::{StreakBrake, StreakConfig, StreakState, StreakVerdict};
    /// use toolbrake_core::progress::digest;
    /// use toolbrake_core::Outcome;
    /// use serde_json::json;
    /// let brake = StreakBrake::new(StreakConfig::default());
    /// let mut s = StreakState::default();
    /// let args = json!({});
    /// for (i, page) in ["1: import os", "101: def main():", "201:     run()", "301: class Job:"].iter().enumerate() {
    ///     let id = i.to_string();
    ///     let v = brake.check(&mut s, "s1", Some(&id), "scroll_down", &args)?;
    ///     assert!(matches!(v, StreakVerdict::Allow { .. }), "page {i}");
    ///     brake.observe(&mut s, &id, digest(&Outcome::success(*page)));
    /// }
    /// # Ok::<(), toolbrake_core::canonical::CanonicalError>(())
    /// ```
    pub fn observe(&self, state: &mut StreakState, call_id: &str, outcome: Option<OutputDigest>) {
        if !self.config.enabled || !self.config.progress {
            return;
        }
        let Some(d) = outcome else { return };
        if state.last.as_deref() != Some(call_id) {
            return;
        }
        match state.outcome {
            Some(prev) if prev != d => {
                state.count = 1;
                state.same = 1;
            }
            Some(_) => state.same = state.same.saturating_add(1),
            None => state.same = 1,
        }
        state.outcome = Some(d);
    }

    #[allow(clippy::too_many_arguments)]
    fn verdict(
        &self,
        state: &StreakState,
        refused: bool,
        count: u32,
        by_limit: bool,
        tool: &str,
        hash: &str,
        session: &str,
    ) -> StreakVerdict {
        if !refused {
            return StreakVerdict::Allow { count };
        }
        StreakVerdict::Refuse(StreakRefusal {
            code: CODE.to_string(),
            tool: tool.to_string(),
            count,
            max_repeats: self.config.max_repeats,
            hash_prefix: hash_prefix(hash).to_string(),
            session: session.to_string(),
            engine: ENGINE.to_string(),
            same_results: (self.config.progress && !by_limit && state.same >= 2)
                .then_some(state.same),
            progress_limit: by_limit.then_some(self.config.ceiling()),
        })
    }

    /// The call `call_id` is closed (its result arrived): a later call with the same id is
    /// a new call, counted as such. The streak itself is unchanged.
    pub fn forget(&self, state: &mut StreakState, call_id: &str) {
        state.seen.retain(|s| s.id != call_id);
    }

    /// A real user message: the session's streak starts afresh.
    pub fn reset(&self, state: &mut StreakState) {
        *state = StreakState::default();
    }
}

/// The session key (the seeds' `sessionKey`): the adapter's explicit key, else the host's
/// agent id, else `default`.
pub fn session_key<'a>(explicit: Option<&'a str>, agent: Option<&'a str>) -> &'a str {
    explicit
        .filter(|s| !s.is_empty())
        .or(agent.filter(|s| !s.is_empty()))
        .unwrap_or("default")
}
