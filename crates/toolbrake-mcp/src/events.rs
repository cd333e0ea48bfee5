//! What the proxy tells its operator beyond the session service's events (metrics, logs):
//! its downstream servers starting and failing, the listener's client sessions, and its
//! own log lines. Told, never consulted.

use std::io::Write as _;
use std::sync::Arc;
use toolbrake_core::redact::log_line;

/// Watches the proxy's own life. Every method has a default: a watcher implements what it
/// needs. Must be cheap and must not block.
pub trait ProxyEvents: Send + Sync {
    /// A downstream server was started (a child process, or the bridge to an HTTP server).
    fn downstream_started(&self) {}
    /// A downstream server failed: it could not be started, exited, closed its output or
    /// wrote something that is not JSON-RPC.
    fn downstream_failed(&self) {}
    /// A client session of the listener started: its relay runs.
    fn client_session_started(&self) {}
    /// A client session of the listener ended: its relay stopped.
    fn client_session_ended(&self) {}
    /// One of the proxy's warnings (`toolbrake mcp: …`, quoting a tool's name or a
    /// server's error as they came). By default a line on stderr as a text log writes it
    /// (`toolbrake_core::redact::log_line`: redacted, control characters escaped).
    fn warn(&self, message: &str) {
        let _ = writeln!(std::io::stderr().lock(), "{}", log_line(message));
    }
}

/// A warning through `events`, else on stderr (a closed stderr is ignored).
pub(crate) fn warn(events: Option<&Arc<dyn ProxyEvents>>, message: &str) {
    match events {
        Some(e) => e.warn(message),
        None => {
            let _ = writeln!(std::io::stderr().lock(), "{}", log_line(message));
        }
    }
}
