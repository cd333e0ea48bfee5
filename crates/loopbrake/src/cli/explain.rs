//! `loopbrake explain TOOL ARGS`: the canonical JSON, the call hash and every
//! fingerprint a call emits, with its kind, its limit and why.

use super::CliError;
use loopbrake::breaker::fingerprints;
use loopbrake::canonical::{call_hash, canonical_json, hash_prefix};
use loopbrake::settings;
use serde_json::Value;
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

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

pub fn run(config: Option<&Path>, tool: &str, raw_args: &str) -> Result<ExitCode, CliError> {
    let cfg = settings::load(config)?.engine;
    let args = read_args(raw_args)?;
    let canonical = canonical_json(&args)?;
    let hash = call_hash(tool, &args)?;
    outln!("tool:       {tool}");
    outln!("canonical:  {}", loopbrake::redact::redact(&canonical));
    outln!("hash:       {hash}");
    outln!("prefix:     {}", hash_prefix(&hash));
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
    outln!("fingerprints:");
    let width = set
        .fps
        .iter()
        .map(|f| f.text.chars().count())
        .max()
        .unwrap_or(0)
        .min(80);
    for f in &set.fps {
        let limit = f
            .limit
            .map(|l| format!("gate at {l}"))
            .unwrap_or_else(|| "off (not counted)".into());
        outln!(
            "  {:<width$}  {:<6} {limit}",
            loopbrake::redact::redact(&f.text),
            f.kind.as_str()
        );
    }
    Ok(ExitCode::SUCCESS)
}
