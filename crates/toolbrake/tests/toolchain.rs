//! The minimum Rust the workspace states (`rust-version`, the README's prerequisites) is
//! true of the locked dependencies: none of them needs a newer one.

use std::process::Command;

/// `1.88` and `1.88.0` alike, as (major, minor, patch).
fn version(v: &str) -> (u32, u32, u32) {
    let mut p = v.split('.').map(|p| p.parse().unwrap_or(0));
    (
        p.next().unwrap_or(0),
        p.next().unwrap_or(0),
        p.next().unwrap_or(0),
    )
}

#[test]
fn the_stated_minimum_rust_builds_every_locked_dependency() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours = env!("CARGO_PKG_RUST_VERSION");
    let needs: Vec<(String, String)> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            (version(v) > version(ours))
                .then(|| (format!("{} {}", p["name"], p["version"]), v.to_string()))
        })
        .collect();
    assert!(
        needs.is_empty(),
        "rust-version {ours}, but these need more: {needs:?}"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let short = ours.trim_end_matches(".0");
    assert!(
        readme.contains(&format!("Rust {short} or newer")),
        "the README's prerequisites do not state Rust {short}"
    );
}
