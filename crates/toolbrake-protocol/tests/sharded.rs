//! The law of the sharded replay: over any stream, `run_sharded` with several processors
//! writes exactly what `run` writes with one (line for line, same order, same error count),
//! and so does a second input read by the same processors.

use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_protocol::import::Trajectory;
use toolbrake_protocol::{run, run_sharded, Handled, Processor, Sink};
use toolbrake_store::MemoryStore;

struct Lines(Vec<String>);

impl Sink for Lines {
    fn handled(&mut self, h: &Handled) -> std::io::Result<()> {
        self.0.push(h.line.clone());
        Ok(())
    }
}

/// Low gates, so short streams reach advisories, asks and denials.
const CONFIG: &str = "[streak]\nmax_repeats = 3\n[breaker]\nwarn_at = 2\nsummarize_at = 3\nfail_warn_at = 2\nfail_limit = 3\n[breaker.limits]\nexact = 4\ncmd = 4\nnet = 4\nhost = 5\n";

fn processor() -> Processor {
    let cfg = Config::from_toml_str(CONFIG, &no_env).unwrap();
    Processor::new(Engine::new(cfg), Arc::new(MemoryStore::new())).with_call_digests(true)
}

/// An event of a small world: few sessions (some with sub-agents), few call ids reused
/// across sessions, results with and without their session, asks answered, stray lines.
fn arb_event() -> impl Strategy<Value = Vec<u8>> {
    let session = prop::sample::select(vec!["a", "b", "c", "d", "e", "a#agent:x"]);
    let id = prop::sample::select(vec!["1", "2", "3", "4"]);
    let command = prop::sample::select(vec![
        "curl https://api.example.com/v1/x",
        "pytest -q",
        "ls",
        "curl https://api.example.com/v1/y",
    ]);
    (
        0u8..10,
        session,
        id,
        command,
        any::<bool>(),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec!["sub1", "sub2"])),
        any::<bool>(),
    )
        .prop_map(|(kind, session, id, command, flag, named, agent, escaped)| {
            let mut v = match kind {
                0..=3 => {
                    json!({"event": "call", "session": session, "id": id, "tool": "bash", "args": {"command": command}})
                }
                4..=6 => {
                    json!({"event": "result", "id": id, "outcome": {"exit_code": i32::from(flag), "text": command}})
                }
                7 => json!({"event": "answer", "id": id, "approved": flag}),
                8 => json!({"event": if flag { "user" } else { "end" }, "session": session}),
                _ => return if flag { b"{not json".to_vec() } else { br#"{"event":"call","session":7}"#.to_vec() },
            };
            if let (Some(a), Value::Object(o)) = (agent, &mut v) {
                if o["event"] == "call" {
                    o.insert("agent".into(), json!(a));
                }
            }
            if named && kind >= 4 {
                v["session"] = json!(session);
            }
            let line = serde_json::to_string(&v).unwrap();
            if escaped {
                // Keys written with escapes route as the same keys.
                return line
                    .replacen("\"session\":", "\"sess\\u0069on\":", 1)
                    .replacen("\"id\":", "\"\\u0069d\":", 1)
                    .into_bytes();
            }
            line.into_bytes()
        })
}

fn stream(lines: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    out
}

fn serial(inputs: &[&[u8]]) -> (Vec<String>, u64) {
    let mut p = processor();
    let mut sink = Lines(Vec::new());
    for input in inputs {
        run(*input, None, &mut p, 1 << 20, &mut sink).unwrap();
    }
    (sink.0, p.errors())
}

fn sharded(inputs: &[&[u8]], shards: usize) -> (Vec<String>, u64) {
    let mut ps: Vec<Processor> = (0..shards).map(|_| processor()).collect();
    let mut sink = Lines(Vec::new());
    for input in inputs {
        ps = run_sharded(*input, None, ps, 1 << 20, &mut sink).unwrap();
    }
    (sink.0, ps.iter().map(Processor::errors).sum())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn sharded_output_is_the_serial_output(
        first in prop::collection::vec(arb_event(), 0..160),
        second in prop::collection::vec(arb_event(), 0..40),
        shards in 2usize..5,
    ) {
        let (a, b) = (stream(&first), stream(&second));
        let one = serial(&[&a, &b]);
        let many = sharded(&[&a, &b], shards);
        prop_assert_eq!(&many.0, &one.0);
        prop_assert_eq!(many.1, one.1);
    }
}

/// Hand-picked: an id open in sessions of different shards is ambiguous without a session
/// and fine with one; after one closes, the other is found without a session.
#[test]
fn an_id_open_in_two_shards_is_resolved_as_one_processor_would() {
    let mut lines = Vec::new();
    // Enough sessions that some land in different shards of 2.
    for s in ["a", "b", "c", "d", "e", "f"] {
        lines.push(json!({"event": "call", "session": s, "id": "7", "tool": "bash", "args": {"command": format!("echo {s}")}}).to_string());
    }
    lines.push(json!({"event": "result", "id": "7", "outcome": {"exit_code": 0}}).to_string());
    for s in ["a", "b", "c", "d", "e"] {
        lines.push(
            json!({"event": "result", "session": s, "id": "7", "outcome": {"exit_code": 0}})
                .to_string(),
        );
    }
    lines.push(json!({"event": "result", "id": "7", "outcome": {"exit_code": 0}}).to_string());
    lines.push(json!({"event": "result", "id": "7", "outcome": {"exit_code": 0}}).to_string());
    let input = lines.join("\n").into_bytes();
    let one = serial(&[&input]);
    assert!(one.0[6].contains("is open in 6 sessions"), "{}", one.0[6]);
    assert!(!one.0[12].contains("error"), "{}", one.0[12]);
    assert!(one.0[13].contains("unknown call id"), "{}", one.0[13]);
    for shards in 2..6 {
        assert_eq!(sharded(&[&input], shards), one, "{shards} shards");
    }
}

/// Recorded runs through an importer: the report's records come back in input order.
#[test]
fn an_importer_stream_is_sharded_in_order() {
    let data = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/trajectories/calls.jsonl.gz"
    ))
    .unwrap();
    let text = {
        use std::io::Read;
        let mut s = Vec::new();
        flate2::read::GzDecoder::new(&data[..])
            .read_to_end(&mut s)
            .unwrap();
        s
    };
    let mut one = Lines(Vec::new());
    let mut p = processor();
    let mut imp = Trajectory::default();
    run(&text[..], Some(&mut imp), &mut p, 16 << 20, &mut one).unwrap();
    let mut many = Lines(Vec::new());
    let mut imp = Trajectory::default();
    let ps = (0..3).map(|_| processor()).collect();
    run_sharded(&text[..], Some(&mut imp), ps, 16 << 20, &mut many).unwrap();
    assert!(one.0.len() > 4000);
    assert_eq!(many.0, one.0);
}

/// Input that fails part-way (a truncated download, a bad disk): the lines before the failure
/// are answered as one processor answers them, and the error comes back.
#[test]
fn a_read_error_keeps_the_answers_to_the_lines_before_it() {
    struct Failing(std::io::Cursor<Vec<u8>>);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(100);
            match std::io::Read::read(&mut self.0, &mut buf[..n])? {
                0 => Err(std::io::Error::other("the disk went away")),
                n => Ok(n),
            }
        }
    }
    let lines: Vec<String> = (0..300)
        .map(|i| json!({"event": "call", "session": format!("s{}", i % 7), "id": format!("{i}"), "tool": "bash", "args": {"command": "ls"}}).to_string())
        .collect();
    let input = format!("{}\n", lines.join("\n")).into_bytes();
    let reader = || std::io::BufReader::new(Failing(std::io::Cursor::new(input.clone())));
    let mut one = Lines(Vec::new());
    let err = run(reader(), None, &mut processor(), 1 << 20, &mut one).unwrap_err();
    assert_eq!(err.to_string(), "the disk went away");
    assert_eq!(one.0.len(), 300);
    let mut many = Lines(Vec::new());
    let ps = (0..3).map(|_| processor()).collect();
    let Err(err) = run_sharded(reader(), None, ps, 1 << 20, &mut many) else {
        panic!("the read error was lost");
    };
    assert_eq!(err.to_string(), "the disk went away");
    assert_eq!(many.0, one.0);
}
