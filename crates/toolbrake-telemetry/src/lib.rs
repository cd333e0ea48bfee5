//! What toolbrake tells the people who operate it, and nothing else: metrics, traces and
//! logs of the decisions the session service makes. Every piece here watches
//! ([`toolbrake_session::Observer`]) or reads (the store's counters); none decides, and
//! none sees an argument value, a preview or an output unredacted.
//!
//! An adapter is handed one observer; [`Fanout`] makes several (metrics, traces, logs) one.
#![deny(missing_docs)]

pub mod counters;
pub mod http;
pub mod log;
pub mod process;
pub mod trace;

use std::sync::Arc;
use toolbrake_core::breaker::Kind;
use toolbrake_core::Decision;
use toolbrake_session::{Observed, Observer};

/// The gate a decision came nearest to, as logs and spans name it (never a fingerprint's
/// text, only its kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    /// `repeat`, `failure`, `struggle`, `unchanged`, `cycle`, or `streak`.
    pub track: &'static str,
    /// The kind of the fingerprint (`exact`, `cmd`, `host`…), when a fingerprint spoke.
    pub kind: Option<Kind>,
    /// The count that reached (or neared) the gate.
    pub count: u32,
    /// The gate, when the decision names it (an advisory gives a count only).
    pub limit: Option<u32>,
}

/// The gate nearest to closing: the hit with the highest count-to-limit ratio, else the
/// streak brake's refusal, else the first advisory.
pub fn nearest_gate(d: &Decision) -> Option<Gate> {
    let nearest = d.hits.iter().max_by(|a, b| {
        (u64::from(a.count) * u64::from(b.limit.max(1)))
            .cmp(&(u64::from(b.count) * u64::from(a.limit.max(1))))
    });
    if let Some(h) = nearest {
        return Some(Gate {
            track: h.track.as_str(),
            kind: Kind::named(&h.fingerprint),
            count: h.count,
            limit: Some(h.limit),
        });
    }
    if let Some(r) = &d.streak_refusal {
        return Some(Gate {
            track: "streak",
            kind: None,
            count: r.count,
            limit: Some(r.max_repeats),
        });
    }
    d.advisories.first().map(|a| Gate {
        track: a.stage.track().as_str(),
        kind: Kind::named(&a.fingerprint),
        count: a.count,
        limit: None,
    })
}

/// Several observers as one, each told every event in order.
#[derive(Default, Clone)]
pub struct Fanout {
    observers: Vec<Arc<dyn Observer>>,
}

impl Fanout {
    /// No observer yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an observer.
    pub fn push(&mut self, observer: Arc<dyn Observer>) {
        self.observers.push(observer);
    }

    /// The observers as one, or `None` when there is none (the session service then reads
    /// no clock).
    pub fn into_observer(mut self) -> Option<Arc<dyn Observer>> {
        match self.observers.len() {
            0 => None,
            1 => self.observers.pop(),
            _ => Some(Arc::new(self)),
        }
    }
}

impl Observer for Fanout {
    fn observe(&self, event: &Observed<'_>) {
        for o in &self.observers {
            o.observe(event);
        }
    }
}
