//! What the session service adds to a decision, in process, over the memory store:
//! `cargo bench -p toolbrake-session --bench service`.
//!
//! - `service/pre_post/bare`: pre + post through `Sessions` with no counters and no
//!   observer (the engines and the store's update alone);
//! - `service/pre_post/counters`: the same keeping the operators' counters (the default);
//! - `service/pre_post/counters_observer`: and telling an observer that does nothing (the
//!   clock reads and the event it is handed).
//!
//! The engines' own cost is `cargo bench -p toolbrake-core --bench decisions`.

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use toolbrake_core::{Call, Config, Engine, Outcome};
use toolbrake_session::{Observed, Observer, Sessions};
use toolbrake_store::MemoryStore;

struct Nothing;

impl Observer for Nothing {
    fn observe(&self, event: &Observed<'_>) {
        std::hint::black_box(event);
    }
}

fn mix() -> Vec<(&'static str, Value)> {
    vec![
        (
            "Bash",
            json!({"command": "cargo test --quiet", "description": "run tests"}),
        ),
        ("Read", json!({"file_path": "/work/src/lib.rs"})),
        (
            "WebFetch",
            json!({"url": "https://docs.rs/serde/latest/serde/", "prompt": "derive"}),
        ),
        ("Grep", json!({"pattern": "fn main", "path": "/work/src"})),
    ]
}

fn bench_service(c: &mut Criterion) {
    let engine = Engine::new(Config::default());
    let outcome = Outcome::success("{\"ok\":true,\"items\":[1,2,3]}");
    let calls = mix();
    let nothing = Nothing;
    let mut g = c.benchmark_group("service/pre_post");
    for (name, counters, observer) in [
        ("bare", false, None),
        ("counters", true, None),
        ("counters_observer", true, Some(&nothing as &dyn Observer)),
    ] {
        let store = MemoryStore::new();
        let mut n = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                let s = Sessions::new(&engine, &store)
                    .with_counters(counters)
                    .with_observer(observer);
                let (tool, args) = &calls[(n % 4) as usize];
                let id = n.to_string();
                n += 1;
                let d = s
                    .pre(
                        "s1",
                        &Call {
                            session: "s1",
                            id: &id,
                            tool,
                            args,
                        },
                    )
                    .unwrap();
                let _ = s.post("s1", &id, &outcome);
                if n.is_multiple_of(8) {
                    let _ = s.user_message("s1");
                }
                d
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_service);
criterion_main!(benches);
