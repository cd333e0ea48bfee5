//! A tune's figures as text, JSON and one HTML page.

use super::{Figures, Setting, Tuning};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde_json::{json, Value};
use std::fmt::Write as _;
use toolbrake_core::config::Config;

impl Tuning {
    /// The table, the frontier, the recommendation and its `toolbrake.toml` snippet.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "toolbrake tune: {} settings over {} events ({} calls, {} sessions)",
            self.settings.len(),
            self.events,
            self.calls,
            self.figures.first().map_or(0, |f| f.sessions)
        );
        if !self.base_source.is_empty() {
            let _ = writeln!(o, "base: the configuration from {}", self.base_source);
        }
        let _ = writeln!(
            o,
            "waste: stopped calls whose recorded output repeated the last identical call's; harmful: stopped calls whose recorded output was new; saved: the calls stopped, as a share of all calls, and the bytes of their recorded outputs (the closest measure of tokens).\n"
        );
        let labels: Vec<String> = self.settings.iter().map(Setting::row_label).collect();
        let width = labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
            .max(7);
        let _ = writeln!(
            o,
            "{:>3}  {:<width$}  {:>5}  {:>7}  {:>7}  {:>8}  {:>7}  {:>11}  frontier",
            "#", "setting", "waste", "harmful", "stopped", "sessions", "saved", "bytes saved"
        );
        for (i, (label, f)) in labels.iter().zip(&self.figures).enumerate() {
            let mark = match (self.frontier[i], self.recommended == Some(i)) {
                (true, true) => "*  <- recommended",
                (false, true) => "   <- recommended",
                (true, false) => "*",
                (false, false) => "",
            };
            let _ = writeln!(
                o,
                "{:>3}  {:<width$}  {:>5}  {:>7}  {:>7}  {:>8}  {:>7}  {:>11}  {mark}",
                i + 1,
                label,
                f.waste,
                f.harmful,
                f.stopped,
                f.sessions_stopped,
                crate::report::share_text(f.stopped, f.calls),
                f.bytes_saved
            );
        }
        let named: Vec<(usize, &Setting)> = self
            .settings
            .iter()
            .enumerate()
            .filter(|(_, s)| s.name.is_some_and(|n| n != "base") && !s.changes.is_empty())
            .collect();
        if !named.is_empty() {
            let _ = writeln!(o);
            for (i, s) in named {
                let _ = writeln!(o, "{:>3}  {}", i + 1, s.label());
            }
        }
        let _ = writeln!(
            o,
            "\n* on the frontier: no other setting stops more waste with no more harmful stops."
        );
        match self.recommended {
            None => {
                let _ = writeln!(o, "No setting was judged.");
            }
            Some(r) => {
                let f = &self.figures[r];
                let base = &self.figures[0];
                let budget = self.max_harmful.in_words();
                let _ = writeln!(
                    o,
                    "Harmful-stop budget (--max-harmful): at most {budget} stops harmful."
                );
                if !self.max_harmful.admits(f.harmful, f.stopped) {
                    let _ = writeln!(
                        o,
                        "No setting keeps its harmful stops within that budget on this history: recommended is the one whose stops are least often harmful."
                    );
                }
                let _ = writeln!(
                    o,
                    "Recommended: #{} {}: {} waste calls stopped, {} harmful of {} stops; saved {} of calls, {} bytes of output (base: {} waste, {} harmful).",
                    r + 1,
                    labels[r],
                    f.waste,
                    f.harmful,
                    f.stopped,
                    crate::report::share_text(f.stopped, f.calls),
                    f.bytes_saved,
                    base.waste,
                    base.harmful
                );
                if self.settings[r].changes.is_empty() {
                    let _ = writeln!(
                        o,
                        "Your configuration is the recommendation: nothing to change."
                    );
                } else {
                    let _ = writeln!(
                        o,
                        "\nAs toolbrake.toml:\n\n{}",
                        self.settings[r].toml().trim_end()
                    );
                }
            }
        }
        o
    }

    /// The figures for machines.
    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .settings
            .iter()
            .zip(&self.figures)
            .enumerate()
            .map(|(i, (s, f))| {
                json!({
                    "name": s.name,
                    "changes": s.edit(),
                    "waste": f.waste,
                    "harmful": f.harmful,
                    "stopped": f.stopped,
                    "sessions_stopped": f.sessions_stopped,
                    "calls": f.calls,
                    "bytes_saved": f.bytes_saved,
                    "frontier": self.frontier[i],
                    "recommended": self.recommended == Some(i),
                })
            })
            .collect();
        json!({
            "events": self.events,
            "calls": self.calls,
            "sessions": self.figures.first().map_or(0, |f| f.sessions),
            "settings": rows,
            "max_harmful": self.max_harmful.to_string(),
            "recommended": self.recommended.map(|r| json!({
                "index": r,
                "changes": self.settings[r].edit(),
                "toml": self.settings[r].toml(),
            })),
        })
    }

    /// One self-contained page: the frontier as a chart (waste stopped against harmful
    /// stops; the base, the defaults and the recommendation marked) beside the table.
    /// maud escapes every inserted value.
    pub fn html(&self) -> String {
        let labels: Vec<String> = self.settings.iter().map(Setting::label).collect();
        let page = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { "toolbrake tune" }
                    style { (PreEscaped(CSS)) }
                }
                body {
                    h1 { "toolbrake tune" }
                    p id="summary" {
                        @if !self.base_source.is_empty() { "Base: the configuration from " (self.base_source) ". " }
                        (self.settings.len()) " settings over " (self.events) " events (" (self.calls) " calls). "
                        b { "Waste" } ": stopped calls whose recorded output repeated the last identical call's. "
                        b { "Harmful" } ": stopped calls whose recorded output was new."
                    }
                    div class="side" {
                        (self.chart())
                        table id="settings" {
                            tr { th { "#" } th { "setting" } th { "waste" } th { "harmful" } th { "stopped" } th { "sessions" } th { "saved" } th { "bytes saved" } th { "" } }
                            @for (i, (label, f)) in labels.iter().zip(&self.figures).enumerate() {
                                tr class={ @if self.frontier[i] { "frontier" } @if self.recommended == Some(i) { " recommended" } } {
                                    td { (i + 1) } td { (label) } td { (f.waste) } td { (f.harmful) } td { (f.stopped) } td { (f.sessions_stopped) } td { (crate::report::share_text(f.stopped, f.calls)) } td { (f.bytes_saved) }
                                    td { @if self.frontier[i] { "frontier" } @if self.recommended == Some(i) { " · recommended" } }
                                }
                            }
                        }
                    }
                    @match self.recommended {
                        Some(r) => {
                            p id="recommendation" { "Recommended (at most " (self.max_harmful.in_words()) " stops harmful): #" (r + 1) " " (labels[r]) ": " (self.figures[r].waste) " waste calls stopped, " (self.figures[r].harmful) " harmful of " (self.figures[r].stopped) " stops." }
                            @if !self.settings[r].changes.is_empty() {
                                pre { (self.settings[r].toml()) }
                            }
                        }
                        None => p id="recommendation" { "No setting was judged." }
                    }
                }
            }
        };
        page.into_string() + "\n"
    }

    fn chart(&self) -> Markup {
        let (w, h, left, bottom, top, right) = (560.0, 380.0, 56.0, 44.0, 16.0, 16.0);
        let max_x = self
            .figures
            .iter()
            .map(|f| f.harmful)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let max_y = self
            .figures
            .iter()
            .map(|f| f.waste)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let x = |v: u64| left + v as f64 / max_x * (w - left - right);
        let y = |v: u64| h - bottom - v as f64 / max_y * (h - bottom - top);
        let mut front: Vec<&Figures> = self
            .figures
            .iter()
            .zip(&self.frontier)
            .filter(|(_, on)| **on)
            .map(|(f, _)| f)
            .collect();
        front.sort_by_key(|f| (f.harmful, f.waste));
        let line: String = front
            .iter()
            .map(|f| format!("{:.1},{:.1}", x(f.harmful), y(f.waste)))
            .collect::<Vec<_>>()
            .join(" ");
        let defaults = self
            .settings
            .iter()
            .position(|s| s.name == Some("defaults"));
        let ticks = |max: f64| -> Vec<u64> {
            let step = ((max / 4.0).ceil() as u64).max(1);
            (0..=4)
                .map(|k| k * step)
                .filter(|v| *v as f64 <= max)
                .collect()
        };
        html! {
            svg id="frontier" xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {w} {h}")) role="img" {
                title { "waste stopped against harmful stops, one dot per setting" }
                line x1=(left) y1=(h - bottom) x2=(w - right) y2=(h - bottom) stroke="#999" {}
                line x1=(left) y1=(top) x2=(left) y2=(h - bottom) stroke="#999" {}
                @for t in ticks(max_x) {
                    text x=(format!("{:.1}", x(t))) y=(h - bottom + 14.0) text-anchor="middle" { (t) }
                }
                @for t in ticks(max_y) {
                    text x=(left - 6.0) y=(format!("{:.1}", y(t) + 4.0)) text-anchor="end" { (t) }
                }
                text x=(format!("{:.0}", (left + w - right) / 2.0)) y=(h - 8.0) text-anchor="middle" { "harmful stops" }
                text x="14" y=(format!("{:.0}", (top + h - bottom) / 2.0)) text-anchor="middle" transform=(format!("rotate(-90 14 {:.0})", (top + h - bottom) / 2.0)) { "waste stopped" }
                @if front.len() > 1 {
                    polyline class="frontier" points=(line) fill="none" stroke="#2f6fdb" stroke-width="1.5" {}
                }
                @for (i, f) in self.figures.iter().enumerate() {
                    circle class={ "setting" @if self.frontier[i] { " frontier" } } cx=(format!("{:.1}", x(f.harmful))) cy=(format!("{:.1}", y(f.waste))) r="4"
                        fill=(if self.frontier[i] { "#2f6fdb" } else { "#bbb" }) {
                        title { "#" (i + 1) " " (self.settings[i].label()) ": " (f.waste) " waste, " (f.harmful) " harmful" }
                    }
                }
                (marker(x(self.figures[0].harmful), y(self.figures[0].waste), if self.settings[0].config == Config::default() { "base = defaults" } else { "base" }, "#222", "square"))
                @if let Some(d) = defaults {
                    (marker(x(self.figures[d].harmful), y(self.figures[d].waste), "defaults", "#8a5a00", "diamond"))
                }
                @if let Some(r) = self.recommended {
                    (marker(x(self.figures[r].harmful), y(self.figures[r].waste), "recommended", "#1a8a3a", "ring"))
                }
            }
        }
    }
}

/// A labelled marker on the chart.
fn marker(cx: f64, cy: f64, label: &str, color: &str, shape: &str) -> Markup {
    html! {
        g class={ "marker " (label.split(' ').next().unwrap_or(label)) } {
            @match shape {
                "square" => rect x=(format!("{:.1}", cx - 6.0)) y=(format!("{:.1}", cy - 6.0)) width="12" height="12" fill="none" stroke=(color) stroke-width="1.5" {},
                "diamond" => polygon points=(format!("{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}", cx, cy - 8.0, cx + 8.0, cy, cx, cy + 8.0, cx - 8.0, cy)) fill="none" stroke=(color) stroke-width="1.5" {},
                _ => circle cx=(format!("{cx:.1}")) cy=(format!("{cy:.1}")) r="9" fill="none" stroke=(color) stroke-width="2" {},
            }
            // Each marker's label on its own side (base above right, defaults above left,
            // the recommendation below right): markers that meet never overlap in words.
            @let (dx, dy, anchor) = match label.split(' ').next().unwrap_or(label) {
                "defaults" => (-10.0, -8.0, "end"),
                "recommended" => (12.0, 20.0, "start"),
                _ => (10.0, -8.0, "start"),
            };
            text x=(format!("{:.1}", cx + dx)) y=(format!("{:.1}", cy + dy)) text-anchor=(anchor) fill=(color) { (label) }
        }
    }
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}h1{font-size:20px}\
.side{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}#frontier{width:560px;max-width:100%;height:auto;flex:none}\
table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}td:nth-child(2),th:nth-child(2){text-align:left}\
tr.frontier td{color:#1b4fa8}tr.recommended td{font-weight:bold;background:#e8f5ec}pre{background:#f5f5f5;padding:8px;display:inline-block}svg text{font:11px system-ui,sans-serif}";
