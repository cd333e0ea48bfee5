//! The brake: both engines over a session store (`NativeBrake`, wrapped by
//! `toolbrake.Brake`), with the store chosen by `store=` and the GIL released for its I/O.

use crate::answers::{outcome_of, PyDecision, PyRecorded};
use crate::fork::fork_gate;
use crate::json::{json_of, json_with, to_py, type_name};
use crate::{config_error, guarded, package_error, toolbrake_error};
use pyo3::exceptions::{PyRuntimeWarning, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use toolbrake::settings::{self, shown_url, StoreKind, StoreSettings};
use toolbrake_core::config::{no_env, ConfigError};
use toolbrake_core::{Call, Engine, EngineError, SessionState};
use toolbrake_session::{SessionError, Sessions};
use toolbrake_store::Store;

/// Both engines over a session store, for Python (wrapped by `toolbrake.Brake`).
#[pyclass(frozen, module = "toolbrake._native")]
pub struct NativeBrake {
    pub(crate) engine: Engine,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) fail_closed: bool,
    /// Call ids are `<prefix>-<n>`: the prefix is random, so processes sharing a store
    /// never reuse each other's ids.
    pub(crate) prefix: String,
    pub(crate) next: AtomicU64,
}

/// `store=` as `[store]` settings: `memory`, `sqlite`, `sqlite:PATH`, or a Redis URL.
pub(crate) fn store_spec(py: Python<'_>, spec: &str, s: &mut StoreSettings) -> PyResult<()> {
    if spec == "memory" {
        s.kind = Some(StoreKind::Memory);
    } else if spec == "sqlite" {
        s.kind = Some(StoreKind::Sqlite);
    } else if let Some(path) = spec.strip_prefix("sqlite:") {
        if path.is_empty() {
            return Err(config_error(
                py,
                "",
                &ConfigError {
                    key: "store".into(),
                    value: format!("{spec:?}"),
                    rule: "sqlite:PATH needs a path".into(),
                },
            ));
        }
        s.kind = Some(StoreKind::Sqlite);
        s.path = Some(path.into());
    } else if spec.starts_with("redis://") || spec.starts_with("rediss://") {
        s.kind = Some(StoreKind::Redis);
        s.url = spec.to_string();
        s.cluster_nodes.clear();
    } else {
        return Err(config_error(
            py,
            "",
            &ConfigError {
                key: "store".into(),
                value: format!("{:?}", shown_url(spec)),
                rule:
                    "must be \"memory\", \"sqlite\", \"sqlite:PATH\" or a redis:// or rediss:// URL"
                        .into(),
            },
        ));
    }
    Ok(())
}

/// `message` as a `RuntimeWarning` (Python's filters show it once per place and text). A
/// warning that cannot be shown (filters turn warnings into errors) is dropped: recording
/// never raises.
fn warn_once(py: Python<'_>, message: &str) {
    let category = py.get_type::<PyRuntimeWarning>();
    if let Ok(text) = std::ffi::CString::new(message) {
        let _ = PyErr::warn(py, &category, &text, 1);
    }
}

impl NativeBrake {
    /// Whether `id` is one this brake made up (`<prefix>-<n>` with `n` already issued).
    fn issued(&self, id: &str) -> bool {
        id.strip_prefix(self.prefix.as_str())
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n < self.next.load(Ordering::Relaxed))
    }

    fn sessions(&self) -> Sessions<'_, dyn Store> {
        Sessions::new(&self.engine, &*self.store).with_fail_closed(self.fail_closed)
    }

    fn decision(&self, d: toolbrake_core::Decision, key: String) -> PyDecision {
        PyDecision {
            verdict: d.verdict.as_str(),
            advisories: d.advisories.into_iter().map(|a| a.text).collect(),
            engine: d.engine,
            code: d.code,
            hits: serde_json::to_value(&d.hits).unwrap_or(Value::Null),
            message: d.message,
            call_id: d.id,
            session: key,
            degraded: None,
        }
    }

    /// What a call gets when the store failed, by the failure policy.
    fn unjudged(&self, problem: &str, id: String, key: String) -> PyDecision {
        let u = self.sessions().unjudged(problem);
        PyDecision {
            verdict: if u.refuse { "deny" } else { "allow" },
            message: u.refuse.then_some(u.refusal),
            advisories: Vec::new(),
            engine: u.refuse.then_some("toolbrake"),
            code: u.refuse.then_some("STORE_UNAVAILABLE"),
            hits: Value::Array(Vec::new()),
            call_id: id,
            session: key,
            degraded: Some(u.note),
        }
    }
}

#[pymethods]
impl NativeBrake {
    /// `config`: `None`, a path (`str`) to a `toolbrake.toml`, or a `dict` of the same
    /// tables. `store`: `None` (the configuration's `[store]`, else memory), `"memory"`,
    /// `"sqlite"`, `"sqlite:PATH"` or a Redis URL. `fail_closed`: `None` (the
    /// configuration's), or the policy for calls toolbrake cannot judge.
    #[new]
    #[pyo3(signature = (config=None, store=None, fail_closed=None))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        store: Option<&str>,
        fail_closed: Option<bool>,
    ) -> PyResult<Self> {
        guarded(py, || {
            let loaded = match config.filter(|c| !c.is_none()) {
                None => settings::parse("", &no_env).map_err(|e| config_error(py, "", &e))?,
                Some(c) if c.is_instance_of::<PyDict>() => {
                    let doc = json_of(c, "the configuration")?;
                    let Some(toml::Value::Table(table)) = toolbrake_config::toml_of_json(&doc)
                    else {
                        unreachable!("a dict is a JSON object")
                    };
                    settings::from_table(&table, &no_env)
                        .map_err(|e| config_error(py, "the configuration: ", &e))?
                }
                Some(c) if c.is_instance_of::<PyString>() => {
                    let path: String = c.extract()?;
                    settings::load_file(Path::new(&path), &no_env).map_err(|e| match e {
                        settings::LoadError::Invalid { ref error, .. } => package_error(
                            py,
                            "ToolBrakeConfigError",
                            (
                                format!("toolbrake: {e}"),
                                error.key.clone(),
                                error.value.clone(),
                                error.rule.clone(),
                            ),
                        ),
                        other => package_error(
                            py,
                            "ToolBrakeConfigError",
                            (format!("toolbrake: {other}"), "config", path.clone(), ""),
                        ),
                    })?
                }
                Some(c) => {
                    return Err(PyTypeError::new_err(format!(
                        "toolbrake: config must be None, a path or a dict, not {}",
                        type_name(c)
                    )))
                }
            };
            let mut st = loaded.store;
            if let Some(spec) = store {
                store_spec(py, spec, &mut st)?;
            }
            // `store="sqlite:PATH"` names the file: `$TOOLBRAKE_STATE` (which overrides a
            // configuration's `[store] path`) must not move it elsewhere behind the
            // caller's back. A bare `"sqlite"` is the default state file, which it names.
            let explicit_path = store.is_some_and(|s| s.starts_with("sqlite:"));
            let env = |name: &str| {
                if explicit_path && name == "TOOLBRAKE_STATE" {
                    None
                } else {
                    settings::process_env(name)
                }
            };
            let opened = py
                .detach(|| {
                    let _inside = fork_gate::enter();
                    st.open(StoreKind::Memory, &env)
                })
                .map_err(|e| {
                    toolbrake_error(py, format!("toolbrake: cannot open the store: {e}"))
                })?;
            let mut nonce = [0u8; 6];
            getrandom::fill(&mut nonce)
                .map_err(|e| toolbrake_error(py, format!("toolbrake: no randomness: {e}")))?;
            Ok(NativeBrake {
                engine: Engine::new(loaded.engine),
                store: opened,
                fail_closed: fail_closed.unwrap_or(st.fail_closed),
                prefix: format!(
                    "py-{}",
                    nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
                ),
                next: AtomicU64::new(0),
            })
        })
    }

    /// Judges a call before it runs.
    #[pyo3(signature = (tool, args=None, session="default", call_id=None, agent=None, default=None))]
    #[allow(clippy::too_many_arguments)]
    fn before(
        &self,
        py: Python<'_>,
        tool: &str,
        args: Option<&Bound<'_, PyAny>>,
        session: &str,
        call_id: Option<String>,
        agent: Option<&str>,
        default: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyDecision> {
        guarded(py, || {
            let args = match args.filter(|a| !a.is_none()) {
                Some(a) => json_with(a, &format!("the arguments of {tool}"), default)?,
                None => Value::Object(Map::new()),
            };
            let id = call_id.unwrap_or_else(|| {
                format!(
                    "{}-{}",
                    self.prefix,
                    self.next.fetch_add(1, Ordering::Relaxed)
                )
            });
            let key = toolbrake_session::key(session, agent);
            let call = Call {
                session: &key,
                id: &id,
                tool,
                args: &args,
            };
            match py.detach(|| {
                let _inside = fork_gate::enter();
                self.sessions().pre(&key, &call)
            }) {
                Ok(d) => Ok(self.decision(d, key)),
                Err(SessionError::Store(e)) => Ok(self.unjudged(&e.to_string(), id, key)),
                Err(SessionError::Engine(e)) => {
                    Err(PyValueError::new_err(format!("toolbrake: {e}")))
                }
            }
        })
    }

    /// The operator's answer to an `ask`.
    #[pyo3(signature = (call_id, approved, session="default", agent=None))]
    fn answer(
        &self,
        py: Python<'_>,
        call_id: &str,
        approved: bool,
        session: &str,
        agent: Option<&str>,
    ) -> PyResult<PyDecision> {
        guarded(py, || {
            let key = toolbrake_session::key(session, agent);
            match py.detach(|| {
                let _inside = fork_gate::enter();
                self.sessions().answer(&key, call_id, approved)
            }) {
                Ok(d) => Ok(self.decision(d, key)),
                Err(SessionError::Store(e)) => {
                    Ok(self.unjudged(&e.to_string(), call_id.to_string(), key))
                }
                Err(SessionError::Engine(e)) => {
                    Err(PyValueError::new_err(format!("toolbrake: {e}")))
                }
            }
        })
    }

    /// Records what a call did.
    #[pyo3(signature = (call_id, outcome=None, session="default", agent=None))]
    fn after(
        &self,
        py: Python<'_>,
        call_id: &str,
        outcome: Option<&Bound<'_, PyAny>>,
        session: &str,
        agent: Option<&str>,
    ) -> PyResult<PyRecorded> {
        guarded(py, || {
            // Never an exception for what the tool returned: a result toolbrake cannot read
            // is recorded as unknown output, said once as a warning and in `degraded`.
            let (outcome, unread) = outcome_of(outcome);
            if let Some(note) = &unread {
                warn_once(py, note);
            }
            let key = toolbrake_session::key(session, agent);
            match py.detach(|| {
                let _inside = fork_gate::enter();
                self.sessions().post(&key, call_id, &outcome)
            }) {
                Ok(p) => Ok(PyRecorded {
                    advisories: p.advisories.into_iter().map(|a| a.text).collect(),
                    failure: serde_json::to_value(&p.failure).unwrap_or(Value::Null),
                    degraded: unread,
                }),
                // A call this brake judged and no longer remembers: more than
                // MAX_OPEN_CALLS were in flight in the session and the oldest was evicted.
                // The call ran and finished; its outcome is simply not known to toolbrake,
                // which must not turn it into the caller's error.
                Err(SessionError::Engine(EngineError::UnknownCall(_))) if self.issued(call_id) => {
                    Ok(PyRecorded {
                        advisories: Vec::new(),
                        failure: Value::Null,
                        degraded: Some(format!(
                            "outcome not recorded: more than {} calls were in flight in this \
                             session and this one, the oldest, was no longer remembered",
                            toolbrake_core::MAX_OPEN_CALLS
                        )),
                    })
                }
                Err(SessionError::Store(e)) => Ok(PyRecorded {
                    advisories: Vec::new(),
                    failure: Value::Null,
                    degraded: Some(self.sessions().unjudged(&e.to_string()).note),
                }),
                Err(SessionError::Engine(e)) => {
                    Err(PyValueError::new_err(format!("toolbrake: {e}")))
                }
            }
        })
    }

    /// One Claude Code hook event (the payload the Claude Agent SDK hands its hook
    /// callbacks, as JSON), answered exactly as `toolbrake hook claude` answers it, over
    /// this brake's engines, store and failure policy: `(output, warnings)`, where `output`
    /// is the hook's JSON output as text, or `None` for no opinion.
    fn claude_hook(
        &self,
        py: Python<'_>,
        payload_json: &str,
    ) -> PyResult<(Option<String>, Vec<String>)> {
        guarded(py, || {
            let reply = py.detach(|| {
                let _inside = fork_gate::enter();
                let ctx = toolbrake_hooks::Context {
                    engine: &self.engine,
                    store: Ok(&*self.store),
                    fail_closed: self.fail_closed,
                    observer: None,
                    traceparent: None,
                };
                toolbrake_hooks::handle(
                    toolbrake_hooks::Dialect::Claude,
                    payload_json.as_bytes(),
                    &ctx,
                )
            });
            Ok((reply.stdout, reply.warnings))
        })
    }

    /// A real human message: the session (and its sub-agents) start afresh.
    fn user_message(&self, py: Python<'_>, session: &str) -> PyResult<()> {
        guarded(py, || {
            py.detach(|| {
                let _inside = fork_gate::enter();
                self.sessions().user_message(session)
            })
            .map(|_| ())
            .map_err(|e| toolbrake_error(py, format!("toolbrake: {e}")))
        })
    }

    /// The session is over: it (and its sub-agents) are forgotten.
    fn end(&self, py: Python<'_>, session: &str) -> PyResult<()> {
        guarded(py, || {
            py.detach(|| {
                let _inside = fork_gate::enter();
                self.sessions().end(session)
            })
            .map(|_| ())
            .map_err(|e| toolbrake_error(py, format!("toolbrake: {e}")))
        })
    }

    /// What toolbrake sees in a call (its canonical form, hash, streak identity and
    /// fingerprints) and, with a session, what that session's state says of it.
    #[pyo3(signature = (tool, args=None, session=None))]
    fn explain<'py>(
        &self,
        py: Python<'py>,
        tool: &str,
        args: Option<&Bound<'py, PyAny>>,
        session: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, || {
            let args = match args.filter(|a| !a.is_none()) {
                Some(a) => json_of(a, &format!("the arguments of {tool}"))?,
                None => Value::Object(Map::new()),
            };
            let invalid =
                |e: &dyn std::fmt::Display| PyValueError::new_err(format!("toolbrake: {e}"));
            let state = match session {
                Some(key) => py
                    .detach(|| {
                        let _inside = fork_gate::enter();
                        self.store.get(key)
                    })
                    .map_err(|e| toolbrake_error(py, format!("toolbrake: {e}")))?
                    .unwrap_or_default(),
                None => SessionState::default(),
            };
            let call = Call {
                session: session.unwrap_or(""),
                id: "explain",
                tool,
                args: &args,
            };
            let signals = self
                .engine
                .signals(&state, &call)
                .map_err(|e| invalid(&e))?;
            let canonical =
                toolbrake_core::canonical::canonical_json(&args).map_err(|e| invalid(&e))?;
            let b = self.engine.breaker().config();
            let breaker = match &signals.breaker {
                Some(s) => {
                    let set = toolbrake_core::breaker::fingerprints(b, tool, &args)
                        .map_err(|e| invalid(&e))?;
                    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
                    if let Value::Object(m) = &mut v {
                        m.insert("class".into(), Value::from(set.class.to_string()));
                        m.insert(
                            "mutating".into(),
                            Value::from(b.tools().is_mutating(tool, &args)),
                        );
                        m.insert("decoys".into(), Value::from(set.stripped.clone()));
                    }
                    v
                }
                None => Value::Null,
            };
            let out = serde_json::json!({
                "tool": tool,
                "canonical": toolbrake_core::redact::redact(&canonical),
                "hash": toolbrake_core::canonical::call_hash(tool, &args).map_err(|e| invalid(&e))?,
                "session": session,
                "streak": {
                    "identity": signals.streak_identity,
                    "decoys_ignored": signals.decoys_ignored,
                    "in_a_row": signals.in_a_row,
                    "same_in_a_row": signals.same_in_a_row,
                },
                "breaker": breaker,
            });
            to_py(py, &out)
        })
    }

    /// The effective configuration of both engines, every key written out.
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(
            py,
            &serde_json::json!({
                "streak": self.engine.streak().config().to_value(),
                "breaker": self.engine.breaker().config().to_value(),
            }),
        )
    }

    /// Where session state lives (`memory`, the SQLite file, the Redis server).
    #[getter]
    fn store(&self) -> String {
        self.store.describe()
    }

    /// Whether calls toolbrake cannot judge are refused.
    #[getter]
    fn fail_closed(&self) -> bool {
        self.fail_closed
    }
}
