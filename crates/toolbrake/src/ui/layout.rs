//! What every page shares: the style (light and dark, following the system), the frame
//! with its navigation, and small pieces (a gate bar, a path segment).

use maud::{html as m, Markup, DOCTYPE};

/// The style of every page. Colours are chosen for WCAG AA contrast in both themes (the
/// browser test runs axe-core on each page in each theme); sizes are in `rem` so 200 %
/// zoom reflows instead of overflowing.
const STYLE: &str = r#"
:root { color-scheme: light dark;
  --fg:#1d2430; --muted:#4f5a68; --line:#cfd6df; --bg:#f7f8fa; --card:#fff; --link:#1f5fbf; --focus:#1f5fbf;
  --allow:#2e7d32; --advise:#8a5300; --ask:#5b3fa8; --deny:#b71c1c; --saved:#1f5fbf; --stops:#b71c1c; --edit:#00695c; }
@media (prefers-color-scheme: dark) {
  :root { --fg:#e6e9ee; --muted:#aab4c0; --line:#3a4350; --bg:#14181e; --card:#1c222a; --link:#8ab4f8; --focus:#8ab4f8;
    --allow:#81c784; --advise:#ffb74d; --ask:#b39ddb; --deny:#ef9a9a; --saved:#8ab4f8; --stops:#ef9a9a; --edit:#80cbc4; }
}
* { box-sizing: border-box; }
body { font: 1rem/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); margin: 0; }
a { color: var(--link); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -999rem; } .skip:focus { left: 1rem; top: .5rem; background: var(--card); padding: .3rem .6rem; }
header { background: var(--card); border-bottom: 1px solid var(--line); padding: .6rem 1.2rem; display: flex; gap: 1.2rem; align-items: baseline; flex-wrap: wrap; }
header .brand { font-size: 1.1rem; margin: 0; font-weight: 700; }
header nav a { margin-right: 1rem; }
header nav a[aria-current=page] { font-weight: 700; text-decoration: none; }
main { padding: 1rem 1.2rem; max-width: 75rem; }
h1 { font-size: 1.4rem; margin: .4rem 0 .6rem; }
h2 { font-size: 1.15rem; margin: 1.4rem 0 .5rem; }
.lede { font-size: 1.2rem; margin: .2rem 0 1rem; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 26rem), 1fr)); gap: 1rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .8rem 1rem; min-width: 0; }
.card h2 { margin-top: 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
.muted { color: var(--muted); }
.warning { color: var(--advise); font-weight: 500; }
.bar { display: inline-block; width: 5.5rem; height: .5rem; background: var(--line); border-radius: 4px; vertical-align: middle; margin-right: .35rem; }
.bar > span { display: block; height: 100%; border-radius: 4px; background: var(--advise); }
.verdict { font-weight: 600; text-transform: uppercase; font-size: .8rem; }
.v-allow { color: var(--allow); } .v-advise { color: var(--advise); } .v-ask { color: var(--ask); } .v-deny { color: var(--deny); }
.gated { border-left: 4px solid var(--deny); }
code { font-size: .85rem; overflow-wrap: anywhere; }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart text { fill: var(--muted); font: 11px system-ui, sans-serif; }
svg.chart .axis { stroke: var(--line); }
.f-saved { fill: var(--saved); } .f-stops { fill: var(--stops); } .f-allow { fill: var(--allow); } .f-advise { fill: var(--advise); }
.f-ask { fill: var(--ask); } .f-deny { fill: var(--deny); } .f-edit { fill: var(--edit); } .f-muted { fill: var(--muted); }
.s-failed { stroke: var(--deny); stroke-width: 2; } .s-ok { stroke: var(--allow); stroke-width: 2; }
.legend { display: flex; flex-wrap: wrap; gap: .3rem 1rem; font-size: .85rem; margin: .3rem 0 0; padding: 0; list-style: none; }
.legend .key { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; vertical-align: -.05rem; margin-right: .3rem; }
.k-saved { background: var(--saved); } .k-stops { background: var(--stops); } .k-allow { background: var(--allow); } .k-advise { background: var(--advise); }
.k-ask { background: var(--ask); } .k-deny { background: var(--deny); } .k-edit { background: var(--edit); } .k-muted { background: var(--muted); }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; margin: .6rem 0; }
form.settings { background: var(--card); padding: 1rem; border: 1px solid var(--line); }
form.settings h2 { margin: 1rem 0 .3rem; }
.setting { display: grid; grid-template-columns: minmax(10rem, 14rem) minmax(6rem, 12rem) 1fr; gap: .2rem 1rem; align-items: start; padding: .4rem 0; border-bottom: 1px solid var(--line); }
.setting .about { font-size: .9rem; }
@media (max-width: 45rem) { .setting { grid-template-columns: 1fr; } }
input, select, button { font: inherit; color: inherit; }
input[type=text], select { background: var(--bg); border: 1px solid var(--muted); border-radius: 4px; padding: .2rem .4rem; width: 100%; }
button { padding: .35rem .9rem; border-radius: 4px; border: 1px solid var(--muted); background: var(--card); cursor: pointer; }
button.danger { border-color: var(--deny); color: var(--deny); }
dialog { color: var(--fg); background: var(--card); border: 1px solid var(--line); border-radius: 6px; max-width: min(34rem, 90vw); }
dialog::backdrop { background: rgba(0,0,0,.45); }
#status { margin: .8rem 0; min-height: 1.5em; }
.error { color: var(--deny); } .ok { color: var(--allow); }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
"#;

/// Percent-encodes one path segment (a session key may hold `/`, `#`, spaces).
pub(super) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A page: `page` names it for the script (`home`, `session`, `settings`) and for the
/// navigation's current link.
pub(super) fn layout(title: &str, page: &str, body: Markup) -> Markup {
    let nav = [("/", "Home", "home"), ("/settings", "Settings", "settings")];
    m! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · toolbrake" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body data-page=(page) {
                a.skip href="#main" { "Skip to the content" }
                header {
                    span.brand { "toolbrake" }
                    nav aria-label="Pages" {
                        @for (href, label, id) in nav {
                            a href=(href) aria-current=[(id == page).then_some("page")] { (label) }
                        }
                    }
                    span.muted #store {}
                }
                main #main tabindex="-1" { (body) }
                dialog #confirm aria-labelledby="confirm-title" {
                    form method="dialog" {
                        h2 #confirm-title {}
                        p #confirm-text {}
                        div.actions {
                            button value="yes" #confirm-yes { "Confirm" }
                            button value="no" #confirm-no autofocus { "Cancel" }
                        }
                    }
                }
                script src="/assets/app.js" {}
            }
        }
    }
}

/// A small bar of `count` out of `limit`, with the figures as text.
pub(super) fn bar(count: u64, limit: u64) -> Markup {
    let pct = (count * 100).checked_div(limit).unwrap_or(0).min(100);
    m! { span.bar aria-hidden="true" { span style=(format!("width:{pct}%")) {} } (count) "/" (limit) }
}

/// A legend: `(class, label)` pairs (the class colours the key).
pub(super) fn legend(items: &[(&str, &str)]) -> Markup {
    m! {
        ul.legend aria-hidden="true" {
            @for (class, label) in items { li { span class=(format!("key k-{class}")) {} (label) } }
        }
    }
}
