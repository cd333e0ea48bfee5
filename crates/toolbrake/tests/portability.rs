//! Other platforms, honestly (docs/install.md, "Platforms"): the shipped code reads no
//! Linux-only path (`/proc`, `/sys`, `/dev/urandom`: the `getrandom` crate is the portable
//! random source), and Unix-only calls stay behind `cfg(unix)`, or the crate says at compile
//! time that it needs a Unix (a clear error on Windows instead of a cascade of them). Only
//! Linux x86-64 is built and run here; this keeps the source from leaning on it unseen.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The shipped source of each crate (its `src/`, without `tests.rs` files and with
/// `#[cfg(test)] mod tests` blocks cut off), by crate folder.
fn shipped_sources() -> Vec<(PathBuf, Vec<(PathBuf, String)>)> {
    let mut crates = Vec::new();
    for parent in ["crates", "bindings"] {
        for entry in std::fs::read_dir(repo().join(parent)).unwrap().flatten() {
            let src = entry.path().join("src");
            if !src.is_dir() || entry.file_name() == "toolbrake-testkit" {
                continue;
            }
            let mut files = Vec::new();
            rust_files(&src, &mut files);
            let sources = files
                .into_iter()
                .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
                .map(|f| {
                    let text = std::fs::read_to_string(&f).unwrap();
                    let shipped = match text.find("#[cfg(test)]\nmod tests") {
                        Some(at) => text[..at].to_string(),
                        None => text,
                    };
                    (f, shipped)
                })
                .collect();
            crates.push((entry.path(), sources));
        }
    }
    crates
}

#[test]
fn shipped_code_reads_no_linux_only_path() {
    let mut found = Vec::new();
    for (_, sources) in shipped_sources() {
        for (file, text) in sources {
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                let opens = ["File::open(", "fs::read", "OpenOptions", "read_dir("]
                    .iter()
                    .any(|call| code.contains(call));
                if opens
                    && ["\"/proc/", "\"/sys/", "\"/dev/urandom", "\"/dev/random"]
                        .iter()
                        .any(|p| code.contains(p))
                {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Linux-only paths read by shipped code (use a portable API, e.g. getrandom):\n{}",
        found.join("\n")
    );
}

/// The attribute and doc lines right above the top-level item (unindented `fn`, `impl`,
/// `mod`, ...) that line `n` is in.
fn top_level_item_attributes<'a>(lines: &[&'a str], n: usize) -> impl Iterator<Item = &'a str> {
    let start = (0..=n)
        .rev()
        .find(|&i| {
            let l = lines[i];
            !l.is_empty()
                && !l.starts_with(char::is_whitespace)
                && !l.starts_with('}')
                && !l.starts_with("//")
                && !l.starts_with("#[")
        })
        .unwrap_or(0);
    lines[..start]
        .iter()
        .rev()
        .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
        .copied()
        .collect::<Vec<_>>()
        .into_iter()
}

#[test]
fn unix_only_calls_are_behind_cfg_unix_or_the_crate_says_it_needs_a_unix() {
    let mut found = Vec::new();
    for (dir, sources) in shipped_sources() {
        let declared = sources.iter().any(|(f, text)| {
            f.ends_with("src/lib.rs") && text.contains("#[cfg(not(unix))]\ncompile_error!(")
        });
        if declared {
            continue;
        }
        for (file, text) in &sources {
            let lines: Vec<&str> = text.lines().collect();
            for (n, line) in lines.iter().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if !["std::os::unix", "std::os::fd", "rustix::", "libc::"]
                    .iter()
                    .any(|u| code.contains(u))
                {
                    continue;
                }
                // A `#[cfg(unix)]` on one of the few lines above (the statement or block it
                // is in), or on the top-level item it is in.
                let unix = |l: &&str| l.contains("#[cfg(unix)]") || l.contains("#[cfg(target_os");
                let guarded = lines[n.saturating_sub(4)..n].iter().any(unix)
                    || top_level_item_attributes(&lines, n).any(|l| unix(&l));
                if !guarded {
                    found.push(format!(
                        "{} ({}):{}: {}",
                        file.display(),
                        dir.file_name().unwrap().to_string_lossy(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Unix-only calls outside #[cfg(unix)] in crates that do not declare they need a Unix:\n{}",
        found.join("\n")
    );
}
