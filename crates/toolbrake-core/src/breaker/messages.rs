//! Every text the breaker shows (docs/decisions.md, "Messages"). The literal
//! anchors are kept byte for byte; no message echoes a stripped decoy value, invents a
//! budget figure, or contains `<tool_call>` / `<function=`.

use super::failure::Failure;
use super::fingerprint::Kind;
use super::verdict::{Hit, Track};
use std::fmt::Write;

/// `text` unchanged when it fits `cap` characters, else its first `cap` characters and
/// `… (+N more chars)`.
///
/// ```
/// use toolbrake_core::breaker::messages::preview;
/// assert_eq!(preview("abcdef", 4), "abcd… (+2 more chars)");
/// assert_eq!(preview("abc", 4), "abc");
/// ```
pub fn preview(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        None => text.to_string(),
        Some((cut, _)) => {
            let more = text[cut..].chars().count();
            format!("{}… (+{more} more chars)", &text[..cut])
        }
    }
}

/// [`preview`] of `text` redacted, reading a bounded prefix of it: a fingerprint of a
/// megabyte `Write` is previewed without redacting the megabyte.
pub fn preview_redacted(text: &str, cap: usize) -> String {
    crate::redact::RedactedCut::preview(text, cap)
        .shown()
        .into_owned()
}

/// Stage 1: a light advisory.
pub fn stage1(fp: &str, n: u32) -> String {
    format!(
        "CONVERGENCE_CHECK: you are repeating yourself — {fp} has come up {n} times this turn.\n\
         Before the next call, consider whether the current route is working, and whether a different approach would get you there faster."
    )
}

/// What a fingerprint's window count holds, for the texts that quote it: the identities of
/// one action (`exact:`, `cmd:`, `net:`) with the progress signal on count only calls that
/// returned what the call before them returned; a target measure counts every call.
fn counts(fp: &str) -> &'static str {
    match Kind::of(fp) {
        Kind::Host => "every call to this host counts, whatever it returned",
        Kind::Site => "every call to this site counts, whatever it returned",
        Kind::Sink => "every write to this destination counts, whatever it returned",
        Kind::Family => "every HTTP fetch counts, whatever it returned",
        Kind::Verb => "every run of this command counts, whatever it returned",
        Kind::Tool => "every call of this tool counts, whatever it returned",
        Kind::Exact | Kind::Cmd | Kind::Net => "",
    }
}

/// Stage 2: the summary demand. `progress`: the progress signal is on (calls that
/// returned new output left the count of `exact:`, `cmd:` and `net:` fingerprints).
pub fn stage2(fp: &str, n: u32, progress: bool) -> String {
    // Seed mode speaks the original's words exactly (its side-by-side test compares them).
    let how = match counts(fp) {
        _ if !progress => " without producing a result".to_string(),
        "" => " without producing a new result".to_string(),
        rule => format!(" ({rule})"),
    };
    format!(
        "CONVERGENCE_CHECK: {fp} has now come up {n} times this turn{how}.\n\
         Stop and summarise your progress before any further call:\n\
         1. What is established, and how you know it.\n\
         2. What you assumed but have not verified.\n\
         3. What failed, and why.\n\
         4. At least two approaches you have not tried yet, and which one comes next.\n\
         Do not repeat the attempts listed under 3; find an alternative instead.\n\
         If you are working through items in batches, use a larger per-batch amount rather than many small calls."
    )
}

/// The failure-track advisory.
pub fn failure_advisory(fp: &str, n: u32, failure: &Failure) -> String {
    format!(
        "CONVERGENCE_CHECK: {fp} has failed {n} times in a row — {failure}.\n\
         1. Read the error output and say what it says.\n\
         2. If it names a target (a file, a URL, a host, an endpoint, a command), check that the target exists.\n\
         3. If it names a cause, fix the cause instead of re-running the same call."
    )
}

/// The struggle advisory: a fingerprint keeps failing although the workspace changed (or
/// the failure changed) between the runs. The agent is working, not looping; it is told
/// the edits have not fixed it yet.
pub fn struggle_advisory(fp: &str, n: u32, failure: &Failure) -> String {
    format!(
        "CONVERGENCE_CHECK: {fp} has failed {n} times since it last succeeded, with changes in between — the latest time {failure}.\n\
         The edits so far have not fixed it. Before the next change:\n\
         1. Say what the latest failure says, and how it differs from the one before.\n\
         2. Check that what you run exercises the code you are changing.\n\
         3. If the failure has not moved for a while, step back and try a different approach."
    )
}

/// `1st`, `2nd`, `3rd`, `4th`…
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn track_hits(hits: &[Hit], track: Track) -> impl Iterator<Item = &Hit> {
    hits.iter().filter(move |h| h.track == track)
}

fn failure_hits(hits: &[Hit]) -> impl Iterator<Item = &Hit> {
    track_hits(hits, Track::Failure)
}

fn repeat_hits(hits: &[Hit]) -> impl Iterator<Item = &Hit> {
    track_hits(hits, Track::Repeat)
}

fn cycle_hits(hits: &[Hit]) -> impl Iterator<Item = &Hit> {
    track_hits(hits, Track::Cycle)
}

fn struggle_hits(hits: &[Hit]) -> impl Iterator<Item = &Hit> {
    track_hits(hits, Track::Struggle)
}

fn unchanged_hits(hits: &[Hit]) -> impl Iterator<Item = &Hit> {
    track_hits(hits, Track::Unchanged)
}

/// `<fp> came back the same N times in a row (M of them after changes to the workspace;
/// the latest: <failure>)`.
fn unchanged_line(h: &Hit) -> String {
    let times = if h.count == 1 { "time" } else { "times" };
    let mut line = format!(
        "{} returned the same result as the run before it {} {times} in a row",
        h.fingerprint, h.count
    );
    match h.after_edits.unwrap_or(0) {
        0 => {}
        n if n == h.count => line.push_str(", each time after the workspace changed"),
        n => {
            let _ = write!(line, ", {n} of them after the workspace changed");
        }
    }
    if let Some(f) = &h.failure {
        let _ = write!(line, " (the latest: {f})");
    }
    line
}

/// `- <fp> — <N> <what> (<the last failure>)`, one line per hit.
fn failure_lines<'a>(s: &mut String, hits: impl Iterator<Item = &'a Hit>, what: &str) {
    for h in hits {
        let why = h
            .failure
            .as_ref()
            .map(|f| f.to_string())
            .unwrap_or_else(|| "the call failed".into());
        let _ = writeln!(s, "- {} — {} {what} ({why})", h.fingerprint, h.count);
    }
}

fn cycle_line(h: &Hit) -> String {
    format!(
        "{} starts a cycle of {} calls for the {} time; every round returned the same results",
        h.fingerprint,
        h.period.unwrap_or(2),
        ordinal(h.count)
    )
}

/// A fingerprint in the words of someone who has never seen one: `exact:get_order:{"id":1}`
/// is `the same call: get_order {"id":1}`, `host:api.example.com` is `calls to
/// api.example.com`. What follows the kind is kept as it was previewed (redacted, cut).
///
/// ```
/// use toolbrake_core::breaker::messages::in_words;
/// assert_eq!(in_words(r#"exact:get_order:{"id":1}"#), r#"the same call: get_order {"id":1}"#);
/// assert_eq!(in_words("host:api.example.com"), "any call to api.example.com");
/// assert_eq!(in_words("tool:get_order"), "get_order, whatever its arguments");
/// assert_eq!(in_words("Bearer x:y"), "Bearer x:y");
/// ```
pub fn in_words(fp: &str) -> String {
    let Some(kind) = Kind::named(fp) else {
        return fp.to_string();
    };
    let rest = &fp[kind.as_str().len() + 1..];
    match kind {
        Kind::Exact => match rest.split_once(':') {
            Some((tool, "{}")) => format!("the same call: {tool} (no arguments)"),
            Some((tool, args)) => format!("the same call: {tool} {args}"),
            None => format!("the same call: {rest}"),
        },
        Kind::Cmd => {
            let command = rest.split_once(':').map_or(rest, |(_, c)| c);
            format!("the command `{command}` (however its volatile flags change)")
        }
        Kind::Net => format!("the address {rest}"),
        Kind::Host => format!("any call to {rest}"),
        Kind::Site => format!("any call to the site {rest}"),
        Kind::Sink => format!("any output written to {rest}"),
        Kind::Family => "any HTTP fetch".to_string(),
        Kind::Verb => format!("any run of `{rest}`"),
        Kind::Tool => format!("{rest}, whatever its arguments"),
    }
}

/// One action a fingerprint names, quoted (`bash {"command":"ls"}`, `` `pytest -x` ``), for
/// texts that already say it is the same action ([`in_words`] for any other kind).
pub fn action_in_words(fp: &str) -> String {
    match Kind::named(fp) {
        Some(Kind::Exact) => {
            let rest = &fp["exact:".len()..];
            match rest.split_once(':') {
                Some((tool, args)) => format!("`{tool} {args}`"),
                None => format!("`{rest}`"),
            }
        }
        Some(Kind::Cmd) => {
            let rest = &fp["cmd:".len()..];
            format!("`{}`", rest.split_once(':').map_or(rest, |(_, c)| c))
        }
        _ => in_words(fp),
    }
}

/// The header of one kind of hit in an ask: the seed's words in seed mode, the product's
/// name otherwise.
fn ask_header(s: &mut String, progress: bool, what: &str) {
    s.push_str(if progress {
        "toolbrake: "
    } else {
        "repeat-tool-breaker: "
    });
    s.push_str(what);
    s.push('\n');
}

/// The reason shown to the operator when a call is about to be gated. `progress` off (seed
/// mode) speaks the original plugin's words; on, the same in plain words: what each hit
/// stands for instead of its fingerprint, and no "measures".
pub fn ask_reason(hits: &[Hit], progress: bool) -> String {
    let mut s = String::new();
    let fp = |h: &Hit| {
        if progress {
            in_words(&h.fingerprint)
        } else {
            h.fingerprint.clone()
        }
    };
    if failure_hits(hits).next().is_some() {
        ask_header(
            &mut s,
            progress,
            "this call is about to be blocked because its target keeps FAILING:",
        );
        for h in failure_hits(hits) {
            if progress {
                let why = h
                    .failure
                    .as_ref()
                    .map(|f| format!(" ({f})"))
                    .unwrap_or_default();
                let _ = writeln!(s, "  - {}: {} failures in a row{why}", fp(h), h.count);
            } else {
                let _ = writeln!(s, "  - {} {} consecutive failures", h.fingerprint, h.count);
            }
        }
    }
    if struggle_hits(hits).next().is_some() {
        ask_header(
            &mut s,
            progress,
            "this call keeps FAILING although the agent changed things between the runs:",
        );
        for h in struggle_hits(hits) {
            let _ = writeln!(
                s,
                "  - {}{} {} failures the same way since it last succeeded",
                fp(h),
                if progress { ":" } else { "" },
                h.count
            );
        }
    }
    if unchanged_hits(hits).next().is_some() {
        ask_header(&mut s, progress, "this call keeps returning the SAME result, whatever the agent changed between the runs:");
        for h in unchanged_hits(hits) {
            let shown = Hit {
                fingerprint: fp(h),
                ..h.clone()
            };
            let _ = writeln!(s, "  - {}", unchanged_line(&shown));
        }
    }
    if repeat_hits(hits).next().is_some() {
        ask_header(
            &mut s,
            progress,
            "this call is about to be blocked as a repeat:",
        );
        for h in repeat_hits(hits) {
            if progress {
                let _ = writeln!(
                    s,
                    "  - {}: this would be the {} time, and the limit is {}",
                    fp(h),
                    ordinal(h.count),
                    h.limit
                );
            } else {
                let _ = writeln!(s, "  - {} {}/{}", h.fingerprint, h.count, h.limit);
            }
        }
    }
    if cycle_hits(hits).next().is_some() {
        ask_header(
            &mut s,
            progress,
            "this call is about to be blocked as a cycle:",
        );
        for h in cycle_hits(hits) {
            let shown = Hit {
                fingerprint: fp(h),
                ..h.clone()
            };
            let _ = writeln!(s, "  - {}", cycle_line(&shown));
        }
    }
    s.push_str(if progress {
        "Approve to let these calls run for the REST OF THIS TURN (later identical calls are allowed). \
         Decline to keep them blocked until your next message."
    } else {
        "Approve to stop counting these measures for the REST OF THIS TURN (later identical calls are allowed). \
         Decline to keep them blocked until your next message."
    });
    s
}

/// The denial the model reads. With `progress` on, repeat hits count only calls that
/// returned what the call before them returned, and the text says so.
pub fn denial(
    tool: &str,
    hits: &[Hit],
    refused: bool,
    last_result: Option<&str>,
    result_cap: usize,
    progress: bool,
) -> String {
    let name = if tool.is_empty() { "tool call" } else { tool };
    let mut s = String::new();
    let has_failure = failure_hits(hits).next().is_some();
    let has_repeat = repeat_hits(hits).next().is_some();
    let has_cycle = cycle_hits(hits).next().is_some();
    let has_struggle = struggle_hits(hits).next().is_some();
    if has_failure {
        let _ = writeln!(
            s,
            "REPEAT_TOOL_BLOCKED: {name} (consecutive failures). The call was stopped before executing."
        );
        s.push_str("Failing target(s):\n");
        failure_lines(&mut s, failure_hits(hits), "consecutive failures");
        s.push_str(
            "Rephrasing the same call will not fix it. Read the failure, check that the target exists, \
             or fix the cause. A different call (reading an error log, a grep, another endpoint) is not blocked.\n",
        );
    }
    if has_repeat {
        if has_failure {
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "REPEAT_TOOL_BLOCKED: repeated {name} (semantic match). The call was stopped before executing."
        );
        s.push_str("Hits:\n");
        for h in repeat_hits(hits) {
            let _ = write!(s, "- {} {}/{}", h.fingerprint, h.count, h.limit);
            match counts(&h.fingerprint) {
                "" => s.push('\n'),
                rule => {
                    let _ = writeln!(s, " ({rule})");
                }
            }
        }
        if progress && repeat_hits(hits).any(|h| counts(&h.fingerprint).is_empty()) {
            let which = if repeat_hits(hits).all(|h| counts(&h.fingerprint).is_empty()) {
                "Calls"
            } else {
                "For exact:, cmd: and net: fingerprints, calls"
            };
            let _ = writeln!(
                s,
                "{which} that returned new output are not counted: the calls counted returned the same result as the one before them."
            );
        }
        s.push_str(
            "Changing a description or a title, a timeout, --max-time, or the spelling of a host is not a new action.\n",
        );
    }
    if has_cycle {
        if has_failure || has_repeat {
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "REPEAT_TOOL_BLOCKED: repeated {name} (cycle). The call was stopped before executing."
        );
        s.push_str("Cycle:\n");
        for h in cycle_hits(hits) {
            let _ = writeln!(s, "- {}", cycle_line(h));
        }
        s.push_str("Going round the same calls again will return the same results again.\n");
    }
    if has_struggle {
        if has_failure || has_repeat || has_cycle {
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "REPEAT_TOOL_BLOCKED: {name} (failing after changes). The call was stopped before executing."
        );
        s.push_str("Still failing:\n");
        failure_lines(
            &mut s,
            struggle_hits(hits),
            "failures the same way since it last succeeded",
        );
    }
    if unchanged_hits(hits).next().is_some() {
        if has_failure || has_repeat || has_cycle || has_struggle {
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "REPEAT_TOOL_BLOCKED: {name} (same result again). The call was stopped before executing."
        );
        s.push_str("Unchanged:\n");
        for h in unchanged_hits(hits) {
            let _ = writeln!(s, "- {}", unchanged_line(h));
        }
        s.push_str(
            "What you changed between these runs did not touch what this call reports, so running it again \
             will answer the same. Read the result you already have: say what it says and what it rules out. \
             Check that the change is in the code this call actually exercises (the right file, module, \
             installed copy, or build), or change the approach. A different call is not blocked.\n",
        );
    }
    refusal_and_last_result(&mut s, refused, last_result, result_cap);
    if has_repeat || has_cycle {
        s.push_str(
            "\nDo not repeat this call with different cosmetics. Use the result you already have, \
             do something genuinely different, or answer with what you have.",
        );
    } else {
        s.push_str("\nDo not retry the failing target as-is.");
    }
    s
}

/// What every denial ends with before its last sentence: that an exemption was refused,
/// when it was, and the previous tool result (or where it is).
pub(super) fn refusal_and_last_result(
    s: &mut String,
    refused: bool,
    last_result: Option<&str>,
    result_cap: usize,
) {
    if refused {
        s.push_str(
            "\nAn exemption for these measures was requested and was NOT granted (the operator declined, \
             or no approval channel was available), so they stay blocked until the next human message.\n",
        );
    }
    match last_result.filter(|r| !r.is_empty()) {
        Some(r) => {
            let _ = write!(s, "\nPrevious tool result:\n{}\n", preview(r, result_cap));
        }
        None => {
            s.push_str("\nThe previous tool result is already in the conversation history above.\n")
        }
    }
}

/// The shell-HTTP denial: `tool` ran `what` (a client or request API) toward `url`
/// (already redacted, when the command named one); `fetch` is the replacement tool.
/// Not a `REPEAT_TOOL_BLOCKED` message: nothing was repeated.
pub fn shell_http_denial(
    tool: &str,
    what: &str,
    url: Option<&str>,
    fetch: &str,
    local_allowed: bool,
) -> String {
    let tool = if tool.is_empty() { "shell" } else { tool };
    let target = url.map_or_else(|| "the URL".to_string(), |u| format!("{u:?}"));
    let mut s = format!(
        "SHELL_HTTP_BLOCKED: this {tool} call fetches over HTTP ({what}) and was stopped before executing.\n\
         A fetch made from the shell hides its outcome (status, size, redirects) inside the pipeline and pours the page into the conversation.\n"
    );
    if fetch == "web_fetch_file" {
        let _ = write!(
            s,
            "Use `web_fetch_file` instead: it saves the response to a file and returns the path and the status code.\n\
             1. web_fetch_file(url: {target}) → the path of the saved file\n\
             2. {tool}: jq / grep / python3 on that path\n\
             The rest of your pipeline still works on the file.\n"
        );
    } else {
        let _ = writeln!(
            s,
            "Use the `{fetch}` tool instead, with url {target}: it fetches under the host's own controls and reports the status."
        );
    }
    if local_allowed {
        s.push_str("Local addresses (localhost, 127.0.0.1, private networks) are not covered: a shell fetch of those still runs.\n");
    }
    s.push_str("Do not look for another shell route to the same fetch.");
    s
}

/// The self-protection denial: `tool` would do `what` to toolbrake itself in `session`.
/// Says who can lift the brake: a person, from their own terminal.
pub fn self_protection_denial(tool: &str, what: &str, session: &str) -> String {
    let tool = if tool.is_empty() { "tool" } else { tool };
    let key = if session.is_empty() || session.chars().any(char::is_control) {
        "KEY".to_string()
    } else {
        crate::redact::redact(session).into_owned()
    };
    format!(
        "TOOLBRAKE_SELF_PROTECTED: this {tool} call would change toolbrake itself ({what}) and was stopped before executing.\n\
         The brake on this session cannot be lifted by the agent it brakes: toolbrake's commands that change state, its state file, its configuration files and its Redis keys are out of reach of tool calls.\n\
         If a stop was wrong, tell the person you work for: they can reset this session from their own terminal with `toolbrake sessions reset {key}` (`toolbrake sessions` lists the keys), or change the configuration there.\n\
         Do not look for another route to the same change."
    )
}
