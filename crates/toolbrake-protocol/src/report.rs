//! The replay report: what toolbrake would have done to a set of sessions, as a text
//! summary and as one self-contained HTML page (inline SVG, no network fetches).
//!
//! Definitions: a *gate* is a call that was asked about or denied; a *stopped* call is one
//! denied, or asked about and not approved (in a replay nobody answers): it never ran, and
//! only stopped calls are *saved*. The calls *after the first gate* are those from a
//! session's first gate to its end (the gate is where the loop would have been stopped or
//! redirected); the *longest repeat* is the most times one exact call (same tool, same
//! canonical arguments) occurs in the session.
//!
//! Each stopped call of a recorded run is also judged against what the run really did
//! next: *waste* when its recorded output repeated the last identical call's (normalised
//! as in [`toolbrake_core::progress`]), *new information* when it differed (or no
//! identical call came before), *unknown* when the recording has no output for it. The
//! share of new information among stopped calls is the false-alarm rate on that history.

use crate::record::Record;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use std::collections::HashMap;
use std::fmt::Write;
use toolbrake_core::progress::{judge_stopped, OutputDigest, Stopped};
use toolbrake_core::{Settled, Verdict};

/// The report's maps: looked up once or more per event (by session, call id and call
/// identity), and `toolbrake tune` fills one report per setting, so they hash with foldhash
/// (seeded per process) rather than SipHash (a twentieth of a tune's time went to SipHash).
/// Nothing reads them in their own order.
pub type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// One call's mark on a session's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The verdict at the call (asks later settled keep `Ask`).
    pub verdict: Verdict,
    /// Advisory or gate label, if any.
    pub label: Option<String>,
    /// For a stopped call: what the recorded run got by running it.
    pub judged: Option<Judged>,
    /// The tool, when the processor recorded details.
    pub tool: String,
    /// A redacted preview of the arguments.
    pub preview: String,
    /// What the call did: `None` before a result, `Some(None)` ok, `Some(Some(why))` failed.
    pub failure: Option<Option<String>>,
}

/// What a stopped call would have returned, judged from the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// Its recorded output repeated the last identical call's: stopping it lost nothing.
    Waste,
    /// Its recorded output was new: stopping it stopped progress.
    NewInformation,
    /// The recording has no output for it.
    Unknown,
}

impl Judged {
    fn as_str(self) -> &'static str {
        match self {
            Judged::Waste => "waste",
            Judged::NewInformation => "new information",
            Judged::Unknown => "no recorded output",
        }
    }
}

/// Per-session figures.
#[derive(Debug, Clone, Default)]
pub struct SessionReport {
    /// The session key.
    pub name: String,
    /// Calls judged.
    pub calls: u32,
    /// Advisories (stage 1/2 and failure).
    pub advisories: u32,
    /// Operator asks.
    pub asks: u32,
    /// Calls stopped (denials, declined and unanswered asks).
    pub denials: u32,
    /// 1-based ordinal of the first gated call.
    pub first_gate: Option<u32>,
    /// Most occurrences of one exact call.
    pub longest_repeat: u32,
    /// Stopped calls whose recorded output repeated the last identical call's.
    pub waste: u32,
    /// Stopped calls whose recorded output was new.
    pub new_information: u32,
    /// Bytes of the recorded outputs of the calls stopped.
    pub bytes_saved: u64,
    /// The timeline.
    pub marks: Vec<Mark>,
    repeats: Map<[u8; 32], u32>,
    ids: Map<String, usize>,
    /// Call id → the call's identity digest.
    digests: Map<String, [u8; 32]>,
    /// Call identity → the last recorded output of that call (`None`: none recorded).
    outputs: Map<[u8; 32], Option<OutputDigest>>,
}

impl SessionReport {
    /// Judges a stopped call by its recorded output, and remembers the output as the last
    /// one of its identity (the recorded run did run it).
    fn judge(&mut self, id: &str, output: Option<OutputDigest>, bytes: u64) {
        let Some(digest) = self.digests.remove(id) else {
            return;
        };
        let previous = self.outputs.insert(digest, output);
        let Some(&i) = self.ids.get(id) else { return };
        let mark = &mut self.marks[i];
        if !matches!(mark.verdict, Verdict::Ask | Verdict::Deny) {
            return;
        }
        self.bytes_saved += bytes;
        let judged = match judge_stopped(output, previous.flatten()) {
            None => Judged::Unknown,
            Some(Stopped::Waste) => Judged::Waste,
            Some(Stopped::NewInformation) => Judged::NewInformation,
        };
        match judged {
            Judged::Waste => self.waste += 1,
            Judged::NewInformation => self.new_information += 1,
            Judged::Unknown => {}
        }
        mark.judged = Some(judged);
        if let Some(label) = &mut mark.label {
            label.push_str(&format!(" ({})", judged.as_str()));
        }
    }

    /// Calls from the first gate to the end of the session (the gate included).
    pub fn after_gate(&self) -> u32 {
        self.first_gate.map_or(0, |g| self.calls - g + 1)
    }

    fn active(&self) -> bool {
        self.advisories > 0 || self.asks > 0 || self.denials > 0
    }
}

/// The report's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Sessions seen.
    pub sessions: u64,
    /// Calls judged.
    pub calls: u64,
    /// Advisories shown.
    pub advisories: u64,
    /// Operator asks.
    pub asks: u64,
    /// Calls stopped (denials, declined and unanswered asks).
    pub stopped: u64,
    /// Sessions with at least one gate.
    pub gated: u64,
    /// Calls from each session's first gate to its end.
    pub after_gate: u64,
    /// Stopped calls whose recorded output repeated the last identical call's.
    pub waste: u64,
    /// Stopped calls whose recorded output was new (false alarms on this history).
    pub new_information: u64,
    /// Bytes of the recorded outputs of the calls stopped: what the runs would not have
    /// produced (the closest measure of tokens a recorded history holds).
    pub bytes_saved: u64,
}

/// What the text table's columns mean, printed under it: a reader meets the words there.
const COLUMNS: &str = "advised: advisories shown; asks: the operator was asked; stopped: denied, or asked and not approved (it never ran)
waste / new info: stopped calls whose recorded output repeated the last identical call's / was new
first gate: the number of the first call asked about or denied; after: the calls from it to the session's end
longest: the most times one exact call occurs in the session";

/// `n / of` as a percentage with one decimal (`3.4%`; `0%` of nothing), in integers.
pub fn share_text(n: u64, of: u64) -> String {
    if of == 0 {
        return "0%".into();
    }
    let tenths = (u128::from(n) * 1000 + u128::from(of) / 2) / u128::from(of);
    format!("{}.{}%", tenths / 10, tenths % 10)
}

/// `1 call`, `2 calls`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl Totals {
    /// The one-line summary. A call is *stopped* when it was denied, or asked about and
    /// not approved.
    pub fn summary(&self) -> String {
        format!(
            "{}, {}: {}, {}, {} stopped; {} gated ({} from the first gate to the end)",
            count(self.sessions, "session", "sessions"),
            count(self.calls, "call", "calls"),
            count(self.advisories, "advisory", "advisories"),
            count(self.asks, "ask", "asks"),
            count(self.stopped, "call", "calls"),
            count(self.gated, "session", "sessions"),
            count(self.after_gate, "call", "calls"),
        )
    }

    /// What the stops saved: the calls stopped as a share of all calls, and the bytes of
    /// their recorded outputs.
    pub fn saved_line(&self) -> String {
        format!(
            "Saved: {} of {} stopped ({}), with {} of recorded output (output bytes saved, the closest measure of tokens).",
            self.stopped,
            count(self.calls, "call", "calls"),
            share_text(self.stopped, self.calls),
            count(self.bytes_saved, "byte", "bytes"),
        )
    }

    /// The line that tells waste from new information among the stopped calls.
    pub fn waste_line(&self) -> String {
        let unknown = self
            .stopped
            .saturating_sub(self.waste + self.new_information);
        let verb = |n: u64, one: &'static str, many: &'static str| if n == 1 { one } else { many };
        format!(
            "Of the calls stopped, {} {} waste (the recorded run got the same output as the last identical call), {} would have brought new information, {} {} no recorded output.",
            self.waste,
            verb(self.waste, "was", "were"),
            self.new_information,
            unknown,
            verb(unknown, "has", "have")
        )
    }
}

/// The whole report.
#[derive(Debug, Default)]
pub struct Report {
    /// Finished and open sessions, in order of first appearance.
    pub sessions: Vec<SessionReport>,
    index: Map<String, usize>,
    /// Fingerprint → times it fired (advisories and gates).
    pub fired: Map<String, u32>,
    /// Error lines.
    pub errors: u64,
}

fn short(fp: &str, n: usize) -> String {
    if fp.chars().count() <= n {
        fp.to_string()
    } else {
        format!("{}…", fp.chars().take(n).collect::<String>())
    }
}

impl Report {
    fn session(&mut self, key: &str) -> &mut SessionReport {
        let i = match self.index.get(key) {
            Some(i) => *i,
            None => {
                self.sessions.push(SessionReport {
                    name: key.to_string(),
                    ..SessionReport::default()
                });
                self.index.insert(key.to_string(), self.sessions.len() - 1);
                self.sessions.len() - 1
            }
        };
        &mut self.sessions[i]
    }

    fn settle(&mut self, key: &str, settled: &[Settled]) {
        let s = self.session(key);
        for x in settled {
            if s.ids.contains_key(&x.id) {
                s.denials += 1;
            }
        }
    }

    /// Adds what one event did.
    pub fn add(&mut self, record: &Record) {
        match record {
            Record::Error => self.errors += 1,
            Record::Call {
                session,
                digest,
                detail,
                decision,
            } => {
                self.settle(session, &decision.settled);
                let mut fired: Vec<String> = Vec::new();
                let s = self.session(session);
                s.calls += 1;
                let ordinal = s.calls;
                if let Some(d) = digest {
                    let c = s.repeats.entry(*d).or_default();
                    *c += 1;
                    s.longest_repeat = s.longest_repeat.max(*c);
                    s.digests.insert(decision.id.clone(), *d);
                }
                let mut label = None;
                match decision.verdict {
                    Verdict::Allow => {}
                    Verdict::Advise => {
                        s.advisories += decision.advisories.len() as u32;
                        if let Some(a) = decision.advisories.first() {
                            label = Some(format!("{} ×{}", short(&a.fingerprint, 60), a.count));
                        }
                        fired.extend(decision.advisories.iter().map(|a| a.fingerprint.clone()));
                    }
                    Verdict::Ask | Verdict::Deny => {
                        if decision.verdict == Verdict::Ask {
                            s.asks += 1;
                        } else {
                            s.denials += 1;
                        }
                        s.first_gate.get_or_insert(ordinal);
                        let what = match decision.engine {
                            Some("streak") => decision
                                .streak_refusal
                                .as_ref()
                                .map(|r| format!("streak {} ×{}", r.tool, r.count))
                                .unwrap_or_else(|| "streak".into()),
                            _ => decision
                                .hits
                                .first()
                                .map(|h| {
                                    format!("{} {}/{}", short(&h.fingerprint, 60), h.count, h.limit)
                                })
                                .unwrap_or_default(),
                        };
                        label = Some(format!("{} {what}", decision.verdict.as_str()));
                        fired.extend(decision.hits.iter().map(|h| h.fingerprint.clone()));
                        if decision.engine == Some("streak") {
                            fired.push("streak (consecutive identical calls)".into());
                        }
                    }
                }
                s.ids.insert(decision.id.clone(), s.marks.len());
                s.marks.push(Mark {
                    verdict: decision.verdict,
                    label,
                    judged: None,
                    tool: detail.as_ref().map(|d| d.tool.clone()).unwrap_or_default(),
                    preview: detail
                        .as_ref()
                        .map(|d| d.preview.clone())
                        .unwrap_or_default(),
                    failure: None,
                });
                for f in fired {
                    *self.fired.entry(f).or_default() += 1;
                }
            }
            Record::Answer { session, decision } => {
                self.settle(session, &decision.settled);
                let s = self.session(session);
                if decision.verdict == Verdict::Deny {
                    s.denials += 1;
                }
            }
            Record::Result {
                session,
                advisories,
                settled,
                id,
                output,
                output_bytes,
                failure,
            } => {
                self.settle(session, settled);
                let s = self.session(session);
                s.judge(id, *output, *output_bytes);
                if let Some(&i) = s.ids.get(id) {
                    s.marks[i].failure = Some(failure.as_ref().map(|f| f.to_string()));
                }
                s.advisories += advisories.len() as u32;
                if let (Some(a), Some(&i)) = (advisories.first(), s.ids.get(id)) {
                    if s.marks[i].label.is_none() {
                        s.marks[i].label = Some(format!(
                            "advisory: {} failing ×{}",
                            short(&a.fingerprint, 60),
                            a.count
                        ));
                        s.marks[i].verdict = Verdict::Advise;
                    }
                }
                let fps: Vec<String> = advisories.iter().map(|a| a.fingerprint.clone()).collect();
                for f in fps {
                    *self.fired.entry(f).or_default() += 1;
                }
            }
            Record::User { session, settled } | Record::End { session, settled } => {
                self.settle(session, settled);
            }
        }
    }

    /// The totals over every session.
    pub fn totals(&self) -> Totals {
        let mut t = Totals {
            sessions: self.sessions.len() as u64,
            ..Totals::default()
        };
        for s in &self.sessions {
            t.calls += s.calls as u64;
            t.advisories += s.advisories as u64;
            t.asks += s.asks as u64;
            t.stopped += s.denials as u64;
            t.gated += s.first_gate.is_some() as u64;
            t.after_gate += s.after_gate() as u64;
            t.waste += s.waste as u64;
            t.new_information += s.new_information as u64;
            t.bytes_saved += s.bytes_saved;
        }
        t
    }

    fn top_fired(&self, n: usize) -> Vec<(&String, &u32)> {
        let mut v: Vec<_> = self.fired.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// The text summary.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let t = self.totals();
        let _ = writeln!(o, "toolbrake replay report");
        let _ = writeln!(o, "{}", t.summary());
        if t.stopped > 0 {
            let _ = writeln!(o, "{}", t.waste_line());
            let _ = writeln!(o, "{}", t.saved_line());
        }
        if self.errors > 0 {
            let _ = writeln!(o, "{} input lines were in error", self.errors);
        }
        let active: Vec<&SessionReport> = self.sessions.iter().filter(|s| s.active()).collect();
        let _ = writeln!(o);
        if active.is_empty() {
            let _ = writeln!(o, "No session drew an advisory or a gate.");
        } else {
            let _ = writeln!(
                o,
                "{:<58} {:>5} {:>7} {:>4} {:>7} {:>5} {:>8} {:>10} {:>5} {:>7}",
                "session",
                "calls",
                "advised",
                "asks",
                "stopped",
                "waste",
                "new info",
                "first gate",
                "after",
                "longest"
            );
            for s in &active {
                let _ = writeln!(
                    o,
                    "{:<58} {:>5} {:>7} {:>4} {:>7} {:>5} {:>8} {:>10} {:>5} {:>7}",
                    short(&s.name, 57),
                    s.calls,
                    s.advisories,
                    s.asks,
                    s.denials,
                    s.waste,
                    s.new_information,
                    s.first_gate
                        .map(|g| g.to_string())
                        .unwrap_or_else(|| "-".into()),
                    s.after_gate(),
                    s.longest_repeat
                );
            }
        }
        if !active.is_empty() {
            let _ = writeln!(o, "\n{COLUMNS}");
        }
        let quiet = self.sessions.len() - active.len();
        if quiet > 0 {
            let sessions = if quiet == 1 { "session" } else { "sessions" };
            let _ = writeln!(o, "(+{quiet} {sessions} with no advisory and no gate)");
        }
        let top = self.top_fired(10);
        if !top.is_empty() {
            let _ = writeln!(o, "\nFingerprints that fired most:");
            for (fp, n) in top {
                let _ = writeln!(o, "{n:>6}  {}", short(fp, 100));
            }
        }
        o
    }

    /// One self-contained HTML page: a timeline per session and a histogram of the
    /// longest repeat per session. Rendered with `maud`, which escapes every value it
    /// inserts (session names, fingerprints and labels come from recorded runs).
    pub fn html(&self) -> String {
        let t = self.totals();
        // The most severe first: gated sessions, then by calls stopped, then advisories.
        let mut shown: Vec<&SessionReport> = self.sessions.iter().filter(|s| s.active()).collect();
        shown.sort_by(|a, b| {
            b.first_gate
                .is_some()
                .cmp(&a.first_gate.is_some())
                .then(b.denials.cmp(&a.denials))
                .then(b.asks.cmp(&a.asks))
                .then(b.advisories.cmp(&a.advisories))
                .then(a.name.cmp(&b.name))
        });
        shown.truncate(300);
        let quiet = self.sessions.iter().filter(|s| !s.active()).count();
        let top = self.top_fired(10);
        let page = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { "toolbrake replay report" }
                    style { (PreEscaped(CSS)) }
                }
                body {
                    h1 { "toolbrake replay report" }
                    p id="totals" { (t.summary()) "." }
                    @if t.stopped > 0 {
                        p id="waste" { (t.waste_line()) }
                        p id="saved" { (t.saved_line()) }
                    }
                    div class="legend" {
                        @for v in [Verdict::Allow, Verdict::Advise, Verdict::Ask, Verdict::Deny] {
                            span { i class="sw" style={ "background:" (color(v)) } {} (v.as_str()) }
                        }
                        span { i class="sw fail" {} "failed (below the line)" }
                        p {
                            "Each dot is a call, in order; hover for its tool, arguments (redacted) and outcome. "
                            "In the labels, " b { "12/12" } " is a fingerprint's count in the window against its gate, "
                            b { "×7" } " the count an advisory names (occurrences, or failures in a row), "
                            b { "streak Bash ×3" } " the length of a run of identical calls. "
                            "A stopped call is " b { "waste" } " when the recorded run got the same output as the last identical call, "
                            b { "new information" } " when it did not. Identical labels in a row are collapsed into one, with their count."
                        }
                    }
                    h2 { "Timelines" }
                    @if shown.is_empty() {
                        p { "No session drew an advisory or a gate." }
                    }
                    @for s in &shown {
                        (timeline(s))
                    }
                    @if quiet > 0 {
                        p { (quiet) " sessions drew no advisory and no gate." }
                    }
                    h2 { "Longest repeat per session" }
                    (histogram_svg(&self.sessions))
                    @if !top.is_empty() {
                        h2 { "Fingerprints that fired most" }
                        table {
                            tr { th { "fingerprint" } th { "times" } }
                            @for (fp, n) in &top {
                                tr { td { (short(fp, 120)) } td { (n) } }
                            }
                        }
                    }
                }
            }
        };
        page.into_string() + "\n"
    }
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}h1{font-size:20px}h2{font-size:16px;margin-top:28px}\
.legend span{display:inline-block;margin-right:14px}.legend p{color:#555;max-width:70em}.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle;border-radius:50%}.sw.fail{background:#7a1f1f;border-radius:0;width:3px;height:10px}\
.session{margin:18px 0 8px}.session svg{display:block;width:100%;height:auto;max-width:var(--w)}.session ol{margin:4px 0 0;padding-left:22px;color:#333}.session li{margin:1px 0}.session code{font-size:12px;word-break:break-all}\
table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}svg text{font:11px system-ui,sans-serif}";

fn color(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "#c8c8c8",
        Verdict::Advise => "#e0a800",
        Verdict::Ask => "#2f6fdb",
        Verdict::Deny => "#d62828",
    }
}

/// A label with its numbers blanked: labels that differ only by counts are one run.
fn label_key(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect()
}

/// Runs of identical labels: `(first call index, last call index, label, how many)`.
fn label_runs(marks: &[Mark]) -> Vec<(usize, usize, &str, usize)> {
    let mut runs: Vec<(usize, usize, &str, usize)> = Vec::new();
    for (i, m) in marks.iter().enumerate() {
        let Some(label) = m.label.as_deref() else {
            continue;
        };
        match runs.last_mut() {
            Some(last) if label_key(last.2) == label_key(label) => {
                last.1 = i;
                last.2 = label;
                last.3 += 1;
            }
            _ => runs.push((i, i, label, 1)),
        }
    }
    runs
}

fn tooltip(i: usize, m: &Mark) -> String {
    let mut t = format!("call {}", i + 1);
    if !m.tool.is_empty() {
        t.push_str(&format!(" · {}", m.tool));
    }
    t.push_str(&format!(" · {}", m.verdict.as_str()));
    if let Some(label) = &m.label {
        t.push_str(&format!(" · {label}"));
    }
    if !m.preview.is_empty() {
        t.push_str(&format!("\n{}", m.preview));
    }
    match &m.failure {
        Some(Some(why)) => t.push_str(&format!("\noutcome: failed, {why}")),
        Some(None) => t.push_str("\noutcome: ok"),
        None => {}
    }
    t
}

fn timeline(s: &SessionReport) -> Markup {
    // The axis is as long as the session: 12 px a call, tighter for long sessions.
    let n = s.marks.len().max(1);
    let step = (1200.0 / n as f64).clamp(3.0, 12.0);
    let width = 20.0 + n as f64 * step;
    let height = 40.0;
    let x = |i: usize| 10.0 + step / 2.0 + i as f64 * step;
    let runs = label_runs(&s.marks);
    let failed = s
        .marks
        .iter()
        .filter(|m| matches!(m.failure, Some(Some(_))))
        .count();
    let first_gate = s
        .first_gate
        .map(|g| format!("at call {g}"))
        .unwrap_or_else(|| "none".into());
    let stopped = s.denials;
    html! {
        div class="session" style=(format!("--w:{width:.0}px")) {
            b { (s.name) } " — " (s.calls) " calls, " (failed) " failed, first gate " (first_gate) ", " (s.after_gate()) " calls from it on"
            @if stopped > 0 {
                "; " (stopped) " stopped: " (s.waste) " waste, " (s.new_information) " new information"
            }
            svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {width:.0} {height:.0}")) preserveAspectRatio="xMinYMin meet" role="img" {
                line x1="10" y1="16" x2=(format!("{:.0}", width - 10.0)) y2="16" stroke="#999" {}
                @for (i, m) in s.marks.iter().enumerate() {
                    @if matches!(m.failure, Some(Some(_))) {
                        rect class="fail" x=(format!("{:.1}", x(i) - 1.0)) y="24" width="2" height="9" fill="#7a1f1f" {}
                    }
                    circle class={ "mark " (m.verdict.as_str()) } cx=(format!("{:.1}", x(i))) cy="16"
                        r=(if m.verdict == Verdict::Allow { format!("{:.1}", (step * 0.3).min(3.5)) } else { format!("{:.1}", (step * 0.45).clamp(2.5, 5.5)) }) fill=(color(m.verdict)) {
                        title { (tooltip(i, m)) }
                    }
                }
            }
            @if !runs.is_empty() {
                ol {
                    @for (first, last, label, count) in &runs {
                        li {
                            @if first == last { "call " (first + 1) } @else { "calls " (first + 1) "–" (last + 1) }
                            ": " (label)
                            @if *count > 1 { " (" (count) " times)" }
                        }
                    }
                }
            }
        }
    }
}

fn histogram_svg(sessions: &[SessionReport]) -> Markup {
    // Bins 1..=19 and 20+.
    let mut bins = [0u32; 20];
    for s in sessions {
        let b = (s.longest_repeat.max(1) as usize).min(20) - 1;
        bins[b] += 1;
    }
    let max = bins.iter().copied().max().unwrap_or(0).max(1) as f64;
    let bw = 28.0;
    html! {
        svg id="histogram" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 680 220" style="width:100%;max-width:660px;height:auto" role="img" {
            @for (i, &c) in bins.iter().enumerate() {
                @let bh = (c as f64 / max) * 160.0;
                @let x = 30.0 + i as f64 * (bw + 4.0);
                @let y = 180.0 - bh;
                rect class="bar" x=(format!("{x:.0}")) y=(format!("{y:.1}")) width=(bw) height=(format!("{bh:.1}")) fill="#2f6fdb" {
                    title { (c) " sessions" }
                }
                @if c > 0 {
                    text x=(format!("{:.0}", x + bw / 2.0)) y=(format!("{:.0}", y - 3.0)) text-anchor="middle" { (c) }
                }
                text x=(format!("{:.0}", x + bw / 2.0)) y="196" text-anchor="middle" {
                    @if i == 19 { "20+" } @else { (i + 1) }
                }
            }
            text x="30" y="214" { "times one exact call occurs in a session (sessions per bin)" }
        }
    }
}
