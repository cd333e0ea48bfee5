//! The house stays as ARCHITECTURE.md draws it: every crate stands on the floors below it
//! (and on the leaves beside), never on a neighbour or on a floor above; and the modules of
//! the crates drawn without circles import no module that imports them back.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// ARCHITECTURE.md, "The house": a crate's floor, or `None` for a leaf beside the floors
/// (it depends on no other toolbrake crate, so anything may stand on it).
fn floor(name: &str) -> Option<u8> {
    Some(match name {
        "toolbrake-core" => 0,
        "toolbrake-config" => 1,
        "toolbrake-store" | "toolbrake-fetch" => 2,
        "toolbrake-session" => 3,
        "toolbrake-hooks" | "toolbrake-mcp" | "toolbrake-protocol" | "toolbrake-telemetry" => 4,
        "toolbrake" => 5,
        "toolbrake-node" | "toolbrake-python" => 6,
        "toolbrake-http" | "toolbrake-import" | "toolbrake-testkit" => return None,
        other => panic!("{other} is on no floor: add it to ARCHITECTURE.md's house and here"),
    })
}

/// Each workspace crate and the workspace crates it depends on (normal dependencies).
fn crate_graph() -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let ours: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap())
                .filter(|n| ours.contains(n))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

#[test]
fn every_crate_stands_on_the_floors_below_it() {
    let graph = crate_graph();
    assert!(graph.len() >= 14, "{graph:?}");
    let mut wrong = Vec::new();
    for (name, deps) in &graph {
        for dep in deps {
            match (floor(name), floor(dep)) {
                (_, None) => {}
                (Some(f), Some(d)) if d < f => {}
                (f, d) => wrong.push(format!("{name} (floor {f:?}) -> {dep} (floor {d:?})")),
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies sideways or up: {wrong:#?}");
}

#[test]
fn the_core_and_the_protocol_have_no_import_circle() {
    for krate in [
        "toolbrake-core",
        "toolbrake-protocol",
        "toolbrake-session",
        "toolbrake-telemetry",
    ] {
        let out = Command::new("python3")
            .arg(repo().join("scripts/check/modgraph.py"))
            .arg(repo().join("crates").join(krate).join("src"))
            .arg("--tests")
            .output()
            .expect("python3 runs scripts/check/modgraph.py");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(" 0 cycle(s)"),
            "{krate}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
