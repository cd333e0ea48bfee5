//! Counters a store keeps beside its sessions: what an update adds ([`Tally`]) and what the
//! store holds ([`Counters`]). The store knows nothing of what they mean (the session
//! service names them); it only keeps them in the same atomic write as the state, and keeps
//! the number of distinct tool names bounded ([`MAX_TOOLS`]).

use std::collections::BTreeMap;

/// Distinct tool names a store keeps counters for; the counts of any later tool are folded
/// into [`OTHER_TOOL`]. (A Redis Cluster keeps this bound per slot bucket.)
pub const MAX_TOOLS: usize = 256;

/// The tool label's value for every tool past [`MAX_TOOLS`].
pub const OTHER_TOOL: &str = "other";

/// The name of the label that carries a tool name.
pub const TOOL_LABEL: &str = "tool";

/// One counter: a metric name and its labels, in the order they were given.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Series {
    /// The metric name.
    pub metric: String,
    /// The labels, `(name, value)`.
    pub labels: Vec<(String, String)>,
}

impl Series {
    /// A series of `metric` with `labels`.
    pub fn new(metric: &str, labels: &[(&str, &str)]) -> Self {
        Series {
            metric: metric.to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// The value of label `name`, if the series has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// How a store keeps the series: a JSON array of strings, the metric first and then
    /// each label's name and value (any text a tool name holds survives it).
    #[cfg(test)]
    pub(crate) fn encode(&self) -> String {
        let labels: Vec<(&str, &str)> = self
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut out = String::new();
        encode_into(&mut out, &self.metric, &labels, None);
        out
    }

    /// The series a stored key names; `None` for a key this version cannot read.
    pub(crate) fn decode(key: &[u8]) -> Option<Series> {
        let parts: Vec<String> = serde_json::from_slice(key).ok()?;
        let (metric, rest) = parts.split_first()?;
        if metric.is_empty() || rest.len() % 2 != 0 {
            return None;
        }
        Some(Series {
            metric: metric.clone(),
            labels: rest
                .chunks(2)
                .map(|kv| (kv[0].clone(), kv[1].clone()))
                .collect(),
        })
    }
}

/// Writes a series' stored key into `out`: a JSON array of strings, the metric first and
/// then each label's name and value, then (with `tool`) the tool label last. Returns where
/// the tool's value starts in `out` (its end without a tool).
fn encode_into(
    out: &mut String,
    metric: &str,
    labels: &[(&str, &str)],
    tool: Option<&str>,
) -> usize {
    fn string(out: &mut String, s: &str) {
        if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            // Nothing to escape (metric and label names, most values): as it is.
            out.push('"');
            out.push_str(s);
            out.push('"');
        } else {
            out.push_str(&serde_json::to_string(s).expect("strings always serialise"));
        }
    }
    out.push('[');
    string(out, metric);
    for (k, v) in labels {
        out.push(',');
        string(out, k);
        out.push(',');
        string(out, v);
    }
    let mut at = out.len();
    if let Some(tool) = tool {
        out.push(',');
        string(out, TOOL_LABEL);
        out.push(',');
        at = out.len();
        string(out, tool);
    }
    out.push(']');
    at
}

/// One increment of a tally, as a store applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inc {
    /// The stored key of the series.
    pub(crate) key: String,
    /// For a series with a tool label: the tool, and the stored key of the same series
    /// with the tool folded into [`OTHER_TOOL`] (used once [`MAX_TOOLS`] tools are kept).
    pub(crate) tool: Option<(String, String)>,
    /// How much to add.
    pub(crate) n: u64,
}

/// The counter increments one update adds to the store's counters. Handed empty to every
/// run of an update's closure; only the kept run's tally is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    incs: Vec<Inc>,
}

impl Tally {
    /// An empty tally.
    pub fn new() -> Self {
        Tally::default()
    }

    /// Adds `n` to the counter `metric` with `labels`.
    pub fn add(&mut self, metric: &str, labels: &[(&str, &str)], n: u64) {
        if n == 0 {
            return;
        }
        let mut key = String::with_capacity(64);
        encode_into(&mut key, metric, labels, None);
        self.push(Inc { key, tool: None, n });
    }

    /// Adds `n` to the counter `metric` with `labels` and the tool label (last) set to
    /// `tool`; the store folds a tool past its bound into [`OTHER_TOOL`]. The caller
    /// redacts the name first.
    pub fn add_for_tool(&mut self, metric: &str, labels: &[(&str, &str)], tool: &str, n: u64) {
        if n == 0 {
            return;
        }
        let mut key = String::with_capacity(96);
        let before_tool = encode_into(&mut key, metric, labels, Some(tool));
        let tool = (tool != OTHER_TOOL).then(|| {
            // The same series with the tool folded: the key up to the tool's value, then
            // `"other"]`.
            let other = format!("{}\"{OTHER_TOOL}\"]", &key[..before_tool]);
            (tool.to_string(), other)
        });
        self.push(Inc { key, tool, n });
    }

    fn push(&mut self, inc: Inc) {
        if inc.n == 0 {
            return;
        }
        match self.incs.iter_mut().find(|i| i.key == inc.key) {
            Some(i) => i.n = i.n.saturating_add(inc.n),
            None => self.incs.push(inc),
        }
    }

    /// Forgets every increment (a store does this before each run of an update).
    pub fn clear(&mut self) {
        self.incs.clear();
    }

    /// Whether there is nothing to add.
    pub fn is_empty(&self) -> bool {
        self.incs.is_empty()
    }

    pub(crate) fn incs(&self) -> &[Inc] {
        &self.incs
    }
}

/// Every counter a store keeps, by series.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Each series and its value.
    pub values: BTreeMap<Series, u64>,
}

impl Counters {
    /// The value of the series `metric` with exactly `labels` (0 when never counted).
    pub fn get(&self, metric: &str, labels: &[(&str, &str)]) -> u64 {
        self.values
            .get(&Series::new(metric, labels))
            .copied()
            .unwrap_or(0)
    }

    /// The sum of every series of `metric` whose labels include `labels`.
    pub fn sum(&self, metric: &str, labels: &[(&str, &str)]) -> u64 {
        self.values
            .iter()
            .filter(|(s, _)| s.metric == metric)
            .filter(|(s, _)| labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
            .fold(0u64, |a, (_, v)| a.saturating_add(*v))
    }

    /// Adds a stored key's value (keys this version cannot read are skipped: `false`).
    pub(crate) fn add_stored(&mut self, key: &[u8], value: u64) -> bool {
        match Series::decode(key) {
            Some(s) => {
                let v = self.values.entry(s).or_insert(0);
                *v = v.saturating_add(value);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_survives_its_stored_form_whatever_the_tool_is_called() {
        for tool in ["Bash", "a\"b\\c", "x,y=z}", "\u{1f}\n", ""] {
            let s = Series::new("m_total", &[("verdict", "deny"), ("tool", tool)]);
            assert_eq!(Series::decode(s.encode().as_bytes()), Some(s));
        }
        assert_eq!(Series::decode(b"not json"), None);
        assert_eq!(Series::decode(br#"["m","odd"]"#), None);
    }

    #[test]
    fn a_tally_merges_increments_of_one_series() {
        let mut t = Tally::new();
        t.add("a_total", &[("x", "1")], 1);
        t.add("a_total", &[("x", "1")], 2);
        t.add_for_tool("b_total", &[], "Bash", 1);
        t.add("zero_total", &[], 0);
        assert_eq!(t.incs().len(), 2);
        assert_eq!(t.incs()[0].n, 3);
        let (tool, other) = t.incs()[1].tool.clone().unwrap();
        assert_eq!(tool, "Bash");
        assert_eq!(
            Series::decode(other.as_bytes()).unwrap().label(TOOL_LABEL),
            Some(OTHER_TOOL)
        );
    }
}
