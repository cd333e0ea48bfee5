//! Memory per idle session in the in-process store, and the store's bound under a flood.
//!
//! `cargo run --release -p toolbrake-store --example session_memory [SESSIONS] [CALLS]
//! [COMPACT]` (default 100,000 sessions of 20 calls each, every call decided and its
//! outcome reported, no session ended): the process's resident memory before and after,
//! per session, beside the store's own measure (the states' JSON length, or the
//! compressed length of those kept compact). `COMPACT` is `idle` (the default: every
//! session not being written is idle, as all are after `[store] compact_after`, so they
//! are kept compressed) or `never` (every state decoded, as before `compact_after`).
//! `… --example session_memory flood [COMPACT]`: three times `[store] max_sessions` new
//! sessions of one call each into a store with the default bounds, printing what it holds
//! (run each alone: a process's resident memory does not shrink after the first part).

use serde_json::json;
use std::time::{Duration, Instant};
use toolbrake_core::{Call, Config, Engine, Outcome};
use toolbrake_store::settings::StoreSettings;
use toolbrake_store::{update, MemoryStore, Store};

/// Resident memory of this process, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// `calls` decided calls on `session`, each with its outcome: a mix of tools and
/// arguments as an agent's session has them.
fn run_session(store: &dyn Store, engine: &Engine, session: &str, calls: usize) {
    for i in 0..calls {
        let (tool, args) = match i % 4 {
            0 => (
                "Bash",
                json!({"command": format!("cargo test -p crate{}", i % 3)}),
            ),
            1 => (
                "Read",
                json!({"file_path": format!("/repo/src/file{i}.rs")}),
            ),
            2 => (
                "Edit",
                json!({"file_path": format!("/repo/src/file{}.rs", i - 1), "old_string": "a", "new_string": "b"}),
            ),
            _ => (
                "Grep",
                json!({"pattern": format!("fn name{i}"), "path": "/repo"}),
            ),
        };
        let id = format!("{session}-{i}");
        let _ = update(store, session, |st| {
            engine.pre(
                st,
                &Call {
                    session,
                    id: &id,
                    tool,
                    args: &args,
                },
            )
        })
        .expect("memory store");
        let outcome = Outcome {
            exit_code: Some(if i % 5 == 0 { 1 } else { 0 }),
            ..Outcome::default()
        };
        let _ = update(store, session, |st| engine.post(st, &id, &outcome)).expect("memory store");
    }
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let engine = Engine::new(Config::default());
    let compact = |store: MemoryStore, how: Option<String>| match how.as_deref() {
        Some("never") => (store, "never"),
        _ => (store.with_compact_after(Duration::ZERO), "idle"),
    };
    if args.peek().map(String::as_str) == Some("flood") {
        args.next();
        let settings = StoreSettings::default();
        let bounded = MemoryStore::new().with_limits(settings.max_sessions, settings.max_bytes);
        let (bounded, how) = compact(bounded, args.next());
        flood(&engine, &settings, &bounded, how);
        return;
    }
    let sessions: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let calls: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    // Bounds it never reaches: a bounded store measures its sessions' size.
    let (store, how) = compact(
        MemoryStore::new().with_limits(sessions * 2, u64::MAX / 2),
        args.next(),
    );
    let before = rss_kib();
    let start = Instant::now();
    for s in 0..sessions {
        run_session(&store, &engine, &format!("session-{s}"), calls);
    }
    let secs = start.elapsed().as_secs_f64();
    let after = rss_kib();
    let n = store.len();
    println!(
        "{n} idle sessions of {calls} calls, compact {how} ({} held compact): resident memory +{:.1} MiB, {:.0} bytes a session; the store's measure {:.0} bytes a session; {:.2} µs an update",
        store.compact(),
        (after - before) as f64 / 1024.0,
        (after - before) as f64 * 1024.0 / n as f64,
        store.bytes() as f64 / n as f64,
        secs * 1e6 / (sessions * calls * 2) as f64,
    );
}

fn flood(engine: &Engine, settings: &StoreSettings, bounded: &MemoryStore, how: &str) {
    let flood = settings.max_sessions * 3;
    let before = rss_kib();
    let mut peak_held = 0;
    for s in 0..flood {
        run_session(bounded, engine, &format!("flood-{s}"), 1);
        if s % 10_000 == 0 {
            peak_held = peak_held.max(bounded.len());
        }
    }
    let after = rss_kib();
    println!(
        "a flood of {flood} new sessions into the default bounds (max_sessions {}, max_bytes {} MiB), compact {how}: {} held at the end (at most {peak_held} seen), the store's measure {:.1} MiB, resident memory +{:.1} MiB",
        settings.max_sessions,
        settings.max_bytes >> 20,
        bounded.len(),
        bounded.bytes() as f64 / (1 << 20) as f64,
        (after - before) as f64 / 1024.0,
    );
}
