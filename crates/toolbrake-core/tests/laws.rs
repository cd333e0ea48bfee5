//! Property tests for the laws of both engines, and bounded random-input ("fuzz-style")
//! tests for the parsers: no input panics, every input gets a defined answer.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use toolbrake_core::breaker::failure::{classify, classify_text};
use toolbrake_core::breaker::shell::{extract_sink, first_verb, strip_volatile_flags, tokenize};
use toolbrake_core::breaker::url::{extract_urls, norm_url};
use toolbrake_core::breaker::{fingerprints, BreakerConfig};
use toolbrake_core::canonical::{
    call_digest, call_hash, canonical_args_without, canonical_json, digest_of_canonical,
};
use toolbrake_core::streak::{StreakBrake, StreakConfig, StreakState, StreakVerdict};
use toolbrake_core::{Call, Config, Engine, Outcome, SessionState, Verdict};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((".{0,6}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// Serialises an object with its members in the given order (serde_json's own map would
/// sort them, hiding the property under test).
fn object_text(members: &[(String, Value)]) -> String {
    let body: Vec<String> = members
        .iter()
        .map(|(k, v)| {
            format!(
                "{}:{}",
                serde_json::to_string(k).unwrap(),
                serde_json::to_string(v).unwrap()
            )
        })
        .collect();
    format!("{{{}}}", body.join(","))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn permuted_keys_hash_equally(members in prop::collection::btree_map(".{0,8}", arb_json(), 0..8), seed in any::<u64>()) {
        let mut list: Vec<(String, Value)> = members.into_iter().collect();
        let a: Value = serde_json::from_str(&object_text(&list)).unwrap();
        // A deterministic shuffle.
        let n = list.len();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            list.swap(i, (s >> 33) as usize % (i + 1));
        }
        let b: Value = serde_json::from_str(&object_text(&list)).unwrap();
        prop_assert_eq!(call_hash("t", &a).unwrap(), call_hash("t", &b).unwrap());
    }

    /// The engine writes object arguments once and derives both the call digest and the
    /// `exact:` fingerprint's text from that writing: it must be what each computes alone.
    #[test]
    fn object_arguments_written_once_give_the_same_digest_and_exact_text(
        members in prop::collection::btree_map(".{0,8}", arb_json(), 0..8),
        tool in "[a-zA-Z_]{1,12}",
    ) {
        let args = Value::Object(members.into_iter().collect());
        let text = canonical_json(&args).unwrap();
        prop_assert_eq!(digest_of_canonical(&tool, &text), call_digest(&tool, &args).unwrap());
        prop_assert_eq!(canonical_args_without(&args, |_| false).unwrap(), text);
    }

    #[test]
    fn random_json_never_panics_the_hasher(v in arb_json()) {
        let text = canonical_json(&v).unwrap();
        // The canonical text is valid JSON meaning the same value (as doubles).
        let back: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(canonical_json(&back).unwrap(), text);
    }

    #[test]
    fn a_different_call_resets_the_streak(n in 1usize..6, other in "[a-z]{1,5}") {
        let brake = StreakBrake::new(StreakConfig::new(100).unwrap());
        let mut st = StreakState::default();
        for _ in 0..n {
            let _ = brake.check(&mut st, "s", None, "t", &json!({"q": "same"})).unwrap();
        }
        prop_assert_eq!(st.count() as usize, n);
        let v = brake.check(&mut st, "s", None, "t", &json!({"q": format!("x{other}")})).unwrap();
        prop_assert_eq!(v, StreakVerdict::Allow { count: 1 });
    }

    #[test]
    fn sessions_are_independent(calls in prop::collection::vec((0u8..3, 0u8..2), 1..40)) {
        // Replaying each session alone gives the same verdicts as interleaving them.
        let engine = Engine::new(Config::default());
        let mut shared: BTreeMap<u8, SessionState> = BTreeMap::new();
        let mut alone: BTreeMap<u8, (SessionState, Vec<Verdict>)> = BTreeMap::new();
        let mut interleaved: BTreeMap<u8, Vec<Verdict>> = BTreeMap::new();
        for (i, (sess, which)) in calls.iter().enumerate() {
            let args = json!({"command": format!("curl https://a.com/{which}")});
            let id = i.to_string();
            let key = sess.to_string();
            let call = Call { session: &key, id: &id, tool: "bash", args: &args };
            let d = engine.pre(shared.entry(*sess).or_default(), &call).unwrap();
            interleaved.entry(*sess).or_default().push(d.verdict);
            let (st, v) = alone.entry(*sess).or_default();
            v.push(engine.pre(st, &call).unwrap().verdict);
        }
        for (sess, (_, v)) in alone {
            prop_assert_eq!(&v, &interleaved[&sess]);
        }
    }

    #[test]
    fn dedupe_by_id_never_double_counts(ids in prop::collection::vec(0u8..4, 1..30)) {
        let brake = StreakBrake::new(StreakConfig::new(1000).unwrap());
        let mut st = StreakState::default();
        let mut distinct = std::collections::BTreeSet::new();
        for id in ids {
            distinct.insert(id);
            let _ = brake.check(&mut st, "s", Some(&id.to_string()), "t", &json!({})).unwrap();
            prop_assert_eq!(st.count() as usize, distinct.len());
        }
    }

    #[test]
    fn decoy_values_never_appear_in_fingerprints(decoy in "[A-Za-z0-9]{6,12}", cmd in prop::sample::select(vec![
        "curl -s https://api.example.com/x -o out.json",
        "ls -la",
        "wget -O f.bin http://10.0.0.1/f",
    ])) {
        let cfg = BreakerConfig::default();
        let decoy = format!("DECOY{decoy}");
        for tool in ["bash", "Bash", "WebFetch", "Read"] {
            let args = json!({"command": cmd, "url": "https://a.com/", "description": decoy, "timeoutMs": 777_123_456, "justification": decoy, "title": decoy});
            for fp in fingerprints(&cfg, tool, &args).unwrap().fps {
                prop_assert!(!fp.text.contains(&decoy), "{}", fp.text);
                prop_assert!(!fp.text.contains("777123456"), "{}", fp.text);
            }
        }
    }

    #[test]
    fn a_user_message_forgets_everything(events in prop::collection::vec((0u8..4, any::<bool>()), 0..60)) {
        let engine = Engine::new(Config::default());
        let mut st = SessionState::default();
        for (i, (which, fail)) in events.iter().enumerate() {
            let args = json!({"url": format!("https://a.com/{which}")});
            let id = i.to_string();
            let d = engine.pre(&mut st, &Call { session: "s", id: &id, tool: "web_fetch", args: &args }).unwrap();
            let o = if *fail { Outcome { status_code: Some(500), ..Outcome::default() } } else { Outcome::success("ok") };
            if d.runs() {
                let _ = engine.post(&mut st, &id, &o).unwrap();
            }
        }
        let _ = engine.user_message(&mut st);
        // Everything that decides is forgotten; only the operator's timeline of past
        // decisions (bounded) stays.
        let fresh = SessionState::default();
        prop_assert_eq!(&st.streak, &fresh.streak);
        prop_assert_eq!(&st.breaker, &fresh.breaker);
        prop_assert_eq!((st.open_calls(), st.stopped()), (0, 0));
        prop_assert!(st.log().count() <= toolbrake_core::engine::MAX_LOG);
    }

    #[test]
    fn no_advice_after_a_call_the_predicate_rules_out(
        steps in prop::collection::vec((0u8..3, 0u8..3, 0usize..8), 1..40),
    ) {
        // Shell and fetch calls of a few commands, with outcomes of every kind; whenever
        // `post_may_advise` says no, the record brings no advisory (hosts answer first then).
        let engine = Engine::new(Config::default());
        let mut st = SessionState::default();
        let outcomes = [
            Outcome::success("ok"),
            Outcome::success("Traceback (most recent call last):\nValueError: bad"),
            Outcome::success("make: *** [all] Error: 2"),
            Outcome::success("done [exit code: 1]"),
            Outcome { exit_code: Some(2), ..Outcome::default() },
            Outcome { status_code: Some(503), ..Outcome::default() },
            Outcome { is_error: Some(true), text: Some("boom".into()), ..Outcome::default() },
            Outcome { aborted: Some(true), ..Outcome::default() },
        ];
        let mut advised = 0;
        for (i, (kind, which, o)) in steps.iter().enumerate() {
            let id = i.to_string();
            let (tool, args) = match kind {
                0 => ("bash", json!({"command": format!("python run{which}.py")})),
                1 => ("web_fetch", json!({"url": format!("https://a.com/{which}")})),
                _ => ("edit", json!({"path": format!("f{which}.py"), "text": i})),
            };
            let d = engine.pre(&mut st, &Call { session: "s", id: &id, tool, args: &args }).unwrap();
            if !d.runs() {
                continue;
            }
            let outcome = &outcomes[*o];
            let p = engine.post(&mut st, &id, outcome).unwrap();
            if !Engine::post_may_advise(outcome) {
                prop_assert!(p.advisories.is_empty(), "advice after {outcome:?}: {:?}", p.advisories);
            }
            advised += p.advisories.len();
        }
        prop_assert!(advised <= steps.len());
    }

    #[test]
    fn counts_are_monotone_within_the_window(n in 1u32..16) {
        // The k-th repeat of one fetch is reported with count k (hits appear from 12).
        let engine = Engine::new(Config::from_value(&json!({"streak": {"enabled": false}, "breaker": {"on_limit": "deny", "warn_at": 0, "summarize_at": 0, "limits": {"net": 2}}}), &toolbrake_core::config::no_env).unwrap());
        let mut st = SessionState::default();
        let args = json!({"url": "https://a.com/x"});
        let mut last = 0;
        for i in 0..n {
            let id = i.to_string();
            let d = engine.pre(&mut st, &Call { session: "s", id: &id, tool: "web_fetch", args: &args }).unwrap();
            for h in &d.hits {
                prop_assert!(h.count >= last);
                last = h.count;
            }
        }
        prop_assert!(last <= 17);
    }

    #[test]
    fn shell_parsers_never_panic(cmd in "[ -~\\t\\n\\x00é\\\\'\"|&;<>]{0,80}") {
        let _ = tokenize(&cmd);
        let _ = first_verb(&cmd);
        let _ = strip_volatile_flags(&cmd);
        let _ = extract_sink(&cmd);
        let _ = classify_text(&cmd);
        let _ = classify(&Outcome::success(cmd.clone()), true);
        let _ = fingerprints(&BreakerConfig::default(), "bash", &json!({"command": cmd})).unwrap();
    }

    #[test]
    fn url_parsers_never_panic(rest in "[ -~\\[\\]%:@é]{0,60}") {
        let aliases = BTreeMap::new();
        for raw in [format!("https://{rest}"), format!("http://[{rest}"), rest.clone(), format!("curl http://{rest} -o x")] {
            for u in extract_urls(&raw) {
                let _ = norm_url(&u, &aliases);
            }
            let _ = norm_url(&raw, &aliases);
            let _ = fingerprints(&BreakerConfig::default(), "web_fetch", &json!({"url": raw})).unwrap();
        }
    }
}

#[test]
fn a_failing_rerun_is_advised_and_the_predicate_says_it_may_be() {
    let engine = Engine::new(Config::default());
    let mut st = SessionState::default();
    // Other pages of one host, each failing: the host's failure streak.
    let failed = Outcome {
        status_code: Some(503),
        ..Outcome::default()
    };
    let mut advised = Vec::new();
    for i in 0..3 {
        let id = i.to_string();
        let args = json!({"url": format!("https://a.com/{i}")});
        let d = engine
            .pre(
                &mut st,
                &Call {
                    session: "s",
                    id: &id,
                    tool: "web_fetch",
                    args: &args,
                },
            )
            .unwrap();
        assert!(d.runs());
        advised.push(
            !engine
                .post(&mut st, &id, &failed)
                .unwrap()
                .advisories
                .is_empty(),
        );
    }
    assert_eq!(advised, [false, false, true]);
    assert!(Engine::post_may_advise(&failed));
    assert!(!Engine::post_may_advise(&Outcome::success("all good")));
    assert!(!Engine::post_may_advise(&Outcome {
        aborted: Some(true),
        ..Outcome::default()
    }));
}

#[test]
fn megabyte_commands_and_odd_hosts_get_defined_fingerprints() {
    let cfg = BreakerConfig::default();
    let huge = format!("curl https://a.com/{} -o out", "x".repeat(2 << 20));
    let set = fingerprints(&cfg, "bash", &json!({"command": huge})).unwrap();
    assert!(set.fps.iter().any(|f| f.text == "sink:out"));
    let unbalanced = fingerprints(
        &cfg,
        "bash",
        &json!({"command": "curl 'https://a.com/x -o \"y"}),
    )
    .unwrap();
    assert!(!unbalanced.fps.is_empty());
    for (raw, host) in [
        ("http://0x7f000001/", Some("127.0.0.1")),
        ("http://2130706433/", Some("127.0.0.1")),
        ("http://[0:0:0:0:0:0:0:1]:80/", Some("::1")),
        ("http://a.com%2F@b.com/", Some("b.com")),
        ("http://[::1/", None),
        ("http://exa mple.com/", None),
        ("http://\u{0}/", None),
    ] {
        assert_eq!(
            norm_url(raw, &BTreeMap::new()).map(|u| u.host).as_deref(),
            host,
            "{raw}"
        );
    }
}

const DURATION_UNITS: &[&str] = &[
    "ns", "us", "ms", "s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute",
    "minutes", "h", "hr", "hrs", "hour", "hours",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Output normalisation never panics, on any text (escapes, odd UTF-8 boundaries,
    /// lone carriage returns), and its result has no trailing blanks.
    #[test]
    fn normalising_any_output_is_defined(text in "(\\PC|\u{1b}|\r|\n|[0-9]{1,12}|0x[0-9a-f]{0,8}|/tmp/[a-z]{0,5}| ){0,64}") {
        let n = toolbrake_core::progress::normalise(&text);
        prop_assert!(!n.ends_with(' ') && !n.ends_with('\n'));
        let clean = !n.contains('\r') && !n.contains('\x1b');
        prop_assert!(clean, "{:?}", n);
        let _ = toolbrake_core::progress::digest(&Outcome::success(text));
    }

    /// A counter of three digits or more never makes two outputs differ (a loop that prints
    /// a rising line number is still a loop); a one- or two-digit change always does.
    #[test]
    fn long_counters_are_masked_and_small_numbers_kept(
        // Words that are not duration units (`0 ms` and `1 ms` are both a duration).
        words in prop::collection::vec("[a-z]{1,8}".prop_filter("not a unit", |w| !DURATION_UNITS.contains(&w.as_str())), 1..6),
        a in 100u64..10_000_000_000,
        b in 100u64..10_000_000_000,
        small in 0u64..99,
    ) {
        let with = |n: u64| format!("{} {n} {}", words.join(" "), words[0]);
        let digest = |t: String| toolbrake_core::progress::digest(&Outcome::success(t));
        prop_assert_eq!(digest(with(a)), digest(with(b)));
        prop_assert_ne!(digest(with(small)), digest(with(small + 1)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// An outcome's digest made once and handed to the engine decides exactly what the
    /// engine decides making it itself (`toolbrake tune` hands it in under every setting):
    /// over runs of reruns whose outputs repeat, change and fail, every decision and every
    /// state is the same.
    #[test]
    fn a_digest_made_once_decides_as_the_engine_does(
        steps in prop::collection::vec((0usize..3, 0usize..4, any::<bool>()), 1..60),
    ) {
        let engine = Engine::new(Config::default());
        let (mut made, mut given) = (SessionState::default(), SessionState::default());
        let commands = ["pytest -q", "python run.py", "ls"];
        let outputs = ["1 failed", "2 failed", "ok", ""];
        for (i, (c, o, fails)) in steps.into_iter().enumerate() {
            let id = i.to_string();
            let args = json!({"command": commands[c]});
            let call = Call { session: "s", id: &id, tool: "bash", args: &args };
            let a = engine.pre(&mut made, &call).unwrap();
            let b = engine.pre(&mut given, &call).unwrap();
            prop_assert_eq!(&a, &b);
            let outcome = Outcome {
                exit_code: Some(i64::from(fails)),
                text: Some(outputs[o].to_string()),
                ..Outcome::default()
            };
            let digested = toolbrake_core::progress::Digested::of(&outcome);
            let a = engine.post(&mut made, &id, &outcome).unwrap();
            let b = engine.post_digested(&mut given, &id, &outcome, Some(digested)).unwrap();
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(format!("{made:?}"), format!("{given:?}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A call prepared once by an engine with other gates (`Engine::prepare`) is judged
    /// exactly as the judging engine judges it preparing the call itself (`toolbrake tune`
    /// prepares each call once, under the base, and judges it under every setting that
    /// `derives_like` it): over reruns of shell and URL calls, with decoy keys and
    /// failures, every decision and every state is the same; and a setting that changes
    /// how calls are read does not derive alike.
    #[test]
    fn a_call_prepared_under_other_gates_decides_as_the_engine_does(
        steps in prop::collection::vec((0usize..6, 0usize..3, any::<bool>()), 1..60),
        gates in (2u32..5, 2u32..6, 2u32..6, 2u32..8, 1u32..4, 2u32..9, any::<bool>(), 0usize..200),
    ) {
        let (repeats, exact, cmd, host, unchanged, window, ask, preview) = gates;
        let judging = Config::from_value(
            &json!({
                "streak": {"max_repeats": repeats},
                "breaker": {
                    "window": window + 2,
                    "warn_at": 2,
                    "summarize_at": 3,
                    "unchanged_limit": unchanged,
                    "fail_limit": 3,
                    "on_limit": if ask { "ask" } else { "deny" },
                    "preview_chars": preview + 20,
                    "limits": {"exact": exact, "cmd": if cmd == 5 { json!("off") } else { json!(cmd) }, "host": host},
                },
            }),
            &toolbrake_core::config::no_env,
        )
        .unwrap();
        let base = Engine::new(Config::default());
        let engine = Engine::new(judging);
        prop_assert!(base.derives_like(&engine) && engine.derives_like(&base));
        let (mut own, mut given) = (SessionState::default(), SessionState::default());
        let calls = [
            ("bash", json!({"command": "pytest -q"})),
            ("bash", json!({"command": "pytest -q", "description": "run the tests again"})),
            ("bash", json!({"command": "curl -s https://api.example.com/v1/items?page=1"})),
            ("web_fetch", json!({"url": "https://api.example.com/v1/items"})),
            ("read_file", json!({"path": "src/main.rs"})),
            ("bash", json!({"command": "sed -i s/a/b/ src/main.rs"})),
        ];
        let outputs = ["1 failed", "ok", ""];
        for (i, (c, o, fails)) in steps.into_iter().enumerate() {
            let id = i.to_string();
            let (tool, args) = &calls[c];
            let call = Call { session: "s", id: &id, tool, args };
            let a = engine.pre(&mut own, &call).unwrap();
            let prepared = base.prepare(&call).unwrap();
            let b = engine.pre_prepared(&mut given, &call, &prepared).unwrap();
            prop_assert_eq!(&a, &b);
            let outcome = Outcome {
                exit_code: Some(i64::from(fails)),
                text: Some(outputs[o].to_string()),
                ..Outcome::default()
            };
            let a = engine.post(&mut own, &id, &outcome).unwrap();
            let b = engine.post(&mut given, &id, &outcome).unwrap();
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(format!("{own:?}"), format!("{given:?}"));
        }
        // How calls are read is not a gate: a configuration that reads them otherwise
        // does not derive alike.
        let reads_otherwise = Engine::new(
            Config::from_value(
                &json!({"breaker": {"ignore_args": {"bash": ["command"]}}}),
                &toolbrake_core::config::no_env,
            )
            .unwrap(),
        );
        prop_assert!(!base.derives_like(&reads_otherwise));
    }
}
