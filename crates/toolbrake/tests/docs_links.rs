//! The README is a front page that sends readers to `docs/`: every relative link in it, in
//! the pages under `docs/` and in the bindings' READMEs names a file of the repository and,
//! with a `#fragment`, a heading of that page (as GitHub makes its anchor). A page moved or
//! a heading renamed without its links is a dead end a reader would hit.

mod support;
use support::repo;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The headings of a Markdown text (outside fenced code), as GitHub's anchors: lower case,
/// punctuation dropped but `-` and `_`, spaces as `-`; a repeated anchor gets `-1`, `-2`, ….
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if fenced || hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base: String = line[hashes..]
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the inline links `[text](target)` of a Markdown text, outside fenced code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_readme_and_docs_leads_somewhere() {
    let root = std::fs::canonicalize(repo()).unwrap();
    let mut pages: Vec<PathBuf> = vec![
        root.join("README.md"),
        root.join("bindings/node/README.md"),
        root.join("bindings/python/README.md"),
    ];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    assert!(pages.len() > 10, "the docs pages: {pages:?}");
    let mut dead = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            checked += 1;
            let (file, fragment) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let linked: PathBuf = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap_or(Path::new("")).join(file)
            };
            let shown = format!(
                "{}: {target}",
                page.strip_prefix(&root).unwrap_or(page).display()
            );
            if !linked.exists() {
                dead.push(format!("{shown} (no such file)"));
                continue;
            }
            if let Some(fragment) = fragment.filter(|_| file.is_empty() || file.ends_with(".md")) {
                let headings = anchors(&std::fs::read_to_string(&linked).unwrap());
                if !headings.contains(fragment) {
                    dead.push(format!("{shown} (no such heading)"));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} links found");
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let page = "# Title\n## What each teammate needs (`--project`)\n## `[store]`\n```\n# not a heading\n```\n## Title\n";
    let a = anchors(page);
    for anchor in [
        "title",
        "what-each-teammate-needs---project",
        "store",
        "title-1",
    ] {
        assert!(a.contains(anchor), "{anchor}: {a:?}");
    }
    assert!(!a.contains("not-a-heading"));
    assert_eq!(
        links("see [a](docs/a.md#x) and [b](b.md)\n```\n[c](c.md)\n```\n"),
        ["docs/a.md#x", "b.md"]
    );
}
