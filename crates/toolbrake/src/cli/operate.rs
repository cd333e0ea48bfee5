//! What the long-running commands (`serve`, `mcp`) tell their operator: `--metrics ADDR`
//! (this process's metrics for Prometheus) and `--log-format text|json` (stderr), wired
//! from `toolbrake-telemetry`.

use super::CliError;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use toolbrake::settings::{Loaded, Reload};
use toolbrake_http::HttpLimits;
use toolbrake_mcp::events::ProxyEvents;
use toolbrake_session::Observer;
use toolbrake_store::Store;
use toolbrake_telemetry::http::{Endpoint, Renderer};
use toolbrake_telemetry::log::{Format, Level, Log};
use toolbrake_telemetry::process::{ProcessMetrics, Timed, Told};
use toolbrake_telemetry::Fanout;

/// The log's format on stderr.
#[derive(Debug, Clone, Copy, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Plain lines, as always.
    #[default]
    Text,
    /// One JSON object per line: the same lines (`level`, `message`), and one per event
    /// the engines judged or recorded.
    Json,
}

/// The flags every long-running command takes.
#[derive(Debug, clap::Args)]
pub struct Operate {
    /// Serve this process's metrics (Prometheus / OpenMetrics text) at
    /// http://ADDR/metrics; beyond loopback only with a token. Port 0 picks a free one
    /// (the address is logged on stderr).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// With --metrics: require `Authorization: Bearer TOKEN` on every scrape (needed to
    /// serve metrics beyond loopback).
    #[arg(long, env = "TOOLBRAKE_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// The log on stderr: text, or json (one object per line, with a line per decision).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

/// A long-running command's log and metrics.
pub struct Telemetry {
    log: Log,
    metrics: Option<ProcessMetrics>,
    endpoint: Option<(SocketAddr, Endpoint)>,
    /// The store whose counters the endpoint serves beside the process's own.
    store: OnceLock<Arc<dyn Store>>,
}

impl Telemetry {
    /// The log and, with `--metrics`, the metrics; a metrics address beyond loopback
    /// without a token is refused.
    pub fn new(op: &Operate) -> Result<Arc<Self>, CliError> {
        let format = match op.log_format {
            LogFormat::Text => Format::Text,
            LogFormat::Json => Format::Json,
        };
        let token = op.metrics_token.clone().filter(|t| !t.is_empty());
        let (metrics, endpoint) = match op.metrics {
            Some(addr) => {
                if !addr.ip().is_loopback() && token.is_none() {
                    return Err(format!(
                        "refusing to serve metrics on {addr} without a token: they describe what this process's agents do; pass --metrics-token (or set TOOLBRAKE_METRICS_TOKEN), or listen on 127.0.0.1"
                    )
                    .into());
                }
                let metrics = ProcessMetrics::new();
                let m = metrics.clone();
                // This process's registry; the store's counters can join it as another
                // renderer.
                let renderers: Vec<Renderer> = vec![Arc::new(move |out| m.render(out))];
                (Some(metrics), Some((addr, Endpoint { renderers, token })))
            }
            None => (None, None),
        };
        Ok(Arc::new(Telemetry {
            log: Log::stderr(format),
            metrics,
            endpoint,
            store: OnceLock::new(),
        }))
    }

    /// The observer the session service tells (metrics, JSON log), if any.
    pub fn observer(self: &Arc<Self>) -> Option<Arc<dyn Observer>> {
        let mut fanout = Fanout::new();
        if let Some(m) = &self.metrics {
            fanout.push(Arc::new(m.clone()));
        }
        if self.log.format() == Format::Json {
            fanout.push(self.clone());
        }
        fanout.into_observer()
    }

    /// The traces of a long-running command (spans from judgement to outcome), or none; a
    /// configuration the exporter refuses is logged and the command runs without them.
    pub fn traces(
        &self,
        settings: &toolbrake::settings::TelemetrySettings,
        command: &str,
    ) -> super::traces::Traces {
        let (traces, problem) = super::traces::Traces::start(
            settings,
            toolbrake_telemetry::trace::Mode::Process,
            std::time::Duration::from_secs(10),
            std::time::Duration::from_secs(2),
        );
        if let Some(p) = problem {
            self.warn(&format!("toolbrake {command}: {p}"));
        }
        traces
    }

    /// The store, timed when metrics are served; its counters (what every process sharing
    /// it counted) are served beside the process's own.
    pub fn store(&self, store: Arc<dyn Store>) -> Arc<dyn Store> {
        // The store's problems, logged as they happen (nobody else asks for them here).
        let log = Log::stderr(self.log.format());
        let store: Arc<dyn Store> = Arc::new(Told::new(
            store,
            Box::new(move |w| log.line(Level::Warn, &format!("toolbrake: {w}"))),
        ));
        let _ = self.store.set(store.clone());
        match &self.metrics {
            Some(m) => Arc::new(Timed::new(store, m.clone())),
            None => store,
        }
    }

    /// The metrics endpoint's address and what it serves, when `--metrics` was given: the
    /// process's registry, then the store's counters and sessions (a store that cannot be
    /// read leaves them out of that scrape; the process's store errors count it).
    pub fn endpoint(&self) -> Option<(SocketAddr, Endpoint)> {
        let (addr, mut endpoint) = self.endpoint.clone()?;
        if let Some(store) = self.store.get().cloned() {
            endpoint.renderers.push(Arc::new(move |out: &mut String| {
                if let (Ok(counters), Ok(sessions)) = (store.counters(), store.list()) {
                    toolbrake_telemetry::counters::render(
                        &counters,
                        &sessions,
                        toolbrake_telemetry::counters::TOP_TOOLS,
                        out,
                    );
                }
            }));
        }
        Some((addr, endpoint))
    }

    /// Serves the metrics on a thread of their own (for a command that is not async) and
    /// logs where.
    pub fn serve_metrics_on_thread(&self, command: &str) -> Result<(), CliError> {
        if let Some((addr, endpoint)) = self.endpoint() {
            let bound =
                toolbrake_telemetry::http::serve_on_thread(addr, endpoint, HttpLimits::default())
                    .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
            self.metrics_at(command, bound);
        }
        Ok(())
    }

    /// Logs where the metrics are served.
    pub fn metrics_at(&self, command: &str, addr: SocketAddr) {
        self.info(&format!(
            "toolbrake {command}: metrics at http://{addr}/metrics"
        ));
    }

    /// A line of the command's own.
    pub fn info(&self, message: &str) {
        self.log.line(Level::Info, message);
    }

    /// A warning of the command's own.
    pub fn warn(&self, message: &str) {
        self.log.line(Level::Warn, message);
    }

    /// An error that stops the command.
    pub fn error(&self, message: &str) {
        self.log.line(Level::Error, message);
    }

    /// Logs and counts what a look at the configuration file found; the configuration to
    /// take into use, if any.
    pub fn reloaded(&self, reload: Reload) -> Option<Loaded> {
        match reload {
            Reload::Unchanged => None,
            Reload::Waiting(line) => {
                self.info(&line);
                None
            }
            Reload::Rejected(line) => {
                self.warn(&line);
                if let Some(m) = &self.metrics {
                    m.config_reload(false);
                }
                None
            }
            Reload::Applied(loaded, line) => {
                self.info(&line);
                if let Some(m) = &self.metrics {
                    m.config_reload(true);
                }
                Some(*loaded)
            }
        }
    }
}

impl Observer for Telemetry {
    fn observe(&self, event: &toolbrake_session::Observed<'_>) {
        self.log.observe(event);
    }
}

impl ProxyEvents for Telemetry {
    fn downstream_started(&self) {
        if let Some(m) = &self.metrics {
            m.downstream_started();
        }
    }

    fn downstream_failed(&self) {
        if let Some(m) = &self.metrics {
            m.downstream_failed();
        }
    }

    fn client_session_started(&self) {
        if let Some(m) = &self.metrics {
            m.client_session_started();
        }
    }

    fn client_session_ended(&self) {
        if let Some(m) = &self.metrics {
            m.client_session_ended();
        }
    }

    fn warn(&self, message: &str) {
        Telemetry::warn(self, message);
    }
}
