//! The sharded replay's own tests: ids sharing a hash still route as one processor
//! would, and the quick route of a line is the full JSON read's.

use super::*;
use proptest::prelude::*;
use std::cell::Cell;

thread_local! {
    /// The bits of [`id_hash`] kept on this thread (the router's: the calling thread):
    /// fewer bits, ids sharing entries.
    pub(super) static ID_HASH_MASK: Cell<u64> = const { Cell::new(u64::MAX) };
}

struct Lines(Vec<String>);

impl Sink for Lines {
    fn handled(&mut self, h: &Handled) -> io::Result<()> {
        self.0.push(h.line.clone());
        Ok(())
    }
}

fn processor() -> Processor {
    use toolbrake_config::ConfigToml as _;
    let cfg = toolbrake_core::config::Config::from_toml_str(
        "[breaker]\nwarn_at = 2\n",
        &toolbrake_core::config::no_env,
    )
    .unwrap();
    Processor::new(
        toolbrake_core::Engine::new(cfg),
        std::sync::Arc::new(toolbrake_store::MemoryStore::new()),
    )
}

/// Calls of a few sessions with call ids reused across them, and answers and results
/// that name no session: every one routed by its id.
fn id_stream() -> impl Strategy<Value = Vec<u8>> {
    let line = (0u8..3, 0usize..6, 0usize..5, any::<bool>()).prop_map(|(kind, s, id, flag)| {
        let session = ["a", "b", "c", "d", "e", "f"][s];
        let id = ["1", "2", "3", "4", "5"][id];
        match kind {
            0 => serde_json::json!({"event": "call", "session": session, "id": id, "tool": "bash", "args": {"command": "ls"}}),
            1 => serde_json::json!({"event": "result", "id": id, "outcome": {"exit_code": i32::from(flag)}}),
            _ => serde_json::json!({"event": "answer", "id": id, "approved": flag}),
        }
        .to_string()
    });
    prop::collection::vec(line, 0..120).prop_map(|lines| (lines.join("\n") + "\n").into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The id map is keyed by a hash of each id: when ids share a hash (here, with the
    /// hash cut to one bit or none, nearly all do), an entry holds the shards of all of
    /// them and the output is still one processor's, line for line.
    #[test]
    fn ids_sharing_a_hash_route_as_one_processor_would(
        input in id_stream(),
        bits in 0u32..2,
        shards in 2usize..4,
    ) {
        let mut one = Lines(Vec::new());
        crate::stream::run(&input[..], None, &mut processor(), 1 << 20, &mut one).unwrap();
        ID_HASH_MASK.with(|m| m.set((1u64 << bits) - 1));
        let mut many = Lines(Vec::new());
        let run = run_sharded(&input[..], None, (0..shards).map(|_| processor()).collect(), 1 << 20, &mut many);
        ID_HASH_MASK.with(|m| m.set(u64::MAX));
        run.unwrap();
        prop_assert_eq!(many.0, one.0);
    }
}

fn owned(r: &Route) -> [Option<String>; 3] {
    [&r.event, &r.session, &r.id].map(|v| v.as_deref().map(str::to_string))
}

/// A top-level key: a routed one (sometimes written with an escape) or another.
fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        r#""event""#,
        r#""session""#,
        r#""id""#,
        r#""tool""#,
        r#""args""#,
        r#""outcome""#,
        r#""\u0069d""#,
        r#""sess\u0069on""#,
        r#""ev\"ent""#,
    ])
    .prop_map(str::to_string)
}

/// A value: strings plain and escaped, scalars, and nested JSON with strings holding
/// quotes, brackets and backslashes.
fn value() -> impl Strategy<Value = String> {
    let nested = any::<Vec<(String, Option<i64>)>>().prop_map(|items| {
        let v: Vec<Value> = items
            .into_iter()
            .map(|(s, n)| serde_json::json!({"s": s, "n": n, "a": [s, {"k": "}]\\\"["}]}))
            .collect();
        serde_json::to_string(&v).unwrap()
    });
    prop_oneof![
        "[a-z0-9#/:._ -]{0,12}".prop_map(|s| format!("\"{s}\"")),
        any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
        Just("null".to_string()),
        Just("true".to_string()),
        any::<i32>().prop_map(|n| n.to_string()),
        Just("-1.5e3".to_string()),
        Just("{}".to_string()),
        Just("[]".to_string()),
        nested,
    ]
}

fn blank() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", " ", "  ", "\t", " \r "]).prop_map(str::to_string)
}

proptest! {
    /// On a well-formed object, the quick reading gives the full read's route whenever
    /// it gives one, and it gives one for every line whose keys and routed values hold
    /// no escape.
    #[test]
    fn the_quick_route_is_the_full_route(
        fields in prop::collection::vec((key(), value(), blank(), blank()), 0..7),
        edge in (blank(), blank()),
    ) {
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v, b1, b2)| format!("{b1}{k}{b2}:{b1}{v}{b2}"))
            .collect();
        let line = format!("{}{{{}}}{}", edge.0, body.join(","), edge.1);
        prop_assert!(serde_json::from_str::<Value>(&line).is_ok(), "{}", line);
        let full: Route = serde_json::from_slice(line.as_bytes()).unwrap();
        let quick = Route::scan(line.as_bytes());
        if let Some(quick) = &quick {
            prop_assert_eq!(owned(quick), owned(&full), "{}", line);
        }
        let escaped = fields.iter().any(|(k, v, _, _)| {
            k.contains('\\')
                || (["\"event\"", "\"session\"", "\"id\""].contains(&k.as_str())
                    && v.starts_with('"')
                    && v.contains('\\'))
        });
        // A line with an escape may still be settled quickly, when the escape is past
        // the look-ahead and cannot spell a routed key.
        if !escaped {
            prop_assert!(quick.is_some(), "{}", line);
        }
        prop_assert_eq!(owned(&Route::of_line(line.as_bytes())), owned(&full));
    }
}

#[test]
fn the_quick_route_on_lines_that_are_not_json_falls_back_or_routes() {
    // Anything it cannot settle goes to the full read, which routes nothing.
    for line in [
        &b"[1]"[..],
        b"",
        b"{",
        b"{\"event\" \"call\"}",
        b"{\"id\":\"x",
    ] {
        assert!(
            Route::scan(line).is_none(),
            "{}",
            String::from_utf8_lossy(line)
        );
        assert_eq!(owned(&Route::of_line(line)), [None, None, None]);
    }
    // Past the look-ahead a malformed rest is not read: the route it gives is the
    // full read's (none) here, and any shard may answer a line in error.
    let line = b"{\"a\":1 \"b\":2}";
    assert_eq!(owned(&Route::scan(line).unwrap()), [None, None, None]);
    assert_eq!(owned(&Route::of_line(line)), [None, None, None]);
    // The last of duplicate keys wins, a value that is not a string routes nothing.
    let r = Route::of_line(br#"{"session":"a","id":"1","session":"b","event":"call","id":7}"#);
    assert_eq!(owned(&r), [Some("call".into()), Some("b".into()), None]);
}

#[test]
fn a_routed_key_after_a_skipped_value_still_routes() {
    // The look-ahead starts at the first value skipped (`tool`'s, `args`'); a routed
    // key after it, plain or spelled with a `\u` escape, is still read, and wins.
    for (line, session) in [
        (
            &br#"{"event":"call","session":"a","args":{"x":1},"session":"b"}"#[..],
            "b",
        ),
        (
            br#"{"event":"call","session":"a","tool":"t","s\u0065ssion":"b"}"#,
            "b",
        ),
        (
            br#"{"event":"call","session":"a","args":{"cmd":"id"},"x":"\u00e9"}"#,
            "a",
        ),
    ] {
        let r = Route::of_line(line);
        assert_eq!(
            owned(&r)[1].as_deref(),
            Some(session),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    let r = Route::of_line(br#"{"event":"result","args":[1],"id":"7","outcome":{}}"#);
    assert_eq!(owned(&r), [Some("result".into()), None, Some("7".into())]);
    let r = Route::of_line(br#"{"args":"x","event":"end","\u0065vent":"call"}"#);
    assert_eq!(owned(&r)[0].as_deref(), Some("call"));
}
