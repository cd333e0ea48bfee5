//! Bounded random hook payloads: `handle` never panics, whatever the bytes, and answers
//! either nothing or one JSON object.

use loopbrake_config::ConfigToml;
use loopbrake_core::config::{no_env, Config};
use loopbrake_core::Engine;
use loopbrake_hooks::{handle, Context, Dialect};
use loopbrake_store::MemoryStore;
use loopbrake_testkit::arb_json;
use proptest::prelude::*;
use serde_json::{json, Value};

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
        ]),
        prop::sample::select(vec!["Bash", "Read", "shell", "exec_command", ""]),
        arb_json(),
        arb_json(),
        prop::option::of(prop::sample::select(vec!["t1", "t2"])),
    )
        .prop_map(|(event, tool, input, response, id)| {
            let mut v = json!({"session_id": "fz", "hook_event_name": event, "tool_name": tool,
                "tool_input": input, "tool_response": response, "error": response.to_string()});
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
    fn any_payload_gets_a_defined_answer(payloads in prop::collection::vec(arb_payload(), 1..12), codex in any::<bool>(), fail_closed in any::<bool>()) {
        let engine = Engine::new(Config::from_toml_str("", &no_env).unwrap());
        let store = MemoryStore::new();
        let dialect = if codex { Dialect::Codex } else { Dialect::Claude };
        for p in payloads {
            let ctx = Context { engine: &engine, store: Ok(&store), fail_closed };
            let reply = handle(dialect, &p, &ctx);
            if let Some(out) = reply.stdout {
                let v: Value = serde_json::from_str(&out).unwrap();
                prop_assert!(v.is_object());
            }
        }
    }
}
