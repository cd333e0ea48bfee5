//! The replay of the bundled corpus, byte for byte: protocol lines (progress on and the
//! seeds' rules), the text report and the HTML page, against goldens committed from the
//! build before the replay's speed work (issue 26). Making replay faster must not change a
//! decision, a message or a preview; a change meant to alter them regenerates the goldens
//! with `TOOLBRAKE_UPDATE_GOLDEN=1 cargo test -p toolbrake --test replay_golden` and says
//! why in its commit.
mod support;

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{isolated_bin, repo, tmpdir};

fn golden_path(name: &str) -> PathBuf {
    repo()
        .join("crates/toolbrake/tests/golden")
        .join(format!("{name}.gz"))
}

/// Compares `actual` with the golden `name`, naming the first line that differs.
fn check(name: &str, actual: &[u8]) {
    let path = golden_path(name);
    if std::env::var_os("TOOLBRAKE_UPDATE_GOLDEN").is_some() {
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(actual).unwrap();
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        return;
    }
    let mut expected = Vec::new();
    GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_end(&mut expected)
        .unwrap();
    if expected == actual {
        return;
    }
    let exp = String::from_utf8_lossy(&expected);
    let act = String::from_utf8_lossy(actual);
    let (no, (e, a)) = exp
        .lines()
        .chain(std::iter::repeat("<end of output>"))
        .zip(act.lines().chain(std::iter::repeat("<end of output>")))
        .enumerate()
        .find(|(_, (e, a))| e != a)
        .expect("outputs differ, so some line does");
    panic!(
        "{name}: output differs from the golden at line {}\nexpected: {e}\nactual:   {a}",
        no + 1
    );
}

fn corpus() -> String {
    repo()
        .join("examples/trajectories/calls.jsonl.gz")
        .display()
        .to_string()
}

/// The standard output of `toolbrake replay ARGS`, written to a file (a pipe would fill
/// while the deadline's loop waits), within a deadline.
fn replay(name: &str, args: &[&str]) -> Vec<u8> {
    let dir = tmpdir("golden", name);
    let path = dir.join("stdout");
    let mut child = isolated_bin()
        .arg("replay")
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&path).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("replay {args:?} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "replay {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&path).unwrap()
}

#[test]
fn protocol_lines_of_the_bundled_corpus_are_unchanged() {
    let lines = replay("lines", &["--from", "trajectory", &corpus()]);
    check("corpus.jsonl", &lines);
}

#[test]
fn protocol_lines_under_the_seeds_rules_are_unchanged() {
    let dir = tmpdir("golden", "seed");
    let config = dir.join("seed.toml");
    std::fs::write(
        &config,
        "[streak]\nprogress = false\n[breaker]\nprogress = false\n",
    )
    .unwrap();
    let lines = replay(
        "seed-lines",
        &[
            "--from",
            "trajectory",
            "--config",
            config.to_str().unwrap(),
            &corpus(),
        ],
    );
    check("corpus-seed.jsonl", &lines);
}

#[test]
fn the_text_and_html_reports_of_the_bundled_corpus_are_unchanged() {
    check(
        "corpus-report.txt",
        &replay("report", &["--from", "trajectory", "--report", &corpus()]),
    );
    let dir = tmpdir("golden", "html");
    let page = dir.join("report.html");
    replay(
        "html",
        &[
            "--from",
            "trajectory",
            "--html",
            page.to_str().unwrap(),
            &corpus(),
        ],
    );
    check("corpus-report.html", &std::fs::read(&page).unwrap());
}
