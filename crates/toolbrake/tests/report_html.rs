//! The HTML pages' words and figures as a reader sees them: every axis label inside its
//! chart, an advisory never worded as a failed call, the tune chart's marker labels apart.

mod support;
use support::*;

/// The `x` of the `<text …>` element whose content is `label`, and the chart's width.
fn label_x(svg: &str, label: &str) -> f64 {
    let end = svg
        .find(&format!(">{label}</text>"))
        .unwrap_or_else(|| panic!("no {label} label"));
    let start = svg[..end].rfind("<text").unwrap();
    let tag = &svg[start..end];
    let x = tag.split("x=\"").nth(1).unwrap().split('"').next().unwrap();
    x.parse().unwrap()
}

#[test]
fn the_replay_reports_labels_fit_and_say_what_they_mean() {
    let dir = tmpdir("report-html", "replay");
    let html = bundled_html_report(&dir.join("report.html"));
    let svg = &html[html.find("<svg id=\"histogram\"").unwrap()..];
    let svg = &svg[..svg.find("</svg>").unwrap()];
    let width: f64 = svg
        .split("viewBox=\"0 0 ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // "20+" is centred on its x: about 9 px each side at 11 px.
    assert!(
        label_x(svg, "20+") + 12.0 <= width,
        "20+ clipped at {width}"
    );
    assert!(
        !html.contains(": failed "),
        "an advisory reads as a failed call"
    );
}

#[test]
fn the_tune_charts_marker_labels_sit_apart() {
    let dir = tmpdir("report-html", "tune");
    let page = dir.join("tune.html");
    // A configuration other than the defaults, so both are marked.
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(&cfg, "[streak]\nmax_repeats = 5\n").unwrap();
    let out = isolated_bin()
        .arg("--config")
        .arg(&cfg)
        .args(["tune", "--html"])
        .arg(&page)
        .arg(repo().join("examples/trajectories/calls.jsonl.gz"))
        .arg("--from")
        .arg("trajectory")
        .output()
        .unwrap();
    assert_success(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    let marker = |class: &str| -> (f64, f64, String) {
        let at = html
            .find(&format!("class=\"marker {class}\""))
            .unwrap_or_else(|| panic!("no {class} marker"));
        let g = &html[at..];
        let t = &g[g.find("<text").unwrap()..];
        let attr = |name: &str| -> String {
            t.split(&format!(" {name}=\""))
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_string()
        };
        (
            attr("x").parse().unwrap(),
            attr("y").parse().unwrap(),
            attr("text-anchor"),
        )
    };
    // Wherever the two markers fall, their words go to different sides.
    let d = marker("defaults");
    let r = marker("recommended");
    assert!(d.2 != r.2 || (d.1 - r.1).abs() > 11.0, "{d:?} {r:?}");
}
