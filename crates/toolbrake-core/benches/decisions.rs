//! Criterion benchmarks of the core decisions: `cargo bench -p toolbrake-core`.
//!
//! - `hash/*`: the call hash alone on small, 10 KB and 1 MB arguments, and raw SHA-256
//!   over the same number of bytes (the floor).
//! - `streak_check/*`: one streak-brake check (hash + slot update).
//! - `decision/*`: one full pre + post through both engines for a realistic mix of calls,
//!   on a warm session and on a session whose window is full.
//!
//! Session state sizes are printed once (serialised bytes), for BENCHMARKS.md.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use toolbrake_core::canonical::{call_hash, canonical_json};
use toolbrake_core::streak::{StreakBrake, StreakConfig, StreakState};
use toolbrake_core::{Call, Config, Engine, Outcome, SessionState};

fn args_of_size(bytes: usize) -> Value {
    // Many small fields, as real arguments have (not one giant string).
    let mut map = serde_json::Map::new();
    let mut i = 0;
    while serde_json::to_string(&map).unwrap().len() < bytes {
        let chunk = (0..64).map(|j| format!("k{i}_{j}")).collect::<Vec<_>>();
        for k in chunk {
            map.insert(k, json!("value with some text ✓ and \"quotes\""));
        }
        i += 1;
    }
    Value::Object(map)
}

fn bench_hash(c: &mut Criterion) {
    let small = json!({"q": "weather"});
    let ten_k = args_of_size(10 * 1024);
    let one_m = args_of_size(1024 * 1024);
    let file_text = json!({"file_path": "/work/big.txt", "content": "line of text with \"quotes\"\tand tabs\n".repeat(1 << 20 >> 5)});
    let mut g = c.benchmark_group("hash");
    for (name, args) in [
        ("small", &small),
        ("10KB", &ten_k),
        ("1MB", &one_m),
        ("1MB_one_string", &file_text),
    ] {
        let len = canonical_json(args).unwrap().len();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("call_hash", name), args, |b, a| {
            b.iter(|| call_hash(black_box("search"), black_box(a)).unwrap())
        });
        let raw = vec![b'x'; len];
        g.bench_with_input(BenchmarkId::new("raw_sha256", name), &raw, |b, r| {
            b.iter(|| Sha256::digest(black_box(r)))
        });
    }
    g.finish();

    let brake = StreakBrake::new(StreakConfig::new(1_000_000).unwrap());
    let mut g = c.benchmark_group("streak_check");
    for (name, args) in [("small", &small), ("10KB", &ten_k), ("1MB", &one_m)] {
        let mut st = StreakState::default();
        g.bench_with_input(BenchmarkId::from_parameter(name), args, |b, a| {
            b.iter(|| {
                brake
                    .check(&mut st, "s1", None, "search", black_box(a))
                    .unwrap()
            })
        });
    }
    g.finish();
}

fn mix() -> Vec<(&'static str, Value)> {
    vec![
        (
            "Bash",
            json!({"command": "curl -s --max-time 20 -o /tmp/out.json 'https://api.example.com/v1/items?page=2&per_page=100'", "description": "fetch items"}),
        ),
        (
            "Edit",
            json!({"file_path": "/work/src/lib.rs", "old_string": "fn a() {}", "new_string": "fn a() { b() }"}),
        ),
        (
            "Read",
            json!({"file_path": "/work/src/lib.rs", "offset": 120, "limit": 80}),
        ),
        (
            "mcp__github__search_issues",
            json!({"q": "repo:o/r is:open label:bug", "per_page": 50}),
        ),
    ]
}

/// A realistic tool output: a test run's first 800 characters, with timings and addresses.
fn output_800() -> String {
    let mut s = String::from("============================= test session starts ==============================\nplatform linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0\nrootdir: /work/repo\ncollected 214 items\n\n");
    let mut i = 0;
    while s.len() < 800 {
        s.push_str(&format!(
            "tests/test_mod_{i}.py::test_case_{i} PASSED [{:>3}%] in 0.0{i}s at 0x7f3a2c{i:04x}\n",
            i % 100
        ));
        i += 1;
    }
    s.truncate(800);
    s
}

/// Pre + post of the mix on a warm session that is never gated (a user message every 8).
fn bench_warm(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    engine: &Engine,
    outcome: &Outcome,
) {
    let calls = mix();
    let mut st = SessionState::default();
    let mut n = 0u64;
    g.bench_function(name, |b| {
        b.iter(|| {
            let (tool, args) = &calls[(n % 4) as usize];
            let id = n.to_string();
            n += 1;
            let d = engine
                .pre(
                    &mut st,
                    &Call {
                        session: "s1",
                        id: &id,
                        tool,
                        args,
                    },
                )
                .unwrap();
            let _ = engine.post(&mut st, &id, outcome);
            if n.is_multiple_of(8) {
                let _ = engine.user_message(&mut st);
            }
            d
        })
    });
}

fn bench_progress(c: &mut Criterion) {
    let mut g = c.benchmark_group("progress");
    let small = Outcome::success("{\"ok\":true,\"items\":[1,2,3]}");
    let medium = Outcome::success(output_800());
    let large = Outcome::success(output_800().repeat(80));
    g.bench_function("digest/small", |b| {
        b.iter(|| toolbrake_core::progress::digest(black_box(&small)))
    });
    g.bench_function("digest/800B", |b| {
        b.iter(|| toolbrake_core::progress::digest(black_box(&medium)))
    });
    g.bench_function("digest/64KB", |b| {
        b.iter(|| toolbrake_core::progress::digest(black_box(&large)))
    });
    g.finish();
}

fn bench_decision(c: &mut Criterion) {
    let calls = mix();
    let outcome = Outcome::success("{\"ok\":true,\"items\":[1,2,3]}");
    let long_outcome = Outcome::success(output_800());
    let progress = Engine::new(Config::default());
    let seed = Engine::new(
        Config::from_value(
            &json!({"streak": {"progress": false}, "breaker": {"progress": false}}),
            &toolbrake_core::config::no_env,
        )
        .unwrap(),
    );
    let mut g = c.benchmark_group("decision");
    // Side by side in one run: the progress signal against the seeds' rules.
    bench_warm(&mut g, "pre_post_warm", &progress, &outcome);
    bench_warm(&mut g, "pre_post_warm_seed", &seed, &outcome);
    bench_warm(&mut g, "pre_post_warm_800B", &progress, &long_outcome);
    bench_warm(&mut g, "pre_post_warm_800B_seed", &seed, &long_outcome);

    // Full window: 16 records of distinct calls, then the same mix keeps sliding it.
    let cfg = Config::from_value(&json!({"streak": {"enabled": false}, "breaker": {"limits": {"exact": 1000, "cmd": 1000, "net": 1000, "sink": 1000, "host": 1000}}}), &toolbrake_core::config::no_env).unwrap();
    let engine_full = Engine::new(cfg);
    let mut full = SessionState::default();
    for i in 0..64 {
        let id = format!("w{i}");
        let args = json!({"command": format!("curl -s https://api.example.com/v1/items/{i} -o out{i}.json")});
        let _ = engine_full
            .pre(
                &mut full,
                &Call {
                    session: "s1",
                    id: &id,
                    tool: "Bash",
                    args: &args,
                },
            )
            .unwrap();
        let _ = engine_full.post(&mut full, &id, &outcome);
    }
    let mut m = 0u64;
    g.bench_function("pre_post_full_window", |b| {
        b.iter(|| {
            let (tool, args) = &calls[(m % 4) as usize];
            let id = format!("f{m}");
            m += 1;
            let d = engine_full
                .pre(
                    &mut full,
                    &Call {
                        session: "s1",
                        id: &id,
                        tool,
                        args,
                    },
                )
                .unwrap();
            let _ = engine_full.post(&mut full, &id, &outcome);
            d
        })
    });
    g.finish();

    let fresh = serde_json::to_vec(&SessionState::default()).unwrap().len();
    let streak_only = {
        let mut s = StreakState::default();
        let _ = StreakBrake::default().check(
            &mut s,
            "s1",
            Some("c1"),
            "search",
            &json!({"q": "weather"}),
        );
        serde_json::to_vec(&s).unwrap().len()
    };
    let full_bytes = serde_json::to_vec(&full).unwrap().len();
    eprintln!(
        "state bytes (serde_json): empty session {fresh}, streak slot after one call {streak_only}, full-window session {full_bytes}; size_of::<SessionState>() = {}",
        std::mem::size_of::<SessionState>()
    );
}

criterion_group!(benches, bench_hash, bench_progress, bench_decision);
criterion_main!(benches);
