//! The protocol, line by line, as docs/protocol.md specifies it.

use serde_json::{json, Value};
use std::sync::Arc;
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_protocol::import::{ClaudeCode, Codex, Importer, Trajectory};
use toolbrake_protocol::report::Report;
use toolbrake_protocol::{run, Handled, Processor, Sink};
use toolbrake_store::MemoryStore;

struct Collect(Vec<Handled>);

impl Sink for Collect {
    fn handled(&mut self, h: &Handled) -> std::io::Result<()> {
        self.0.push(h.clone());
        Ok(())
    }
}

fn processor(toml: &str) -> Processor {
    Processor::new(
        Engine::new(Config::from_toml_str(toml, &no_env).unwrap()),
        Arc::new(MemoryStore::new()),
    )
}

fn replay_lines(toml: &str, input: &str) -> Vec<String> {
    replay_bytes(toml, input.as_bytes(), 16 << 20)
}

fn replay_bytes(toml: &str, input: &[u8], max: usize) -> Vec<String> {
    let mut p = processor(toml);
    let mut out = Collect(Vec::new());
    run(input, None, &mut p, max, &mut out).unwrap();
    out.0.into_iter().map(|h| h.line).collect()
}

fn v(line: &str) -> Value {
    serde_json::from_str(line).unwrap()
}

#[test]
fn the_example_of_the_spec_gives_exactly_its_output() {
    let input = r#"{"event":"call","session":"s1","id":"1","tool":"bash","args":{"command":"curl -s https://api.example.com/x","description":"1st"}}
{"event":"result","id":"1","outcome":{"exit_code":0,"text":"{...}"}}
{"event":"user","session":"s1"}
"#;
    assert_eq!(
        replay_lines("", input),
        [
            r#"{"id":"1","verdict":"allow","engine":null,"code":null,"message":null,"hits":[],"advisories":[]}"#,
            r#"{"id":"1","advisories":[],"failure":null}"#,
            r#"{"session":"s1","ok":true}"#,
        ]
    );
}

/// The breaker's gate alone: with the streak on, it refuses the third of these calls
/// first (a fresh `description` does not make a new call).
const BREAKER_ONLY: &str = "[streak]\nenabled = false\n";

fn curl_call(id: u32, session: &str) -> String {
    let description = ["1st", "2nd", "3rd"][id as usize % 3];
    json!({"event": "call", "session": session, "id": id.to_string(), "tool": "bash",
           "args": {"command": "curl -s https://api.example.com/v1/x", "description": description}})
    .to_string()
}

fn ok_result(id: u32) -> String {
    json!({"event": "result", "id": id.to_string(), "outcome": {"exit_code": 0, "text": "ok"}})
        .to_string()
}

fn eleven_calls(session: &str) -> String {
    let mut s = String::new();
    for i in 1..=11 {
        s.push_str(&curl_call(i, session));
        s.push('\n');
        s.push_str(&ok_result(i));
        s.push('\n');
    }
    s
}

#[test]
fn advise_ask_and_answers() {
    let mut input = eleven_calls("s1");
    input.push_str(&curl_call(12, "s1"));
    input.push('\n');
    input.push_str(r#"{"event":"answer","id":"12","approved":true}"#);
    input.push('\n');
    let out = replay_lines(BREAKER_ONLY, &input);
    assert_eq!(out.len(), 24);
    let seventh = v(&out[12]);
    assert_eq!(seventh["verdict"], "advise");
    assert_eq!(seventh["engine"], "breaker");
    assert!(seventh["advisories"][0]
        .as_str()
        .unwrap()
        .starts_with("CONVERGENCE_CHECK:"));
    let ask = v(&out[22]);
    assert_eq!(ask["verdict"], "ask");
    assert!(ask["message"]
        .as_str()
        .unwrap()
        .contains("REST OF THIS TURN"));
    let hit = ask["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["fingerprint"] == "net:api.example.com/v1/x")
        .unwrap();
    assert_eq!(
        hit,
        &json!({"fingerprint": "net:api.example.com/v1/x", "count": 12, "limit": 12, "track": "repeat"})
    );
    let answered = v(&out[23]);
    assert_eq!(answered["id"], "12");
    assert_eq!(answered["verdict"], "allow");
}

#[test]
fn a_declined_ask_is_a_denial_and_its_result_is_ignored() {
    let mut input = eleven_calls("s1");
    input.push_str(&curl_call(12, "s1"));
    input.push_str("\n{\"event\":\"answer\",\"id\":\"12\",\"approved\":false}\n");
    input.push_str(&ok_result(12));
    input.push('\n');
    let out = replay_lines(BREAKER_ONLY, &input);
    let declined = v(&out[23]);
    assert_eq!(declined["verdict"], "deny");
    assert_eq!(declined["code"], "REPEAT_TOOL_BLOCKED");
    assert!(declined["message"]
        .as_str()
        .unwrap()
        .contains("was NOT granted"));
    assert_eq!(
        out[24],
        r#"{"id":"12","ignored":"denied","advisories":[],"failure":null}"#
    );
}

#[test]
fn a_pending_ask_is_settled_by_the_next_event_of_its_session() {
    let mut input = eleven_calls("s1");
    input.push_str(&curl_call(12, "s1"));
    input.push('\n');
    // Another session's event does not settle it…
    input.push_str("{\"event\":\"user\",\"session\":\"other\"}\n");
    // …the result of the asked call itself does.
    input.push_str(&ok_result(12));
    input.push('\n');
    input.push_str("{\"event\":\"answer\",\"id\":\"12\",\"approved\":true}\n");
    let out = replay_lines(BREAKER_ONLY, &input);
    assert_eq!(v(&out[22])["verdict"], "ask");
    assert_eq!(out[23], r#"{"session":"other","ok":true}"#);
    assert_eq!(
        out[24],
        r#"{"id":"12","ignored":"denied","advisories":[],"failure":null,"settled":[{"id":"12","verdict":"deny"}]}"#
    );
    // Too late: the id is no longer open.
    assert!(v(&out[25])["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown call id"));
}

#[test]
fn the_streak_brake_speaks_the_protocol() {
    let call = r#"{"event":"call","session":"s","id":"ID","tool":"search","args":{"q":"weather"}}"#;
    let input = [
        call.replace("ID", "a"),
        call.replace("ID", "b"),
        call.replace("ID", "c"),
    ]
    .join("\n");
    let out = replay_lines("", &input);
    let denied = v(&out[2]);
    assert_eq!(denied["verdict"], "deny");
    assert_eq!(denied["engine"], "streak");
    assert_eq!(denied["code"], "LOOP_BRAKE");
    assert!(denied["message"]
        .as_str()
        .unwrap()
        .starts_with("loop brake: tool \"search\" called 3 times in a row"));
    assert!(
        !out[2].contains("weather"),
        "no argument value in the refusal"
    );
}

#[test]
fn failures_are_classified_and_advised() {
    let mut input = String::new();
    for i in 1..=3 {
        input.push_str(&json!({"event": "call", "session": "s", "id": i.to_string(), "tool": "web_fetch", "args": {"url": "https://api.example.com/missing", "n": i}}).to_string());
        input.push('\n');
        input.push_str(
            &json!({"event": "result", "id": i.to_string(), "outcome": {"status_code": 404}})
                .to_string(),
        );
        input.push('\n');
    }
    let out = replay_lines("", &input);
    assert_eq!(
        v(&out[1])["failure"],
        json!({"reason": "http", "detail": "404"})
    );
    let third = v(&out[5]);
    assert!(third["advisories"][0]
        .as_str()
        .unwrap()
        .contains("has failed 3 times in a row — the request returned HTTP 404"));
}

#[test]
fn every_bad_line_gets_its_own_error_line_and_state_survives() {
    let mut input: Vec<u8> = Vec::new();
    let push = |input: &mut Vec<u8>, s: &str| {
        input.extend_from_slice(s.as_bytes());
        input.push(b'\n');
    };
    push(
        &mut input,
        r#"{"event":"call","session":"s","id":"1","tool":"search","args":{"q":"w"}}"#,
    );
    push(&mut input, "this is not json");
    push(&mut input, r#"{"event":"call","id":"2","tool":"t"}"#);
    push(
        &mut input,
        r#"{"event":"call","session":"s","id":2,"tool":"t"}"#,
    );
    push(&mut input, r#"{"event":"result","id":"nope"}"#);
    push(&mut input, r#"{"event":"answer","id":"1","approved":true}"#);
    push(&mut input, r#"{"event":"teleport"}"#);
    input.extend_from_slice(b"{\"event\":\"user\",\"session\":\"\xff\"}\n");
    push(
        &mut input,
        &format!(
            r#"{{"event":"call","session":"s","id":"3","tool":"t","args":{{"x":"{}"}}}}"#,
            "y".repeat(5000)
        ),
    );
    push(&mut input, "");
    push(
        &mut input,
        r#"{"event":"call","session":"s","id":"4","tool":"search","args":{"q":"w"}}"#,
    );
    push(
        &mut input,
        r#"{"event":"call","session":"s","id":"5","tool":"search","args":{"q":"w"}}"#,
    );
    let out = replay_bytes("", &input, 4096);
    assert_eq!(out.len(), 12, "exactly one output line per input line");
    let errors: Vec<(u64, String)> = out
        .iter()
        .filter_map(|l| {
            let e = v(l);
            e.get("error").map(|e| {
                (
                    e["line"].as_u64().unwrap(),
                    e["message"].as_str().unwrap().to_string(),
                )
            })
        })
        .collect();
    let lines: Vec<u64> = errors.iter().map(|e| e.0).collect();
    assert_eq!(lines, [2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert!(errors[0].1.starts_with("not JSON"));
    assert_eq!(errors[1].1, "missing required field `session`");
    assert_eq!(errors[2].1, "field `id` must be a string");
    assert!(errors[3].1.contains("unknown call id"));
    assert!(errors[4].1.contains("no ask is pending"));
    assert!(errors[5].1.starts_with("unknown event"));
    assert!(errors[6].1.contains("not valid UTF-8"));
    assert!(errors[7].1.contains("longer than the maximum of 4096"));
    // The state built before the bad lines is intact: call 1 + calls 4, 5 make a streak of 3.
    assert_eq!(v(&out[10])["verdict"], "allow");
    assert_eq!(v(&out[11])["verdict"], "deny");
}

#[test]
fn sub_agents_count_in_their_own_session_and_end_forgets() {
    let call = |id: &str, agent: Option<&str>| {
        let mut c = json!({"event": "call", "session": "s", "id": id, "tool": "search", "args": {"q": "w"}});
        if let Some(a) = agent {
            c["agent"] = json!(a);
        }
        c.to_string()
    };
    let input = [
        call("1", None),
        call("2", Some("sub")),
        call("3", None),
        call("4", Some("sub")),
        r#"{"event":"end","session":"s"}"#.to_string(),
        call("5", None),
        call("6", None),
    ]
    .join("\n");
    let out = replay_lines("", &input);
    let verdicts: Vec<String> = out
        .iter()
        .map(|l| v(l)["verdict"].as_str().unwrap_or("-").to_string())
        .collect();
    // Interleaved main/sub calls never reach 3 in a row within one session key.
    assert_eq!(
        verdicts,
        ["allow", "allow", "allow", "allow", "-", "allow", "allow"]
    );
}

#[test]
fn the_trajectory_importer_replays_and_the_report_counts() {
    let data = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/django-11265.jsonl"
    ))
    .unwrap();
    // The seeds' rules (progress off) stop this run; the report tells waste from new
    // information among what they stop.
    let mut p = processor("[streak]\nprogress = false\n[breaker]\nprogress = false")
        .with_call_digests(true);
    let mut imp = Trajectory::default();
    let mut out = Collect(Vec::new());
    run(&data[..], Some(&mut imp), &mut p, 16 << 20, &mut out).unwrap();
    assert_eq!(p.errors(), 0);
    let mut report = Report::default();
    for h in &out.0 {
        report.add(&h.record);
    }
    let s = &report.sessions[0];
    assert_eq!(s.calls, 50);
    assert_eq!(
        s.first_gate,
        Some(14),
        "gated on the 6th run of the failing script"
    );
    assert_eq!(s.after_gate(), 37);
    assert_eq!(s.longest_repeat, 20);
    assert_eq!((s.waste, s.new_information), (1, 14));
    assert_eq!(report.totals().stopped, 15);
    let text = report.text();
    assert!(
        text.contains("1 session gated (37 calls from the first gate to the end)"),
        "{text}"
    );
    let html = report.html();
    assert!(html.contains("<svg class=\"timeline\"") && html.contains("id=\"histogram\""));
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "no external resources"
    );
    assert!(
        !html.contains("<script"),
        "the page needs no script and fetches nothing"
    );
}

#[test]
fn importers_skip_bad_records_with_counted_warnings() {
    let mut traj = Trajectory::default();
    let mut ev = Vec::new();
    traj.feed(
        b"{\"session\":\"s\",\"seq\":0,\"tool\":\"t\",\"args\":{}",
        &mut ev,
    );
    traj.feed(b"{\"seq\":1}", &mut ev);
    assert!(ev.is_empty());
    assert_eq!(traj.warnings().total(), 2);

    let mut claude = ClaudeCode::new("file");
    let lines = [
        r#"{"type":"user","sessionId":"c1","message":{"role":"user","content":"please list files"}}"#,
        r#"{"type":"assistant","sessionId":"c1","message":{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}}"#,
        r#"{"type":"user","sessionId":"c1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"Exit code 2\nls: cannot access"}]}}"#,
        r#"{"type":"user","sessionId":"c1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"orphan"}]}}"#,
        r#"{"type":"mystery","sessionId":"c1"}"#,
        r#"{"type":"summary","summary":"x"}"#,
        r#"{"type":"assistant","sessionId":"c1","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Task","input":{}}]}"#,
    ];
    let mut ev = Vec::new();
    for l in lines {
        claude.feed(l.as_bytes(), &mut ev);
    }
    claude.finish(&mut ev);
    let kinds: Vec<&str> = ev.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "call", "result", "end"]);
    assert_eq!(ev[2]["outcome"]["exit_code"], 2);
    assert_eq!(claude.warnings().count("results with no call"), 1);
    assert_eq!(claude.warnings().count("records of unknown type"), 1);
    assert_eq!(claude.warnings().count("lines not JSON (truncated?)"), 1);

    let mut codex = Codex::new("rollout.jsonl");
    let lines = [
        r#"{"timestamp":"t","type":"session_meta","payload":{"id":"cx-1","cwd":"/w"}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"run tests"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cargo test\"}","call_id":"call_1"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"Process exited with code 101\nerror: test failed"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"call_7","output":"x"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"ls\"]}","call_id":"call_2"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"call_2","output":"{\"output\":\"a\\nb\",\"metadata\":{\"exit_code\":0}}"}}"#,
    ];
    let mut ev = Vec::new();
    for l in lines {
        codex.feed(l.as_bytes(), &mut ev);
    }
    codex.finish(&mut ev);
    let kinds: Vec<&str> = ev.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "call", "result", "call", "result", "end"]);
    assert_eq!(ev[1]["session"], "cx-1");
    assert_eq!(ev[2]["outcome"]["exit_code"], 101);
    assert_eq!(ev[4]["outcome"]["exit_code"], 0);
    assert_eq!(codex.warnings().count("results with no call"), 1);
}

#[test]
fn a_reused_call_id_is_an_error_while_open_and_a_new_call_once_closed() {
    let call = |cmd: &str| {
        format!(
            r#"{{"event":"call","session":"s","id":"1","tool":"bash","args":{{"command":"{cmd}"}}}}"#
        )
    };
    let result = r#"{"event":"result","id":"1","outcome":{"exit_code":0,"text":"done"}}"#;
    // Open: the same id with other arguments is refused, every time.
    let input = [
        call("ls"),
        call("rm -rf /"),
        call("rm -rf /"),
        call("rm -rf /"),
    ]
    .join("\n");
    let out = replay_lines("", &input);
    assert_eq!(v(&out[0])["verdict"], "allow");
    for line in &out[1..] {
        assert!(
            v(line)["error"]["message"]
                .as_str()
                .unwrap()
                .contains("call id \"1\" is still open with another tool or other arguments"),
            "{line}"
        );
    }
    // The same call through a second seam is judged again, not counted twice.
    let out = replay_lines("", &[call("ls"), call("ls"), call("ls")].join("\n"));
    assert!(out.iter().all(|l| v(l)["verdict"] == "allow"), "{out:?}");
    // Closed: the id names a new call, counted as one.
    let input = [
        call("ls"),
        result.into(),
        call("rm -rf /"),
        result.into(),
        call("rm -rf /"),
        result.into(),
        call("rm -rf /"),
    ]
    .join("\n");
    let verdicts: Vec<String> = replay_lines("", &input)
        .iter()
        .filter_map(|l| v(l)["verdict"].as_str().map(str::to_string))
        .collect();
    assert_eq!(verdicts, ["allow", "allow", "allow", "deny"]);
}

#[test]
fn results_name_their_session_when_an_id_is_open_in_two() {
    let input = r#"{"event":"call","session":"a","id":"1","tool":"t","args":{"n":1}}
{"event":"call","session":"b","id":"1","tool":"t","args":{"n":2}}
{"event":"result","id":"1","outcome":{"is_error":true}}
{"event":"result","id":"1","session":"b","outcome":{"is_error":true}}
{"event":"result","id":"1","outcome":{}}
{"event":"result","id":"1","session":"b","outcome":{}}
"#;
    let out = replay_lines("", input);
    let err = v(&out[2])["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(
        err,
        r#"call id "1" is open in 2 sessions ("a", "b"); name the session: add "session" to this event"#
    );
    assert_eq!(v(&out[3])["failure"]["reason"], "error", "{}", out[3]);
    // Now only session a has it open: no session needed.
    assert_eq!(v(&out[4])["failure"], Value::Null, "{}", out[4]);
    assert_eq!(
        v(&out[5])["error"]["message"],
        r#"unknown call id "1" in session "b""#
    );
}

#[test]
fn a_shell_fetch_is_denied_with_its_code_when_a_fetch_tool_is_configured() {
    let toml = "[breaker]\nfetch_tool = \"web_fetch_file\"";
    let out = replay_lines(toml, &format!("{}\n", curl_call(1, "s1")));
    let d = v(&out[0]);
    assert_eq!(
        (d["verdict"].as_str(), d["code"].as_str()),
        (Some("deny"), Some("SHELL_HTTP_BLOCKED")),
        "{d}"
    );
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("web_fetch_file(url: \"https://"),
        "{d}"
    );
    // Without a replacement tool the same call runs.
    let out = replay_lines("", &format!("{}\n", curl_call(1, "s1")));
    assert_eq!(v(&out[0])["verdict"], "allow");
}

#[test]
fn the_html_report_collapses_runs_explains_itself_and_puts_gated_sessions_first() {
    let mut p = processor("[breaker]\non_limit = \"deny\"\nlimits = { exact = 3, cmd = 3 }\nwarn_at = 0\nsummarize_at = 0\n[streak]\nenabled = false")
        .with_call_digests(true);
    let mut lines = Vec::new();
    // "a-quiet" sorts first by name but drew only advisories-free calls; "b-loop" is gated.
    lines.push(
        json!({"event": "call", "session": "a-quiet", "id": "q", "tool": "read", "args": {"p": 1}})
            .to_string(),
    );
    lines.push(json!({"event": "call", "session": "a-advised", "id": "x0", "tool": "bash", "args": {"command": "python3 t.py"}}).to_string());
    for i in 0..8 {
        let id = format!("c{i}");
        lines.push(json!({"event": "call", "session": "b-loop", "id": id, "tool": "bash",
            "args": {"command": "curl -s 'https://api.example.com/x?api_key=sk-live-abcdef1234567890abcd'"}}).to_string());
        lines.push(json!({"event": "result", "session": "b-loop", "id": id, "outcome": {"exit_code": 22, "text": "curl: (22) The requested URL returned error: 500"}}).to_string());
    }
    let input = lines.join("\n") + "\n";
    let mut out = Collect(Vec::new());
    run(input.as_bytes(), None, &mut p, 16 << 20, &mut out).unwrap();
    let mut report = Report::default();
    for h in &out.0 {
        report.add(&h.record);
    }
    let html = report.html();
    // Six denials with labels that differ only by counts: one line, with its count.
    assert_eq!(html.matches("<li>").count(), 1, "{html}");
    assert!(html.contains("calls 3–8: deny"), "{html}");
    assert!(html.contains("(6 times)"), "{html}");
    // Tooltips name the tool, the redacted arguments and the outcome.
    assert!(html.contains("call 1 · bash · allow"), "{html}");
    assert!(html.contains("outcome: failed"), "{html}");
    assert!(
        !html.contains("sk-live-abcdef1234567890abcd"),
        "never a secret"
    );
    // Failures are marked; the width follows the session; a legend explains the counts.
    assert_eq!(
        html.matches("class=\"fail\"").count(),
        2,
        "only calls that ran can fail: {html}"
    );
    assert!(html.contains("viewBox=\"0 0 116 40\""), "{html}");
    assert!(html.contains("count in the window against its gate"));
    // Gated sessions first.
    let gated = html.find("<b>b-loop</b>").unwrap();
    let advised = html.find("<b>a-advised</b>").unwrap_or(usize::MAX);
    assert!(gated < advised);
}

/// A processor that writes no lines (a report's) answers every event in error with the
/// same error line, leaves the others' lines empty, and records exactly what a processor
/// writing lines records: the report of both is the same.
#[test]
fn without_lines_only_error_lines_are_written_and_the_records_are_the_same() {
    let mut input = eleven_calls("s1");
    input.push_str("{not json\n");
    input.push_str(
        &json!({"event": "result", "id": "nope", "outcome": {"exit_code": 0}}).to_string(),
    );
    input.push('\n');
    input.push_str(&json!({"event": "user", "session": "s1"}).to_string());
    input.push('\n');
    input.push_str(&json!({"event": "end", "session": "s1"}).to_string());
    input.push('\n');
    let handled = |lines: bool| {
        let mut p = processor("").with_call_digests(true).with_lines(lines);
        let mut out = Collect(Vec::new());
        run(input.as_bytes(), None, &mut p, 1 << 20, &mut out).unwrap();
        out.0
    };
    let (with, without) = (handled(true), handled(false));
    assert_eq!(with.len(), without.len());
    assert!(with.iter().filter(|h| h.is_error).count() >= 2);
    let mut reports = (Report::default(), Report::default());
    for (w, wo) in with.iter().zip(&without) {
        assert_eq!(w.is_error, wo.is_error);
        if w.is_error {
            assert_eq!(wo.line, w.line);
        } else {
            assert!(!w.line.is_empty());
            assert_eq!(wo.line, "");
        }
        reports.0.add(&w.record);
        reports.1.add(&wo.record);
    }
    assert_eq!(reports.0.text(), reports.1.text());
}
