//! `toolbrake explain [--session KEY] TOOL ARGS`: the canonical JSON, the call hash and
//! every fingerprint a call emits, with its kind, its limit and why; with a session, what
//! that session's state says of the call (the engines' signals, read-only).

use super::CliError;
use serde_json::Value;
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use toolbrake::breaker::fingerprints;
use toolbrake::canonical::{call_hash, canonical_json, hash_prefix};
use toolbrake::settings::{self, process_env, StoreKind};

/// Arguments read from stdin larger than this are refused.
const MAX_ARGS_BYTES: u64 = 16 << 20;

fn read_args(raw: &str) -> Result<Value, CliError> {
    let text = if raw == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .take(MAX_ARGS_BYTES + 1)
            .read_to_string(&mut buf)
            .map_err(|e| format!("cannot read arguments from stdin: {e}"))?;
        if buf.len() as u64 > MAX_ARGS_BYTES {
            return Err(format!("arguments on stdin exceed {MAX_ARGS_BYTES} bytes").into());
        }
        buf
    } else {
        raw.to_string()
    };
    // The parse error names the position only: never echo the arguments themselves.
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "arguments are not valid JSON ({} at line {}, column {})",
            match e.classify() {
                serde_json::error::Category::Io => "read error",
                serde_json::error::Category::Syntax => "syntax error",
                serde_json::error::Category::Data => "data error",
                serde_json::error::Category::Eof => "unexpected end",
            },
            e.line(),
            e.column()
        )
        .into()
    })
}

pub fn run(
    config: Option<&Path>,
    session: Option<&str>,
    tool: &str,
    raw_args: &str,
) -> Result<ExitCode, CliError> {
    let loaded = settings::load(config)?;
    let cfg = loaded.engine;
    let args = read_args(raw_args)?;
    let canonical = canonical_json(&args)?;
    let hash = call_hash(tool, &args)?;
    let engine = toolbrake::Engine::new(cfg.clone());
    let state = match session {
        Some(key) => {
            let store = loaded.store.open(StoreKind::Sqlite, &process_env)?;
            let st = store.get(key)?;
            for w in store.take_warnings() {
                warn!("toolbrake: {w}");
            }
            // A key the store does not hold (a typo, a session swept or reset) is said so,
            // as `sessions reset` says it, rather than explained as an empty session.
            let Some(st) = st else {
                warn!(
                    "toolbrake: no stored session {key:?} in {} (`toolbrake sessions` lists them)",
                    store.describe()
                );
                return Ok(ExitCode::from(1));
            };
            Some((key, st, store.describe()))
        }
        None => None,
    };
    let empty = toolbrake::SessionState::default();
    let call = toolbrake::Call {
        session: session.unwrap_or(""),
        id: "explain",
        tool,
        args: &args,
    };
    let signals = engine.signals(state.as_ref().map_or(&empty, |s| &s.1), &call)?;
    outln!("tool:       {tool}");
    outln!("canonical:  {}", toolbrake::redact::redact(&canonical));
    outln!("hash:       {hash}");
    outln!("prefix:     {}", hash_prefix(&hash));
    outln!(
        "streak:     counts {}{}",
        signals.streak_identity,
        if signals.decoys_ignored {
            " (the call without its decoy keys: a new description or timeout is the same call)"
        } else {
            ""
        }
    );
    if let Some((key, _, describe)) = &state {
        outln!("session:    {key} ({describe})");
        outln!(
            "  streak:     {} identical {} in a row before this one (refused ones included){}",
            signals.in_a_row,
            if signals.in_a_row == 1 {
                "call"
            } else {
                "calls"
            },
            // `same_in_a_row` counts the results themselves (the first one is 1), as the
            // streak's refusal does ("the last N identical calls returned the same result");
            // a refused call ran and returned nothing, so it is never among them.
            if signals.same_in_a_row >= 2 {
                format!(
                    ", the last {} that ran returned the same result",
                    signals.same_in_a_row
                )
            } else {
                String::new()
            }
        );
        if let Some(b) = &signals.breaker {
            let u = &b.unchanged;
            outln!(
                "  unchanged:  {} {} in a row the same as the run before{}; {}",
                u.same,
                if u.same == 1 { "result" } else { "results" },
                if u.after_edits > 0 {
                    format!(" ({} after workspace changes)", u.after_edits)
                } else {
                    String::new()
                },
                match u.limit {
                    Some(l) if u.stops => format!("stopped at {l}: this call would be stopped"),
                    Some(l) if u.same >= l => {
                        format!("stopped at {l}: its next run is let through")
                    }
                    Some(l) => format!("stopped at {l}"),
                    None => "the unchanged track is off".into(),
                }
            );
            // The change that kept it running although its result kept coming back the same.
            match (u.kept, u.fresh) {
                (Some(k @ toolbrake::breaker::Kept::NewFile), true) => {
                    outln!("  kept:       {} since it last ran", k.describe())
                }
                (Some(k @ toolbrake::breaker::Kept::ScriptEdited), _) => {
                    outln!("  kept:       its count restarted: {}", k.describe())
                }
                _ => {}
            }
            if let Some(p) = b.cycle {
                outln!("  cycle:      this call would start another round of a {p}-call cycle");
            }
            if b.exempt {
                outln!("  exempt:     an operator approved it for the rest of this turn");
            }
        }
    }
    let b = &cfg.breaker;
    if !b.enabled() {
        outln!("breaker:    off (breaker.enabled = false)");
        return Ok(ExitCode::SUCCESS);
    }
    if !b.tracks(tool) {
        outln!("breaker:    not tracked (breaker.include / breaker.exclude)");
        return Ok(ExitCode::SUCCESS);
    }
    let set = fingerprints(b, tool, &args)?;
    outln!("class:      {} tool", set.class);
    let mutating = b.tools().is_mutating(tool, &args);
    outln!(
        "mutating:   {}",
        match (mutating, b.progress()) {
            (true, true) => "yes: when it succeeds, failing fingerprints count from 1 again",
            (true, false) => "yes, but breaker.progress = false ignores it",
            (false, _) => "no",
        }
    );
    if b.progress() {
        let files = toolbrake::breaker::mutation::files(b.tools(), tool, &args);
        let list = |names: &[String]| {
            names
                .iter()
                .map(|n| toolbrake::redact::redact(n).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !files.reads.is_empty() {
            outln!(
                "reads:      {} (an edit of one restarts its unchanged count)",
                list(&files.reads)
            );
        }
        if !files.writes.is_empty() {
            outln!(
                "writes:     {} (when it succeeds, a call that reads one counts from 0 again)",
                list(&files.writes)
            );
        }
    }
    if !set.stripped.is_empty() {
        outln!("decoys:     stripped {}", set.stripped.join(", "));
    }
    if set.relaxed {
        outln!(
            "local:      every URL is local and local_hosts = \"allow\": no target fingerprints"
        );
    } else if set.local {
        outln!("local:      every URL is local (host: only with include_local = true)");
    }
    // A command's fingerprint drops the quotes and backslashes that redaction may need to
    // find a credential (a JSON text's escaped line break, `…\\npassword X`, becomes
    // `…npassword X`): each is shown as the same fingerprint of the arguments with their
    // credentials redacted first (when that gives the same fingerprints).
    let redacted = toolbrake::redact::redact(&canonical);
    let shown = serde_json::from_str::<Value>(&redacted)
        .ok()
        .filter(|_| redacted != canonical)
        .and_then(|a| fingerprints(b, tool, &a).ok())
        .filter(|r| {
            r.fps.len() == set.fps.len()
                && r.fps.iter().zip(&set.fps).all(|(x, y)| x.kind == y.kind)
        });
    let text = |i: usize| {
        let t = shown.as_ref().map_or(&set.fps[i].text, |r| &r.fps[i].text);
        toolbrake::redact::redact(t).into_owned()
    };
    outln!("fingerprints:");
    let width = set
        .fps
        .iter()
        .map(|f| f.text.chars().count())
        .max()
        .unwrap_or(0)
        .min(80);
    let seen = signals.breaker.as_ref().filter(|_| state.is_some());
    for (i, f) in set.fps.iter().enumerate() {
        let limit = f
            .limit
            .map(|l| format!("gate at {l}"))
            .unwrap_or_else(|| "off (not counted)".into());
        let now = seen
            .and_then(|b| b.fingerprints.get(i))
            .map(|s| {
                let mut t = format!("; {} in the window", s.count);
                if s.failures > 0 {
                    t.push_str(&format!(", failed {} in a row", s.failures));
                }
                if s.failures_since_success > s.failures {
                    t.push_str(&format!(
                        ", {} failures since it last succeeded",
                        s.failures_since_success
                    ));
                }
                t
            })
            .unwrap_or_default();
        outln!("  {:<width$}  {:<6} {limit}{now}", text(i), f.kind.as_str());
    }
    Ok(ExitCode::SUCCESS)
}
