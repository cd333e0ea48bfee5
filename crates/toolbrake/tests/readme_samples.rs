//! The README's sample outputs are the binary's own: every ```` ```sh ```` block of one
//! `toolbrake …` command that a bare ```` ``` ```` block follows is run from the repository's
//! root, and its output must be that block, line for line. A sample that went stale (a
//! line the binary prints missing from the page, or one it no longer prints) fails here.
//! `TOOLBRAKE_BLESS=1 cargo test -p toolbrake --test readme_samples` writes the binary's
//! output into the page instead.

mod support;
use support::*;

/// Each sample of a page: the command's words, and the byte range of its output block.
fn samples(text: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    let mut rest = 0;
    while let Some(at) = text[rest..].find("```sh\ntoolbrake ") {
        let start = rest + at + "```sh\n".len();
        let end_cmd = start + text[start..].find('\n').unwrap();
        let command = text[start..end_cmd].to_string();
        rest = end_cmd;
        let Some(after) = text[end_cmd..].strip_prefix("\n```\n\n```\n") else {
            continue;
        };
        let body = text.len() - after.len();
        let close = body + after.find("\n```\n").expect("an unclosed output block") + 1;
        found.push((command, body..close));
        rest = close;
    }
    found
}

#[test]
fn the_readme_shows_what_its_commands_print() {
    let path = repo().join("README.md");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let found = samples(&text);
    assert!(
        !found.is_empty(),
        "no sample (a ```sh block of one toolbrake command, then its output) in the README"
    );
    let bless = std::env::var_os("TOOLBRAKE_BLESS").is_some();
    let mut stale = Vec::new();
    for (command, range) in found.into_iter().rev() {
        // (A sample's command is plain words: no quotes, no shell.)
        let words: Vec<&str> = command.split_whitespace().collect();
        let out = isolated_bin()
            .current_dir(repo())
            .args(&words[1..])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{command}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).unwrap();
        if text[range.clone()] != printed {
            stale.push(format!(
                "`{command}`\n--- the README shows\n{}--- the binary prints\n{printed}",
                &text[range.clone()]
            ));
            text.replace_range(range, &printed);
        }
    }
    if bless && !stale.is_empty() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    assert!(
        stale.is_empty(),
        "the README's sample output is stale (TOOLBRAKE_BLESS=1 rewrites it):\n{}",
        stale.join("\n")
    );
}

#[test]
fn a_sample_is_found_and_a_stale_one_is_told() {
    let page = "a\n```sh\ntoolbrake --version\n```\n\n```\nold\n```\nb\n```sh\ntoolbrake x\n```\nnot a sample\n";
    let found = samples(page);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "toolbrake --version");
    assert_eq!(&page[found[0].1.clone()], "old\n");
}
