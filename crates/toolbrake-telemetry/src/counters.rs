//! The store's counters as a Prometheus scrape: what every process sharing the store
//! counted (hook processes, proxies, every machine on one Redis), read at scrape time
//! (`Store::counters`, `Store::list`), never kept here.
//!
//! The exposition is OpenMetrics text, written by `prometheus-client`'s encoder from the
//! values the store holds (a [`Collector`] reads them at each scrape; the crate's own
//! counter types would count in this process only). Serve it through
//! [`crate::http::exposition`] with [`crate::http::CONTENT_TYPE`].
//!
//! Tool names: the store keeps at most `MAX_TOOLS`; the scrape shows the `top_tools` with
//! the most judged calls under their names and sums every other tool into `other`, so a
//! dashboard's series stay few. Labels never carry a session key or an argument.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, HashMap};
use toolbrake_core::SessionState;
use toolbrake_session::metrics;
use toolbrake_store::{Counters, Series, SessionInfo, OTHER_TOOL, TOOL_LABEL};

/// Tools shown under their own name by default.
pub const TOP_TOOLS: usize = 20;

/// Sessions the store holds (gauge).
pub const SESSIONS_ACTIVE: &str = "toolbrake_sessions_active";
/// Sessions gated: a call stopped, a refusal in force or an ask pending (gauge).
pub const SESSIONS_GATED: &str = "toolbrake_sessions_gated";

/// Every counter family the store's counters hold, with its help text: the name ends in
/// `_total`.
pub const COUNTERS: &[(&str, &str)] = &[
    (
        metrics::CALLS_JUDGED,
        "Tool calls judged before they ran, by verdict, the engine that gave it, the track and the tool (the top tools by count; the rest as other).",
    ),
    (
        metrics::ASKS,
        "Operator asks by what became of them: approved, declined, or unanswered (settled as declined by a later event of the session).",
    ),
    (
        metrics::STOPPED,
        "Calls toolbrake stopped whose output is known all the same (a replayed run's recorded outcome, an ask the operator approved), by what it was: waste (the same output as that call's last) or new_information.",
    ),
    (
        metrics::UNJUDGED,
        "Calls toolbrake could not judge while its store worked (a payload it could not read), by the failure policy applied. A store that is down cannot count its own failures.",
    ),
];

/// Every gauge family, with its help text.
pub const GAUGES: &[(&str, &str)] = &[
    (
        SESSIONS_ACTIVE,
        "Sessions the store holds (not yet expired).",
    ),
    (
        SESSIONS_GATED,
        "Sessions gated: a call of the session was stopped or is refused, or an ask waits for an answer.",
    ),
];

/// Whether a session is gated: a call was stopped (denied, or asked and not approved) since
/// it (re)started, a refusal is in force, or an ask waits for the operator. The dashboard
/// marks the same sessions.
pub fn gated(st: &SessionState) -> bool {
    let b = st.breaker.summary();
    st.stopped() > 0 || b.refusals > 0 || !b.pending_asks.is_empty()
}

/// A series' labels, `(name, value)`.
type Labels = Vec<(String, String)>;

/// One counter family: its name (without `_total`), help, and labelled values.
type Family = (String, &'static str, Vec<(Labels, u64)>);

/// What one scrape shows.
#[derive(Debug, Default)]
struct Scrape {
    /// The counter families.
    counters: Vec<Family>,
    /// Gauge name → help, value.
    gauges: Vec<(&'static str, &'static str, i64)>,
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, help, values) in &self.counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (labels, v) in values {
                let m = family.encode_family(labels)?;
                prometheus_client::metrics::counter::ConstCounter::new(*v).encode(m)?;
            }
        }
        for (name, help, v) in &self.gauges {
            let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            prometheus_client::metrics::gauge::ConstGauge::new(*v).encode(m)?;
        }
        Ok(())
    }
}

/// The series' tool folded into `other` unless it is one of `top`.
fn fold_tool(series: &Series, top: &[String]) -> Labels {
    series
        .labels
        .iter()
        .map(|(k, v)| {
            if k == TOOL_LABEL && !top.iter().any(|t| t == v) {
                (k.clone(), OTHER_TOOL.to_string())
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect()
}

/// The tools with the most counts in `metric`, at most `n` (`other` never among them).
fn top_tools(counters: &Counters, metric: &str, n: usize) -> Vec<String> {
    let mut per_tool: HashMap<&str, u64> = HashMap::new();
    for (s, v) in counters.values.iter().filter(|(s, _)| s.metric == metric) {
        if let Some(t) = s.label(TOOL_LABEL).filter(|t| *t != OTHER_TOOL) {
            let e = per_tool.entry(t).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }
    let mut tools: Vec<(&str, u64)> = per_tool.into_iter().collect();
    tools.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    tools
        .into_iter()
        .take(n)
        .map(|(t, _)| t.to_string())
        .collect()
}

/// Appends the metric families of a store's counters and sessions (without `# EOF`): the
/// families of [`COUNTERS`] (only the series counted so far) and the gauges of [`GAUGES`],
/// the `top_tools` tools named and the rest as `other`. Counters of a metric this version
/// does not know are left out.
pub fn render(counters: &Counters, sessions: &[SessionInfo], top_tools_n: usize, out: &mut String) {
    let mut scrape = Scrape::default();
    for (metric, help) in COUNTERS {
        let top = top_tools(counters, metric, top_tools_n);
        let mut values: BTreeMap<Labels, u64> = BTreeMap::new();
        for (s, v) in counters.values.iter().filter(|(s, _)| s.metric == *metric) {
            let e = values.entry(fold_tool(s, &top)).or_insert(0);
            *e = e.saturating_add(*v);
        }
        let name = metric.strip_suffix("_total").unwrap_or(metric).to_string();
        scrape
            .counters
            .push((name, help, values.into_iter().collect()));
    }
    let gated_n = sessions.iter().filter(|s| gated(&s.state)).count();
    scrape
        .gauges
        .push((SESSIONS_ACTIVE, GAUGES[0].1, sessions.len() as i64));
    scrape
        .gauges
        .push((SESSIONS_GATED, GAUGES[1].1, gated_n as i64));
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode_registry(out, &registry);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A metric, its labels and its value.
    type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], u64);

    fn counters(rows: &[Row<'_>]) -> Counters {
        let mut c = Counters::default();
        for (m, labels, v) in rows {
            c.values.insert(Series::new(m, labels), *v);
        }
        c
    }

    #[test]
    fn tools_past_the_top_are_summed_as_other() {
        let j = metrics::CALLS_JUDGED;
        let deny = ("verdict", "deny");
        let c = counters(&[
            (j, &[deny, ("tool", "Bash")], 5),
            (j, &[deny, ("tool", "Read")], 3),
            (j, &[deny, ("tool", "Grep")], 1),
            (j, &[deny, ("tool", "other")], 2),
        ]);
        let mut text = String::new();
        render(&c, &[], 2, &mut text);
        assert!(
            text.contains(r#"toolbrake_calls_judged_total{verdict="deny",tool="Bash"} 5"#),
            "{text}"
        );
        assert!(text.contains(r#"toolbrake_calls_judged_total{verdict="deny",tool="Read"} 3"#));
        assert!(text.contains(r#"toolbrake_calls_judged_total{verdict="deny",tool="other"} 3"#));
        assert!(!text.contains("Grep"));
        assert!(text.contains("# TYPE toolbrake_calls_judged counter"));
        assert!(text.contains("toolbrake_sessions_active 0"));
        // The families only: the exposition ends them once (`http::exposition`).
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn label_values_are_escaped() {
        let c = counters(&[(metrics::CALLS_JUDGED, &[("tool", "a\"b\\c\nd")], 1)]);
        let mut text = String::new();
        render(&c, &[], 20, &mut text);
        assert!(
            text.contains(r#"toolbrake_calls_judged_total{tool="a\"b\\c\nd"} 1"#),
            "{text}"
        );
    }
}
