//! Charts as server-rendered SVG: no script, no library, nothing from the network. Each
//! chart is one `<svg role="img">` whose label says in words what it shows (the figures
//! included), each mark carries a `<title>` (the browser's tooltip), and colours come
//! from the page's style, so the charts follow the light or dark theme.

use maud::{html as m, Markup};

/// The drawing's width in user units (it scales to its box).
const W: f64 = 640.0;
const LEFT: f64 = 34.0;
const BOTTOM: f64 = 22.0;
const TOP: f64 = 12.0;

/// One series of a column chart: the class that colours it (`saved`, `stops`, …) and
/// what it counts.
pub(super) struct Series<'a> {
    pub class: &'a str,
    pub name: &'a str,
}

/// Grouped columns: one group per `(x label, values)`, one column per series in each.
/// `label_every` labels every n-th group (all of them for 7 days, every 3rd hour).
pub(super) fn columns(
    id: &str,
    summary: &str,
    groups: &[(String, Vec<u64>)],
    series: &[Series<'_>],
    label_every: usize,
) -> Markup {
    let h = 170.0;
    let max = groups
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_h = h - TOP - BOTTOM;
    let n = groups.len().max(1) as f64;
    let gw = (W - LEFT - 4.0) / n;
    let bw = (gw * 0.8 / series.len().max(1) as f64).max(1.0);
    let y = |v: u64| TOP + plot_h - plot_h * (v as f64) / (max as f64);
    m! {
        svg.chart id=(id) viewBox=(format!("0 0 {W} {h}")) role="img" aria-label=(summary) {
            line.axis x1=(LEFT) y1=(TOP + plot_h) x2=(W) y2=(TOP + plot_h) {}
            line.axis x1=(LEFT) y1=(TOP) x2=(W) y2=(TOP) stroke-dasharray="3 3" {}
            text x=(LEFT - 4.0) y=(TOP + 4.0) text-anchor="end" { (max) }
            text x=(LEFT - 4.0) y=(TOP + plot_h + 4.0) text-anchor="end" { "0" }
            @for (i, (x_label, values)) in groups.iter().enumerate() {
                @let x0 = LEFT + 2.0 + gw * i as f64 + gw * 0.1;
                @for (j, v) in values.iter().enumerate() {
                    @let s = &series[j.min(series.len() - 1)];
                    @if *v > 0 {
                        rect class=(format!("f-{}", s.class)) x=(fmt(x0 + bw * j as f64)) y=(fmt(y(*v)))
                            width=(fmt(bw)) height=(fmt(TOP + plot_h - y(*v))) {
                            title { (x_label) ": " (v) " " (s.name) }
                        }
                    }
                }
                @if label_every > 0 && i % label_every == 0 {
                    text x=(fmt(x0)) y=(h - 6.0) { (x_label) }
                }
            }
        }
    }
}

/// Horizontal bars, one per `(class, name, value)`, each with its figure.
pub(super) fn hbars(id: &str, summary: &str, rows: &[(&str, &str, u64)]) -> Markup {
    let row_h = 26.0;
    let h = row_h * rows.len().max(1) as f64 + 6.0;
    let label_w = 150.0;
    let max = rows.iter().map(|r| r.2).max().unwrap_or(0).max(1);
    let span = W - label_w - 60.0;
    m! {
        svg.chart id=(id) viewBox=(format!("0 0 {W} {h}")) role="img" aria-label=(summary) {
            @for (i, (class, name, v)) in rows.iter().enumerate() {
                @let top = 4.0 + row_h * i as f64;
                @let w = span * (*v as f64) / (max as f64);
                text x="0" y=(fmt(top + 15.0)) style="font-size:13px" { (name) }
                rect class=(format!("f-{class}")) x=(label_w) y=(fmt(top + 3.0)) width=(fmt(w.max(1.0))) height="16" {
                    title { (name) ": " (v) }
                }
                text x=(fmt(label_w + w + 6.0)) y=(fmt(top + 15.0)) style="font-size:13px" { (v) }
            }
        }
    }
}

/// One call of a session, as the session's picture draws it.
pub(super) struct Mark<'a> {
    /// `allow`, `advise`, `ask` or `deny`.
    pub verdict: &'a str,
    /// An ask the operator approved (its verdict is then `allow`): drawn as a square, the
    /// ask's shape, in the colour of an allowed call.
    pub approved: bool,
    /// `ok`, `failed`, `aborted` once known.
    pub outcome: Option<&'a str>,
    /// The call changed files (an edit or a write).
    pub edit: bool,
    /// What it returned, where known: `same` as the last time the same call ran (waste),
    /// or `new` (new information).
    pub returned: Option<&'a str>,
    /// What the tooltip says of it.
    pub title: String,
}

/// A session's calls over time: one mark per call, oldest on the left; its colour and
/// shape the verdict (a circle allowed, a diamond advised, a square asked (green once
/// approved), a cross stopped), a ring around it the outcome (green ran fine, red failed), a teal
/// triangle above it an edit, and below it what it returned: a grey bar the same as last
/// time (waste), a blue dot something new.
pub(super) fn strip(id: &str, summary: &str, marks: &[Mark<'_>]) -> Markup {
    let h = 86.0;
    let n = marks.len().max(1) as f64;
    let step = ((W - 20.0) / n).min(52.0);
    let cy = 46.0;
    m! {
        svg.chart id=(id) viewBox=(format!("0 0 {W} {h}")) role="img" aria-label=(summary) {
            line.axis x1="8" y1=(cy) x2=(W - 8.0) y2=(cy) {}
            @for (i, mk) in marks.iter().enumerate() {
                @let cx = 10.0 + step * (i as f64 + 0.5);
                @let class = format!("f-{}", mk.verdict);
                g data-verdict=(mk.verdict) data-returned=[mk.returned] {
                    title { (mk.title) }
                    @match mk.outcome {
                        Some("ok") => { circle.s-ok cx=(fmt(cx)) cy=(cy) r="13" fill="none" {} }
                        Some("failed") | Some("aborted") => { circle.s-failed cx=(fmt(cx)) cy=(cy) r="13" fill="none" stroke-dasharray="4 2" {} }
                        _ => {}
                    }
                    @match mk.verdict {
                        "deny" => {
                            path class=(class) d=(format!("M{a} {b}l6 -6 4 4 -6 6 6 6 -4 4 -6 -6 -6 6 -4 -4 6 -6 -6 -6 4 -4z", a = fmt(cx), b = cy - 2.0)) {}
                        }
                        "ask" => { rect class=(class) x=(fmt(cx - 8.0)) y=(cy - 8.0) width="16" height="16" {} }
                        "allow" if mk.approved => { rect class=(class) data-answer="approved" x=(fmt(cx - 8.0)) y=(cy - 8.0) width="16" height="16" {} }
                        "advise" => { path class=(class) d=(format!("M{} {}l9 9 -9 9 -9 -9z", fmt(cx), cy - 9.0)) {} }
                        _ => { circle class=(class) cx=(fmt(cx)) cy=(cy) r="8" {} }
                    }
                    @if mk.edit {
                        path.f-edit d=(format!("M{} 8l6 10h-12z", fmt(cx))) {}
                    }
                    @match mk.returned {
                        Some("same") => { rect.f-muted.r-same x=(fmt(cx - 7.0)) y=(cy + 17.0) width="14" height="4" {} }
                        Some("new") => { circle.f-saved.r-new cx=(fmt(cx)) cy=(cy + 19.0) r="3.5" {} }
                        _ => {}
                    }
                    text x=(fmt(cx)) y=(h - 4.0) text-anchor="middle" { (i + 1) }
                }
            }
        }
    }
}

/// One setting a tune sweep judged: its figures on the history replayed.
pub(super) struct Point<'a> {
    /// Stopped calls whose output was new.
    pub harmful: u64,
    /// Stopped calls whose output repeated the last identical call's.
    pub waste: u64,
    /// On the frontier (no other setting stops more waste with no more harm).
    pub frontier: bool,
    /// The recommendation.
    pub recommended: bool,
    /// What the tooltip says of it.
    pub label: &'a str,
}

/// The tune frontier: each setting a point (waste stopped up, harmful stops right), the
/// frontier joined by a line, the recommendation a larger ringed point.
pub(super) fn frontier(id: &str, summary: &str, points: &[Point<'_>]) -> Markup {
    let h = 260.0;
    let (left, bottom, top, right) = (48.0, 34.0, 12.0, 16.0);
    let max_x = points.iter().map(|p| p.harmful).max().unwrap_or(0).max(1);
    let max_y = points.iter().map(|p| p.waste).max().unwrap_or(0).max(1);
    // Square-root scales: the settings that matter sit near no harm, and one loose
    // setting with many harmful stops would otherwise squash them into a corner.
    let scale = |v: u64, max: u64| (v as f64).sqrt() / (max as f64).sqrt();
    let x = |v: u64| left + scale(v, max_x) * (W - left - right);
    let y = |v: u64| h - bottom - scale(v, max_y) * (h - bottom - top);
    let mut front: Vec<&Point<'_>> = points.iter().filter(|p| p.frontier).collect();
    front.sort_by_key(|p| (p.harmful, p.waste));
    let line = front
        .iter()
        .map(|p| format!("{},{}", fmt(x(p.harmful)), fmt(y(p.waste))))
        .collect::<Vec<_>>()
        .join(" ");
    m! {
        svg.chart id=(id) viewBox=(format!("0 0 {W} {h}")) role="img" aria-label=(summary) {
            line.axis x1=(left) y1=(h - bottom) x2=(W - right) y2=(h - bottom) {}
            line.axis x1=(left) y1=(top) x2=(left) y2=(h - bottom) {}
            text x=(left - 6.0) y=(top + 4.0) text-anchor="end" { (max_y) }
            text x=(left - 6.0) y=(h - bottom + 4.0) text-anchor="end" { "0" }
            text x=(W - right) y=(h - bottom + 14.0) text-anchor="end" { (max_x) }
            text x=((left + W) / 2.0) y=(h - 4.0) text-anchor="middle" { "harmful stops (new output stopped; square-root scale) →" }
            text x="12" y=((top + h - bottom) / 2.0) transform=(format!("rotate(-90 12 {})", (top + h - bottom) / 2.0)) text-anchor="middle" { "waste stopped (square-root scale) →" }
            @if !line.is_empty() { polyline points=(line) fill="none" stroke="var(--saved)" stroke-width="2" {} }
            @for p in points {
                g {
                    title { (p.label) ": " (p.waste) " waste stopped, " (p.harmful) " harmful" @if p.frontier { ", on the frontier" } @if p.recommended { ", recommended" } }
                    @if p.recommended {
                        circle cx=(fmt(x(p.harmful))) cy=(fmt(y(p.waste))) r="10" fill="none" stroke="var(--allow)" stroke-width="3" {}
                    }
                    circle class=(if p.frontier { "f-saved" } else { "f-muted" }) cx=(fmt(x(p.harmful))) cy=(fmt(y(p.waste))) r=(if p.frontier { "5" } else { "3.5" }) {}
                }
            }
        }
    }
}

/// A number as SVG wants it: two decimals at most.
fn fmt(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_draw_one_mark_per_nonzero_value_and_say_it_in_words() {
        let groups = vec![
            ("Mon".to_string(), vec![2, 0]),
            ("Tue".to_string(), vec![5, 1]),
        ];
        let series = [
            Series {
                class: "stops",
                name: "stops",
            },
            Series {
                class: "saved",
                name: "calls saved",
            },
        ];
        let svg = columns("c", "stops per day", &groups, &series, 1).into_string();
        assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
        assert!(svg.contains("<title>Tue: 5 stops</title>"), "{svg}");
        assert!(
            svg.contains("role=\"img\" aria-label=\"stops per day\""),
            "{svg}"
        );
        assert!(
            svg.contains(">5</text>"),
            "the top of the scale is the largest value: {svg}"
        );
    }

    #[test]
    fn a_strip_draws_each_call_by_verdict_outcome_edit_and_what_it_returned() {
        let marks = [
            Mark {
                approved: false,
                verdict: "allow",
                outcome: Some("failed"),
                edit: false,
                returned: Some("same"),
                title: "1".into(),
            },
            Mark {
                approved: false,
                verdict: "deny",
                outcome: None,
                edit: false,
                returned: None,
                title: "2".into(),
            },
            Mark {
                approved: false,
                verdict: "allow",
                outcome: Some("ok"),
                edit: true,
                returned: Some("new"),
                title: "3".into(),
            },
        ];
        let svg = strip("s", "calls", &marks).into_string();
        assert_eq!(svg.matches("data-verdict=\"deny\"").count(), 1);
        assert_eq!(svg.matches("class=\"s-failed\"").count(), 1);
        assert_eq!(svg.matches("class=\"f-edit\"").count(), 1);
        assert_eq!(svg.matches("data-returned=\"same\"").count(), 1);
        assert_eq!(svg.matches("r-same").count(), 1);
        assert_eq!(svg.matches("r-new").count(), 1);
        assert_eq!(fmt(1.50), "1.5");
        assert_eq!(fmt(2.0), "2");
    }
}
