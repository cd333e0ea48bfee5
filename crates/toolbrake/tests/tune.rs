//! `toolbrake tune`, driven as a user drives it: the real binary on the bundled recorded
//! runs and on small histories written here.

mod support;
use support::*;

use serde_json::Value;
use std::process::Output;

fn corpus() -> std::path::PathBuf {
    repo().join("examples/trajectories/calls.jsonl.gz")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One session that runs the same search twice and gets the same answer both times (a
/// second run that was waste), then a different search.
const TWICE: &str = r#"{"event":"call","session":"s","id":"1","tool":"search","args":{"q":"weather"}}
{"event":"result","id":"1","outcome":{"text":"sunny"}}
{"event":"call","session":"s","id":"2","tool":"search","args":{"q":"weather"}}
{"event":"result","id":"2","outcome":{"text":"sunny"}}
{"event":"call","session":"s","id":"3","tool":"search","args":{"q":"news"}}
{"event":"result","id":"3","outcome":{"text":"headlines"}}
{"event":"end","session":"s"}
"#;

/// `toolbrake replay --report` of the bundled runs, under a configuration file if given.
fn bundled_report(config: Option<&std::path::Path>) -> String {
    let mut cmd = isolated_bin();
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    let out = cmd
        .args(["replay", "--from", "trajectory", "--report"])
        .arg(corpus())
        .output()
        .unwrap();
    assert_success(&out);
    stdout(&out)
}

/// The number a replay report prints just before `words`.
fn number_before(text: &str, words: &str) -> u64 {
    let at = text
        .find(words)
        .unwrap_or_else(|| panic!("{words:?} in {text}"));
    text[..at]
        .split(|c: char| !c.is_ascii_digit())
        .rfind(|w| !w.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

fn tune_json(args: &[&str], input: &str) -> Value {
    let out = run_with_stdin(
        isolated_bin().arg("tune").args(args).arg("--json"),
        input.as_bytes(),
    );
    assert_success(&out);
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// The default sweep on the bundled runs: about 30 settings, the base first; the frontier
/// is exactly the settings no other beats on both counts; the recommendation keeps its
/// harmful stops within the default budget (1 stop in 50), stops the most waste of those
/// that do, and is printed as TOML.
#[test]
fn the_default_sweep_on_the_bundled_runs_marks_the_frontier_and_recommends_a_harmless_setting() {
    let out = output_with_deadline(
        {
            let mut c = isolated_bin();
            c.args(["tune", "--from", "trajectory", "--json"])
                .arg(corpus());
            c
        },
        600,
    );
    assert_success(&out);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rows = v["settings"].as_array().unwrap();
    assert!((25..=35).contains(&rows.len()), "{} settings", rows.len());
    assert_eq!(rows[0]["name"], "base");
    assert_eq!(rows[0]["changes"], serde_json::json!({}));
    let fig = |r: &Value, k: &str| r[k].as_u64().unwrap();
    for a in rows {
        let beaten = rows.iter().any(|b| {
            fig(b, "waste") >= fig(a, "waste")
                && fig(b, "harmful") <= fig(a, "harmful")
                && (fig(b, "waste") > fig(a, "waste") || fig(b, "harmful") < fig(a, "harmful"))
        });
        assert_eq!(a["frontier"], !beaten, "{a}");
    }
    // Some setting of the sweep does stop new information on this history (so the
    // recommendation is a choice, not the only option).
    assert!(rows.iter().any(|r| fig(r, "harmful") > 0));
    let rec: Vec<&Value> = rows.iter().filter(|r| r["recommended"] == true).collect();
    assert_eq!(rec.len(), 1);
    let rec = rec[0];
    let within = |r: &Value| fig(r, "harmful") * 50 <= fig(r, "stopped");
    assert!(within(rec), "{rec}");
    assert_eq!(v["max_harmful"], "2%");
    let best = rows
        .iter()
        .filter(|r| within(r))
        .map(|r| fig(r, "waste"))
        .max()
        .unwrap();
    assert_eq!(fig(rec, "waste"), best);
    assert!(best > 0, "the recommendation stops waste");
    let toml = v["recommended"]["toml"].as_str().unwrap();
    assert!(toml.starts_with('['), "{toml}");
}

/// The sweep's figures for the base setting are what `toolbrake replay --report` says of
/// the same input: the same replay, the same judge.
#[test]
fn the_base_figures_equal_the_replay_report() {
    let report = bundled_report(None);
    let stopped = number_before(&report, " calls stopped;");
    let gated = number_before(&report, " sessions gated");
    let waste = number_before(&report, " waste (the recorded run");
    let new_info = number_before(&report, " would have brought new information");
    // The sweep of one value that is the base's own: the base alone.
    let v = {
        let out = isolated_bin()
            .args([
                "tune",
                "--from",
                "trajectory",
                "--json",
                "--sweep",
                "streak.max_repeats=3",
            ])
            .arg(corpus())
            .output()
            .unwrap();
        assert_success(&out);
        serde_json::from_str::<Value>(&stdout(&out)).unwrap()
    };
    let base = &v["settings"][0];
    assert_eq!(v["settings"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        (
            base["stopped"].as_u64().unwrap(),
            base["sessions_stopped"].as_u64().unwrap(),
            base["waste"].as_u64().unwrap(),
            base["harmful"].as_u64().unwrap()
        ),
        (stopped, gated, waste, new_info),
        "{report}"
    );
    assert!(stopped > 0 && waste > 0);

    // On a history written here, under a configuration of the user's.
    let dir = tmpdir("tune", "base");
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(&cfg, "[streak]\nmax_repeats = 2\n").unwrap();
    let replay = run_with_stdin(
        isolated_bin()
            .arg("--config")
            .arg(&cfg)
            .args(["replay", "--report"]),
        TWICE.as_bytes(),
    );
    assert_success(&replay);
    let report = stdout(&replay);
    let v = tune_json(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--sweep",
            "max_repeats=2,4",
        ],
        TWICE,
    );
    let base = &v["settings"][0];
    assert_eq!(
        base["waste"].as_u64(),
        Some(number_before(&report, " waste (the recorded run"))
    );
    assert_eq!(base["waste"].as_u64(), Some(1), "{report}");
}

/// A grid of the user's: every value given, the base first, the recommendation the one
/// that stops the waste with no harmful stop.
#[test]
fn a_grid_of_the_users_is_judged_and_the_recommendation_is_printed_as_toml() {
    let v = tune_json(&["--sweep", "streak.max_repeats=2,3,4"], TWICE);
    let rows = v["settings"].as_array().unwrap();
    // 3 is the base's own value: base, 2, 4.
    assert_eq!(rows.len(), 3, "{v}");
    assert_eq!(rows[1]["changes"]["streak"]["max_repeats"], 2);
    assert_eq!(rows[1]["waste"], 1);
    assert_eq!(rows[1]["harmful"], 0);
    assert_eq!(rows[1]["recommended"], true);
    assert_eq!(rows[0]["waste"], 0);
    assert_eq!(v["recommended"]["toml"], "[streak]\nmax_repeats = 2\n");

    let out = run_with_stdin(
        isolated_bin().args(["tune", "--sweep", "streak.max_repeats=2,3,4"]),
        TWICE.as_bytes(),
    );
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains(
            "Recommended: #2 streak.max_repeats=2: 1 waste calls stopped, 0 harmful of 1 stops; saved 33.3% of calls, 5 bytes of output"
        ),
        "{text}"
    );
    assert!(text.contains("[streak]\nmax_repeats = 2"), "{text}");
}

/// `--write` merges the recommendation into the file: its comments and its other tables
/// stay, and the result loads; a missing file is created owner-only.
#[test]
fn write_merges_the_recommendation_keeping_comments_and_other_tables() {
    let dir = tmpdir("tune", "write");
    let cfg = dir.join("toolbrake.toml");
    let original = "# my settings, tuned by hand\n[streak]\n# how many repeats\nmax_repeats = 3 # the default\n\n[store]\nkind = \"memory\"\n";
    std::fs::write(&cfg, original).unwrap();
    let out = run_with_stdin(
        isolated_bin()
            .arg("--config")
            .arg(&cfg)
            .args(["tune", "--sweep", "streak.max_repeats=2,3,4", "--write"])
            .arg(&cfg),
        TWICE.as_bytes(),
    );
    assert_success(&out);
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("# my settings, tuned by hand"), "{text}");
    assert!(text.contains("# how many repeats"), "{text}");
    assert!(text.contains("max_repeats = 2"), "{text}");
    assert!(text.contains("[store]\nkind = \"memory\""), "{text}");
    let check = isolated_bin()
        .args(["config", "check"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_success(&check);
    assert!(
        stdout(&check).contains("max_repeats = 2"),
        "{}",
        stdout(&check)
    );

    // A file that does not exist yet: created, owner-only, and it loads.
    let fresh = dir.join("new.toml");
    let out = run_with_stdin(
        isolated_bin()
            .args(["tune", "--sweep", "max_repeats=2,4", "--write"])
            .arg(&fresh),
        TWICE.as_bytes(),
    );
    assert_success(&out);
    assert_eq!(
        std::fs::read_to_string(&fresh).unwrap().trim(),
        "[streak]\nmax_repeats = 2"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    assert_success(
        &isolated_bin()
            .args(["config", "check"])
            .arg(&fresh)
            .output()
            .unwrap(),
    );
}

/// `--html` writes one self-contained, owner-only page: the frontier chart (an inline SVG
/// with the base and the recommendation marked) beside the table.
#[test]
fn html_writes_the_frontier_chart_beside_the_table() {
    let dir = tmpdir("tune", "html");
    let page = dir.join("tune.html");
    // A second session whose repeated call got something new the second time: stopping it
    // is harmful, so the frontier has two points.
    let progress = r#"{"event":"call","session":"p","id":"1","tool":"run_tests","args":{}}
{"event":"result","id":"1","outcome":{"text":"3 failed"}}
{"event":"call","session":"p","id":"2","tool":"run_tests","args":{}}
{"event":"result","id":"2","outcome":{"text":"all passed"}}
{"event":"end","session":"p"}
"#;
    let out = run_with_stdin(
        isolated_bin()
            .args(["tune", "--sweep", "streak.max_repeats=2,3,4", "--html"])
            .arg(&page),
        format!("{TWICE}{progress}").as_bytes(),
    );
    assert_success(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.contains("<svg id=\"frontier\""), "{html}");
    assert!(html.contains("class=\"marker base\""), "{html}");
    assert!(html.contains("class=\"marker recommended\""), "{html}");
    assert!(html.contains("<polyline class=\"frontier\""), "{html}");
    assert!(html.contains("<table id=\"settings\""), "{html}");
    assert!(html.contains("streak.max_repeats=2"), "{html}");
    for fetch in ["src=", "href=", "<script", "@import", "url("] {
        assert!(!html.contains(fetch), "{fetch} in {html}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&page).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}

/// Without recorded outputs, harm cannot be measured: tune says so and fails.
#[test]
fn a_history_without_outputs_is_refused() {
    let calls_only = r#"{"event":"call","session":"s","id":"1","tool":"search","args":{"q":"w"}}
{"event":"call","session":"s","id":"2","tool":"search","args":{"q":"w"}}
{"event":"result","id":"2","outcome":{}}
{"event":"end","session":"s"}
"#;
    let out = run_with_stdin(isolated_bin().arg("tune"), calls_only.as_bytes());
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("cannot measure harm"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());

    let out = run_with_stdin(isolated_bin().arg("tune"), b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no tool calls"), "{}", stderr(&out));
}

/// Bad input gets replay's errors: the line and the same message, a recorded run without
/// `--from` named with the flag to use, an unreadable file; bad flags are refused.
#[test]
fn bad_input_and_bad_flags_get_clear_errors() {
    let bad = format!(
        "{}not json\n",
        TWICE.lines().next().unwrap().to_owned() + "\n"
    );
    let out = run_with_stdin(isolated_bin().arg("tune"), bad.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    let replay = run_with_stdin(isolated_bin().arg("replay"), bad.as_bytes());
    let replay_line: Value = serde_json::from_str(stdout(&replay).lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "toolbrake: stdin, line 2: {}",
            replay_line["error"]["message"].as_str().unwrap()
        )
    );

    let out = isolated_bin().arg("tune").arg(corpus()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("run `toolbrake tune --from trajectory` on it"),
        "{}",
        stderr(&out)
    );

    let out = isolated_bin()
        .args(["tune", "/nonexistent/runs.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot read /nonexistent/runs.jsonl"),
        "{}",
        stderr(&out)
    );

    let out = isolated_bin()
        .args(["tune", "--from", "nope"])
        .arg(corpus())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown format \"nope\""),
        "{}",
        stderr(&out)
    );

    for (sweep, says) in [
        ("streak.max_repeats=0", "streak.max_repeats = 0"),
        ("max_repeat=3", "is not a setting that takes one value"),
        ("breaker.tools=1", "is not a setting that takes one value"),
        ("streak.max_repeats", "must be KEY=V1,V2"),
        ("window=", "names no value"),
    ] {
        let out = run_with_stdin(
            isolated_bin().args(["tune", "--sweep", sweep]),
            TWICE.as_bytes(),
        );
        assert_eq!(out.status.code(), Some(2), "{sweep}");
        assert!(stderr(&out).contains(says), "{sweep}: {}", stderr(&out));
    }
    let out = run_with_stdin(
        isolated_bin().args([
            "tune",
            "--sweep",
            "window=8",
            "--sweep",
            "breaker.window=12",
        ]),
        TWICE.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("twice"), "{}", stderr(&out));

    // --jobs 0 is refused as replay refuses it.
    let out = isolated_bin()
        .args(["tune", "--jobs", "0"])
        .arg(corpus())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let replay = isolated_bin()
        .args(["replay", "--jobs", "0"])
        .arg(corpus())
        .output()
        .unwrap();
    let tail = |s: &str| s.lines().next().unwrap_or("").to_string();
    assert_eq!(tail(&stderr(&out)), tail(&stderr(&replay)));
    assert!(stderr(&out).contains("--jobs"), "{}", stderr(&out));
}

/// The figures do not depend on how many settings are judged at once.
#[test]
fn the_figures_are_the_same_whatever_the_number_of_jobs() {
    let args = [
        "--from",
        "trajectory",
        "--sweep",
        "unchanged_limit=3,4",
        "--sweep",
        "cycle_limit=2,3",
    ];
    let run = |jobs: &str| {
        let out = isolated_bin()
            .arg("tune")
            .args(args)
            .args(["--json", "--jobs", jobs])
            .arg(corpus())
            .output()
            .unwrap();
        assert_success(&out);
        stdout(&out)
    };
    let one = run("1");
    assert_eq!(one, run("3"));
    let v: Value = serde_json::from_str(&one).unwrap();
    // The base, and the four combinations (one of them changes only unchanged_limit).
    let rows = v["settings"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{v}");

    // The same sweep as a table for people: one row per setting with its figures, the
    // frontier marked, the recommendation named and printed as TOML.
    let out = isolated_bin()
        .arg("tune")
        .args(args)
        .arg(corpus())
        .output()
        .unwrap();
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("base: the configuration from built-in defaults"),
        "{text}"
    );
    for (i, r) in rows.iter().enumerate() {
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{} ", i + 1)))
            .unwrap_or_else(|| panic!("row {} in {text}", i + 1));
        let cells: Vec<&str> = row.split_whitespace().collect();
        let figures = format!(
            "{} {} {} {}",
            r["waste"], r["harmful"], r["stopped"], r["sessions_stopped"]
        );
        assert!(cells.join(" ").contains(&figures), "{row} vs {r}");
        assert_eq!(row.contains('*'), r["frontier"] == true, "{row}");
        assert_eq!(
            row.contains("<- recommended"),
            r["recommended"] == true,
            "{row}"
        );
    }
    assert!(text.contains("(base)"), "{text}");
    if let Some(toml) = v["recommended"]["toml"].as_str().filter(|t| !t.is_empty()) {
        assert!(
            text.contains(&format!("As toolbrake.toml:\n\n{}", toml.trim_end())),
            "{text}"
        );
    }
}

/// Every setting of a sweep is judged as `replay --report` judges its configuration,
/// though `tune` reads each call once for all the settings that read calls alike (here
/// they differ in gates, the window and the streak: all of them).
#[test]
fn each_setting_is_judged_as_the_replay_report_of_its_configuration() {
    let out = isolated_bin()
        .args(["tune", "--from", "trajectory", "--json"])
        .args(["--sweep", "limits.exact=4,24", "--sweep", "window=8,64"])
        .arg(corpus())
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let settings = v["settings"].as_array().unwrap();
    assert_eq!(settings.len(), 5, "{v}");
    let dir = tmpdir("tune", "each");
    let mut stopped_differ = std::collections::BTreeSet::new();
    for (i, (exact, window)) in [(4, 8), (4, 64), (24, 8), (24, 64)].into_iter().enumerate() {
        let cfg = dir.join(format!("{i}.toml"));
        std::fs::write(
            &cfg,
            format!("[breaker]\nwindow = {window}\n[breaker.limits]\nexact = {exact}\n"),
        )
        .unwrap();
        let report = bundled_report(Some(&cfg));
        let setting = settings
            .iter()
            .find(|s| {
                s["changes"]["breaker"]["limits"]["exact"] == exact
                    && s["changes"]["breaker"]["window"] == window
            })
            .unwrap_or_else(|| panic!("exact={exact} window={window} in {v}"));
        let figures = (
            setting["stopped"].as_u64().unwrap(),
            setting["waste"].as_u64().unwrap(),
            setting["harmful"].as_u64().unwrap(),
        );
        assert_eq!(
            figures,
            (
                number_before(&report, " calls stopped;"),
                number_before(&report, " waste (the recorded run"),
                number_before(&report, " would have brought new information"),
            ),
            "exact={exact} window={window}: {report}"
        );
        stopped_differ.insert(figures.0);
    }
    // The gates changed what was stopped: the settings were not judged alike.
    assert!(stopped_differ.len() > 1, "{stopped_differ:?}");
}

/// `--write` with nothing to change leaves a missing file missing, and says so truly.
#[test]
fn write_with_nothing_to_change_creates_no_file() {
    let dir = tmpdir("tune", "nothing-to-write");
    let history = dir.join("history.jsonl");
    std::fs::write(
        &history,
        concat!(
            r#"{"event":"call","session":"s","id":"1","tool":"t","args":{"a":1}}"#,
            "\n",
            r#"{"event":"result","session":"s","id":"1","outcome":{"text":"x"}}"#,
            "\n",
            r#"{"event":"call","session":"s","id":"2","tool":"t","args":{"a":2}}"#,
            "\n",
            r#"{"event":"result","session":"s","id":"2","outcome":{"text":"y"}}"#,
            "\n",
        ),
    )
    .unwrap();
    let target = dir.join("toolbrake.toml");
    let out = isolated_bin()
        .arg("tune")
        .arg("--write")
        .arg(&target)
        .arg(&history)
        .output()
        .unwrap();
    assert_success(&out);
    assert!(!target.exists());
    let err = stderr(&out);
    assert!(err.contains("nothing to write"), "{err}");
    assert!(!err.contains("left as it is"), "{err}");
}
