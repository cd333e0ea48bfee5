//! Test-only helpers shared by loopbrake's crates: the property-test strategies the
//! fuzz tests of the protocol, the hooks and the MCP proxy draw their inputs from.
//! A dev-dependency only; nothing at run time depends on it.

use proptest::prelude::*;
use serde_json::{json, Value};

/// Small JSON values of every kind, nested up to 4 levels: nulls, booleans, integers,
/// short strings, arrays and objects.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        "[a-z0-9 ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
