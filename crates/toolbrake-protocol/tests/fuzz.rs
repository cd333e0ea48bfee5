//! Bounded random input ("fuzz-style") for the protocol reader and processor and for the
//! importers: no input panics, and without an importer every input line gets exactly one
//! answer line, in order.

use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_protocol::import::{by_name, FORMATS};
use toolbrake_protocol::{run, Handled, Processor, Sink};
use toolbrake_store::MemoryStore;
use toolbrake_testkit::arb_json;

struct Count(Vec<String>);

impl Sink for Count {
    fn handled(&mut self, h: &Handled) -> std::io::Result<()> {
        self.0.push(h.line.clone());
        Ok(())
    }
}

/// A line: random bytes, random JSON, or an event with random (often wrong) fields.
fn arb_line() -> impl Strategy<Value = Vec<u8>> {
    let event = (
        prop::sample::select(vec!["call", "result", "answer", "user", "end", "other"]),
        prop::sample::select(vec!["s1", "s2"]),
        prop::sample::select(vec!["1", "2", "3"]),
        prop::sample::select(vec!["bash", "Read", "web_fetch", ""]),
        arb_json(),
        arb_json(),
    )
        .prop_map(|(kind, session, id, tool, args, extra)| {
            let mut v =
                json!({"event": kind, "session": session, "id": id, "tool": tool, "args": args});
            match kind {
                "result" => v["outcome"] = json!({"exit_code": 1, "text": extra.to_string()}),
                "answer" => v["approved"] = extra,
                _ => v["extra"] = extra,
            }
            serde_json::to_vec(&v).unwrap()
        });
    prop_oneof![
        1 => prop::collection::vec(any::<u8>().prop_filter("one line", |b| *b != b'\n'), 0..64),
        1 => arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        2 => event,
    ]
}

fn processor() -> Processor {
    Processor::new(
        Engine::new(Config::from_toml_str("[streak]\nmax_repeats = 2", &no_env).unwrap()),
        Arc::new(MemoryStore::new()),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_line_gets_one_answer(lines in prop::collection::vec(arb_line(), 0..40)) {
        let mut input = Vec::new();
        for l in &lines {
            input.extend_from_slice(l);
            input.push(b'\n');
        }
        let mut p = processor();
        let mut out = Count(Vec::new());
        run(&input[..], None, &mut p, 1 << 16, &mut out).unwrap();
        prop_assert_eq!(out.0.len(), lines.len());
        for l in &out.0 {
            prop_assert!(serde_json::from_str::<Value>(l).is_ok(), "{}", l);
        }
    }

    #[test]
    fn importers_never_panic(lines in prop::collection::vec(arb_line(), 0..30), format in prop::sample::select(FORMATS.to_vec())) {
        let mut input = Vec::new();
        for l in &lines {
            input.extend_from_slice(l);
            input.push(b'\n');
        }
        let mut imp = by_name(format, "fuzz").unwrap();
        let mut p = processor();
        let mut out = Count(Vec::new());
        run(&input[..], Some(imp.as_mut()), &mut p, 1 << 16, &mut out).unwrap();
    }
}
