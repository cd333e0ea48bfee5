//! The same-output track (docs/decisions.md, "Progress", "Same output, other spelling"):
//! a loop that changes only its spelling.
//!
//! An agent refused for repeating a command often rewrites it (`ls -la x`, `ls -al x`,
//! `ls -a -l ./x`, a comment, a `cd` to where it already is) and gets the same output
//! back each time. The exact identity sees a new call every time. This track reads two
//! things together: the output, and the call's *spelling identity* (for a shell tool its
//! canonical command, [`super::shell::canonical`], with a leading `cd` resolved against
//! the directory the session is in; for any other tool its `exact:` identity).
//!
//! Per tool, the session keeps the current *run*: the calls of that tool in a row that
//! returned the same non-trivial output (at least [`MIN_OUTPUT`] non-blank bytes: an
//! empty output, `OK`, `[]` or a prompt are what different calls share), with the
//! spelling identities that took part and how often. The run ends when the tool returns
//! anything else (different output, a trivial one, none), when a call of another tool
//! comes between, and when a call changed the workspace; a call that returned new output
//! thus never counts. A call is stopped when its spelling identity already ran
//! `same_output_limit` times in the run: the same action, however it is written, that
//! already came back the same that many times with nothing changed in between.

use super::fingerprint::{FpId, Spelling};
use super::messages;
use super::verdict::{Hit, Track};
use crate::progress::OutputDigest;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Fewest non-blank bytes of output that can tie two calls together: fewer is what
/// unrelated calls share (an empty output, `OK`, `[]`, `true`, a shell prompt).
pub const MIN_OUTPUT: usize = 16;
/// Spelling identities remembered per run.
const MAX_IDS: usize = 16;

/// One spelling identity in a run, and how many of the run's calls it made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Member {
    id: FpId,
    n: u32,
}

/// The calls of one tool in a row that returned the same output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Run {
    tool: String,
    out: OutputDigest,
    /// Calls in the run.
    calls: u32,
    members: Vec<Member>,
}

/// A session's same-output state: the current run, the spelling identity of each call
/// still waiting for its outcome, and the directory the session's shell is in as far as
/// the calls tell (the id of the last `cd` target).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SameOutputState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<Run>,
    /// (a quick id of the call's id, its spelling identity)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    open: Vec<(u64, FpId)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cwd: Option<FpId>,
    /// The last call this track stopped (its `exact:` id) and the output its run kept
    /// returning: what the stopped call would have returned again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stopped: Option<(FpId, OutputDigest)>,
}

impl SameOutputState {
    pub(crate) fn is_empty(&self) -> bool {
        self.run.is_none() && self.open.is_empty() && self.cwd.is_none() && self.stopped.is_none()
    }

    /// How many times the run of `tool` already holds `id`, when it does.
    pub(crate) fn count(&self, tool: &str, id: FpId) -> u32 {
        self.run
            .as_ref()
            .filter(|r| r.tool == tool)
            .and_then(|r| r.members.iter().find(|m| m.id == id))
            .map_or(0, |m| m.n)
    }

    /// This track stopped a call of `tool` (its `exact:` id).
    pub(crate) fn stop(&mut self, tool: &str, exact: FpId) {
        if let Some(r) = self.run.as_ref().filter(|r| r.tool == tool) {
            self.stopped = Some((exact, r.out));
        }
    }

    /// For a call this track stopped last: the output its run kept returning.
    pub(crate) fn before(&self, exact: FpId) -> Option<OutputDigest> {
        self.stopped.filter(|(id, _)| *id == exact).map(|(_, d)| d)
    }

    /// A call is about to run: its spelling identity is kept for its outcome, and its
    /// leading `cd` becomes the session's directory.
    pub(crate) fn ran(&mut self, call_id: &str, id: FpId, cd: Option<FpId>) {
        let call = FpId::quick(call_id).0;
        self.open.retain(|(c, _)| *c != call);
        if self.open.len() >= crate::outcome::MAX_OPEN_CALLS {
            self.open.remove(0);
        }
        self.open.push((call, id));
        if cd.is_some() {
            self.cwd = cd;
        }
    }

    /// A call's outcome. `changed`: it changed the workspace (a successful mutating call).
    /// `digest` and `text`: what it returned.
    pub(crate) fn outcome(
        &mut self,
        call_id: &str,
        tool: &str,
        changed: bool,
        digest: Option<OutputDigest>,
        text: Option<&str>,
    ) {
        self.stopped = None;
        let call = FpId::quick(call_id).0;
        let id = self
            .open
            .iter()
            .position(|(c, _)| *c == call)
            .map(|i| self.open.remove(i).1);
        if changed {
            self.run = None;
            return;
        }
        let (Some(id), Some(d)) = (id, digest.filter(|_| text.is_some_and(non_trivial))) else {
            self.run = None;
            return;
        };
        match self.run.as_mut().filter(|r| r.tool == tool && r.out == d) {
            Some(r) => {
                r.calls = r.calls.saturating_add(1);
                match r.members.iter_mut().find(|m| m.id == id) {
                    Some(m) => m.n = m.n.saturating_add(1),
                    None => {
                        if r.members.len() >= MAX_IDS {
                            r.members.remove(0);
                        }
                        r.members.push(Member { id, n: 1 });
                    }
                }
            }
            None => match self.run.as_mut() {
                // A new run in the old one's place (its allocations kept).
                Some(r) => {
                    if r.tool != tool {
                        r.tool.clear();
                        r.tool.push_str(tool);
                    }
                    r.out = d;
                    r.calls = 1;
                    r.members.clear();
                    r.members.push(Member { id, n: 1 });
                }
                None => {
                    self.run = Some(Run {
                        tool: tool.to_string(),
                        out: d,
                        calls: 1,
                        members: vec![Member { id, n: 1 }],
                    })
                }
            },
        }
    }
}

fn same_output_hits(hits: &[Hit]) -> impl Iterator<Item = &Hit> {
    hits.iter().filter(|h| h.track == Track::SameOutput)
}

/// `<fp> has run 2 times already, however it was spelled, and <tool> returned the same
/// result every time`.
fn line(tool: &str, h: &Hit) -> String {
    format!(
        "{} has run {} {} already, however it was spelled, and {tool} returned the same result every time since it last returned anything else",
        h.fingerprint,
        h.count,
        if h.count == 1 { "time" } else { "times" },
    )
}

/// The reason an operator reads ([`messages::ask_reason`], with the same-output hits
/// first).
pub(super) fn ask_reason(tool: &str, hits: &[Hit], progress: bool) -> String {
    let mut s = String::new();
    if same_output_hits(hits).next().is_some() {
        // The track exists only with the progress signal on: it speaks plain words.
        s.push_str("toolbrake: this call repeats, spelled differently, a call that keeps returning the SAME output:\n");
        for h in same_output_hits(hits) {
            let shown = Hit {
                fingerprint: messages::action_in_words(&h.fingerprint),
                ..h.clone()
            };
            let _ = writeln!(s, "  - {}", line(tool, &shown));
        }
    }
    s.push_str(&messages::ask_reason(hits, progress));
    s
}

/// The denial the model reads ([`messages::denial`], with the same-output hits first).
pub(super) fn denial(
    tool: &str,
    hits: &[Hit],
    refused: bool,
    last_result: Option<&str>,
    result_cap: usize,
    progress: bool,
) -> String {
    if same_output_hits(hits).next().is_none() {
        return messages::denial(tool, hits, refused, last_result, result_cap, progress);
    }
    let name = if tool.is_empty() { "tool call" } else { tool };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "REPEAT_TOOL_BLOCKED: repeated {name} (same output, other spelling). The call was stopped before executing."
    );
    s.push_str("Same output:\n");
    for h in same_output_hits(hits) {
        let _ = writeln!(s, "- {}", line(name, h));
    }
    s.push_str(
        "Rewriting a command (the order of its flags, its quotes, a comment, `./`, a `cd` to where you already are, \
         a different head count) does not change what it does: it will return the same result again. \
         A different call is not blocked.\n",
    );
    let others: Vec<Hit> = hits
        .iter()
        .filter(|h| h.track != Track::SameOutput)
        .cloned()
        .collect();
    if !others.is_empty() {
        s.push('\n');
        s.push_str(&messages::denial(
            tool,
            &others,
            refused,
            last_result,
            result_cap,
            progress,
        ));
        return s;
    }
    messages::refusal_and_last_result(&mut s, refused, last_result, result_cap);
    s.push_str(
        "\nDo not repeat this call with different cosmetics. Use the result you already have, \
         do something genuinely different, or answer with what you have.",
    );
    s
}

/// Whether an output says enough to tie two calls together: at least [`MIN_OUTPUT`]
/// non-blank bytes.
pub fn non_trivial(text: &str) -> bool {
    text.bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .take(MIN_OUTPUT)
        .count()
        >= MIN_OUTPUT
}

/// A call's spelling identity in a session, and the directory its leading `cd` moves the
/// session to: `(identity, cd)`. A shell call is its canonical command in the directory it
/// runs in (its `cd`'s target, resolved against the session's directory when relative;
/// else the session's directory); any other call is its `exact:` identity.
pub(crate) fn identity(
    st: &SameOutputState,
    exact: FpId,
    spelling: Option<&Spelling>,
) -> (FpId, Option<FpId>) {
    let Some(s) = spelling else {
        return (exact, None);
    };
    let cd = s.cd.as_deref().map(|d| {
        if d.starts_with(['/', '~']) {
            FpId::quick(d)
        } else {
            match st.cwd {
                Some(base) => FpId::quick(&format!("{:016x}/{d}", base.0)),
                None => FpId::quick(d),
            }
        }
    });
    let dir = cd.or(st.cwd);
    let id = match dir {
        Some(d) => FpId(mix(s.rest.0 ^ d.0.rotate_left(29))),
        None => s.rest,
    };
    (id, cd)
}

/// splitmix64's finaliser: two 64-bit ids into one well-spread id.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trivial_outputs() {
        for t in [
            "",
            "OK",
            "[]",
            "{}",
            "true\n",
            "$ ",
            "root@host:/w# ",
            "   \n\t  ",
        ] {
            assert!(!non_trivial(t), "{t:?}");
        }
        assert!(non_trivial("total 8\ndrwxr-xr-x 2 a a 4096 x"));
    }
}
