//! Progress-aware detection through the engine's public API: loops are still stopped,
//! work is not. Each scenario is a pattern seen in real recorded agent runs.

mod support;

use serde_json::{json, Value};
use support::Session;
use toolbrake_core::{Outcome, Stage, Track, Verdict};

fn bash(cmd: &str) -> Value {
    json!({ "command": cmd })
}

fn out(text: &str) -> Outcome {
    Outcome::success(text)
}

fn failed(code: i64, text: &str) -> Outcome {
    Outcome {
        exit_code: Some(code),
        text: Some(text.to_string()),
        ..Outcome::default()
    }
}

fn edit(i: usize) -> Value {
    json!({"command": "str_replace", "path": "/repo/src/lib.py", "old_str": format!("v{i}"), "new_str": format!("v{}", i + 1)})
}

#[test]
fn paging_through_a_file_is_progress_up_to_the_ceiling() {
    let mut r = Session::new(json!({}));
    for i in 0..47 {
        let page = format!("[File: big.py]\n{}: def handler_{i}(request):", 100 * i + 1);
        let (d, _) = r.try_run("scroll_down", json!({}), out(&page));
        assert!(d.runs(), "scroll {} stopped: {:?}", i + 1, d.message);
    }
    assert_eq!(r.stops(), 0);
    // A runaway identical call is still refused at the ceiling, output changing or not.
    for i in 47..70 {
        r.step("scroll_down", json!({}), out(&format!("{i}: line {i}")));
    }
    assert_eq!(r.first_stop(), Some(64));
    let d = r.call("scroll_down", json!({}));
    assert!(d
        .message
        .unwrap()
        .contains("limit 64 even while the output changes"));
}

#[test]
fn a_failing_cd_with_a_rising_line_counter_is_a_loop() {
    let mut r = Session::new(json!({}));
    for i in 0..22 {
        let text = format!(
            "bash: line {}: cd: fastjson/: No such file or directory",
            11316 + i
        );
        r.step("execute_bash", bash("cd fastjson/"), failed(1, &text));
    }
    assert_eq!(r.first_stop(), Some(3), "{:?}", r.verdicts);
    let d = r.call("execute_bash", bash("cd fastjson/"));
    let text = d.message.unwrap();
    assert!(
        text.contains("The last 2 identical calls returned the same result."),
        "{text}"
    );
}

#[test]
fn the_same_error_every_time_is_stopped_at_the_third_call() {
    let mut r = Session::new(json!({}));
    for _ in 0..13 {
        r.step(
            "execute_bash",
            bash("./mvnw compile; ./mvnw test"),
            failed(1, "Error: JAVA_HOME is not defined correctly."),
        );
    }
    assert_eq!(r.first_stop(), Some(3));
    let mut r = Session::new(json!({}));
    for _ in 0..30 {
        r.step(
            "str_replace_editor",
            json!({"command": "create", "path": "/repo/a.py"}),
            Outcome {
                is_error: Some(true),
                text: Some("Parameter `file_text` is required for command: create".into()),
                ..Outcome::default()
            },
        );
    }
    assert_eq!(r.first_stop(), Some(3));
}

/// The rhythm of every coding agent: edit, rerun the failing test, until it passes.
fn edit_and_rerun(r: &mut Session, runs: usize, failure_text: impl Fn(usize) -> String) {
    for i in 0..runs {
        let outcome = if i + 1 == runs {
            out("All tests passed")
        } else {
            failed(1, &failure_text(i))
        };
        r.step(
            "execute_bash",
            bash("cd /repo && python reproduce_issue.py"),
            outcome,
        );
        if i + 1 < runs {
            r.step(
                "str_replace_editor",
                edit(i),
                out("The file /repo/src/lib.py has been edited."),
            );
        }
    }
}

#[test]
fn edit_and_rerun_is_never_stopped_while_the_failure_changes() {
    // The failure changes as the fix takes shape: work, however long it takes.
    let mut r = Session::new(json!({}));
    edit_and_rerun(&mut r, 15, |i| {
        format!("AssertionError: expected 3, got {}", i % 3)
    });
    assert_eq!(r.stops(), 0, "{:?}", r.verdicts);
    // Reads between the failures are not progress: rerun, read, rerun, read with the same
    // results is a cycle, stopped at its 3rd round…
    let rerun_and_read = |r: &mut Session| {
        for _ in 0..6 {
            r.step(
                "execute_bash",
                bash("cd /repo && python reproduce_issue.py"),
                failed(1, "AssertionError"),
            );
            r.step(
                "execute_bash",
                bash("cat /repo/src/lib.py"),
                out("def f(): pass"),
            );
        }
    };
    let mut r = Session::new(json!({"streak": {"enabled": false}}));
    rerun_and_read(&mut r);
    assert_eq!(r.first_stop(), Some(5), "{:?}", r.verdicts);
    // …and without cycle detection the failure gate still stops the 6th run.
    let mut r =
        Session::new(json!({"streak": {"enabled": false}, "breaker": {"cycle_limit": "off"}}));
    rerun_and_read(&mut r);
    assert_eq!(r.first_stop(), Some(11), "{:?}", r.verdicts);
}

#[test]
fn edits_that_leave_the_failure_unchanged_are_stopped_at_the_fourth_run() {
    let same = |_| {
        "Traceback (most recent call last):\n  File \"reproduce_issue.py\", line 3\nAssertionError"
            .to_string()
    };
    // The failure comes back byte for byte after every edit: the edits do not touch what
    // it reports. After 3 results in a row that were the same (2 equal to the one before), the 4th run is
    // asked about.
    let mut r = Session::new(json!({}));
    edit_and_rerun(&mut r, 15, same);
    assert_eq!(r.first_stop(), Some(7), "{:?}", r.verdicts);
    let mut r = Session::new(json!({}));
    for i in 0..3 {
        r.step(
            "execute_bash",
            bash("cd /repo && python reproduce_issue.py"),
            failed(1, &same(i)),
        );
        r.step(
            "str_replace_editor",
            edit(i),
            out("The file /repo/src/lib.py has been edited."),
        );
    }
    let d = r.call(
        "execute_bash",
        bash("cd /repo && python reproduce_issue.py"),
    );
    assert_eq!(d.verdict, Verdict::Ask);
    assert!(d
        .hits
        .iter()
        .any(|h| h.track == Track::Unchanged && h.count == 2 && h.limit == 2));
    let reason = d.message.unwrap();
    assert!(
        reason.contains(
            "keeps returning the SAME result, whatever the agent changed between the runs"
        ),
        "{reason}"
    );
    assert!(reason.contains("returned the same result as the run before it 2 times in a row, each time after the workspace changed (the latest: the command exited 1)"), "{reason}");
    // Under on_limit = "deny" the model reads why; after a further change it may run the
    // call once more, and if that comes back the same again it stays stopped.
    let mut r = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    for i in 0..3 {
        r.step(
            "execute_bash",
            bash("cd /repo && python reproduce_issue.py"),
            failed(1, &same(i)),
        );
        r.step(
            "str_replace_editor",
            edit(i),
            out("The file /repo/src/lib.py has been edited."),
        );
    }
    let d = r.call(
        "execute_bash",
        bash("cd /repo && python reproduce_issue.py"),
    );
    assert_eq!(d.verdict, Verdict::Deny);
    let text = d.message.unwrap();
    assert!(text.starts_with("REPEAT_TOOL_BLOCKED: execute_bash (same result again). The call was stopped before executing."), "{text}");
    assert!(
        text.contains("did not touch what this call reports"),
        "{text}"
    );
    r.step(
        "str_replace_editor",
        edit(10),
        out("The file /repo/src/lib.py has been edited."),
    );
    let (d, _) = r.try_run(
        "execute_bash",
        bash("cd /repo && python reproduce_issue.py"),
        failed(1, &same(0)),
    );
    assert!(d.runs(), "one rerun after a change: {:?}", d.message);
    r.step(
        "str_replace_editor",
        edit(11),
        out("The file /repo/src/lib.py has been edited."),
    );
    assert_eq!(
        r.call(
            "execute_bash",
            bash("cd /repo && python reproduce_issue.py")
        )
        .verdict,
        Verdict::Deny
    );
    // The rerun after the stop and a change came back different: the count starts again.
    let mut r = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    for i in 0..3 {
        r.step(
            "execute_bash",
            bash("cd /repo && python reproduce_issue.py"),
            failed(1, &same(i)),
        );
        r.step(
            "str_replace_editor",
            edit(i),
            out("The file /repo/src/lib.py has been edited."),
        );
    }
    r.step(
        "execute_bash",
        bash("cd /repo && python reproduce_issue.py"),
        failed(1, &same(0)),
    );
    r.step(
        "str_replace_editor",
        edit(10),
        out("The file /repo/src/lib.py has been edited."),
    );
    r.step(
        "execute_bash",
        bash("cd /repo && python reproduce_issue.py"),
        failed(1, "NameError: x"),
    );
    for i in 0..3 {
        r.step(
            "str_replace_editor",
            edit(20 + i),
            out("The file /repo/src/lib.py has been edited."),
        );
        r.step(
            "execute_bash",
            bash("cd /repo && python reproduce_issue.py"),
            failed(1, &format!("NameError: {i}")),
        );
    }
    assert_eq!(
        r.first_stop(),
        Some(7),
        "only the first stop: {:?}",
        r.verdicts
    );
    // Off, nothing of this is stopped.
    let mut r = Session::new(json!({"breaker": {"unchanged_limit": "off"}}));
    edit_and_rerun(&mut r, 15, same);
    assert_eq!(r.stops(), 0, "{:?}", r.verdicts);
}

#[test]
fn a_struggle_gets_an_advisory_and_at_last_an_operator_ask_never_a_denial() {
    // The unchanged track would stop this struggle at its 5th run; this is about the
    // struggle track alone.
    let mut r = Session::new(json!({"breaker": {"unchanged_limit": "off"}}));
    let mut struggle_advisory = None;
    let mut asked = None;
    for i in 0..20 {
        let (d, advisories) = r.try_run(
            "execute_bash",
            bash("pytest tests/test_x.py"),
            failed(
                1,
                "=== test session starts ===\ncollected 1 item\n\ntests/test_x.py F",
            ),
        );
        if d.verdict == Verdict::Ask {
            asked = Some((i + 1, d.hits.clone()));
            break;
        }
        assert_ne!(d.verdict, Verdict::Deny, "run {}", i + 1);
        if let Some(a) = advisories
            .iter()
            .find(|a| a.contains("since it last succeeded"))
        {
            struggle_advisory.get_or_insert((i + 1, a.clone()));
        }
        r.step(
            "Edit",
            json!({"file_path": "/repo/x.py", "old_string": format!("{i}"), "new_string": "y"}),
            out("ok"),
        );
    }
    let (n, text) = struggle_advisory.expect("a struggle advisory");
    assert_eq!(n, 6);
    assert!(text.starts_with("CONVERGENCE_CHECK: "), "{text}");
    assert!(
        text.contains("has failed 6 times since it last succeeded, with changes in between"),
        "{text}"
    );
    let (n, hits) = asked.expect("an operator ask");
    assert_eq!(n, 17, "asked after 16 failures the same way");
    assert!(hits
        .iter()
        .all(|h| h.track == Track::Struggle && h.count == 16));
    // With on_limit = "deny" a struggle is never stopped at all.
    let mut r = Session::new(json!({"breaker": {"on_limit": "deny", "unchanged_limit": "off"}}));
    for i in 0..30 {
        r.step(
            "execute_bash",
            bash("pytest tests/test_x.py"),
            failed(1, "F"),
        );
        r.step(
            "Edit",
            json!({"file_path": "/repo/x.py", "old_string": format!("{i}"), "new_string": "y"}),
            out("ok"),
        );
    }
    assert_eq!(r.stops(), 0);
}

#[test]
fn a_failing_edit_is_not_progress() {
    let mut r =
        Session::new(json!({"streak": {"enabled": false}, "breaker": {"on_limit": "deny"}}));
    for i in 0..6 {
        r.step(
            "execute_bash",
            bash("make test"),
            failed(2, "make: *** [test] Error 1"),
        );
        r.step(
            "str_replace_editor",
            edit(i),
            Outcome {
                is_error: Some(true),
                text: Some("No replacement was performed".into()),
                ..Outcome::default()
            },
        );
    }
    assert_eq!(r.first_stop(), Some(11), "{:?}", r.verdicts);
}

#[test]
fn shell_writes_count_as_edits() {
    // The failure track's view (the unchanged track would stop the 5th unchanged run).
    let mut r = Session::new(
        json!({"streak": {"enabled": false}, "breaker": {"on_limit": "deny", "unchanged_limit": "off"}}),
    );
    for i in 0..10 {
        r.step(
            "execute_bash",
            bash("python -m pytest -x"),
            failed(1, "1 failed"),
        );
        r.step(
            "execute_bash",
            bash(&format!("sed -i 's/old{i}/new/' src/app.py")),
            out(""),
        );
    }
    assert_eq!(r.stops(), 0, "{:?}", r.verdicts);
}

#[test]
fn a_no_op_edit_repeated_is_a_micro_loop() {
    let mut r = Session::new(json!({}));
    for _ in 0..4 {
        r.step("execute_bash", bash("sed -i 's/x/x/' f.py"), out(""));
    }
    assert_eq!(r.first_stop(), Some(3));
}

#[test]
fn a_short_failing_retry_is_stopped_early() {
    let mut r = Session::new(json!({}));
    let args = json!({"reservation_id": "K1NW8N", "flights": [{"flight_number": "HAT023", "date": "2024-05-26"}]});
    for _ in 0..3 {
        r.step(
            "update_reservation_flights",
            args.clone(),
            Outcome {
                is_error: Some(true),
                text: Some("Error: flight HAT023 not available on date 2024-05-26".into()),
                ..Outcome::default()
            },
        );
    }
    assert_eq!(r.first_stop(), Some(3));
}

#[test]
fn a_cycle_without_progress_is_stopped_well_before_the_exact_gate() {
    let mut r = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    for _ in 0..6 {
        r.step(
            "get_user_details",
            json!({"user_id": "u1"}),
            out("{\"name\": \"Ann\"}"),
        );
        r.step(
            "get_reservation_details",
            json!({"reservation_id": "R1"}),
            out("{\"status\": \"active\"}"),
        );
    }
    assert_eq!(r.first_stop(), Some(5), "{:?}", r.verdicts);
    let d = r.call("get_user_details", json!({"user_id": "u1"}));
    assert_eq!(d.verdict, Verdict::Deny);
    let text = d.message.unwrap();
    assert!(
        text.starts_with("REPEAT_TOOL_BLOCKED: repeated get_user_details (cycle)."),
        "{text}"
    );
    assert!(
        text.contains("starts a cycle of 2 calls for the 3rd time"),
        "{text}"
    );
    assert_eq!(d.hits[0].track, Track::Cycle);
    assert_eq!(d.hits[0].period, Some(2));

    // Period 3 too.
    let mut r = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    for _ in 0..4 {
        r.step(
            "execute_bash",
            bash("make"),
            out("make: Nothing to be done"),
        );
        r.step("execute_bash", bash("git status"), out("nothing to commit"));
        r.step("execute_bash", bash("ls build"), out("app"));
    }
    assert_eq!(r.first_stop(), Some(7), "{:?}", r.verdicts);
}

#[test]
fn a_cycle_whose_outcomes_advance_is_polling_not_a_loop() {
    let mut r = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    for i in 0..30 {
        r.step("execute_bash", bash("sleep 5"), out(""));
        r.step(
            "execute_bash",
            bash("tail -n 1 build.log"),
            out(&format!("step {i} of 30: compiling module_{i}")),
        );
    }
    assert_eq!(r.stops(), 0, "{:?}", r.verdicts);
}

#[test]
fn repeated_reads_that_return_new_output_do_not_reach_the_exact_gate() {
    let mut r =
        Session::new(json!({"breaker": {"on_limit": "deny"}, "streak": {"enabled": false}}));
    for i in 0..30 {
        let (d, _) = r.try_run(
            "check_job",
            json!({"job": "j1"}),
            out(&format!("job j1: {} of 30 shards done", i % 30)),
        );
        assert!(d.runs(), "poll {} stopped", i + 1);
    }
    // The same call returning the same result reaches the gate as before.
    let mut r =
        Session::new(json!({"breaker": {"on_limit": "deny"}, "streak": {"enabled": false}}));
    for _ in 0..12 {
        r.step("check_job", json!({"job": "j1"}), out("job j1: queued"));
    }
    assert_eq!(r.first_stop(), Some(12));
}

#[test]
fn seed_mode_restores_the_exact_rules() {
    let seed =
        json!({"streak": {"progress": false}, "breaker": {"progress": false, "on_limit": "deny"}});
    // The streak brake counts identical calls whatever they returned.
    let mut r = Session::new(seed.clone());
    for i in 0..3 {
        r.step("scroll_down", json!({}), out(&format!("{i}: new lines")));
    }
    assert_eq!(r.first_stop(), Some(3));
    let d = r.call("scroll_down", json!({}));
    assert!(!d.message.unwrap().contains("returned the same result"));
    // Edits do not restart the failure count: the 6th run is stopped.
    let mut r = Session::new(seed.clone());
    edit_and_rerun(&mut r, 15, |i| format!("AssertionError: {i}"));
    assert_eq!(r.first_stop(), Some(11), "{:?}", r.verdicts);
    // No cycle detection, no struggle advisory.
    let mut r = Session::new(seed.clone());
    for _ in 0..5 {
        r.step("a", json!({}), out("x"));
        r.step("b", json!({}), out("y"));
    }
    assert_eq!(r.stops(), 0);
}

#[test]
fn outcomes_never_reported_keep_the_seed_count() {
    let mut r = Session::new(json!({}));
    for _ in 0..3 {
        let _ = r.call("scroll_down", json!({}));
    }
    assert_eq!(r.first_stop(), Some(3));
}

#[test]
fn the_struggle_advisory_stage_is_reported() {
    let mut r = Session::new(json!({"breaker": {"struggle_warn_at": 2, "fail_warn_at": 0}}));
    r.step("execute_bash", bash("make"), failed(2, "E1"));
    r.step(
        "Write",
        json!({"file_path": "a.c", "content": "x"}),
        out("ok"),
    );
    let d = r.call("execute_bash", bash("make"));
    let p = r.engine.post(&mut r.st, &d.id, &failed(2, "E1")).unwrap();
    assert_eq!(p.advisories.len(), 1);
    assert_eq!(p.advisories[0].stage, Stage::Struggle);
    assert_eq!(p.advisories[0].count, 2);
}

/// One page of a listing: a body that differs from page to page.
fn issues_page(page: usize) -> Outcome {
    out(&format!(
        "[{{\"title\": \"issue {a} on page {page}\", \"state\": \"open\"}}, {{\"title\": \"issue {b} on page {page}\", \"state\": \"open\"}}]",
        a = 2 * page,
        b = 2 * page + 1
    ))
}

const ISSUES: &str = "https://api.github.com/repos/acme/app/issues?state=open";

/// The ways an agent pages through a URL: a fetch tool (smolagents' `fetch_url`), the MCP
/// fetch server's `fetch` (bare and as Claude Code names it), and `curl` in a shell tool.
fn page_call(how: &str, page: usize) -> (&str, Value) {
    let url = format!("{ISSUES}&page={page}");
    match how {
        "curl" => ("Bash", bash(&format!("curl -s '{url}'"))),
        tool => (tool, json!({ "url": url })),
    }
}

const PAGERS: [&str; 4] = ["fetch_url", "fetch", "mcp__fetch__fetch", "curl"];

#[test]
fn paging_through_a_url_is_progress() {
    for how in PAGERS {
        let mut r = Session::new(json!({}));
        for page in 1..=25 {
            let (tool, args) = page_call(how, page);
            let (d, _) = r.try_run(tool, args, issues_page(page));
            assert!(d.runs(), "{how}: page {page} stopped: {:?}", d.message);
        }
        assert_eq!(r.stops(), 0, "{how}");
        // A cursor works the same way, and so does `offset`.
        let mut r = Session::new(json!({}));
        for page in 1..=25 {
            let url = format!("https://api.example.com/v1/events?cursor=c{page}x&limit=50");
            let (d, _) = r.try_run(how_tool(how), url_args(how, &url), issues_page(page));
            assert!(
                d.runs(),
                "{how}: cursor page {page} stopped: {:?}",
                d.message
            );
        }
    }
}

fn how_tool(how: &str) -> &str {
    if how == "curl" {
        "Bash"
    } else {
        how
    }
}

fn url_args(how: &str, url: &str) -> Value {
    if how == "curl" {
        bash(&format!("curl -s '{url}'"))
    } else {
        json!({ "url": url })
    }
}

#[test]
fn the_same_page_again_and_again_is_still_stopped() {
    for how in PAGERS {
        let mut r = Session::new(json!({}));
        for _ in 0..25 {
            let (tool, args) = page_call(how, 3);
            r.step(tool, args, issues_page(3));
        }
        assert!(
            r.first_stop().is_some_and(|n| n <= 12),
            "{how}: {:?}",
            r.verdicts
        );
    }
}

#[test]
fn pages_that_return_the_same_body_are_still_stopped() {
    for how in PAGERS {
        let mut r = Session::new(json!({}));
        for page in 1..=25 {
            let (tool, args) = page_call(how, page);
            r.step(
                tool,
                args,
                out("[]  (rate limited: try again later, please)"),
            );
        }
        assert!(
            r.first_stop().is_some_and(|n| n <= 16),
            "{how}: {:?}",
            r.verdicts
        );
    }
}

#[test]
fn a_cursor_that_goes_back_is_still_a_loop() {
    for how in PAGERS {
        let mut r = Session::new(json!({}));
        // Pages 1 to 4, then back to 1, over and over: each page's body differs from the
        // page before it, but the pages were all fetched before.
        for i in 0..25 {
            let page = i % 4 + 1;
            let (tool, args) = page_call(how, page);
            r.step(tool, args, issues_page(page));
        }
        assert!(
            r.first_stop().is_some_and(|n| n <= 16),
            "{how}: {:?}",
            r.verdicts
        );
    }
}
