//! What loopbrake tells the people who operate it, and nothing else: metrics, traces and
//! logs of the decisions the session service makes. Every piece here watches
//! ([`loopbrake_session::Observer`]) or reads (the store's counters); none decides, and
//! none sees an argument value, a preview or an output unredacted.
//!
//! An adapter is handed one observer; [`Fanout`] makes several (metrics, traces, logs) one.
#![deny(missing_docs)]

pub mod counters;
pub mod http;
pub mod log;
pub mod process;
pub mod trace;

use loopbrake_session::{Observed, Observer};
use std::sync::Arc;

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
