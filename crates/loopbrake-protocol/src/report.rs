//! The replay report: what loopbrake would have done to a set of sessions, as a text
//! summary and as one self-contained HTML page (inline SVG, no network fetches).
//!
//! Definitions: a *gate* is a call that was asked about or denied; *saved calls* are the
//! calls from a session's first gate to its end (the gate is where the loop would have
//! been stopped or redirected); the *longest repeat* is the most times one exact call
//! (same tool, same canonical arguments) occurs in the session.
//!
//! Each stopped call of a recorded run is also judged against what the run really did
//! next: *waste* when its recorded output repeated the last identical call's (normalised
//! as in [`loopbrake_core::progress`]), *new information* when it differed (or no
//! identical call came before), *unknown* when the recording has no output for it. The
//! share of new information among stopped calls is the false-alarm rate on that history.

use crate::processor::Record;
use loopbrake_core::progress::OutputDigest;
use loopbrake_core::{Settled, Verdict};
use std::collections::HashMap;
use std::fmt::Write;

/// One call's mark on a session's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The verdict at the call (asks later settled keep `Ask`).
    pub verdict: Verdict,
    /// Advisory or gate label, if any.
    pub label: Option<String>,
    /// For a stopped call: what the recorded run got by running it.
    pub judged: Option<Judged>,
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
    /// The timeline.
    pub marks: Vec<Mark>,
    repeats: HashMap<[u8; 32], u32>,
    ids: HashMap<String, usize>,
    /// Call id → the call's identity digest.
    digests: HashMap<String, [u8; 32]>,
    /// Call identity → the last recorded output of that call (`None`: none recorded).
    outputs: HashMap<[u8; 32], Option<OutputDigest>>,
}

impl SessionReport {
    /// Judges a stopped call by its recorded output, and remembers the output as the last
    /// one of its identity (the recorded run did run it).
    fn judge(&mut self, id: &str, output: Option<OutputDigest>) {
        let Some(digest) = self.digests.remove(id) else {
            return;
        };
        let previous = self.outputs.insert(digest, output);
        let Some(&i) = self.ids.get(id) else { return };
        let mark = &mut self.marks[i];
        if !matches!(mark.verdict, Verdict::Ask | Verdict::Deny) {
            return;
        }
        let judged = match (output, previous.flatten()) {
            (None, _) => Judged::Unknown,
            (Some(now), Some(before)) if now == before => Judged::Waste,
            _ => Judged::NewInformation,
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

    /// Calls from the first gate to the end of the session.
    pub fn saved(&self) -> u32 {
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
    pub saved: u64,
    /// Stopped calls whose recorded output repeated the last identical call's.
    pub waste: u64,
    /// Stopped calls whose recorded output was new (false alarms on this history).
    pub new_information: u64,
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
            "{}, {}: {}, {}, {} stopped; {} gated, {} saved",
            count(self.sessions, "session", "sessions"),
            count(self.calls, "call", "calls"),
            count(self.advisories, "advisory", "advisories"),
            count(self.asks, "ask", "asks"),
            count(self.stopped, "call", "calls"),
            count(self.gated, "session", "sessions"),
            count(self.saved, "call", "calls"),
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
    index: HashMap<String, usize>,
    /// Fingerprint → times it fired (advisories and gates).
    pub fired: HashMap<String, u32>,
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
                ..
            } => {
                self.settle(session, settled);
                let s = self.session(session);
                s.judge(id, *output);
                s.advisories += advisories.len() as u32;
                if let (Some(a), Some(&i)) = (advisories.first(), s.ids.get(id)) {
                    if s.marks[i].label.is_none() {
                        s.marks[i].label =
                            Some(format!("failed {} ×{}", short(&a.fingerprint, 60), a.count));
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
            t.saved += s.saved() as u64;
            t.waste += s.waste as u64;
            t.new_information += s.new_information as u64;
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
        let _ = writeln!(o, "loopbrake replay report");
        let _ = writeln!(o, "{}", t.summary());
        if t.stopped > 0 {
            let _ = writeln!(o, "{}", t.waste_line());
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
                "saved",
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
                    s.saved(),
                    s.longest_repeat
                );
            }
        }
        let quiet = self.sessions.len() - active.len();
        if quiet > 0 {
            let _ = writeln!(o, "(+{quiet} sessions with no advisory and no gate)");
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
    /// longest repeat per session.
    pub fn html(&self) -> String {
        let t = self.totals();
        let mut o = String::new();
        o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>loopbrake replay report</title>\n<style>\n");
        o.push_str("body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:28px}");
        o.push_str(".legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}");
        o.push_str("table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}svg text{font:11px system-ui,sans-serif}\n");
        o.push_str("</style></head><body>\n<h1>loopbrake replay report</h1>\n");
        let _ = writeln!(o, "<p id=\"totals\">{} sessions, {} calls: {} advisories, {} asks, {} calls stopped; <b>{}</b> sessions gated, <b>{}</b> calls saved.</p>", t.sessions, t.calls, t.advisories, t.asks, t.stopped, t.gated, t.saved);
        if t.stopped > 0 {
            let _ = writeln!(o, "<p id=\"waste\">{}</p>", esc(&t.waste_line()));
        }
        o.push_str("<p class=\"legend\"><span><i class=\"sw\" style=\"background:#c8c8c8\"></i>allow</span><span><i class=\"sw\" style=\"background:#e0a800\"></i>advise</span><span><i class=\"sw\" style=\"background:#2f6fdb\"></i>ask</span><span><i class=\"sw\" style=\"background:#d62828\"></i>deny</span></p>\n");

        o.push_str("<h2>Timelines</h2>\n");
        let shown: Vec<&SessionReport> = {
            let mut v: Vec<&SessionReport> = self.sessions.iter().filter(|s| s.active()).collect();
            v.truncate(300);
            v
        };
        if shown.is_empty() {
            o.push_str("<p>No session drew an advisory or a gate.</p>\n");
        }
        for s in &shown {
            o.push_str(&timeline_svg(s));
        }
        let quiet = self.sessions.iter().filter(|s| !s.active()).count();
        if quiet > 0 {
            let _ = writeln!(o, "<p>{quiet} sessions drew no advisory and no gate.</p>");
        }

        o.push_str("<h2>Longest repeat per session</h2>\n");
        o.push_str(&histogram_svg(&self.sessions));

        let top = self.top_fired(10);
        if !top.is_empty() {
            o.push_str("<h2>Fingerprints that fired most</h2>\n<table><tr><th>fingerprint</th><th>times</th></tr>\n");
            for (fp, n) in top {
                let _ = writeln!(o, "<tr><td>{}</td><td>{n}</td></tr>", esc(&short(fp, 120)));
            }
            o.push_str("</table>\n");
        }
        o.push_str("</body></html>\n");
        o
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn color(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "#c8c8c8",
        Verdict::Advise => "#e0a800",
        Verdict::Ask => "#2f6fdb",
        Verdict::Deny => "#d62828",
    }
}

fn timeline_svg(s: &SessionReport) -> String {
    let step = 12.0_f64;
    let n = s.marks.len().max(1);
    let labels: Vec<(usize, &String)> = s
        .marks
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.label.as_ref().map(|l| (i, l)))
        .collect();
    // Wide enough for the marks and for every label (about 6.5 px a character).
    let label_extent = labels
        .iter()
        .map(|(i, l)| 16.0 + *i as f64 * step + 3.0 + (l.chars().count() + 10) as f64 * 6.5)
        .fold(0.0_f64, f64::max);
    let width = (40.0 + n as f64 * step).max(label_extent).max(320.0);
    let height = 46.0 + labels.len() as f64 * 14.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<div class=\"session\"><b>{}</b> — {} calls, first gate {}, {} saved<br>",
        esc(&s.name),
        s.calls,
        s.first_gate
            .map(|g| format!("at call {g}"))
            .unwrap_or_else(|| "none".into()),
        s.saved()
    );
    let _ = writeln!(o, "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\">");
    let _ = writeln!(
        o,
        "<line x1=\"10\" y1=\"20\" x2=\"{:.0}\" y2=\"20\" stroke=\"#999\"/>",
        width - 10.0
    );
    for (i, m) in s.marks.iter().enumerate() {
        let x = 16.0 + i as f64 * step;
        let r = if m.verdict == Verdict::Allow {
            3.5
        } else {
            5.5
        };
        let _ = writeln!(
            o,
            "<circle class=\"mark {}\" cx=\"{x:.1}\" cy=\"20\" r=\"{r}\" fill=\"{}\"><title>call {}: {}</title></circle>",
            m.verdict.as_str(),
            color(m.verdict),
            i + 1,
            m.verdict.as_str()
        );
    }
    for (row, (i, label)) in labels.iter().enumerate() {
        let x = 16.0 + *i as f64 * step;
        let y = 44.0 + row as f64 * 14.0;
        let _ = writeln!(
            o,
            "<line x1=\"{x:.1}\" y1=\"26\" x2=\"{x:.1}\" y2=\"{:.0}\" stroke=\"#ccc\"/>",
            y - 10.0
        );
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{y:.0}\">call {}: {}</text>",
            x + 3.0,
            i + 1,
            esc(label)
        );
    }
    o.push_str("</svg></div>\n");
    o
}

fn histogram_svg(sessions: &[SessionReport]) -> String {
    // Bins 1..=19 and 20+.
    let mut bins = [0u32; 20];
    for s in sessions {
        let b = (s.longest_repeat.max(1) as usize).min(20) - 1;
        bins[b] += 1;
    }
    let max = bins.iter().copied().max().unwrap_or(0).max(1) as f64;
    let (w, h, bw) = (660.0, 220.0, 28.0);
    let mut o = String::new();
    let _ = writeln!(o, "<svg id=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" role=\"img\">");
    for (i, &c) in bins.iter().enumerate() {
        let bh = (c as f64 / max) * 160.0;
        let x = 30.0 + i as f64 * (bw + 4.0);
        let y = 180.0 - bh;
        let _ = writeln!(
            o,
            "<rect class=\"bar\" x=\"{x:.0}\" y=\"{y:.1}\" width=\"{bw}\" height=\"{bh:.1}\" fill=\"#2f6fdb\"><title>{c} sessions</title></rect>"
        );
        if c > 0 {
            let _ = writeln!(
                o,
                "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{c}</text>",
                x + bw / 2.0,
                y - 3.0
            );
        }
        let label = if i == 19 {
            "20+".to_string()
        } else {
            (i + 1).to_string()
        };
        let _ = writeln!(
            o,
            "<text x=\"{:.0}\" y=\"196\" text-anchor=\"middle\">{label}</text>",
            x + bw / 2.0
        );
    }
    let _ = writeln!(o, "<text x=\"30\" y=\"214\">times one exact call occurs in a session (sessions per bin)</text>");
    o.push_str("</svg>\n");
    o
}
