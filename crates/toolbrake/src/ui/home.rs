//! The home page and `GET /api/overview`: how things stand, from the store alone.
//!
//! The time series (stops and calls saved per hour and per day over 7 days) are derived
//! from the sessions the store holds, each counted at its last activity: the store keeps
//! no timestamp per decision, and sessions stay for `[store] idle_ttl` (7 days by
//! default), so the 7 days are what the store still remembers. A session reset or
//! forgotten leaves the charts. The asks per day are each session's asks by their answer
//! (kept in its state), counted the same way. The asks' totals and the tools come from the
//! store's counters (since the store was made). docs/dashboard.md says the same.

use super::charts::{self, Series};
use super::layout::{bar, layout, legend, segment};
use super::words::{ago, count_of, reason};
use super::{blocking, html, session_json, Shared};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use maud::{html as m, Markup};
use serde_json::{json, Value};
use toolbrake_session::metrics;
use toolbrake_store::{Counters, SessionInfo, TOOL_LABEL};

/// A session active this recently is "working now".
pub(super) const WORKING_MS: u64 = 15 * 60 * 1000;
const HOUR_MS: u64 = 3600 * 1000;
const DAY_MS: u64 = 24 * HOUR_MS;
/// Hours the charts cover.
const HOURS: u64 = 7 * 24;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Sessions stopped and calls they had stopped, per bucket of `width` ms ending with the
/// one holding `now`, oldest first: `n` buckets.
fn buckets(list: &[SessionInfo], now: u64, width: u64, n: u64) -> Vec<(u64, u64, u64)> {
    let last = now / width;
    let first = last + 1 - n;
    let mut out: Vec<(u64, u64, u64)> = (first..=last).map(|b| (b * width, 0, 0)).collect();
    for s in list {
        let stopped = u64::from(s.state.stopped());
        let b = s.last_activity_ms / width;
        if stopped == 0 || b < first || b > last {
            continue;
        }
        let slot = &mut out[(b - first) as usize];
        slot.1 += 1;
        slot.2 += stopped;
    }
    out
}

/// Each session's asks by their answer (`[approved, declined, unanswered]`), per bucket of
/// `width` ms ending with the one holding `now`, oldest first: `n` buckets.
fn ask_buckets(list: &[SessionInfo], now: u64, width: u64, n: u64) -> Vec<[u64; 3]> {
    let last = now / width;
    let first = last + 1 - n;
    let mut out = vec![[0u64; 3]; n as usize];
    for s in list {
        let b = s.last_activity_ms / width;
        if b < first || b > last {
            continue;
        }
        for (slot, v) in out[(b - first) as usize].iter_mut().zip(s.state.asks()) {
            *slot += u64::from(v);
        }
    }
    out
}

/// The day's short name and date (UTC): "Thu 3".
fn day_label(start_ms: u64) -> String {
    let days = start_ms / DAY_MS;
    let dow = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(start_ms);
    let date = humantime::format_rfc3339_seconds(t).to_string();
    format!("{dow} {}", date[8..10].trim_start_matches('0'))
}

fn hour_label(start_ms: u64) -> String {
    format!("{:02}h", (start_ms / HOUR_MS) % 24)
}

/// Calls stopped (and asked, advised) per tool from the counters, most stopped first.
fn looping_tools(c: &Counters, n: usize) -> Vec<Value> {
    let mut per: std::collections::BTreeMap<&str, [u64; 3]> = Default::default();
    for (s, v) in c
        .values
        .iter()
        .filter(|(s, _)| s.metric == metrics::CALLS_JUDGED)
    {
        let i = match s.label("verdict") {
            Some("deny") => 0,
            Some("ask") => 1,
            Some("advise") => 2,
            _ => continue,
        };
        let tool = s.label(TOOL_LABEL).unwrap_or("");
        let e = per.entry(tool).or_default();
        e[i] = e[i].saturating_add(*v);
    }
    let mut rows: Vec<(&str, [u64; 3])> = per.into_iter().collect();
    rows.sort_by(|a, b| {
        (b.1[0] + b.1[1], b.1[2])
            .cmp(&(a.1[0] + a.1[1], a.1[2]))
            .then(a.0.cmp(b.0))
    });
    rows.into_iter()
        .take(n)
        .map(|(t, [d, a, w])| json!({"tool": t, "stopped": d, "asked": a, "advised": w}))
        .collect()
}

/// Everything the home page shows, as `GET /api/overview` returns it.
pub(super) fn overview(list: &[SessionInfo], c: &Counters, now: u64, store: &str) -> Value {
    let mut sessions: Vec<&SessionInfo> = list.iter().collect();
    sessions.sort_by_key(|i| std::cmp::Reverse(i.last_activity_ms));
    let working: Vec<Value> = sessions
        .iter()
        .filter(|i| now.saturating_sub(i.last_activity_ms) <= WORKING_MS)
        .map(|i| {
            let mut v = session_json(i, false);
            v["ago"] = json!(ago(now, i.last_activity_ms));
            v
        })
        .collect();
    let mut recent = Vec::new();
    for i in &sessions {
        let s = session_json(i, true);
        let stops = s["log"].as_array().into_iter().flatten().rev();
        let in_a_row = s["streak"]["count"].as_u64();
        let mut told: Vec<Option<String>> = Vec::new();
        for e in stops.filter(|e| matches!(e["verdict"].as_str(), Some("deny" | "ask"))) {
            // One line per reason and session, two reasons at most.
            let why = reason(e, in_a_row);
            if told.contains(&why) {
                continue;
            }
            if told.len() == 2 {
                break;
            }
            told.push(why.clone());
            recent.push(json!({
                "key": i.key,
                "ago": ago(now, i.last_activity_ms),
                "last_activity_ms": i.last_activity_ms,
                "verdict": e["verdict"],
                "code": e["code"],
                "tool": e["tool"],
                "reason": why,
            }));
        }
        if recent.len() >= 10 {
            break;
        }
    }
    recent.truncate(10);
    let hours = buckets(list, now, HOUR_MS, HOURS);
    let days = buckets(list, now, DAY_MS, 7);
    let series = |b: &[(u64, u64, u64)]| -> Vec<Value> {
        b.iter()
            .map(|(start, st, saved)| json!({"start_ms": start, "sessions_stopped": st, "calls_saved": saved}))
            .collect()
    };
    let mut per_day = series(&days);
    for (row, [yes, no, none]) in per_day.iter_mut().zip(ask_buckets(list, now, DAY_MS, 7)) {
        row["asks"] = json!({"approved": yes, "declined": no, "unanswered": none});
    }
    let last = |ms: u64| {
        list.iter()
            .filter(|i| now.saturating_sub(i.last_activity_ms) <= ms)
            .map(|i| u64::from(i.state.stopped()))
            .fold((0u64, 0u64), |(n, c), s| (n + u64::from(s > 0), c + s))
    };
    let (stopped_hour, _) = last(HOUR_MS);
    let (_, saved_day) = last(DAY_MS);
    let summary = format!(
        "{} working; {} stopped in the last hour, {} saved in the last 24 hours.",
        count_of(working.len() as u64, "agent", "agents"),
        count_of(stopped_hour, "session", "sessions"),
        count_of(saved_day, "call", "calls"),
    );
    let asks = |a: &str| c.sum(metrics::ASKS, &[("answer", a)]);
    let judged = |o: &str| c.sum(metrics::STOPPED, &[("judged", o)]);
    json!({
        "now_ms": now,
        "store": store,
        "summary": summary,
        "working": working,
        "recent_stops": recent,
        "per_hour": series(&hours),
        "per_day": per_day,
        "asks": {"approved": asks("approved"), "declined": asks("declined"), "unanswered": asks("unanswered")},
        "stopped_outcomes": {"waste": judged("waste"), "new_information": judged("new_information")},
        "looping_tools": looping_tools(c, 6),
    })
}

async fn overview_now(ui: &Shared) -> Result<Value, Response> {
    let store = ui.store.clone();
    let (list, counters) = blocking(move || Ok((store.list()?, store.counters()?))).await?;
    Ok(overview(&list, &counters, now_ms(), &ui.store.describe()))
}

pub(super) async fn api_overview(State(ui): State<Shared>) -> Response {
    match overview_now(&ui).await {
        Ok(v) => Json(v).into_response(),
        Err(r) => r,
    }
}

/// The sessions working now, each with its nearest gate (`app.js` rewrites the rows).
pub(super) fn working_table(rows: &[Value]) -> Markup {
    m! {
        div.scroll { table #working {
            thead { tr { th { "Session" } th { "Last call" } th { "Nearest gate" } th { "Stopped" } } }
            tbody {
                @if rows.is_empty() { tr { td colspan="4" .muted { "No session made a call in the last 15 minutes." } } }
                @for s in rows {
                    @let key = s["key"].as_str().unwrap_or("");
                    tr class=[(s["gated"] == true).then_some("gated")] {
                        td { a href=(format!("/sessions/{}", segment(key))) { code { (key) } } }
                        td.muted { (s["ago"].as_str().unwrap_or("")) }
                        td {
                            @if let Some(n) = s["near"].get(0) {
                                (bar(n["count"].as_u64().unwrap_or(0), n["limit"].as_u64().unwrap_or(0))) " " (n["doing"].as_str().unwrap_or(""))
                                div { code.muted { (n["fingerprint"].as_str().unwrap_or("")) } }
                            } @else { span.muted { "none near" } }
                        }
                        td { (s["stopped"]) }
                    }
                }
            }
        } }
    }
}

fn columns_of(rows: &Value, label: fn(u64) -> String) -> Vec<(String, Vec<u64>)> {
    rows.as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                label(r["start_ms"].as_u64().unwrap_or(0)),
                vec![
                    r["sessions_stopped"].as_u64().unwrap_or(0),
                    r["calls_saved"].as_u64().unwrap_or(0),
                ],
            )
        })
        .collect()
}

/// The asks per day as columns: approved, declined, unanswered.
fn ask_columns(rows: &Value) -> Vec<(String, Vec<u64>)> {
    rows.as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let a = &r["asks"];
            (
                day_label(r["start_ms"].as_u64().unwrap_or(0)),
                ["approved", "declined", "unanswered"]
                    .iter()
                    .map(|k| a[k].as_u64().unwrap_or(0))
                    .collect(),
            )
        })
        .collect()
}

fn asks_in_words(cols: &[(String, Vec<u64>)]) -> String {
    let parts: Vec<String> = cols
        .iter()
        .filter(|(_, v)| v.iter().any(|x| *x > 0))
        .map(|(l, v)| {
            format!(
                "{l}: {} approved, {} declined, {} unanswered",
                v[0], v[1], v[2]
            )
        })
        .collect();
    if parts.is_empty() {
        "Asks per day, last 7 days: none.".to_string()
    } else {
        format!("Asks per day, last 7 days: {}.", parts.join("; "))
    }
}

fn in_words(what: &str, cols: &[(String, Vec<u64>)]) -> String {
    let parts: Vec<String> = cols
        .iter()
        .filter(|(_, v)| v.iter().any(|x| *x > 0))
        .map(|(l, v)| format!("{l}: {} stopped, {} saved", v[0], v[1]))
        .collect();
    if parts.is_empty() {
        format!("{what}: no stops.")
    } else {
        format!("{what}: {}.", parts.join("; "))
    }
}

pub(super) async fn home_page(State(ui): State<Shared>) -> Response {
    let o = match overview_now(&ui).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let series = [
        Series {
            class: "stops",
            name: "sessions stopped",
        },
        Series {
            class: "saved",
            name: "calls saved",
        },
    ];
    let days = columns_of(&o["per_day"], day_label);
    let hours: Vec<(String, Vec<u64>)> = columns_of(&o["per_hour"], hour_label)
        .into_iter()
        .rev()
        .take(24)
        .rev()
        .collect();
    let ask_days = ask_columns(&o["per_day"]);
    let ask_series = [
        Series {
            class: "allow",
            name: "approved",
        },
        Series {
            class: "deny",
            name: "declined",
        },
        Series {
            class: "muted",
            name: "unanswered",
        },
    ];
    let a = &o["asks"];
    let ask_rows = [
        ("allow", "approved", a["approved"].as_u64().unwrap_or(0)),
        ("deny", "declined", a["declined"].as_u64().unwrap_or(0)),
        ("muted", "unanswered", a["unanswered"].as_u64().unwrap_or(0)),
    ];
    let w = &o["stopped_outcomes"];
    let outcome_rows = [
        (
            "stops",
            "waste (same output)",
            w["waste"].as_u64().unwrap_or(0),
        ),
        (
            "allow",
            "new information",
            w["new_information"].as_u64().unwrap_or(0),
        ),
    ];
    let words = |rows: &[(&str, &str, u64)]| {
        rows.iter()
            .map(|(_, n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let body = m! {
        h1 { "How things stand" }
        p.lede #summary aria-live="polite" { (o["summary"].as_str().unwrap_or("")) }
        div.grid {
            section.card aria-labelledby="h-working" {
                h2 #h-working { "Working now" }
                (working_table(o["working"].as_array().map_or(&[][..], Vec::as_slice)))
            }
            section.card aria-labelledby="h-stops" {
                h2 #h-stops { "Recent stops" }
                @let stops = o["recent_stops"].as_array().map_or(&[][..], Vec::as_slice);
                @if stops.is_empty() { p.muted { "Nothing was stopped in the sessions the store holds." } }
                ul #recent-stops {
                    @for s in stops {
                        @let key = s["key"].as_str().unwrap_or("");
                        li {
                            a href=(format!("/sessions/{}", segment(key))) { code { (key) } }
                            " " span.muted { (s["ago"].as_str().unwrap_or("")) } ": "
                            (s["reason"].as_str().unwrap_or(""))
                        }
                    }
                }
            }
        }
        div.grid {
            section.card aria-labelledby="h-days" {
                h2 #h-days { "Stops and calls saved, last 7 days" }
                (charts::columns("chart-days", &in_words("Per day, last 7 days", &days), &days, &series, 1))
                (legend(&[("stops", "sessions stopped"), ("saved", "calls saved (stopped before they ran)")]))
            }
            section.card aria-labelledby="h-hours" {
                h2 #h-hours { "The last 24 hours" }
                (charts::columns("chart-hours", &in_words("Per hour, last 24 hours", &hours), &hours, &series, 3))
                (legend(&[("stops", "sessions stopped"), ("saved", "calls saved")]))
            }
            section.card aria-labelledby="h-asks" {
                h2 #h-asks { "Asks, and what you answered" }
                (charts::columns("chart-asks-days", &asks_in_words(&ask_days), &ask_days, &ask_series, 1))
                (legend(&[("allow", "approved"), ("deny", "declined"), ("muted", "unanswered (settled as declined)")]))
                p.muted { "Per day of each session's last call, last 7 days. Since the store was made:" }
                (charts::hbars("chart-asks", &format!("Asks: {}.", words(&ask_rows)), &ask_rows))
                h2 { "What the stopped calls would have returned" }
                (charts::hbars("chart-outcomes", &format!("Stopped calls whose output is known: {}.", words(&outcome_rows)), &outcome_rows))
                p.muted { "Since the store was made. A stopped call's output is known when it ran anyway or you approved it." }
            }
            section.card aria-labelledby="h-tools" {
                h2 #h-tools { "Tools that loop most" }
                @let tools = o["looping_tools"].as_array().map_or(&[][..], Vec::as_slice);
                div.scroll { table #tools {
                    thead { tr { th { "Tool" } th { "Stopped" } th { "Asked" } th { "Warned" } } }
                    tbody {
                        @if tools.is_empty() { tr { td colspan="4" .muted { "No tool was stopped, asked about or warned yet." } } }
                        @for t in tools {
                            tr { td { code { (t["tool"].as_str().unwrap_or("")) } } td { (t["stopped"]) } td { (t["asked"]) } td { (t["advised"]) } }
                        }
                    }
                } }
            }
        }
        p.muted { "Sessions are counted at their last call. The store (" code { (ui.store.describe()) } ") forgets a session once it has been idle longer than " code { "idle_ttl" } " (" code { "[store]" } " in the configuration; 7 days unless set). "
            a href="/api/overview" { "These figures as JSON" } "." }
        p #status aria-live="polite" {}
    };
    html(layout("Home", "home", body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolbrake_core::SessionState;

    #[test]
    fn sessions_are_counted_in_the_bucket_of_their_last_activity() {
        let st: SessionState = SessionState::default();
        let info = |key: &str, at: u64| SessionInfo {
            key: key.into(),
            last_activity_ms: at,
            state: st.clone(),
        };
        let now = 100 * DAY_MS + 5 * HOUR_MS;
        // A session that stopped nothing is in no bucket.
        let b = buckets(&[info("a", now)], now, HOUR_MS, 24);
        assert_eq!(b.len(), 24);
        assert!(b.iter().all(|x| x.1 == 0));
        assert_eq!(day_label(0), "Thu 1");
        assert_eq!(hour_label(now), "05h");
    }
}
