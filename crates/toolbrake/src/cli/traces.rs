//! Traces for the commands that judge calls (`serve`, `mcp`, `hook`): a span exporter is
//! built only when the environment or `[telemetry]` configures one; otherwise nothing is
//! built and nothing touches the network.

use std::sync::Arc;
use std::time::Duration;
use toolbrake::settings::{process_env, TelemetrySettings};
use toolbrake_session::Observer;
use toolbrake_telemetry::trace::{Mode, TraceObserver, Tracing};
use toolbrake_telemetry::Fanout;

/// The trace observer of a command, exported and shut down (within its deadline) when
/// dropped.
pub struct Traces {
    observer: Option<Arc<TraceObserver>>,
    deadline: Duration,
}

impl Traces {
    /// Traces as configured, or none. A configuration the exporter refuses (a bad endpoint
    /// in the environment) is `Err` with the reason; the command then runs without traces.
    pub fn start(
        settings: &TelemetrySettings,
        mode: Mode,
        export_timeout: Duration,
        deadline: Duration,
    ) -> (Self, Option<String>) {
        let built = Tracing::resolve(settings, &process_env)
            .map(|t| TraceObserver::new(&t, mode, export_timeout));
        let (observer, problem) = match built {
            None => (None, None),
            Some(Ok(o)) => (Some(Arc::new(o)), None),
            Some(Err(e)) => (None, Some(format!("{e}; traces are off"))),
        };
        (Traces { observer, deadline }, problem)
    }

    /// The observer to hand an adapter: the command's `others` (metrics, logs), if any,
    /// and the traces, through one [`Fanout`].
    pub fn observer(&self, others: Option<Arc<dyn Observer>>) -> Option<Arc<dyn Observer>> {
        let mut fanout = Fanout::new();
        if let Some(o) = others {
            fanout.push(o);
        }
        if let Some(o) = &self.observer {
            fanout.push(o.clone());
        }
        fanout.into_observer()
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Some(o) = &self.observer {
            o.shutdown(self.deadline);
        }
    }
}
