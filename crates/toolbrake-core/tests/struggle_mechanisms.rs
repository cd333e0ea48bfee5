//! The unchanged track (docs/decisions.md, "Unchanged") lets a rerun through when the
//! history says it may differ, and still stops the struggle: the same failure after edit
//! upon edit, with nothing new tried. One healthy edit-rerun-succeed sequence per mechanism,
//! each of which the track stopped before the mechanism, and the struggle it must still stop.

mod support;

use serde_json::{json, Value};
use support::Session;
use toolbrake_core::breaker::Kept;
use toolbrake_core::{Call, Outcome, Track, Verdict};

fn bash(cmd: &str) -> Value {
    json!({ "command": cmd })
}

fn ok(text: &str) -> Outcome {
    Outcome::success(text)
}

fn failed(text: &str) -> Outcome {
    Outcome {
        exit_code: Some(1),
        text: Some(text.to_string()),
        ..Outcome::default()
    }
}

/// The sessions here keep the gate at 3, where these sequences were written (their counts
/// read "the 5th run"); the default gate, 2, is tested in `progress_scenarios.rs`. What a
/// mechanism does (restart a count, let one run through) does not depend on the gate.
fn gate_of_3() -> Value {
    json!({"breaker": {"unchanged_limit": 3}})
}

const SAME: &str =
    "Traceback (most recent call last):\n  File \"reproduce.py\", line 3\nAssertionError";

/// An edit of a library file the run does not name, each time a different one.
fn lib_edit(i: usize) -> Value {
    json!({"command": "str_replace", "path": "/w/src/lib.py", "old_str": format!("v{i}"), "new_str": format!("v{}", i + 1)})
}

/// A session that ran `run` and got the same failure after `n` edits of the library (the
/// same file each time): `n` results in a row the same as the run before.
fn struggle(r: &mut Session, run: &Value, n: usize) {
    r.step("execute_bash", run.clone(), failed(SAME));
    for i in 0..n {
        r.step(
            "str_replace_editor",
            lib_edit(i),
            ok("The file /w/src/lib.py has been edited."),
        );
        let d = r.run("execute_bash", run.clone(), failed(SAME));
        assert!(d.runs(), "run {} stopped: {:?}", i + 2, d.message);
    }
}

/// What the unchanged track says of `run` now (`toolbrake explain --session`).
fn view(r: &Session, run: &Value) -> toolbrake_core::breaker::UnchangedView {
    let call = Call {
        session: "s1",
        id: "explain",
        tool: "execute_bash",
        args: run,
    };
    r.engine
        .signals(&r.st, &call)
        .unwrap()
        .breaker
        .unwrap()
        .unchanged
}

#[test]
fn the_struggle_is_still_stopped() {
    // The same failure after every edit of the same file: the 5th run is asked about.
    let run = bash("cd /w && python reproduce.py");
    let mut r = Session::new(gate_of_3());
    struggle(&mut r, &run, 3);
    assert!(view(&r, &run).stops);
    r.step(
        "str_replace_editor",
        lib_edit(3),
        ok("The file /w/src/lib.py has been edited."),
    );
    let d = r.call("execute_bash", run.clone());
    assert_eq!(d.verdict, Verdict::Ask, "{:?}", r.verdicts);
    assert!(d.hits.iter().any(|h| h.track == Track::Unchanged));
}

/// Edits of the script the rerun executes, through every kind of write, each followed by
/// the same failure: the rerun's count restarts each time, and the run that finally passes
/// is never stopped.
#[test]
fn an_edit_of_the_script_it_runs_restarts_its_count() {
    let writes: Vec<(&str, Value)> = vec![
        (
            "str_replace_editor",
            json!({"command": "str_replace", "path": "/w/reproduce.py", "old_str": "a", "new_str": "b"}),
        ),
        (
            "str_replace_editor",
            json!({"command": "create", "path": "/w/reproduce.py", "file_text": "x"}),
        ),
        (
            "Edit",
            json!({"file_path": "/w/reproduce.py", "old_string": "a", "new_string": "b"}),
        ),
        (
            "execute_bash",
            bash("cat > /w/reproduce.py <<'EOF'\nimport lib\nEOF"),
        ),
        (
            "execute_bash",
            bash("cd /w && sed -i 's/a/b/' ./reproduce.py"),
        ),
        ("execute_bash", bash("rm /w/reproduce.py")),
        (
            "execute_bash",
            bash("cd /w && printf 'x' | tee reproduce.py"),
        ),
        ("execute_bash", bash("mv /tmp/new.py /w/reproduce.py")),
        ("execute_bash", bash("cp /tmp/reproduce.py /w/")),
        ("execute_bash", bash("echo 'print(1)' >> /w/reproduce.py")),
        (
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: /w/reproduce.py\n@@\n-a\n+b\n*** End Patch"}),
        ),
    ];
    for (tool, write) in writes {
        let run = bash("cd /w && python reproduce.py");
        let mut r = Session::new(gate_of_3());
        // Same failure after three library edits: the next run would be stopped.
        struggle(&mut r, &run, 3);
        for round in 0..5 {
            // Each write brings its own result (a cycle of the same two results would be
            // the cycle track's).
            r.step(tool, write.clone(), ok(&format!("done {round}")));
            let v = view(&r, &run);
            assert_eq!(v.kept, Some(Kept::ScriptEdited), "{tool} {write}");
            assert_eq!(v.same, 0, "{tool} {write}");
            let d = r.run("execute_bash", run.clone(), failed(SAME));
            assert!(d.runs(), "{tool} {write}, round {round}: {:?}", d.message);
        }
        r.step(tool, write.clone(), ok("done at last"));
        let d = r.run("execute_bash", run.clone(), ok("all good"));
        assert!(d.runs(), "{tool} {write}: {:?}", d.message);
        assert_eq!(r.stops(), 0, "{tool} {write}: {:?}", r.verdicts);
    }
}

/// The interpreters and runners whose script or test file is read off the command line.
#[test]
fn the_file_a_run_executes_is_read_for_every_interpreter() {
    let cases = [
        ("python3 -u t.py", "t.py"),
        ("PYTHONPATH=. timeout 60 python t.py --flag", "t.py"),
        (
            "python -m pytest tests/test_x.py::TestA::test_b -x",
            "tests/test_x.py",
        ),
        ("pytest -k name tests/test_x.py", "tests/test_x.py"),
        (
            "python -m django test app.tests.test_x",
            "app/tests/test_x.py",
        ),
        (
            "./tests/runtests.py admin_docs.test_utils.TestUtils",
            "admin_docs/test_utils.py",
        ),
        ("python -m pkg.tool input.json", "pkg/tool.py"),
        ("bash run.sh", "run.sh"),
        ("sh -x run.sh", "run.sh"),
        ("node index.js", "index.js"),
        ("./run", "run"),
        ("scripts/check.sh", "scripts/check.sh"),
        ("ruby t.rb", "t.rb"),
        ("perl t.pl", "t.pl"),
        ("go run main.go", "main.go"),
        ("javac Repro.java && java Repro", "Repro.java"),
        ("pylint t.py", "t.py"),
    ];
    for (cmd, file) in cases {
        let run = bash(cmd);
        let mut r = Session::new(gate_of_3());
        struggle(&mut r, &run, 3);
        r.step(
            "Edit",
            json!({"file_path": format!("/w/{file}"), "old_string": "a", "new_string": "b"}),
            ok("edited"),
        );
        assert_eq!(view(&r, &run).kept, Some(Kept::ScriptEdited), "{cmd}");
        let d = r.run("execute_bash", run.clone(), failed(SAME));
        assert!(d.runs(), "{cmd}: {:?}", d.message);
    }
    // Inline code, and the file of another command, are not the script it runs.
    for (cmd, file) in [
        ("python -c 'import t'", "/w/t.py"),
        ("python t.py", "/w/u.py"),
        ("python /w/a/t.py", "/x/a/t.py"),
    ] {
        let run = bash(cmd);
        let edit = json!({"file_path": file, "old_string": "a", "new_string": "b"});
        let mut r = Session::new(gate_of_3());
        // Edited before the struggle began: not a file never edited before either.
        r.step("Edit", edit.clone(), ok("edited"));
        struggle(&mut r, &run, 3);
        r.step("Edit", edit, ok("edited"));
        let d = r.call("execute_bash", run.clone());
        assert!(
            !d.runs(),
            "{cmd} after an edit of {file} should stay stopped"
        );
    }
}

/// A rerun whose count reached the gate runs once more after the agent edits a file it had
/// never edited in the session (it found another place to change); if that run comes back
/// the same, the next one is stopped again.
#[test]
fn an_edit_of_a_file_never_edited_before_lets_the_next_run_through() {
    let run = bash("cd /w && python reproduce.py");
    let mut r = Session::new(gate_of_3());
    struggle(&mut r, &run, 3);
    assert!(view(&r, &run).stops);
    // The installed copy, not the checkout: a path never edited before.
    let installed = json!({"command": "str_replace", "path": "/usr/lib/python3/site-packages/src/lib.py", "old_str": "a", "new_str": "b"});
    r.step("str_replace_editor", installed.clone(), ok("edited"));
    let v = view(&r, &run);
    assert!(
        v.fresh && !v.stops && v.kept == Some(Kept::NewFile),
        "{v:?}"
    );
    let d = r.run("execute_bash", run.clone(), ok("all good"));
    assert!(d.runs(), "{:?}", d.message);
    assert_eq!(r.stops(), 0);

    // The same, and the run comes back the same: the struggle goes on, stopped next time.
    let mut r = Session::new(gate_of_3());
    struggle(&mut r, &run, 3);
    r.step("str_replace_editor", installed.clone(), ok("edited"));
    assert!(r.run("execute_bash", run.clone(), failed(SAME)).runs());
    r.step("str_replace_editor", installed, ok("edited again"));
    let d = r.call("execute_bash", run.clone());
    assert_eq!(d.verdict, Verdict::Ask, "{:?}", r.verdicts);

    // A shell write to a new file counts too (`sed -i` on a configuration file).
    let install = bash("sudo apt-get install maven");
    let timeout = Outcome {
        timed_out: Some(true),
        text: Some("EXECUTION TIMED OUT".into()),
        ..Outcome::default()
    };
    let mut r = Session::new(gate_of_3());
    for _ in 0..4 {
        r.step("execute_bash", install.clone(), timeout.clone());
        r.step("execute_bash", bash("sudo apt-get update"), ok("Hit:1"));
    }
    assert!(!r.call("execute_bash", install.clone()).runs());
    let mut r = Session::new(gate_of_3());
    for _ in 0..4 {
        r.step("execute_bash", install.clone(), timeout.clone());
        r.step("execute_bash", bash("sudo apt-get update"), ok("Hit:1"));
    }
    r.step(
        "execute_bash",
        bash("sudo sed -i 's/archive/nl.archive/' /etc/apt/sources.list"),
        ok(""),
    );
    let d = r.run("execute_bash", install, ok("Setting up maven"));
    assert!(d.runs(), "{:?}", d.message);
}

/// The exit status is part of what a call returned: a run whose text is the same but which
/// now passes is a new result, and starts the count again.
#[test]
fn an_exit_status_change_is_a_new_result() {
    use toolbrake_core::progress::digest;
    assert_ne!(digest(&failed(SAME)), digest(&ok(SAME)));
    let run = bash("cd /w && python reproduce.py");
    let mut r = Session::new(gate_of_3());
    struggle(&mut r, &run, 2);
    r.step(
        "str_replace_editor",
        lib_edit(8),
        ok("The file /w/src/lib.py has been edited."),
    );
    assert!(r.run("execute_bash", run.clone(), ok(SAME)).runs());
    assert_eq!(view(&r, &run).same, 0);
    for i in 9..12 {
        r.step("str_replace_editor", lib_edit(i), ok("edited"));
        assert!(r.run("execute_bash", run.clone(), failed(SAME)).runs());
    }
    assert_eq!(r.stops(), 0, "{:?}", r.verdicts);
}

/// The files a session remembers as edited are bounded, whatever the session's length.
#[test]
fn the_edited_files_are_bounded() {
    let mut r = Session::new(gate_of_3());
    for i in 0..200 {
        r.step(
            "Edit",
            json!({"file_path": format!("/w/f{i}.py"), "old_string": "a", "new_string": "b"}),
            ok("edited"),
        );
    }
    let state = serde_json::to_value(&r.st).unwrap();
    let kept = state["breaker"]["edited_files"].as_array().unwrap();
    assert_eq!(kept.len(), toolbrake_core::breaker::MAX_EDITED_FILES);
}
