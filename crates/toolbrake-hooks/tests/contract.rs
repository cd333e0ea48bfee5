//! Contract tests: payloads as Claude Code and Codex send them in, the exact stdout out.

use serde_json::{json, Value};
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_hooks::{codex_exit_code, handle, outcome_of, Context, Dialect, Unavailable};
use toolbrake_store::{MemoryStore, Store, StoreError};

fn engine(toml: &str) -> Engine {
    Engine::new(Config::from_toml_str(toml, &no_env).unwrap())
}

fn run(dialect: Dialect, engine: &Engine, store: &dyn Store, payload: &Value) -> Option<String> {
    let ctx = Context {
        engine,
        store: Ok(store),
        fail_closed: false,
        observer: None,
        traceparent: None,
    };
    let r = handle(dialect, payload.to_string().as_bytes(), &ctx);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    r.stdout
}

/// The PreToolUse payload observed from Claude Code 2.1.332.
fn claude_pre(id: &str, command: &str, description: &str) -> Value {
    json!({
        "session_id": "c45be149-797d-4c0a-83c6-88c28af53022",
        "transcript_path": "/tmp/cfg/projects/-work-project/c45be149-797d-4c0a-83c6-88c28af53022.jsonl",
        "cwd": "/home/me/project",
        "prompt_id": "cee02e9c-e024-414e-9c46-4656072e47c6",
        "permission_mode": "default",
        "effort": { "level": "medium" },
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command, "description": description },
        "tool_use_id": id
    })
}

#[test]
fn claude_allow_prints_nothing_and_the_third_identical_call_is_denied() {
    let e = engine("");
    let store = MemoryStore::new();
    assert_eq!(
        run(
            Dialect::Claude,
            &e,
            &store,
            &claude_pre("toolu_A1", "echo deny-me", "second")
        ),
        None
    );
    assert_eq!(
        run(
            Dialect::Claude,
            &e,
            &store,
            &claude_pre("toolu_A2", "echo deny-me", "second")
        ),
        None
    );
    let out = run(
        Dialect::Claude,
        &e,
        &store,
        &claude_pre("toolu_A3", "echo deny-me", "second"),
    )
    .unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .to_string();
    let prefix = &reason[reason.find("(call ").unwrap() + 6..reason.find('…').unwrap()];
    assert_eq!(
        out,
        json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": format!("loop brake: tool \"Bash\" called 3 times in a row with identical arguments (call {prefix}…, limit 3); the call was denied before it ran. Change the arguments, call a different tool, or stop.")
        }})
        .to_string()
    );
    assert!(
        !out.contains("\"allow\""),
        "never emit allow: it would skip the user's permission prompt"
    );
}

#[test]
fn advisories_go_to_additional_context_and_asks_to_the_operator() {
    let e = engine("[streak]\nenabled = false");
    let store = MemoryStore::new();
    let mut last = None;
    for i in 1..=7 {
        let p = claude_pre(
            &format!("toolu_{i}"),
            "curl -s https://api.example.com/v1/x",
            &format!("try {i}"),
        );
        last = run(Dialect::Claude, &e, &store, &p);
        let post = json!({"session_id": "c45be149-797d-4c0a-83c6-88c28af53022", "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": p["tool_input"], "tool_use_id": format!("toolu_{i}"),
            "tool_response": {"stdout": "{}", "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false}});
        assert_eq!(run(Dialect::Claude, &e, &store, &post), None);
    }
    let v: Value = serde_json::from_str(&last.unwrap()).unwrap();
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert!(v["hookSpecificOutput"].get("permissionDecision").is_none());
    assert!(v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().starts_with("CONVERGENCE_CHECK: you are repeating yourself — host:api.example.com has come up 7 times"));
    for i in 8..=11 {
        let p = claude_pre(
            &format!("toolu_{i}"),
            "curl -s https://api.example.com/v1/x",
            &format!("try {i}"),
        );
        run(Dialect::Claude, &e, &store, &p);
    }
    let out = run(
        Dialect::Claude,
        &e,
        &store,
        &claude_pre("toolu_12", "curl -s https://api.example.com/v1/x", "again"),
    )
    .unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "ask");
    assert!(v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .contains("REST OF THIS TURN"));
    // The operator approved: the call ran and its PostToolUse arrives.
    let post = json!({"session_id": "c45be149-797d-4c0a-83c6-88c28af53022", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": "curl -s https://api.example.com/v1/x", "description": "again"}, "tool_use_id": "toolu_12",
        "tool_response": {"stdout": "{}", "stderr": "", "interrupted": false}});
    run(Dialect::Claude, &e, &store, &post);
    // Exempt for the rest of the turn: the next identical call is not asked about.
    let out = run(
        Dialect::Claude,
        &e,
        &store,
        &claude_pre("toolu_13", "curl -s https://api.example.com/v1/x", "more"),
    );
    assert!(
        out.as_ref()
            .is_none_or(|o| !o.contains("permissionDecision")),
        "{out:?}"
    );
}

#[test]
fn a_declined_ask_is_settled_by_the_next_event_and_denies_thereafter() {
    let e = engine("[streak]\nenabled = false\n[breaker]\nlimits = { exact = 2 }\nwarn_at = 0\nsummarize_at = 0");
    let store = MemoryStore::new();
    run(Dialect::Claude, &e, &store, &claude_pre("t1", "ls", "x"));
    let asked = run(Dialect::Claude, &e, &store, &claude_pre("t2", "ls", "x")).unwrap();
    assert!(asked.contains("\"ask\""));
    // No PostToolUse for t2 (the user declined): the next call of the session arrives.
    let out = run(Dialect::Claude, &e, &store, &claude_pre("t3", "ls", "x")).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .contains("was NOT granted"));
}

#[test]
fn failures_from_post_tool_use_failure_feed_the_failure_track() {
    let e = engine("[streak]\nenabled = false");
    let store = MemoryStore::new();
    let mut outs = Vec::new();
    for i in 1..=3 {
        let pre = claude_pre(
            &format!("f{i}"),
            "echo failing; exit 3",
            &format!("attempt {i}"),
        );
        run(Dialect::Claude, &e, &store, &pre);
        let post = json!({"session_id": "c45be149-797d-4c0a-83c6-88c28af53022", "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash", "tool_input": pre["tool_input"], "tool_use_id": format!("f{i}"),
            "error": "Exit code 3\nfailing", "is_interrupt": false, "duration_ms": 10});
        outs.push(run(Dialect::Claude, &e, &store, &post));
    }
    assert_eq!(outs[0], None);
    let v: Value = serde_json::from_str(outs[2].as_ref().unwrap()).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["hookEventName"],
        "PostToolUseFailure"
    );
    assert!(v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .contains("has failed 3 times in a row — the command exited 3"));
}

#[test]
fn outcomes_from_payloads() {
    let fail = json!({"error": "Exit code 3\nfailing", "is_interrupt": false});
    assert_eq!(
        outcome_of(Dialect::Claude, "PostToolUseFailure", &fail).exit_code,
        Some(3)
    );
    let mcp = json!({"error": "MCP error -32602: Input validation error", "is_interrupt": false});
    assert_eq!(
        outcome_of(Dialect::Claude, "PostToolUseFailure", &mcp).is_error,
        Some(true)
    );
    let interrupted = json!({"error": "Interrupted", "is_interrupt": true});
    assert_eq!(
        outcome_of(Dialect::Claude, "PostToolUseFailure", &interrupted).aborted,
        Some(true)
    );
    let mcp_ok = json!({"tool_response": [{"type": "text", "text": "Echo: hi"}]});
    assert_eq!(
        outcome_of(Dialect::Claude, "PostToolUse", &mcp_ok)
            .text
            .as_deref(),
        Some("Echo: hi")
    );
    // Codex: output text only; the exit code is looked for in the text…
    let codex = json!({"tool_response": "failing\n", "tool_use_id": "call_B2"});
    assert_eq!(
        outcome_of(Dialect::Codex, "PostToolUse", &codex).exit_code,
        None
    );
    let codex2 =
        json!({"tool_response": "Process exited with code 3\nfailing\n", "tool_use_id": "call_B2"});
    assert_eq!(
        outcome_of(Dialect::Codex, "PostToolUse", &codex2).exit_code,
        Some(3)
    );
    // …and in the rollout transcript, when there.
    let dir = std::env::temp_dir().join(format!("lb-rollout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rollout = dir.join("rollout.jsonl");
    std::fs::write(
        &rollout,
        concat!(
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"call_B2","output":"Process exited with code 3\nfailing"}}"#,
            "\n"
        ),
    )
    .unwrap();
    assert_eq!(codex_exit_code(&rollout, "call_B2"), Some(3));
    assert_eq!(codex_exit_code(&rollout, "call_ZZ"), None);
    let codex3 =
        json!({"tool_response": "failing\n", "tool_use_id": "call_B2", "transcript_path": rollout});
    assert_eq!(
        outcome_of(Dialect::Codex, "PostToolUse", &codex3).exit_code,
        Some(3)
    );
}

#[test]
fn user_prompt_resets_the_session_and_its_sub_agents_and_session_end_forgets() {
    let e = engine("");
    let store = MemoryStore::new();
    let mut sub = claude_pre("s1", "ls", "x");
    sub["agent_id"] = json!("agent-7");
    run(Dialect::Claude, &e, &store, &sub);
    run(Dialect::Claude, &e, &store, &claude_pre("m1", "ls", "x"));
    assert_eq!(
        store.list().unwrap().len(),
        2,
        "the sub-agent has its own session"
    );
    let prompt = json!({"session_id": "c45be149-797d-4c0a-83c6-88c28af53022", "hook_event_name": "UserPromptSubmit", "prompt": "run the commands"});
    run(Dialect::Claude, &e, &store, &prompt);
    for s in store.list().unwrap() {
        // Both engines start afresh; the operator's timeline of past decisions stays.
        let fresh = toolbrake_core::SessionState::default();
        assert_eq!(
            (
                &s.state.streak,
                &s.state.breaker,
                s.state.open_calls(),
                s.state.stopped()
            ),
            (&fresh.streak, &fresh.breaker, 0, 0),
            "{} was reset",
            s.key
        );
    }
    let end = json!({"session_id": "c45be149-797d-4c0a-83c6-88c28af53022", "hook_event_name": "SessionEnd", "reason": "other"});
    run(Dialect::Claude, &e, &store, &end);
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn the_codex_payload_is_judged_the_same_way() {
    let e = engine("");
    let store = MemoryStore::new();
    let pre = |id: &str| {
        json!({"session_id": "01a227f8-32d2-7db0-bfba-fa7b089d44da", "turn_id": "01a227f8-32ee-77b3-8e1f-f48da432727e",
            "transcript_path": "/nonexistent/rollout.jsonl", "cwd": "/home/me/project", "hook_event_name": "PreToolUse",
            "model": "mock-model", "permission_mode": "bypassPermissions", "tool_name": "Bash",
            "tool_input": {"command": "echo deny-me"}, "tool_use_id": id})
    };
    assert_eq!(run(Dialect::Codex, &e, &store, &pre("call_A1")), None);
    assert_eq!(run(Dialect::Codex, &e, &store, &pre("call_A2")), None);
    let out = run(Dialect::Codex, &e, &store, &pre("call_B2")).unwrap();
    assert!(out.contains("\"permissionDecision\":\"deny\""));
}

#[test]
fn when_toolbrake_fails_the_hook_fails_open_or_closed_as_configured() {
    let e = engine("");
    let pre = claude_pre("x", "ls", "d").to_string();
    let locked = Unavailable::Store(StoreError::unavailable(
        "sqlite /x/state.db",
        "database is locked",
    ));
    let open = Context {
        engine: &e,
        store: Err(&locked),
        fail_closed: false,
        observer: None,
        traceparent: None,
    };
    let r = handle(Dialect::Claude, pre.as_bytes(), &open);
    assert_eq!(
        r.stdout, None,
        "fail-open: the normal permission flow applies"
    );
    assert_eq!(
        r.warnings,
        ["could not handle PreToolUse: sqlite /x/state.db: database is locked"]
    );
    let closed = Context {
        engine: &e,
        store: Err(&locked),
        fail_closed: true,
        observer: None,
        traceparent: None,
    };
    let r = handle(Dialect::Claude, pre.as_bytes(), &closed);
    let v: Value = serde_json::from_str(r.stdout.as_ref().unwrap()).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .contains("fail_closed"));
    // A corrupt payload never reaches the engine, and never echoes its content.
    let store = MemoryStore::new();
    let ok_store = Context {
        engine: &e,
        store: Ok(&store),
        fail_closed: false,
        observer: None,
        traceparent: None,
    };
    let r = handle(
        Dialect::Claude,
        b"{\"hook_event_name\": \"PreToolUse\", \"tool_input\": {\"command\": \"sk-secret",
        &ok_store,
    );
    assert_eq!(r.stdout, None);
    assert!(!r.warnings[0].contains("sk-secret"));
    // Post events are never refused, even fail-closed.
    let post = json!({"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "x"}).to_string();
    assert_eq!(
        handle(Dialect::Claude, post.as_bytes(), &closed).stdout,
        None
    );
}

/// Claude Code's PostToolUse for a call: `tool_response` as the host sends it.
fn claude_post(id: &str, tool: &str, input: Value, response: Value) -> Value {
    json!({
        "session_id": "progress-session",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/home/me/project",
        "hook_event_name": "PostToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_response": response,
        "tool_use_id": id
    })
}

fn claude_pre_tool(id: &str, tool: &str, input: Value) -> Value {
    json!({
        "session_id": "progress-session",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/home/me/project",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": id
    })
}

fn denied(out: &Option<String>) -> bool {
    out.as_deref()
        .is_some_and(|o| o.contains("\"permissionDecision\":\"deny\""))
}

#[test]
fn claude_outputs_reach_the_progress_signal() {
    let e = engine("");
    let store = MemoryStore::new();
    // A structured result with no text field (a file read): new content each time is
    // progress, so the third identical Read runs.
    let read = json!({"file_path": "/repo/log.txt"});
    for i in 0..4 {
        let id = format!("toolu_R{i}");
        let pre = run(
            Dialect::Claude,
            &e,
            &store,
            &claude_pre_tool(&id, "Read", read.clone()),
        );
        assert!(!denied(&pre), "read {i}: {pre:?}");
        let response = json!({"type": "text", "file": {"filePath": "/repo/log.txt", "content": format!("line {i}: build step {i}")}});
        run(
            Dialect::Claude,
            &e,
            &store,
            &claude_post(&id, "Read", read.clone(), response),
        );
    }
    // The same Bash output every time is a loop: the third call is denied, and says why.
    let bash = json!({"command": "ls missing/"});
    let mut outs = Vec::new();
    for i in 0..3 {
        let id = format!("toolu_B{i}");
        let pre = run(
            Dialect::Claude,
            &e,
            &store,
            &claude_pre_tool(&id, "Bash", bash.clone()),
        );
        outs.push(pre.clone());
        if !denied(&pre) {
            let response = json!({"stdout": "", "stderr": "ls: cannot access 'missing/': No such file or directory", "interrupted": false});
            run(
                Dialect::Claude,
                &e,
                &store,
                &claude_post(&id, "Bash", bash.clone(), response),
            );
        }
    }
    assert!(!denied(&outs[0]) && !denied(&outs[1]));
    let third = outs[2].as_deref().unwrap();
    assert!(denied(&outs[2]), "{third}");
    assert!(
        third.contains("The last 2 identical calls returned the same result."),
        "{third}"
    );
}

/// A payload naming a FIFO (or a device) as its transcript never hangs the hook: only
/// regular files are read.
#[test]
fn a_transcript_path_that_is_not_a_regular_file_never_blocks() {
    let dir = std::env::temp_dir().join(format!("lb-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("rollout.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for path in [
        fifo.clone(),
        std::path::PathBuf::from("/dev/zero"),
        dir.clone(),
    ] {
        let payload = json!({
            "session_id": "fifo", "hook_event_name": "PostToolUse", "tool_name": "shell",
            "tool_input": {"command": ["bash", "-lc", "false"]},
            "tool_response": "failing\n", "tool_use_id": "call_F1",
            "transcript_path": path,
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let e = engine("");
            let store = MemoryStore::new();
            // The call first, then its outcome.
            let pre = json!({"session_id": "fifo", "hook_event_name": "PreToolUse", "tool_name": "shell",
                "tool_input": {"command": ["bash", "-lc", "false"]}, "tool_use_id": "call_F1"});
            run(Dialect::Codex, &e, &store, &pre);
            let _ = tx.send(outcome_of(Dialect::Codex, "PostToolUse", &payload).exit_code);
            run(Dialect::Codex, &e, &store, &payload);
            let _ = tx.send(None);
        });
        let first = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(
            first,
            Ok(None),
            "{}: the hook hung or read it",
            path.display()
        );
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Payloads without `tool_use_id`: each PreToolUse is a call of its own (identical calls
/// are counted one by one), and a post event finds its call by tool and arguments.
#[test]
fn payloads_without_a_call_id_count_every_invocation() {
    let e = engine("");
    let store = MemoryStore::new();
    let payload = |event: &str| {
        json!({"session_id": "no-ids", "hook_event_name": event, "tool_name": "Bash",
               "tool_input": {"command": "cat missing.txt"},
               "tool_response": {"stdout": "", "stderr": "cat: missing.txt: No such file"}})
    };
    let first = run(Dialect::Claude, &e, &store, &payload("PreToolUse"));
    assert_eq!(first, None);
    run(Dialect::Claude, &e, &store, &payload("PostToolUse"));
    assert_eq!(
        run(Dialect::Claude, &e, &store, &payload("PreToolUse")),
        None
    );
    run(Dialect::Claude, &e, &store, &payload("PostToolUse"));
    let third = run(Dialect::Claude, &e, &store, &payload("PreToolUse")).unwrap();
    assert!(third.contains("\"permissionDecision\":\"deny\""), "{third}");
    // Every post found its call: nothing is left open but the denied one.
    let st = store.get("no-ids").unwrap().unwrap();
    assert_eq!(st.open_call_ids().count(), 1);
}

#[test]
fn a_shell_fetch_is_sent_to_the_hosts_fetch_tool_on_the_first_call() {
    let e = engine("[breaker]\nfetch_tool = \"WebFetch\"");
    let store = MemoryStore::new();
    let out = run(
        Dialect::Claude,
        &e,
        &store,
        &claude_pre(
            "toolu_F1",
            "curl -s https://api.example.com/v1/items | jq .",
            "fetch",
        ),
    )
    .unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        reason.contains("SHELL_HTTP_BLOCKED: this Bash call fetches over HTTP (curl)"),
        "{reason}"
    );
    assert!(
        reason.contains(
            "Use the `WebFetch` tool instead, with url \"https://api.example.com/v1/items\""
        ),
        "{reason}"
    );
    // Local fetches and ordinary commands run.
    for (id, cmd) in [
        ("toolu_F2", "curl -s http://localhost:3000/health"),
        ("toolu_F3", "ls -la"),
    ] {
        assert_eq!(
            run(Dialect::Claude, &e, &store, &claude_pre(id, cmd, "x")),
            None,
            "{cmd}"
        );
    }
    // Codex's shell tool too.
    let codex = json!({"session_id": "01a227f8-32d2-7db0-bfba-fa7b089d44da", "turn_id": "t1",
        "transcript_path": "/nonexistent/rollout.jsonl", "cwd": "/home/me/project", "hook_event_name": "PreToolUse",
        "model": "mock-model", "permission_mode": "bypassPermissions", "tool_name": "Bash",
        "tool_input": {"command": "wget -qO- https://example.com/page"}, "tool_use_id": "call_F1"});
    let out = run(Dialect::Codex, &e, &store, &codex).unwrap();
    assert!(out.contains("SHELL_HTTP_BLOCKED"), "{out}");
}

/// A Gemini CLI payload (hooks reference): no call id; `timestamp` in ISO 8601.
fn gemini(event: &str, extra: Value) -> Value {
    let mut v = json!({"session_id": "gem-1", "transcript_path": "/tmp/g.json", "cwd": "/home/me/p",
        "hook_event_name": event, "timestamp": "2026-11-30T06:00:00.000Z"});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn gemini_the_third_identical_shell_call_is_denied_in_its_dialect() {
    let e = engine("");
    let store = MemoryStore::new();
    let pre = gemini(
        "BeforeTool",
        json!({"tool_name": "run_shell_command", "tool_input": {"command": "ls /nope"}}),
    );
    assert_eq!(run(Dialect::Gemini, &e, &store, &pre), None);
    assert_eq!(run(Dialect::Gemini, &e, &store, &pre), None);
    let out: Value =
        serde_json::from_str(&run(Dialect::Gemini, &e, &store, &pre).unwrap()).unwrap();
    assert_eq!(out["decision"], "deny");
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .starts_with("loop brake: tool \"run_shell_command\" called 3 times"),
        "{out}"
    );
    assert!(out.get("hookSpecificOutput").is_none());
    // A new prompt starts afresh.
    assert_eq!(
        run(
            Dialect::Gemini,
            &e,
            &store,
            &gemini("BeforeAgent", json!({"prompt": "go on"}))
        ),
        None
    );
    assert_eq!(run(Dialect::Gemini, &e, &store, &pre), None);
}

#[test]
fn gemini_calls_without_ids_pair_with_their_results_one_by_one() {
    let e = engine("[breaker]\nfail_warn_at = 2\n");
    let store = MemoryStore::new();
    let pre = gemini(
        "BeforeTool",
        json!({"tool_name": "run_shell_command", "tool_input": {"command": "pytest -x"}}),
    );
    // Two identical calls in flight at once (parallel function calls), then both results.
    assert_eq!(run(Dialect::Gemini, &e, &store, &pre), None);
    assert_eq!(run(Dialect::Gemini, &e, &store, &pre), None);
    let failed = gemini(
        "AfterTool",
        json!({"tool_name": "run_shell_command", "tool_input": {"command": "pytest -x"},
        "tool_response": {"llmContent": "Command: pytest -x\nOutput: 1 failed\nExit Code: 1", "returnDisplay": "1 failed"}}),
    );
    assert_eq!(run(Dialect::Gemini, &e, &store, &failed), None);
    let out: Value =
        serde_json::from_str(&run(Dialect::Gemini, &e, &store, &failed).unwrap()).unwrap();
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "AfterTool");
    assert!(
        out["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("has failed 2 times in a row"),
        "{out}"
    );
    // Both results were paired: nothing is left open, so the next identical call is the
    // third in a row and is refused.
    let st = store.get("gem-1").unwrap().unwrap();
    assert_eq!(st.open_calls(), 0);
    assert!(run(Dialect::Gemini, &e, &store, &pre)
        .unwrap()
        .contains("\"decision\":\"deny\""));
}

#[test]
fn gemini_outcomes_read_errors_and_exit_codes() {
    let err = gemini(
        "AfterTool",
        json!({"tool_name": "read_file", "tool_input": {"path": "x"},
        "tool_response": {"llmContent": "", "returnDisplay": "", "error": {"message": "File not found: x", "type": "FILE_NOT_FOUND"}}}),
    );
    let o = outcome_of(Dialect::Gemini, "AfterTool", &err);
    assert_eq!(
        (o.is_error, o.error_code.as_deref(), o.text.as_deref()),
        (
            Some(true),
            Some("FILE_NOT_FOUND"),
            Some("File not found: x")
        )
    );
    let ok = gemini(
        "AfterTool",
        json!({"tool_name": "run_shell_command", "tool_input": {"command": "true"},
        "tool_response": {"llmContent": [{"text": "Command: true\nExit Code: 0"}], "returnDisplay": ""}}),
    );
    let o = outcome_of(Dialect::Gemini, "AfterTool", &ok);
    assert_eq!((o.exit_code, o.is_error), (Some(0), None));
}

#[test]
fn gemini_an_ask_is_refused_saying_the_host_cannot_ask() {
    let e = engine("[streak]\nenabled = false\n[breaker]\nlimits = { exact = 2, cmd = 2 }\nwarn_at = 0\nsummarize_at = 0\n");
    let store = MemoryStore::new();
    let pre = gemini(
        "BeforeTool",
        json!({"tool_name": "web_fetch", "tool_input": {"prompt": "Summarize https://example.com/a"}}),
    );
    assert_eq!(run(Dialect::Gemini, &e, &store, &pre), None);
    let out: Value =
        serde_json::from_str(&run(Dialect::Gemini, &e, &store, &pre).unwrap()).unwrap();
    assert_eq!(out["decision"], "deny");
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .starts_with(toolbrake_hooks::GEMINI_CANNOT_ASK),
        "{out}"
    );
}

/// Claude Code's Bash and Gemini CLI's run_shell_command send a fresh `description` (and a
/// `timeout`) with the same command: in toolbrake mode the streak brake sees through them,
/// and the third run of the command is refused; seed mode keeps the seed's full-argument
/// identity, so there the calls are all different.
#[test]
fn the_streak_sees_through_a_fresh_description_and_timeout() {
    let descriptions = ["Run the tests", "Run the test suite again", "Re-run tests"];
    for (toml, refused) in [("", true), ("[streak]\nprogress = false\n", false)] {
        let e = engine(toml);
        let store = MemoryStore::new();
        let mut outs = Vec::new();
        for (i, d) in descriptions.iter().enumerate() {
            let mut pre = claude_pre(&format!("toolu_D{i}"), "npm test", d);
            pre["tool_input"]["timeout"] = json!(60_000 + i * 1000);
            outs.push(run(Dialect::Claude, &e, &store, &pre));
        }
        assert_eq!(outs[..2], [None, None], "{toml}");
        match (&outs[2], refused) {
            (Some(out), true) => assert!(
                out.contains("\"permissionDecision\":\"deny\"")
                    && out.contains("called 3 times in a row with identical arguments"),
                "{out}"
            ),
            (None, false) => {}
            (other, _) => panic!("{toml:?}: {other:?}"),
        }

        let e = engine(toml);
        let store = MemoryStore::new();
        let mut outs = Vec::new();
        for d in descriptions {
            let pre = gemini(
                "BeforeTool",
                json!({"tool_name": "run_shell_command",
                       "tool_input": {"command": "pytest -x", "description": d}}),
            );
            outs.push(run(Dialect::Gemini, &e, &store, &pre));
        }
        assert_eq!(outs[..2], [None, None], "{toml}");
        match (&outs[2], refused) {
            (Some(out), true) => assert!(out.contains("\"decision\":\"deny\""), "{out}"),
            (None, false) => {}
            (other, _) => panic!("{toml:?}: {other:?}"),
        }
    }
}
