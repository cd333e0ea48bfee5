//! Bounded random hook payloads: `handle` never panics, whatever the bytes and whichever
//! host's dialect, and answers either nothing or one JSON object.

use proptest::prelude::*;
use serde_json::{json, Value};
use toolbrake_config::ConfigToml;
use toolbrake_core::config::{no_env, Config};
use toolbrake_core::Engine;
use toolbrake_hooks::{handle_event, Context, Dialect};
use toolbrake_store::MemoryStore;
use toolbrake_testkit::arb_json;

fn arb_payload() -> impl Strategy<Value = Vec<u8>> {
    let shaped = (
        prop::sample::select(vec![
            "PreToolUse",
            "PostToolUse",
            "PostToolUseFailure",
            "UserPromptSubmit",
            "Stop",
            "PostToolBatch",
            "SessionEnd",
            "SessionStart",
            "Other",
            // GitHub Copilot CLI, Cursor, Cline.
            "preToolUse",
            "postToolUse",
            "postToolUseFailure",
            "agentStop",
            "beforeShellExecution",
            "afterShellExecution",
            "beforeSubmitPrompt",
            "tool_call",
            "tool_result",
            "prompt_submit",
            "agent_end",
        ]),
        prop::sample::select(vec![
            "Bash",
            "Read",
            "shell",
            "exec_command",
            "Execute",
            "Shell",
            "",
        ]),
        arb_json(),
        arb_json(),
        prop::option::of(prop::sample::select(vec!["t1", "t2"])),
    )
        .prop_map(|(event, tool, input, response, id)| {
            // Every host's field names at once: each dialect reads its own.
            let mut v = json!({"session_id": "fz", "hook_event_name": event, "tool_name": tool,
                "tool_input": input, "tool_response": response, "error": response.to_string(),
                "sessionId": "fz", "toolName": tool, "toolArgs": input, "toolResult": response,
                "conversation_id": "fz", "tool_output": response, "command": input,
                "taskId": "fz", "hookName": event,
                "tool_call": {"id": "c1", "name": tool, "input": input},
                "tool_result": {"id": "c1", "name": tool, "input": input, "output": response}});
            if let Some(id) = id {
                v["tool_use_id"] = json!(id);
            }
            serde_json::to_vec(&v).unwrap()
        });
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..128),
        1 => arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        2 => shaped,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_payload_gets_a_defined_answer(
        payloads in prop::collection::vec(arb_payload(), 1..12),
        dialect in prop::sample::select(vec![
            Dialect::Claude, Dialect::Codex, Dialect::Gemini, Dialect::Copilot,
            Dialect::Qwen, Dialect::Cursor, Dialect::Cline, Dialect::Factory,
        ]),
        event in prop::option::of(prop::sample::select(vec!["preToolUse", "postToolUse", "sessionEnd", ""])),
        fail_closed in any::<bool>(),
    ) {
        let engine = Engine::new(Config::from_toml_str("", &no_env).unwrap());
        let store = MemoryStore::new();
        for p in payloads {
            let ctx = Context { engine: &engine, store: Ok(&store), fail_closed, observer: None, traceparent: None };
            let reply = handle_event(dialect, event, &p, &ctx);
            if let Some(out) = reply.stdout {
                let v: Value = serde_json::from_str(&out).unwrap();
                prop_assert!(v.is_object());
            }
        }
    }
}
