//! `toolbrake hook DIALECT [EVENT]`: one hook invocation, as a host runs it at a tool call
//! (`init.rs` installs the command).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use toolbrake::settings::{self, process_env, StoreKind};
use toolbrake::Engine;
use toolbrake_hooks::{
    handle_event, handle_unreadable_event, Context, Dialect, PayloadError, Unavailable, MAX_PAYLOAD,
};

use super::traces::Traces;
use toolbrake::settings::TelemetrySettings;
use toolbrake_telemetry::trace::Mode;

/// What a hook waits, at most, for its spans to be exported before it exits.
const TRACE_DEADLINE: Duration = Duration::from_millis(200);

/// Appends warnings to the hook log (owner-only), next to the state file.
fn log(path: &Path, dialect: Dialect, warnings: &[String]) {
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    #[cfg(unix)]
    opts.mode(0o600);
    if let Ok(mut f) = opts.open(path) {
        // A log left readable by others (an older build, a copied folder) is made
        // owner-only as it is opened: its lines name tools and sessions.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if f.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o077 != 0)
            {
                let _ = f.set_permissions(std::fs::Permissions::from_mode(0o600));
            }
        }
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        for w in warnings {
            let _ = writeln!(f, "{now} hook {}: {w}", dialect.as_str());
        }
    }
}

/// Runs one hook invocation. Always exits 0: a hook must never break the host.
pub fn run(config: Option<&Path>, dialect: Dialect, event: Option<&str>) -> ExitCode {
    let mut input = Vec::new();
    let read = std::io::stdin()
        .take(MAX_PAYLOAD as u64 + 1)
        .read_to_end(&mut input);
    let early = match read {
        Err(e) => Some(PayloadError::Unreadable(e)),
        Ok(_) if input.len() > MAX_PAYLOAD => Some(PayloadError::TooLarge),
        Ok(_) => None,
    };
    let loaded = settings::load(config);
    let (engine, store_settings, telemetry, notices, cfg_error) = match loaded {
        Ok(mut s) => {
            let notices = s.notices();
            // What the agent's own calls must not change: toolbrake's state, its
            // configuration, its keys and its command (self-protection).
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            let protected = settings::protected(&s, StoreKind::Sqlite, &process_env, &cwd);
            s.engine.breaker.protect(protected);
            (Engine::new(s.engine), s.store, s.telemetry, notices, None)
        }
        Err(e) => (
            Engine::default(),
            settings::store_settings_of_broken(config),
            TelemetrySettings::default(),
            Vec::new(),
            Some(e),
        ),
    };
    let log_path = store_settings
        .sqlite_path(&process_env)
        .parent()
        .map(|d| d.join("hook.log"))
        .unwrap_or_else(|| PathBuf::from("hook.log"));
    // What the user is told once per session: the configuration is broken, or a project's
    // file set what only the user may, or turned an engine off.
    let broken = cfg_error.is_some();
    let notice = match &cfg_error {
        Some(e) => Some((
            e.to_string(),
            config_message(&e.to_string(), store_settings.fail_closed),
        )),
        None => (!notices.is_empty()).then(|| {
            let m = notices.join(" ");
            (m.clone(), m)
        }),
    };
    let store = match (cfg_error, &early) {
        (Some(e), _) => Err(Unavailable::Configuration(Box::new(e))),
        (None, Some(_)) => Err(Unavailable::PayloadUnread),
        (None, None) => store_settings
            .open(StoreKind::Sqlite, &process_env)
            .map_err(Unavailable::Store),
    };
    // Traces only when configured (a broken file: the environment alone). The export
    // gets 200 ms in all, after the answer is printed.
    let (traces, trace_problem) =
        Traces::start(&telemetry, Mode::Event, TRACE_DEADLINE, TRACE_DEADLINE);
    let observer = traces.observer(None);
    // The OTel environment carrier: the agent's trace, when the host runs hooks in it.
    let traceparent = std::env::var("TRACEPARENT").ok();
    let ctx = Context {
        engine: &engine,
        store: store.as_ref().map(|s| s.as_ref()),
        fail_closed: store_settings.fail_closed,
        observer: observer.as_deref(),
        traceparent: traceparent.as_deref(),
    };
    let reply = match early {
        Some(reason) => handle_unreadable_event(dialect, event, reason, &ctx),
        None => handle_event(dialect, event, &input, &ctx),
    };
    let mut stdout_text = reply.stdout.clone();
    let mut warnings = reply.warnings;
    if let Some((key, message)) = &notice {
        let session = session_of(&input);
        if first_warning(&log_path, &session, key) {
            stdout_text = Some(with_system_message(stdout_text.as_deref(), message));
            if !broken {
                warnings.push(message.clone());
            }
        }
    }
    if let Some(out) = &stdout_text {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{out}");
        let _ = stdout.flush();
    }
    warnings.extend(trace_problem);
    if !warnings.is_empty() {
        for w in &warnings {
            warn!("toolbrake: {w}");
        }
        log(&log_path, dialect, &warnings);
    }
    // The spans are exported (within TRACE_DEADLINE) after the answer is out.
    drop(traces);
    ExitCode::SUCCESS
}

/// The session a payload names, for the once-per-session notice. Read without building the
/// payload's value (it can hold 64 MiB of arguments); empty when it names none.
fn session_of(input: &[u8]) -> String {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Keys<'a> {
        #[serde(borrow)]
        session_id: Option<&'a RawValue>,
        #[serde(borrow, rename = "sessionId")]
        session_id_camel: Option<&'a RawValue>,
        #[serde(borrow)]
        conversation_id: Option<&'a RawValue>,
        #[serde(borrow, rename = "taskId")]
        task_id: Option<&'a RawValue>,
    }
    let Ok(k) = serde_json::from_slice::<Keys>(input) else {
        return String::new();
    };
    [
        k.session_id,
        k.session_id_camel,
        k.conversation_id,
        k.task_id,
    ]
    .into_iter()
    .flatten()
    .find_map(|raw| serde_json::from_str::<String>(raw.get()).ok())
    .unwrap_or_default()
}

/// What the user reads when the configuration is broken: the host shows it once per
/// session (Claude Code, Codex and Gemini CLI all show a hook's `systemMessage`).
fn config_message(error: &str, fail_closed: bool) -> String {
    let effect = if fail_closed {
        "tool calls are refused until it is fixed ([store] fail_closed = true)"
    } else {
        "tool calls run unchecked until it is fixed"
    };
    format!("toolbrake is not checking tool calls: its configuration is invalid. {error} Run `toolbrake config check` after fixing it; {effect}.")
}

/// Adds `systemMessage` to the hook's JSON answer (or makes one).
fn with_system_message(out: Option<&str>, message: &str) -> String {
    let mut v = out
        .and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    v["systemMessage"] = serde_json::Value::String(message.to_string());
    v.to_string()
}

/// Whether this session has not been told about this configuration error yet; records
/// that it now has (a short owner-only file beside the hook log, last 256 entries).
fn first_warning(log_path: &Path, session: &str, error: &str) -> bool {
    let Some(dir) = log_path.parent() else {
        return true;
    };
    let file = dir.join("config-warnings");
    let entry = format!(
        "{:016x}",
        toolbrake::breaker::FpId::of(&format!("{session}\n{error}")).0
    );
    let existing = std::fs::read_to_string(&file).unwrap_or_default();
    if existing.lines().any(|l| l == entry) {
        return false;
    }
    let mut lines: Vec<&str> = existing.lines().collect();
    lines.push(&entry);
    let keep = &lines[lines.len().saturating_sub(256)..];
    let _ = std::fs::create_dir_all(dir);
    let _ = toolbrake::files::replace_own(&file, (keep.join("\n") + "\n").as_bytes(), Some(0o600));
    true
}
