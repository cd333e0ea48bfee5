//! A model can put a lone surrogate (`"\ud800"`, which Node's `JSON.stringify` writes) or
//! nesting past the parser's 128 levels into its own arguments. Such a call must be
//! counted like any other, in every host's dialect: the third identical one is refused.

use serde_json::{json, Value};
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_hooks::{handle_event, Context, Dialect};
use toolbrake_store::{MemoryStore, Store};

const MARK: &str = "\"@@unreadable@@\"";

/// Each dialect's pre-tool payload (with the event to pass on the command line, for
/// Copilot), its arguments holding `MARK` where the unreadable part goes.
fn payloads() -> Vec<(Dialect, Option<&'static str>, Value)> {
    let claude_like = |event: &str, tool: &str| {
        json!({"session_id": "s1", "hook_event_name": event, "tool_name": tool,
               "tool_use_id": "t1", "cwd": "/tmp",
               "tool_input": {"command": "ls", "description": "@@unreadable@@"}})
    };
    vec![
        (Dialect::Claude, None, claude_like("PreToolUse", "Bash")),
        (
            Dialect::Qwen,
            None,
            claude_like("PreToolUse", "run_shell_command"),
        ),
        (Dialect::Factory, None, claude_like("PreToolUse", "Execute")),
        (Dialect::Codex, None, claude_like("PreToolUse", "Bash")),
        (
            Dialect::Gemini,
            None,
            claude_like("BeforeTool", "run_shell_command"),
        ),
        (
            Dialect::Copilot,
            Some("preToolUse"),
            json!({"sessionId": "s1", "timestamp": 1, "cwd": "/tmp", "toolName": "bash",
                   "toolArgs": {"command": "ls", "description": "@@unreadable@@"}}),
        ),
        (
            Dialect::Cursor,
            None,
            json!({"conversation_id": "conv1", "generation_id": "g1", "hook_event_name": "preToolUse",
                   "tool_name": "Shell", "tool_use_id": "t1", "cwd": "/tmp",
                   "tool_input": {"command": "ls", "working_directory": "/tmp",
                                  "note": "@@unreadable@@"}}),
        ),
        (
            Dialect::Cline,
            None,
            json!({"hookName": "tool_call", "taskId": "task1", "workspaceRoots": ["/tmp"],
                   "tool_call": {"id": "t1", "name": "run_commands",
                                 "input": {"commands": ["ls"], "note": "@@unreadable@@"}}}),
        ),
    ]
}

fn check(unreadable: &str, what: &str) {
    let engine = Engine::new(Config::from_toml_str("", &no_env).unwrap());
    for (dialect, event, payload) in payloads() {
        let store = MemoryStore::new();
        let ctx = Context {
            engine: &engine,
            store: Ok(&store as &dyn Store),
            fail_closed: false,
            observer: None,
            traceparent: None,
        };
        let text = payload.to_string().replace(MARK, unreadable);
        assert!(
            serde_json::from_str::<Value>(&text).is_err(),
            "{what}: {text}"
        );
        for n in 1..=3 {
            // Each attempt is a new call of the host's (its own id).
            let call = text.replace("\"t1\"", &format!("\"t{n}\""));
            let reply = handle_event(dialect, event, call.as_bytes(), &ctx);
            let said = reply.warnings.join("\n");
            assert!(!said.contains("not JSON"), "{dialect:?} {what}: {said}");
            assert!(
                said.contains("judged by a hash of their bytes"),
                "{dialect:?} {what}: {said}"
            );
            let refused = reply
                .stdout
                .as_deref()
                .is_some_and(|o| o.contains("loop brake: tool"));
            assert_eq!(
                refused,
                n == 3,
                "{dialect:?} {what}, call {n}: {:?}",
                reply.stdout
            );
        }
        // Other unreadable bytes are another call: counted on their own.
        let other = text.replace("ls", "pwd").replace("\"t1\"", "\"t9\"");
        let reply = handle_event(dialect, event, other.as_bytes(), &ctx);
        assert!(
            !reply
                .stdout
                .as_deref()
                .is_some_and(|o| o.contains("loop brake: tool")),
            "{dialect:?} {what}"
        );
    }
}

#[test]
fn a_lone_surrogate_in_the_arguments_is_counted_in_every_dialect() {
    check("\"\\ud800\"", "a lone surrogate");
    check("\"x\\udc00y\"", "a lone trailing surrogate");
}

#[test]
fn arguments_nested_past_the_parser_are_counted_in_every_dialect() {
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    check(&deep, "deep nesting");
}
