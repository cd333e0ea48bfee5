//! The streak brake refusing the third identical call: `cargo run --example streak`.

use serde_json::json;
use toolbrake::{Brake, GuardError};

fn main() {
    let brake = Brake::default();
    let args = json!({"q": "weather"});
    for attempt in 1..=3 {
        let result = brake.guard("demo-session", "search", &args, || {
            println!("  search body runs (attempt {attempt})");
            Ok::<_, String>("sunny, 21°C")
        });
        match result {
            Ok(out) => println!("call {attempt}: allowed -> {}", out.value),
            Err(GuardError::Refused(refusal)) => {
                println!(
                    "call {attempt}: refused by the {} engine ({})",
                    refusal.engine, refusal.code
                );
                println!("  {refusal}");
            }
            Err(other) => println!("call {attempt}: {other}"),
        }
    }
}
