//! The release artifacts as a user gets them: `scripts/package` builds the tarball, the
//! Debian package, the npm tarball and the wheel (both carrying the static command) into
//! `target/package/`; the `.deb` is unpacked into a temporary root (`dpkg-deb -x`: the
//! machine's package database is never touched) and the README's quick start runs from it,
//! with its completions and man page in place. scripts/test then installs the wheel and the
//! npm package as users do (scripts/check-install).
//! Ignored by a plain `cargo test` (a release build); `scripts/test` runs it
//! (`--include-ignored`). Skipped, saying why, without dpkg-deb.

mod support;
use support::*;

use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn one(dir: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {suffix} in {}: {found:?}",
        dir.display()
    );
    found.into_iter().next().unwrap()
}

#[test]
#[ignore = "builds the release artifacts (a release build): scripts/test runs it"]
fn the_debian_package_installs_and_runs_the_quick_start() {
    let root = repo();
    let out = root.join("target/package");
    run(Command::new(root.join("scripts/package")).current_dir(&root));

    // The tarball: binary, README and the pages it links to, LICENSE, completions, man page.
    let tarball = one(&out, ".tar.gz");
    let listing = run(Command::new("tar").arg("-tzf").arg(&tarball));
    for f in [
        "/toolbrake",
        "/README.md",
        "/docs/configuration.md",
        "/docs/dashboard.png",
        "/LICENSE",
        "/completions/toolbrake.bash",
        "/completions/_toolbrake",
        "/completions/toolbrake.fish",
        "/man/man1/toolbrake.1",
    ] {
        assert!(listing.lines().any(|l| l.ends_with(f)), "{f} in {listing}");
    }
    let npm = one(&out, ".tgz");
    let npm_listing = run(Command::new("tar").arg("-tzf").arg(&npm));
    assert!(npm_listing.contains("package/native.cjs"), "{npm_listing}");
    // The command in the npm package and in the wheel: the static binary scripts/install
    // built, byte for byte (scripts/check-install installs both as a user would).
    let built = std::fs::read(root.join("target/package-root/bin/toolbrake")).unwrap();
    assert!(
        npm_listing.contains("package/bin/toolbrake"),
        "{npm_listing}"
    );
    let raw = Command::new("tar")
        .arg("-xzOf")
        .arg(&npm)
        .arg("package/bin/toolbrake")
        .output()
        .unwrap();
    assert!(
        raw.stdout == built,
        "the npm package's command is the static build"
    );
    let wheel = one(&out.join("python"), ".whl");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.contains("manylinux_2_17"), "{name}");
    let in_wheel = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))",
        ])
        .arg(&wheel)
        .arg(format!(
            "toolbrake-{}.data/scripts/toolbrake",
            env!("CARGO_PKG_VERSION")
        ))
        .output()
        .unwrap();
    assert_success(&in_wheel);
    assert!(
        in_wheel.stdout == built,
        "the wheel's command is the static build"
    );

    let deb = one(&out, ".deb");
    if Command::new("dpkg-deb").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED unpacking {}: dpkg-deb is not installed",
            deb.display()
        );
        return;
    }
    let contents = run(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    for f in [
        "./usr/bin/toolbrake",
        "./usr/share/bash-completion/completions/toolbrake",
        "./usr/share/zsh/vendor-completions/_toolbrake",
        "./usr/share/fish/vendor_completions.d/toolbrake.fish",
        "./usr/share/man/man1/toolbrake.1.gz",
        // The README's links resolve beside it.
        "./usr/share/doc/toolbrake/README.md",
        "./usr/share/doc/toolbrake/docs/configuration.md",
        "./usr/share/doc/toolbrake/docs/dashboard.png",
    ] {
        assert!(contents.contains(f), "{f} in {contents}");
    }
    // Unpacked into a root of its own: the machine's package database (and a user's own
    // install of toolbrake) is never touched.
    let unpacked = tmpdir("package", "deb-root");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked));
    let installed = unpacked.join("usr/bin/toolbrake");
    let result = std::panic::catch_unwind(|| {
        let version = run(Command::new(&installed).arg("--version"));
        assert!(version.starts_with("toolbrake "), "{version}");
        // The README's quick start, from the packaged command.
        let report = run(Command::new(&installed)
            .current_dir(&root)
            .args(["replay", "--from", "trajectory", "--report"])
            .args([
                "examples/tau-airline-task009.jsonl",
                "examples/django-11265.jsonl",
            ]));
        assert!(
            report.starts_with("toolbrake replay report\n2 sessions, 73 calls:"),
            "{report}"
        );
        assert!(
            report.contains("tau_bench/gpt-4o-airline/task009/trial2"),
            "{report}"
        );
        let bash = std::fs::read_to_string(
            unpacked.join("usr/share/bash-completion/completions/toolbrake"),
        )
        .unwrap();
        assert!(bash.contains("complete -F _toolbrake"), "{bash}");
    });
    let _ = std::fs::remove_dir_all(&unpacked);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
