//! Contract tests for the second round of hosts: payloads in, the exact stdout out.
//!
//! Cursor has no CLI in a package registry, so its payloads here are the ones Cursor
//! documents for `.cursor/hooks.json` (cursor.com/docs/agent/hooks). GitHub Copilot CLI's,
//! Qwen Code's, Cline's and Factory Droid's are the ones their real programs sent in the
//! end-to-end tests (`hosts_e2e.rs`).

use serde_json::{json, Value};
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_hooks::{
    handle, handle_event, outcome_of, Context, Dialect, PayloadError, Unavailable,
};
use toolbrake_store::{MemoryStore, Store};

fn engine(toml: &str) -> Engine {
    Engine::new(Config::from_toml_str(toml, &no_env).unwrap())
}

fn ctx<'a>(engine: &'a Engine, store: &'a dyn Store) -> Context<'a> {
    Context {
        engine,
        store: Ok(store),
        fail_closed: false,
        observer: None,
        traceparent: None,
    }
}

fn run(dialect: Dialect, e: &Engine, store: &dyn Store, payload: &Value) -> Option<Value> {
    run_event(dialect, None, e, store, payload)
}

fn run_event(
    dialect: Dialect,
    event: Option<&str>,
    e: &Engine,
    store: &dyn Store,
    payload: &Value,
) -> Option<Value> {
    let r = handle_event(
        dialect,
        event,
        payload.to_string().as_bytes(),
        &ctx(e, store),
    );
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    r.stdout.map(|s| serde_json::from_str(&s).unwrap())
}

const REFUSAL: &str = "loop brake: tool";

// --- Cursor -----------------------------------------------------------------------------

fn cursor_base(event: &str) -> Value {
    json!({
        "conversation_id": "668320d2-2fd8-4888-b33c-2a466fec86e7",
        "generation_id": "490b90b7-a2ce-4c2c-bb76-cb77b125df2f",
        "model": "claude-sonnet-4",
        "hook_event_name": event,
        "cursor_version": "2.0.77",
        "workspace_roots": ["/home/me/project"],
        "user_email": "me@example.com",
        "transcript_path": null
    })
}

fn cursor_pre(id: &str, command: &str) -> Value {
    let mut p = cursor_base("preToolUse");
    p["tool_name"] = json!("Shell");
    p["tool_input"] = json!({"command": command, "working_directory": "/home/me/project"});
    p["tool_use_id"] = json!(id);
    p["cwd"] = json!("/home/me/project");
    p
}

fn cursor_post(id: &str, command: &str, output: &str) -> Value {
    let mut p = cursor_base("postToolUse");
    p["tool_name"] = json!("Shell");
    p["tool_input"] = json!({"command": command, "working_directory": "/home/me/project"});
    p["tool_output"] = json!(json!({"output": output, "exitCode": 0}).to_string());
    p["tool_use_id"] = json!(id);
    p["cwd"] = json!("/home/me/project");
    p["duration"] = json!(120);
    p
}

#[test]
fn cursor_the_third_identical_call_is_denied_with_a_message_for_the_agent_and_the_user() {
    let e = engine("");
    let s = MemoryStore::new();
    for i in 1..=2 {
        let id = format!("tool_{i}");
        assert_eq!(
            run(Dialect::Cursor, &e, &s, &cursor_pre(&id, "make test")),
            None
        );
        assert_eq!(
            run(
                Dialect::Cursor,
                &e,
                &s,
                &cursor_post(&id, "make test", "ok")
            ),
            None
        );
    }
    let out = run(Dialect::Cursor, &e, &s, &cursor_pre("tool_3", "make test")).unwrap();
    assert_eq!(out["permission"], "deny");
    let agent = out["agent_message"].as_str().unwrap();
    assert!(
        agent.starts_with(r#"loop brake: tool "Shell" called 3 times in a row"#),
        "{agent}"
    );
    assert_eq!(out["user_message"], out["agent_message"]);
    assert_eq!(out.as_object().unwrap().len(), 3, "{out}");
}

#[test]
fn cursor_a_call_whose_output_changes_is_not_stopped() {
    let e = engine("");
    let s = MemoryStore::new();
    for i in 1..=6 {
        let id = format!("tool_{i}");
        assert_eq!(
            run(Dialect::Cursor, &e, &s, &cursor_pre(&id, "cat log")),
            None,
            "call {i}"
        );
        run(
            Dialect::Cursor,
            &e,
            &s,
            &cursor_post(&id, "cat log", &format!("line {i}")),
        );
    }
}

#[test]
fn cursor_before_shell_execution_is_served_too_and_pairs_without_ids() {
    let e = engine("");
    let s = MemoryStore::new();
    let before = |cmd: &str| {
        let mut p = cursor_base("beforeShellExecution");
        p["command"] = json!(cmd);
        p["cwd"] = json!("/home/me/project");
        p["sandbox"] = json!(false);
        p
    };
    let after = |cmd: &str, out: &str| {
        let mut p = cursor_base("afterShellExecution");
        p["command"] = json!(cmd);
        p["output"] = json!(out);
        p["duration"] = json!(80);
        p["sandbox"] = json!(false);
        p
    };
    for _ in 0..2 {
        assert_eq!(run(Dialect::Cursor, &e, &s, &before("npm test")), None);
        assert_eq!(
            run(Dialect::Cursor, &e, &s, &after("npm test", "1 failed")),
            None
        );
    }
    let out = run(Dialect::Cursor, &e, &s, &before("npm test")).unwrap();
    assert_eq!(out["permission"], "deny");
    assert!(out["agent_message"].as_str().unwrap().starts_with(REFUSAL));
}

#[test]
fn cursor_asks_where_it_can_and_refuses_saying_so_where_it_cannot() {
    // The breaker's exact gate at 2 with the streak out of the way: the second identical
    // call reaches the gate, which asks.
    let toml = "[streak]\nmax_repeats = 10\n[breaker.limits]\nexact = 2\ncmd = 2\n";
    let e = engine(toml);
    let s = MemoryStore::new();
    run(Dialect::Cursor, &e, &s, &cursor_pre("t1", "ls"));
    run(Dialect::Cursor, &e, &s, &cursor_post("t1", "ls", "a"));
    let out = run(Dialect::Cursor, &e, &s, &cursor_pre("t2", "ls")).unwrap();
    assert_eq!(
        out["permission"], "deny",
        "preToolUse documents no ask: {out}"
    );
    assert!(out["agent_message"]
        .as_str()
        .unwrap()
        .starts_with(toolbrake_hooks::cursor::CURSOR_CANNOT_ASK));

    let s = MemoryStore::new();
    let before = |cmd: &str| {
        let mut p = cursor_base("beforeShellExecution");
        p["command"] = json!(cmd);
        p
    };
    let mut after = cursor_base("afterShellExecution");
    after["command"] = json!("ls");
    after["output"] = json!("a");
    run(Dialect::Cursor, &e, &s, &before("ls"));
    run(Dialect::Cursor, &e, &s, &after);
    let out = run(Dialect::Cursor, &e, &s, &before("ls")).unwrap();
    assert_eq!(out["permission"], "ask", "{out}");
}

#[test]
fn cursor_failures_are_recorded_and_advised_as_additional_context() {
    let e = engine("");
    let s = MemoryStore::new();
    let fail = |id: &str| {
        let mut p = cursor_base("postToolUseFailure");
        p["tool_name"] = json!("Shell");
        p["tool_input"] = json!({"command": "curl -f http://h/x"});
        p["tool_use_id"] = json!(id);
        p["error_message"] = json!("exit 22");
        p["failure_type"] = json!("error");
        p["is_interrupt"] = json!(false);
        p["duration"] = json!(5);
        p
    };
    let mut advised = None;
    for i in 1..=3 {
        let id = format!("f{i}");
        let mut pre = cursor_pre(&id, "curl -f http://h/x");
        pre["tool_input"] = json!({"command": "curl -f http://h/x", "n": i});
        run(Dialect::Cursor, &e, &s, &pre);
        let mut f = fail(&id);
        f["tool_input"] = pre["tool_input"].clone();
        advised = run(Dialect::Cursor, &e, &s, &f);
    }
    let advised = advised.expect("the third failure is advised");
    assert!(advised["additional_context"]
        .as_str()
        .unwrap()
        .contains("has failed 3 times in a row"));

    let mut timeout = fail("t");
    timeout["failure_type"] = json!("timeout");
    let o = outcome_of(Dialect::Cursor, "postToolUseFailure", &timeout);
    assert_eq!(o.timed_out, Some(true));
    let mut interrupted = fail("i");
    interrupted["is_interrupt"] = json!(true);
    assert_eq!(
        outcome_of(Dialect::Cursor, "postToolUseFailure", &interrupted).aborted,
        Some(true)
    );
}

#[test]
fn cursor_a_new_prompt_starts_afresh_and_fail_closed_denies_in_cursors_words() {
    let e = engine("");
    let s = MemoryStore::new();
    for i in 1..=2 {
        let id = format!("t{i}");
        run(Dialect::Cursor, &e, &s, &cursor_pre(&id, "ls"));
        run(Dialect::Cursor, &e, &s, &cursor_post(&id, "ls", "a"));
    }
    let mut prompt = cursor_base("beforeSubmitPrompt");
    prompt["prompt"] = json!("try again");
    prompt["attachments"] = json!([]);
    assert_eq!(run(Dialect::Cursor, &e, &s, &prompt), None);
    assert_eq!(run(Dialect::Cursor, &e, &s, &cursor_pre("t3", "ls")), None);

    let broken = Unavailable::PayloadUnread;
    let closed = Context {
        engine: &e,
        store: Err(&broken),
        fail_closed: true,
        observer: None,
        traceparent: None,
    };
    let r = handle(
        Dialect::Cursor,
        cursor_pre("x", "ls").to_string().as_bytes(),
        &closed,
    );
    let out: Value = serde_json::from_str(&r.stdout.unwrap()).unwrap();
    assert_eq!(out["permission"], "deny");
    let r = handle(Dialect::Cursor, b"not json", &closed);
    let out: Value = serde_json::from_str(&r.stdout.unwrap()).unwrap();
    assert_eq!(out["permission"], "deny", "an unreadable payload too");
}

// --- Factory Droid ------------------------------------------------------------------------

fn factory(event: &str, command: &str, risk_reason: &str) -> Value {
    let mut p = json!({
        "session_id": "0f9e6a0c-6c1b-4f3e-9d7e-2b1a5c3d4e5f",
        "transcript_path": "/home/me/.factory/sessions/0f9e6a0c.jsonl",
        "cwd": "/home/me/project",
        "permission_mode": "auto-high",
        "hook_event_name": event,
        "tool_name": "Execute",
        "tool_input": {"command": command, "riskLevel": "low", "riskLevelReason": risk_reason}
    });
    if event == "PostToolUse" {
        p["tool_response"] = json!("ok\n\n\n[Process exited with code 0]");
    }
    p
}

#[test]
fn factory_droid_is_served_by_claude_codes_dialect_and_its_decoys_do_not_hide_a_repeat() {
    let e = engine("");
    let s = MemoryStore::new();
    for i in 1..=2 {
        // The model words a new risk reason each time: the same call all the same.
        let why = format!("reads only ({i})");
        assert_eq!(
            run(
                Dialect::Factory,
                &e,
                &s,
                &factory("PreToolUse", "make", &why)
            ),
            None
        );
        assert_eq!(
            run(
                Dialect::Factory,
                &e,
                &s,
                &factory("PostToolUse", "make", &why)
            ),
            None
        );
    }
    let out = run(
        Dialect::Factory,
        &e,
        &s,
        &factory("PreToolUse", "make", "again"),
    )
    .unwrap();
    let h = &out["hookSpecificOutput"];
    assert_eq!(h["hookEventName"], "PreToolUse");
    assert_eq!(h["permissionDecision"], "deny");
    assert!(h["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .starts_with(r#"loop brake: tool "Execute" called 3 times in a row"#));
    let o = outcome_of(
        Dialect::Factory,
        "PostToolUse",
        &factory("PostToolUse", "make", ""),
    );
    assert_eq!(
        o.exit_code,
        Some(0),
        "from Execute's `[Process exited with code N]`"
    );
}

// --- GitHub Copilot CLI ---------------------------------------------------------------------

fn copilot_pre(args: Value) -> Value {
    json!({"sessionId": "acd910bc-1300-49ac-91b9-114bec179cb0", "timestamp": 1796116588397_i64,
           "cwd": "/tmp/w", "toolName": "bash", "toolArgs": args})
}

#[test]
fn copilot_takes_tool_args_as_an_object_or_as_json_text_and_its_decoys_are_ignored() {
    let e = engine("");
    let s = MemoryStore::new();
    let pre = |args: Value| {
        run_event(
            Dialect::Copilot,
            Some("preToolUse"),
            &e,
            &s,
            &copilot_pre(args),
        )
    };
    let post = |args: Value| {
        let mut p = copilot_pre(args);
        p["toolResult"] = json!({"resultType": "success",
            "textResultForLlm": "same\n<shellId: 4 completed with exit code 0>"});
        run_event(Dialect::Copilot, Some("postToolUse"), &e, &s, &p)
    };
    let a = json!({"command": "ls", "description": "list", "initial_wait": 10});
    assert_eq!(pre(a.clone()), None);
    assert_eq!(post(a), None);
    // The documented form: toolArgs as a JSON text; a new description and wait.
    let b = json!(
        json!({"command": "ls", "description": "list again", "initial_wait": 30}).to_string()
    );
    assert_eq!(pre(b.clone()), None);
    assert_eq!(post(b.clone()), None);
    let out = pre(b).unwrap();
    assert_eq!(out["permissionDecision"], "deny");
    assert!(out["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .starts_with(REFUSAL));
    assert_eq!(out.as_object().unwrap().len(), 2);
}

#[test]
fn copilot_without_its_event_on_the_command_line_nothing_is_judged_and_fail_closed_speaks_copilot()
{
    let e = engine("");
    let s = MemoryStore::new();
    // Its payloads do not name their event: a hook installed without one judges nothing,
    // and says why.
    let r = handle(
        Dialect::Copilot,
        copilot_pre(json!({"command": "ls"})).to_string().as_bytes(),
        &ctx(&e, &s),
    );
    assert_eq!(r.stdout, None);
    assert!(
        r.warnings[0].contains("give it on the command line"),
        "{:?}",
        r.warnings
    );
    let broken = Unavailable::PayloadUnread;
    let closed = Context {
        engine: &e,
        store: Err(&broken),
        fail_closed: true,
        observer: None,
        traceparent: None,
    };
    let r = toolbrake_hooks::handle_unreadable_event(
        Dialect::Copilot,
        Some("preToolUse"),
        PayloadError::TooLarge,
        &closed,
    );
    let out: Value = serde_json::from_str(&r.stdout.unwrap()).unwrap();
    assert_eq!(out["permissionDecision"], "deny");
    // A post event is never refused.
    let r = toolbrake_hooks::handle_unreadable_event(
        Dialect::Copilot,
        Some("postToolUse"),
        PayloadError::TooLarge,
        &closed,
    );
    assert_eq!(r.stdout, None);
}

// --- Qwen Code ----------------------------------------------------------------------------

fn qwen(event: &str, id: &str, extra: Value) -> Value {
    let mut p = json!({"session_id": "e6654be9", "cwd": "/tmp/w", "hook_event_name": event,
        "permission_mode": "yolo", "tool_name": "run_shell_command",
        "tool_input": {"command": "ls", "is_background": false}, "tool_use_id": id});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

#[test]
fn qwen_code_continuations_are_not_new_turns_and_its_exit_code_is_read() {
    let e = engine("");
    let s = MemoryStore::new();
    let result = json!({"tool_response": {"llmContent": "Command: ls\nDirectory: (root)\nOutput: a\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: (none)", "returnDisplay": "a"}});
    for i in 1..=2 {
        let id = format!("toolu_{i}");
        assert_eq!(
            run(Dialect::Qwen, &e, &s, &qwen("PreToolUse", &id, json!({}))),
            None
        );
        assert_eq!(
            run(
                Dialect::Qwen,
                &e,
                &s,
                &qwen("PostToolUse", &id, result.clone())
            ),
            None
        );
        // Qwen continues its own turn with an empty prompt: not a human message.
        let cont =
            json!({"session_id": "e6654be9", "hook_event_name": "UserPromptSubmit", "prompt": ""});
        assert_eq!(run(Dialect::Qwen, &e, &s, &cont), None);
    }
    let out = run(
        Dialect::Qwen,
        &e,
        &s,
        &qwen("PreToolUse", "toolu_3", json!({})),
    )
    .unwrap();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    // A real prompt starts afresh.
    let user =
        json!({"session_id": "e6654be9", "hook_event_name": "UserPromptSubmit", "prompt": "go on"});
    run(Dialect::Qwen, &e, &s, &user);
    assert_eq!(
        run(
            Dialect::Qwen,
            &e,
            &s,
            &qwen("PreToolUse", "toolu_4", json!({}))
        ),
        None
    );

    let failing = json!({"tool_response": {"llmContent": "Command: false\nOutput: (empty)\nExit Code: 1", "returnDisplay": ""}});
    let o = outcome_of(
        Dialect::Qwen,
        "PostToolUse",
        &qwen("PostToolUse", "x", failing),
    );
    assert_eq!(o.exit_code, Some(1));
    let f = outcome_of(
        Dialect::Qwen,
        "PostToolUseFailure",
        &qwen(
            "PostToolUseFailure",
            "x",
            json!({"error": "boom", "is_interrupt": false}),
        ),
    );
    assert_eq!(f.is_error, Some(true));
}

// --- Cline --------------------------------------------------------------------------------

fn cline(hook: &str, call: Value, parent: Option<&str>) -> Value {
    let mut p = json!({"clineVersion": "", "hookName": hook, "timestamp": "2026-12-01T09:21:15Z",
        "taskId": "conv_1", "workspaceRoots": ["/tmp/w"], "userId": "me",
        "agent_id": "agent_1", "parent_agent_id": parent});
    match hook {
        "tool_call" => p["tool_call"] = call,
        "tool_result" => p["tool_result"] = call,
        _ => {}
    }
    p
}

#[test]
fn cline_a_denial_cancels_the_task_and_an_ask_does_too_saying_why() {
    let e = engine("");
    let s = MemoryStore::new();
    let call = |id: &str| json!({"id": id, "name": "run_commands", "input": {"commands": ["ls"]}});
    for i in 1..=2 {
        let id = format!("c{i}");
        assert_eq!(
            run(Dialect::Cline, &e, &s, &cline("tool_call", call(&id), None)),
            None
        );
        let mut r = call(&id);
        r["output"] = json!([{"query": "ls", "result": "a\n", "success": true}]);
        assert_eq!(
            run(Dialect::Cline, &e, &s, &cline("tool_result", r, None)),
            None
        );
    }
    let out = run(
        Dialect::Cline,
        &e,
        &s,
        &cline("tool_call", call("c3"), None),
    )
    .unwrap();
    assert_eq!(out["cancel"], true);
    assert!(out["errorMessage"].as_str().unwrap().starts_with(REFUSAL));
    // A sub-agent counts in its own session.
    assert_eq!(
        run(
            Dialect::Cline,
            &e,
            &s,
            &cline("tool_call", call("c4"), Some("agent_0"))
        ),
        None
    );

    let asking = engine("[streak]\nmax_repeats = 10\n[breaker.limits]\nexact = 2\n");
    let s = MemoryStore::new();
    run(
        Dialect::Cline,
        &asking,
        &s,
        &cline("tool_call", call("a1"), None),
    );
    let mut r = call("a1");
    r["output"] = json!("same");
    run(Dialect::Cline, &asking, &s, &cline("tool_result", r, None));
    let out = run(
        Dialect::Cline,
        &asking,
        &s,
        &cline("tool_call", call("a2"), None),
    )
    .unwrap();
    assert_eq!(out["cancel"], true);
    assert!(out["errorMessage"]
        .as_str()
        .unwrap()
        .starts_with(toolbrake_hooks::cline::CLINE_CANNOT_ASK));
}

#[test]
fn cline_advisories_are_context_modifications() {
    // `run_commands` is a shell tool: its `commands` are read as command lines, so three
    // failures of `make` count together although the calls differ.
    let e = engine("");
    let s = MemoryStore::new();
    let mut advised = None;
    for i in 1..=3 {
        let id = format!("f{i}");
        let call =
            json!({"id": id, "name": "run_commands", "input": {"commands": ["make"], "n": i}});
        run(
            Dialect::Cline,
            &e,
            &s,
            &cline("tool_call", call.clone(), None),
        );
        let mut r = call;
        r["error"] = json!("make: *** [all] Error 2");
        advised = run(Dialect::Cline, &e, &s, &cline("tool_result", r, None));
    }
    let advised = advised.expect("the third failure is advised");
    assert!(advised["contextModification"]
        .as_str()
        .unwrap()
        .contains("has failed 3 times in a row"));
    assert_eq!(advised.as_object().unwrap().len(), 1);
}
