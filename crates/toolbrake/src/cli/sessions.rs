//! `toolbrake sessions` and `toolbrake sessions reset KEY`: the operator's view of the store.

use super::CliError;
use std::path::Path;
use std::process::ExitCode;
use toolbrake::settings::{self, process_env, StoreKind};

pub fn list(config: Option<&Path>, json: bool) -> Result<ExitCode, CliError> {
    let s = settings::load(config)?;
    let store = s.store.open(StoreKind::Sqlite, &process_env)?;
    let sessions = store.list()?;
    for w in store.take_warnings() {
        warn!("toolbrake: {w}");
    }
    // One shape for every reader: the dashboard's `/api/sessions` rows.
    let rows: Vec<serde_json::Value> = sessions
        .iter()
        .map(|info| toolbrake::ui::session_json(info, false))
        .collect();
    if json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let n = rows.len();
    outln!(
        "# {n} {} in {}",
        if n == 1 { "session" } else { "sessions" },
        store.describe()
    );
    if rows.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<48} {:<20} {:>6} {:>9} {:>8} {:<22} {:>10} {:>8} {:>7}",
        "session",
        "last activity",
        "window",
        "top count",
        "in a row",
        "failing",
        "exemptions",
        "refusals",
        "stopped"
    );
    for r in &rows {
        let fails: Vec<String> = r["failure_streaks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| format!("{}×{}", f["kind"].as_str().unwrap_or(""), f["count"]))
            .collect();
        let key = r["key"].as_str().unwrap_or("");
        let key = if key.chars().count() > 47 {
            format!("{}…", key.chars().take(46).collect::<String>())
        } else {
            key.to_string()
        };
        outln!(
            "{:<48} {:<20} {:>6} {:>9} {:>8} {:<22} {:>10} {:>8} {:>7}",
            key,
            r["last_activity"].as_str().unwrap_or(""),
            r["window"].to_string(),
            r["top_count"].to_string(),
            r["streak"]["count"].to_string(),
            if fails.is_empty() {
                "-".to_string()
            } else {
                fails.join(" ")
            },
            r["exemptions"].to_string(),
            r["refusals"].to_string(),
            r["stopped"].to_string()
        );
    }
    outln!(
        "\nwindow: calls counted in the breaker's window; top count: most occurrences of one \
         fingerprint in it; in a row: the current run of identical calls; failing: failure \
         streaks (kind×count); exemptions / refusals: fingerprints the operator approved / \
         declined this turn (the JSON's `exemptions` and `refusals`); stopped: calls denied by either engine, or asked and not approved."
    );
    Ok(ExitCode::SUCCESS)
}

pub fn reset(config: Option<&Path>, key: &str) -> Result<ExitCode, CliError> {
    let s = settings::load(config)?;
    let store = s.store.open(StoreKind::Sqlite, &process_env)?;
    let removed = if let Some(var) = settings::agent_environment(&process_env) {
        // Run by an agent's tool (or typed into the agent's own prompt): done, but kept
        // in the session's timeline so a person sees it on the dashboard.
        let noted = toolbrake_session::reset_noted(store.as_ref(), key, var)?;
        if noted {
            warn!("toolbrake: this command runs inside an agent's environment ({var} is set): the reset is recorded in the session's history on the dashboard");
        }
        noted
    } else {
        let mut removed = false;
        for k in toolbrake_store::with_sub_agents(store.as_ref(), key)? {
            removed |= store.remove(&k)?;
        }
        removed
    };
    if removed {
        outln!("Session {key} reset.");
        Ok(ExitCode::SUCCESS)
    } else {
        warn!(
            "toolbrake: no stored session {key:?} in {}",
            store.describe()
        );
        Ok(ExitCode::from(1))
    }
}
