//! Scenario tests of the breaker, through the engine's public API (docs/decisions.md,
//! "Breaker").

mod support;

use serde_json::{json, Value};
use support::Session;
use toolbrake_core::{Decision, Outcome, SessionState, Track, Verdict};

fn ok() -> Outcome {
    Outcome::success("{\"rows\": 3}")
}

const DECOYS: [&str; 3] = ["1st", "2nd", "3rd"];

/// The seed's cosmetic loop: a new description, a churning --max-time and two host
/// spellings each call. Every call looks new to an exact counter.
fn cosmetic_args(i: usize) -> Value {
    let host = if i.is_multiple_of(2) {
        "open-data.canada.ca"
    } else {
        "open.canada.ca"
    };
    json!({
        "command": format!("curl -s --max-time {} https://{host}/data/api/3/action/package_search?q=fires", 10 + i),
        "description": DECOYS[i % 3],
    })
}

#[test]
fn the_cosmetic_variation_loop_is_gated_on_the_12th_call() {
    let mut s = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    let mut advisories = Vec::new();
    for i in 0..11 {
        let d = s.run("bash", cosmetic_args(i), ok());
        assert!(d.runs(), "call {} should run: {:?}", i + 1, d.message);
        if d.verdict == Verdict::Advise {
            advisories.push((i + 1, d.advisories[0].text.clone()));
        }
    }
    assert_eq!(advisories.len(), 2, "{advisories:?}");
    assert_eq!(advisories[0].0, 7);
    assert!(advisories[0].1.starts_with(
        "CONVERGENCE_CHECK: you are repeating yourself — host:open.canada.ca has come up 7 times this turn."
    ));
    assert_eq!(advisories[1].0, 11);
    assert!(advisories[1].1.contains("summarise your progress"));
    assert!(advisories[1].1.contains("larger per-batch amount"));

    let d = s.call("bash", cosmetic_args(11));
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!(d.code, Some("REPEAT_TOOL_BLOCKED"));
    assert_eq!(d.engine, Some("breaker"));
    let text = d.message.unwrap();
    assert!(text.starts_with("REPEAT_TOOL_BLOCKED: repeated bash (semantic match). The call was stopped before executing."));
    assert!(
        text.contains("Hits:\n- net:open.canada.ca/data/api/3/action/package_search?q=fires 12/12"),
        "{text}"
    );
    assert!(text.contains("Previous tool result:\n{\"rows\": 3}"));
    for decoy in DECOYS {
        assert!(!text.contains(decoy), "denial echoes decoy {decoy}");
    }
    assert!(!text.contains("<tool_call>") && !text.contains("<function="));
    assert_eq!(d.hits.len(), 1);
    assert_eq!(
        (d.hits[0].count, d.hits[0].limit, d.hits[0].track),
        (12, 12, Track::Repeat)
    );

    // Retrying the blocked call keeps hitting: the hit fingerprint stays at its cap.
    let d = s.call("bash", cosmetic_args(12));
    assert_eq!(d.verdict, Verdict::Deny);
    // A genuinely different call passes.
    let d = s.run("bash", json!({"command": "grep -r fires data/"}), ok());
    assert!(d.runs());
}

#[test]
fn pagination_is_never_gated_on_net_and_is_gated_on_host_at_16() {
    let mut s = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    let page = |n: u32| json!({"command": format!("curl -s 'https://api.example.com/v1/items?page={n}&per_page=100'")});
    let mut advised = Vec::new();
    for n in 1..=15 {
        let d = s.run("bash", page(n), ok());
        assert!(d.runs(), "page {n}: {:?}", d.message);
        if d.verdict == Verdict::Advise {
            assert_eq!(d.advisories[0].fingerprint, "host:api.example.com");
            assert!(d.advisories[0].text.contains("host:api.example.com"));
            advised.push(n);
        }
    }
    assert_eq!(advised, [7, 11]);
    let d = s.call("bash", page(16));
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!(d.hits.len(), 1);
    assert_eq!(d.hits[0].fingerprint, "host:api.example.com");
    assert_eq!((d.hits[0].count, d.hits[0].limit), (16, 16));
}

fn not_found() -> Outcome {
    Outcome {
        status_code: Some(404),
        text: Some("Not Found".into()),
        ..Outcome::default()
    }
}

#[test]
fn a_404_endpoint_is_blocked_on_the_6th_call_while_other_calls_pass() {
    // The streak brake would refuse the third consecutive identical fetch first; this
    // scenario is about the breaker's failure track alone.
    let mut s =
        Session::new(json!({"streak": {"enabled": false}, "breaker": {"on_limit": "deny"}}));
    let missing = json!({"url": "https://api.example.com/v1/missing"});
    let other = json!({"url": "https://api.example.com/v1/items"});
    let grep = json!({"command": "grep -rn 'v1/' src/"});

    let post = |s: &mut Session, args: &Value, o: Outcome| {
        let d = s.call("WebFetch", args.clone());
        assert!(d.runs(), "{:?}", d.message);
        s.engine.post(&mut s.st, &d.id, &o).unwrap()
    };
    let p = post(&mut s, &missing, not_found());
    assert_eq!(p.failure.as_ref().map(|f| f.reason.as_str()), Some("http"));
    assert!(post(&mut s, &missing, not_found()).advisories.is_empty());
    post(&mut s, &other, ok()); // a success on the host clears only the host's streak
    let failure_advisories = post(&mut s, &missing, not_found()).advisories;
    assert_eq!(
        failure_advisories.len(),
        1,
        "advisory at the 3rd consecutive failure"
    );
    assert!(failure_advisories[0].text.starts_with("CONVERGENCE_CHECK: net:api.example.com/v1/missing has failed 3 times in a row — the request returned HTTP 404."));
    post(&mut s, &missing, not_found());
    post(&mut s, &missing, not_found());

    // The grep and the other endpoint pass.
    assert!(s.run("Bash", grep.clone(), ok()).runs());
    assert!(s.run("WebFetch", other.clone(), ok()).runs());

    // The 6th call to the missing endpoint is stopped before it runs.
    let d = s.call("WebFetch", missing.clone());
    assert_eq!(d.verdict, Verdict::Deny);
    let text = d.message.unwrap();
    assert!(text.starts_with("REPEAT_TOOL_BLOCKED: WebFetch (consecutive failures). The call was stopped before executing."), "{text}");
    assert!(text.contains("- net:api.example.com/v1/missing — 5 consecutive failures (the request returned HTTP 404)"), "{text}");
    assert!(d
        .hits
        .iter()
        .all(|h| h.track == Track::Failure && h.count == 5 && h.limit == 5));

    // Our own denial is never counted as a failure: the streak stays at the limit.
    let p = s.engine.post(&mut s.st, &d.id, &not_found()).unwrap();
    assert_eq!(p.ignored, Some("denied"));
    let d = s.call("WebFetch", missing);
    assert!(d.hits.iter().all(|h| h.count == 5));
}

fn repeated(s: &mut Session, n: usize) {
    let args = |i: usize| json!({"command": "curl -s https://api.example.com/v1/x", "description": DECOYS[i % 3]});
    for i in 0..n {
        assert!(s.run("bash", args(i), ok()).runs());
    }
}

fn again(s: &mut Session, i: usize) -> Decision {
    s.call(
        "bash",
        json!({"command": "curl -s https://api.example.com/v1/x", "description": DECOYS[i % 3]}),
    )
}

#[test]
fn an_approved_ask_exempts_the_hit_for_the_rest_of_the_turn() {
    let mut s = Session::new(json!({"streak": {"enabled": false}}));
    repeated(&mut s, 11);
    let d = again(&mut s, 11);
    assert_eq!(d.verdict, Verdict::Ask);
    let reason = d.message.unwrap();
    // The operator reads plain words: what each hit stands for, not its fingerprint.
    assert!(
        reason.starts_with("toolbrake: this call is about to be blocked as a repeat:\n"),
        "{reason}"
    );
    assert!(
        reason.contains(
            "\n  - the address api.example.com/v1/x: this would be the 12th time, and the limit is 12\n"
        ),
        "{reason}"
    );
    assert!(reason.contains("REST OF THIS TURN"));
    for jargon in ["measures", "exact:", "net:", "cmd:", "repeat-tool-breaker"] {
        assert!(!reason.contains(jargon), "{jargon} in {reason}");
    }
    let id = s.last_id();
    let d = s.engine.answer(&mut s.st, &id, true).unwrap();
    assert!(d.runs(), "{:?}", d);
    // Later identical calls ride along…
    for i in 12..15 {
        let d = again(&mut s, i);
        assert!(d.runs(), "call {i}: {:?}", d.message);
        s.engine.post(&mut s.st, &d.id, &ok()).unwrap();
    }
    // …but the exemption is per fingerprint: host: was not exempted and reaches its own gate.
    let d = again(&mut s, 15);
    assert_eq!(d.verdict, Verdict::Ask);
    assert_eq!(d.hits.len(), 1);
    assert_eq!(d.hits[0].fingerprint, "host:api.example.com");
    assert_eq!((d.hits[0].count, d.hits[0].limit), (16, 16));
    // …until the next human message, after which both engines forget everything (the
    // operator's timeline of past decisions stays).
    s.engine.user_message(&mut s.st);
    let fresh = SessionState::default();
    assert_eq!(
        (&s.st.streak, &s.st.breaker),
        (&fresh.streak, &fresh.breaker)
    );
    assert_eq!((s.st.open_calls(), s.st.stopped()), (0, 0));
}

#[test]
fn a_declined_ask_denies_and_is_not_asked_again() {
    let mut s = Session::new(json!({"streak": {"enabled": false}}));
    repeated(&mut s, 11);
    assert_eq!(again(&mut s, 11).verdict, Verdict::Ask);
    let id = s.last_id();
    let d = s.engine.answer(&mut s.st, &id, false).unwrap();
    assert_eq!(d.verdict, Verdict::Deny);
    assert!(d.message.as_ref().unwrap().contains("was NOT granted"));
    let d = again(&mut s, 12);
    assert_eq!(
        d.verdict,
        Verdict::Deny,
        "a refused measure is not asked again"
    );
    assert!(d.message.unwrap().contains("was NOT granted"));
}

#[test]
fn an_unanswered_ask_fails_closed() {
    let mut s = Session::new(json!({"streak": {"enabled": false}}));
    repeated(&mut s, 11);
    let asked = again(&mut s, 11);
    assert_eq!(asked.verdict, Verdict::Ask);
    // The next event of the session arrives before any answer.
    let d = s.call("Read", json!({"file_path": "/tmp/x"}));
    assert_eq!(d.settled.len(), 1);
    assert_eq!(d.settled[0].id, asked.id);
    assert_eq!(d.settled[0].verdict, Verdict::Deny);
    // The result of the asked call, if the host sends one, is ignored.
    let p = s.engine.post(&mut s.st, &asked.id, &ok()).unwrap();
    assert_eq!(p.ignored, Some("denied"));
    assert!(
        s.engine.answer(&mut s.st, &asked.id, true).is_err(),
        "too late to approve"
    );
    assert_eq!(again(&mut s, 13).verdict, Verdict::Deny);
}

#[test]
fn the_same_call_judged_again_while_asked_is_asked_again_not_refused() {
    // A host that resumes a run (another process, after a restart) or sees the call
    // through a second seam judges the same call id again before anyone answered.
    let mut s = Session::new(json!({"streak": {"enabled": false}}));
    repeated(&mut s, 11);
    let asked = again(&mut s, 11);
    assert_eq!(asked.verdict, Verdict::Ask);
    let args =
        json!({"command": "curl -s https://api.example.com/v1/x", "description": DECOYS[11 % 3]});
    let call = toolbrake_core::Call {
        session: "s1",
        id: &asked.id,
        tool: "bash",
        args: &args,
    };
    let d = s.engine.pre(&mut s.st, &call).unwrap();
    assert_eq!(d.verdict, Verdict::Ask, "still asked: {:?}", d.message);
    assert!(d.settled.is_empty(), "its own ask is not settled");
    assert_eq!(d.message, asked.message);
    // The operator's answer still applies (any other call settles it: the test above).
    let approved = s.engine.answer(&mut s.st, &asked.id, true).unwrap();
    assert!(approved.runs());
}

#[test]
fn the_streak_brake_refuses_the_third_identical_call_first() {
    let mut s = Session::new(json!({}));
    let args = json!({"q": "weather"});
    assert_eq!(s.call("search", args.clone()).verdict, Verdict::Allow);
    assert_eq!(s.call("search", args.clone()).verdict, Verdict::Allow);
    let d = s.call("search", args.clone());
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!((d.engine, d.code), (Some("streak"), Some("LOOP_BRAKE")));
    let refusal = d.streak_refusal.unwrap();
    assert_eq!(
        d.message.unwrap(),
        format!(
            "loop brake: tool \"search\" called 3 times in a row with identical arguments (call {}…, limit 3); the call was denied before it ran. Change the arguments, call a different tool, or stop.",
            refusal.hash_prefix
        )
    );
    assert_eq!(refusal.count, 3);
    assert_eq!(refusal.session, "s1");
    assert_eq!(refusal.hash_prefix.len(), 12);
    // Refusals extend the streak: the fourth attempt reports 4 and is still refused.
    assert_eq!(
        s.call("search", args.clone()).streak_refusal.unwrap().count,
        4
    );
    // A different call breaks the streak.
    assert_eq!(
        s.call("search", json!({"q": "rain"})).verdict,
        Verdict::Allow
    );
    assert_eq!(s.call("search", args).verdict, Verdict::Allow);
}

#[test]
fn excluded_tools_and_disabled_engines_are_transparent() {
    let mut s = Session::new(
        json!({"streak": {"enabled": false}, "breaker": {"exclude": ["Read"], "on_limit": "deny"}}),
    );
    for _ in 0..40 {
        assert_eq!(
            s.run("Read", json!({"file_path": "/a"}), ok()).verdict,
            Verdict::Allow
        );
    }
    let mut s =
        Session::new(json!({"breaker": {"enabled": false}, "streak": {"max_repeats": 100}}));
    for _ in 0..40 {
        assert_eq!(
            s.run("Bash", json!({"command": "curl https://a.com/"}), ok())
                .verdict,
            Verdict::Allow
        );
    }
}

#[test]
fn max_repeats_one_refuses_every_call() {
    let mut s = Session::new(json!({"streak": {"max_repeats": 1}}));
    assert_eq!(s.call("a", json!({})).verdict, Verdict::Deny);
    assert_eq!(s.call("b", json!({})).verdict, Verdict::Deny);
}

#[test]
fn local_hosts_allow_relaxes_target_measures() {
    let mut s = Session::new(
        json!({"breaker": {"local_hosts": "allow", "on_limit": "deny"}, "streak": {"enabled": false}}),
    );
    for i in 0..30 {
        let d = s.run(
            "bash",
            json!({"command": format!("curl http://127.0.0.1:8080/health?n={i}")}),
            ok(),
        );
        assert!(d.runs());
    }
}

#[test]
fn state_stays_bounded_and_never_holds_argument_text() {
    let mut s = Session::new(json!({"streak": {"enabled": false}}));
    for i in 0..2000 {
        let secret = format!("sk-SECRET-{i}");
        let _ = s.run("bash", json!({"command": format!("curl -H 'Authorization: {secret}' https://api.example.com/{i}")}), ok());
    }
    let bytes = serde_json::to_string(&s.st).unwrap();
    // Mostly the 64 calls denied at the gate that never got a result: each stays open (a
    // late result is then ignored, and its id cannot name another call meanwhile), and the
    // operator's timeline of the last 12 decisions.
    assert!(bytes.len() < 12_000, "state is {} bytes", bytes.len());
    assert!(!bytes.contains("SECRET"));
}

#[test]
fn a_shell_fetch_is_sent_to_the_fetch_tool_on_its_first_call_and_counts_nowhere() {
    let mut s = Session::new(json!({"breaker": {"fetch_tool": "web_fetch_file"}}));
    let fetch = json!({"command": "curl -s 'https://api.example.com/v1/items?api_key=sk-live-abcdef1234567890abcd' | jq ."});
    for _ in 0..20 {
        let d = s.run("bash", fetch.clone(), ok());
        assert_eq!(d.verdict, Verdict::Deny);
        assert_eq!(d.code, Some("SHELL_HTTP_BLOCKED"));
        let text = d.message.unwrap();
        assert!(
            text.starts_with("SHELL_HTTP_BLOCKED: this bash call fetches over HTTP (curl)"),
            "{text}"
        );
        assert!(
            text.contains("web_fetch_file(url: \"https://api.example.com/v1/items?api_key="),
            "{text}"
        );
        assert!(
            !text.contains("sk-live-abcdef1234567890abcd"),
            "the key is redacted: {text}"
        );
        assert!(!text.contains("REPEAT_TOOL_BLOCKED"), "{text}");
        // The host's post of a denied call is ignored.
        assert_eq!(
            s.engine.post(&mut s.st, &d.id, &ok()).unwrap().ignored,
            Some("denied")
        );
    }
    // Nothing was counted: the same listing runs twice, the local fetch runs, and the
    // first repeat-related stop is the streak brake's own third identical call.
    let ls = json!({"command": "ls -la"});
    assert_eq!(s.run("bash", ls.clone(), ok()).verdict, Verdict::Allow);
    assert_eq!(s.run("bash", ls.clone(), ok()).verdict, Verdict::Allow);
    let local = json!({"command": "curl -s http://localhost:8000/health"});
    assert_eq!(s.run("bash", local, ok()).verdict, Verdict::Allow);
    assert_eq!(s.run("bash", ls.clone(), ok()).verdict, Verdict::Allow);
    // A non-shell tool with a `command` argument is not a shell.
    let d = s.run(
        "db_query",
        json!({"command": "curl https://x.example.com"}),
        ok(),
    );
    assert_eq!(d.verdict, Verdict::Allow);
}

#[test]
fn shell_fetches_run_when_no_replacement_exists_or_the_block_is_off() {
    let fetch = json!({"command": "curl -s https://api.example.com/v1/items"});
    for config in [
        json!({}),
        json!({"breaker": {"fetch_tool": "WebFetch", "block_shell_http": false}}),
        json!({"breaker": {"fetch_tool": "WebFetch", "shell_http_block": []}}),
    ] {
        let mut s = Session::new(config.clone());
        assert_eq!(
            s.run("Bash", fetch.clone(), ok()).verdict,
            Verdict::Allow,
            "{config}"
        );
    }
    let mut s =
        Session::new(json!({"breaker": {"fetch_tool": "WebFetch", "block_local_http": true}}));
    let d = s.run(
        "Bash",
        json!({"command": "curl -s http://localhost:8000/"}),
        ok(),
    );
    let text = d.message.unwrap();
    assert!(text.contains("Use the `WebFetch` tool instead"), "{text}");
    assert!(!text.contains("Local addresses"), "{text}");
}

#[test]
fn the_operators_timeline_shows_recent_decisions_redacted_with_outcomes() {
    let mut s =
        Session::new(json!({"breaker": {"on_limit": "deny"}, "streak": {"enabled": false}}));
    let secret = "sk-live-abcdef1234567890abcd";
    for i in 0..14 {
        let args = json!({"command": format!("curl -s 'https://api.example.com/v1?key={secret}&n=1'"), "description": DECOYS[i % 3]});
        s.step("bash", args, ok());
    }
    let log: Vec<_> = s.st.log().collect();
    assert_eq!(log.len(), toolbrake_core::engine::MAX_LOG);
    let last = log.last().unwrap();
    assert_eq!(last.tool, "bash");
    assert_eq!(last.verdict, Verdict::Deny);
    assert_eq!(last.code.as_deref(), Some("REPEAT_TOOL_BLOCKED"));
    let allowed = log.iter().find(|e| e.verdict == Verdict::Allow).unwrap();
    assert!(
        allowed.preview.shown().starts_with("exact:bash:"),
        "{}",
        allowed.preview
    );
    assert_eq!(allowed.outcome.as_deref(), Some("ok"));
    let (fp, count, limit) = log[log.len() - 3].near.clone().unwrap();
    assert!(
        count <= limit && limit == 12 && !fp.shown().is_empty(),
        "{fp} {count}/{limit}"
    );
    let text = serde_json::to_string(&s.st).unwrap();
    assert!(
        !text.contains(secret),
        "stored state never holds the secret"
    );
}

#[test]
fn seed_mode_asks_in_the_original_plugins_words() {
    let mut s = Session::new(json!({"streak": {"enabled": false}, "breaker": {"progress": false}}));
    repeated(&mut s, 11);
    let d = again(&mut s, 11);
    assert_eq!(d.verdict, Verdict::Ask);
    let reason = d.message.unwrap();
    assert!(
        reason.starts_with("repeat-tool-breaker: this call is about to be blocked as a repeat:\n"),
        "{reason}"
    );
    assert!(
        reason.contains("\n  - net:api.example.com/v1/x 12/12\n"),
        "{reason}"
    );
    assert!(reason.ends_with(
        "Approve to stop counting these measures for the REST OF THIS TURN (later identical calls are allowed). \
         Decline to keep them blocked until your next message."
    ));
}
