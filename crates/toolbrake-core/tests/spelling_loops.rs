//! Loops that change their spelling (issue 40): a command rewritten call after call
//! (flag order, `./x`, a `cd` to where the shell already is, a head count, a comment, a
//! trailing `;`, blanks, quotes, an assignment in front) that returns the same output each
//! time is stopped by its 3rd call; the same rewriting with an output that changes is never
//! stopped (docs/decisions.md, "Same output, other spelling").

mod support;

use serde_json::{json, Value};
use support::Session;
use toolbrake_core::{Config, Outcome, Track, Verdict};

fn bash(cmd: &str) -> Value {
    json!({ "command": cmd })
}

fn out(text: &str) -> Outcome {
    Outcome::success(text)
}

/// The families of the issue: six spellings of one command each (run in this order).
fn families() -> Vec<(&'static str, [&'static str; 6])> {
    vec![
        (
            "flag order",
            [
                "ls -la src",
                "ls -al src",
                "ls -a -l src",
                "ls -l -a src",
                "ls -la src",
                "ls -al src",
            ],
        ),
        (
            "./x and x",
            [
                "python3 ./repro.py",
                "python3 repro.py",
                "python3 ././repro.py",
                "python3 repro.py",
                "python3 ./repro.py",
                "python3 repro.py",
            ],
        ),
        (
            "a cd to where the shell is",
            [
                "cd /w && pytest -q tests",
                "pytest -q tests",
                "cd /w && pytest -q tests",
                "cd /w/ ; pytest -q tests",
                "pytest -q tests",
                "cd /w && pytest -q tests",
            ],
        ),
        (
            "a head count",
            [
                "grep -rn TODO src | head -50",
                "grep -rn TODO src | head -51",
                "grep -rn TODO src | head -n 60",
                "grep -rn TODO src | head -40",
                "grep -rn TODO src | head -n50",
                "grep -rn TODO src | head -52",
            ],
        ),
        (
            "a trailing comment",
            [
                "make test",
                "make test # try 2",
                "make test # try 3",
                "make test  # try 4",
                "make test # one more time",
                "make test # try 6",
            ],
        ),
        (
            "a trailing ;",
            [
                "cargo build",
                "cargo build;",
                "cargo build ;",
                "cargo build;",
                "cargo build",
                "cargo build ; ",
            ],
        ),
        (
            "extra blanks",
            [
                "node index.js --check",
                "node  index.js --check",
                "node index.js  --check",
                " node index.js --check",
                "node\tindex.js --check",
                "node index.js --check ",
            ],
        ),
        (
            "quotes",
            [
                "cat 'notes.txt'",
                "cat notes.txt",
                "cat \"notes.txt\"",
                "cat 'notes.txt'",
                "cat notes.txt",
                "cat \"notes\".txt",
            ],
        ),
        (
            "an assignment in front",
            [
                "FOO=1 ./run.sh",
                "./run.sh",
                "FOO=2 ./run.sh",
                "DEBUG=1 FOO=1 ./run.sh",
                "./run.sh",
                "FOO=1 ./run.sh",
            ],
        ),
    ]
}

const SAME: &str =
    "Traceback (most recent call last):\n  File \"repro.py\", line 3\nValueError: bad input";

#[test]
fn each_family_with_one_output_is_stopped_by_its_third_call() {
    for (family, spellings) in families() {
        let mut r = Session::new(json!({}));
        for cmd in spellings {
            r.step("Bash", bash(cmd), out(SAME));
        }
        let first = r.first_stop();
        assert!(
            matches!(first, Some(3..=5)),
            "{family}: first stop {first:?}, {:?}",
            r.verdicts
        );
        assert_eq!(first, Some(3), "{family}: {:?}", r.verdicts);
    }
}

#[test]
fn each_family_with_an_output_that_changes_is_never_stopped() {
    for (family, spellings) in families() {
        let mut r = Session::new(json!({}));
        for (i, cmd) in spellings.into_iter().enumerate() {
            let text = format!("{SAME}\n{i} tests still failing");
            r.step("Bash", bash(cmd), out(&text));
        }
        assert_eq!(r.stops(), 0, "{family}: {:?}", r.verdicts);
    }
}

#[test]
fn the_stop_says_what_it_is_and_quotes_the_command() {
    let mut r = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    r.step("Bash", bash("ls -la src"), out(SAME));
    r.step("Bash", bash("ls -al src"), out(SAME));
    let d = r.call("Bash", bash("ls -a -l ./src  # try 3"));
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!(d.engine, Some("breaker"));
    assert_eq!(d.code, Some("REPEAT_TOOL_BLOCKED"));
    assert_eq!(d.hits.len(), 1, "{:?}", d.hits);
    let h = &d.hits[0];
    assert_eq!((h.track, h.count, h.limit), (Track::SameOutput, 2, 2));
    assert_eq!(h.track.as_str(), "same_output");
    assert!(h.fingerprint.starts_with("cmd:ls:"), "{}", h.fingerprint);
    let text = d.message.unwrap();
    for needle in [
        "REPEAT_TOOL_BLOCKED: repeated Bash (same output, other spelling)",
        "has run 2 times already, however it was spelled",
        "does not change what it does",
        "Previous tool result:",
        "Do not repeat this call with different cosmetics.",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
}

#[test]
fn the_operator_is_asked_and_an_approval_lets_every_spelling_run() {
    let mut r = Session::new(json!({}));
    r.step("Bash", bash("ls -la src"), out(SAME));
    r.step("Bash", bash("ls -al src"), out(SAME));
    let d = r.call("Bash", bash("ls -a -l src"));
    assert_eq!(d.verdict, Verdict::Ask);
    let reason = d.message.clone().unwrap();
    assert!(
        reason
            .contains("repeats, spelled differently, a call that keeps returning the SAME output"),
        "{reason}"
    );
    assert!(reason.contains("REST OF THIS TURN"), "{reason}");
    let a = r.engine.answer(&mut r.st, &d.id, true).unwrap();
    assert_eq!(a.verdict, Verdict::Allow);
    // It ran anyway and returned the same: the stop was waste, as the report says.
    let p = r.engine.post(&mut r.st, &d.id, &out(SAME)).unwrap();
    assert_eq!(p.stopped, Some(toolbrake_core::progress::Stopped::Waste));
    for cmd in ["ls -l -a src", "ls -la src # again"] {
        let d = r.run("Bash", bash(cmd), out(SAME));
        assert!(d.runs(), "{cmd}: {:?}", d.message);
    }
}

#[test]
fn a_different_command_with_the_same_output_is_not_stopped() {
    let mut r = Session::new(json!({"breaker": {"on_limit": "deny"}}));
    r.step("Bash", bash("python3 repro.py"), out(SAME));
    r.step("Bash", bash("python3  repro.py"), out(SAME));
    // Another action that happens to say the same thing runs...
    let d = r.run("Bash", bash("python3 -m repro"), out(SAME));
    assert!(d.runs(), "{:?}", d.message);
    // ...and the run it joined still stops the repeated one.
    let d = r.call("Bash", bash("python3 ./repro.py"));
    assert_eq!(d.verdict, Verdict::Deny);
}

#[test]
fn tiny_outputs_tie_nothing_together() {
    for text in ["", "OK", "[]", "true", "$ "] {
        let mut r = Session::new(json!({}));
        for cmd in families()[1].1 {
            r.step("Bash", bash(cmd), out(text));
        }
        assert_eq!(r.stops(), 0, "{text:?}: {:?}", r.verdicts);
    }
}

#[test]
fn a_change_to_the_workspace_or_another_tool_in_between_ends_the_run() {
    let mut r = Session::new(json!({}));
    for (i, cmd) in families()[0].1.into_iter().enumerate() {
        r.step("Bash", bash(cmd), out(SAME));
        let edit = json!({"file_path": "/w/src/a.py", "old_string": format!("v{i}"), "new_string": format!("v{}", i + 1)});
        r.step("Edit", edit, out("The file /w/src/a.py has been updated."));
    }
    assert_eq!(r.stops(), 0, "{:?}", r.verdicts);

    let mut r = Session::new(json!({}));
    for cmd in families()[0].1 {
        r.step("Bash", bash(cmd), out(SAME));
        r.step(
            "Read",
            json!({"file_path": "/w/README.md"}),
            out("# Project\nHow to run it."),
        );
    }
    // The reads are the streak's business (the same read again and again), not this track's.
    assert!(
        r.verdicts.iter().step_by(2).all(|v| *v == Verdict::Allow),
        "{:?}",
        r.verdicts
    );
}

#[test]
fn a_cd_elsewhere_is_another_command() {
    let mut r = Session::new(json!({}));
    for dir in ["/a", "/b", "/c", "/d", "/e", "/f"] {
        r.step(
            "Bash",
            bash(&format!("cd {dir} && git status")),
            out("On branch main\nnothing to commit, working tree clean"),
        );
    }
    assert_eq!(r.stops(), 0, "{:?}", r.verdicts);
    // A relative cd is read from where the shell is.
    let mut r = Session::new(json!({}));
    r.step("Bash", bash("cd /w && ls"), out(SAME));
    r.step("Bash", bash("cd src && ls"), out(SAME));
    r.step("Bash", bash("cd /w && ls"), out(SAME));
    assert_eq!(r.stops(), 0, "{:?}", r.verdicts);
}

#[test]
fn a_cd_is_known_once_the_session_made_one() {
    // Where the shell started is not known: the first `cmd` and `cd /w && cmd` are two
    // spellings until a cd says where the shell is; from then on they are one.
    let mut r = Session::new(json!({}));
    for cmd in [
        "pytest -q",
        "cd /w && pytest -q",
        "pytest -q",
        "cd /w && pytest -q",
        "pytest -q",
        "cd /w && pytest -q",
    ] {
        r.step("Bash", bash(cmd), out(SAME));
    }
    assert_eq!(r.first_stop(), Some(4), "{:?}", r.verdicts);
}

#[test]
fn a_working_directory_argument_is_where_the_command_runs() {
    let mut r = Session::new(json!({}));
    let calls = [
        json!({"command": ["bash", "-lc", "ls -la"], "workdir": "/w"}),
        json!({"command": ["bash", "-lc", "cd /w && ls -al"]}),
        json!({"command": ["bash", "-lc", "ls -a -l"], "workdir": "/w/"}),
    ];
    for args in calls {
        r.step("shell", args, out(SAME));
    }
    assert_eq!(r.first_stop(), Some(3), "{:?}", r.verdicts);
}

#[test]
fn two_spellings_alternating_are_stopped_at_the_third_call() {
    let mut r = Session::new(json!({}));
    for cmd in ["ls -la src", "ls -al src", "ls -la src", "ls -al src"] {
        r.step("Bash", bash(cmd), out(SAME));
    }
    assert_eq!(r.first_stop(), Some(3), "{:?}", r.verdicts);
}

#[test]
fn tools_other_than_shells_count_their_exact_identity() {
    // The JSON's own spellings (key order, 1 and 1.0, a fresh description) are one call
    // already: the streak stops such a call repeated three times in a row. Here other
    // queries that returned the same come in between.
    let mut r = Session::new(json!({}));
    let text = "No results for this query in the knowledge base.";
    r.step(
        "search",
        json!({"q": "refund policy", "limit": 5}),
        out(text),
    );
    r.step(
        "search",
        json!({"q": "refund  policy", "limit": 5}),
        out(text),
    );
    r.step(
        "search",
        json!({"limit": 5.0, "q": "refund policy"}),
        out(text),
    );
    r.step("search", json!({"q": "refunds", "limit": 5}), out(text));
    let d = r.run(
        "search",
        json!({"q": "refund policy", "limit": 5, "description": "again"}),
        out(text),
    );
    assert_eq!(r.first_stop(), Some(5), "{:?}", r.verdicts);
    assert_eq!(d.hits[0].track, Track::SameOutput);
}

#[test]
fn off_and_seed_mode_stop_nothing() {
    for config in [
        json!({"breaker": {"same_output_limit": "off"}}),
        json!({"breaker": {"progress": false}, "streak": {"progress": false}}),
    ] {
        let mut r = Session::new(config.clone());
        for cmd in families()[0].1 {
            r.step("Bash", bash(cmd), out(SAME));
        }
        assert_eq!(r.stops(), 0, "{config}: {:?}", r.verdicts);
    }
    // A higher limit stops later.
    let mut r = Session::new(json!({"breaker": {"same_output_limit": 3}}));
    for cmd in families()[0].1 {
        r.step("Bash", bash(cmd), out(SAME));
    }
    assert_eq!(r.first_stop(), Some(4), "{:?}", r.verdicts);
}

#[test]
fn the_limit_is_validated() {
    let load = |v: Value| {
        Config::from_value(
            &json!({"breaker": {"same_output_limit": v}}),
            &toolbrake_core::config::no_env,
        )
    };
    for ok in [json!(2), json!(64), json!("off"), json!(false)] {
        assert!(load(ok.clone()).is_ok(), "{ok}");
    }
    for bad in [
        json!(1),
        json!(65),
        json!(0),
        json!("2"),
        json!(2.5),
        json!(true),
    ] {
        let e = load(bad.clone()).unwrap_err().to_string();
        assert!(e.contains("breaker.same_output_limit"), "{e}");
        assert!(e.contains("from 2 to 64"), "{e}");
    }
}
