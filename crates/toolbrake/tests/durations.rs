//! Durations are shown in the spelling people type and the docs write (`"7d"`, not
//! humantime's `"7days"`, nor `"11months 30days 3h…"` for a year), and what `config check`
//! prints reads back as the same settings.

mod support;
use support::*;

fn check(file: &std::path::Path) -> String {
    let out = isolated_bin()
        .args(["config", "check"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn config_check_shows_durations_as_they_are_typed() {
    let dir = tmpdir("durations", "check");
    let f = dir.join("toolbrake.toml");
    std::fs::write(&f, "").unwrap();
    let shown = check(&f);
    for line in [
        "idle_ttl = \"7d\"\n",
        "lock_timeout = \"3s\"\n",
        "connect_timeout = \"2s\"\n",
        "command_timeout = \"2s\"\n",
        "timeout = \"30s\"\n",
    ] {
        assert!(shown.contains(line), "{line}: {shown}");
    }

    std::fs::write(
        &f,
        "[store]\nidle_ttl = \"365d\"\nlock_timeout = \"1500ms\"\n[fetch]\ntimeout = \"90s\"\n",
    )
    .unwrap();
    let shown = check(&f);
    for line in [
        "idle_ttl = \"365d\"\n",
        "lock_timeout = \"1500ms\"\n",
        "timeout = \"90s\"\n",
    ] {
        assert!(shown.contains(line), "{line}: {shown}");
    }
    // What it printed is a configuration that reads back as the same settings.
    let again = dir.join("again.toml");
    std::fs::write(&again, &shown).unwrap();
    let settings = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(settings(&check(&again)), settings(&shown));
}
