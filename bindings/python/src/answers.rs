//! What crosses back to Python: the frozen `Decision`, `Recorded` and `Outcome`, and the
//! outcome of a call read from what Python returned, raised or said.

use crate::json::{json_of, to_py, type_name};
use pyo3::prelude::*;
use serde_json::Value;
use toolbrake_core::Outcome as CoreOutcome;

/// Text as a Python literal in a repr (`'text'`, or `None`).
pub(crate) fn py_str(s: Option<&str>) -> String {
    match s {
        None => "None".into(),
        Some(s) => format!(
            "'{}'",
            s.replace('\\', "\\\\")
                .replace('\'', "\\'")
                .replace('\n', "\\n")
        ),
    }
}

/// What toolbrake decided about a call before it runs.
#[pyclass(frozen, module = "toolbrake", name = "Decision")]
pub struct PyDecision {
    pub(crate) verdict: &'static str,
    pub(crate) message: Option<String>,
    pub(crate) advisories: Vec<String>,
    pub(crate) engine: Option<&'static str>,
    pub(crate) code: Option<&'static str>,
    pub(crate) hits: Value,
    pub(crate) call_id: String,
    pub(crate) session: String,
    pub(crate) degraded: Option<String>,
}

#[pymethods]
impl PyDecision {
    /// `"allow"`, `"advise"`, `"ask"` or `"deny"`.
    #[getter]
    fn verdict(&self) -> &'static str {
        self.verdict
    }
    /// Whether the tool may run now (`allow` or `advise`).
    #[getter]
    fn runs(&self) -> bool {
        matches!(self.verdict, "allow" | "advise")
    }
    /// For `deny` and `ask`: the text the model reads instead of a result (for `ask`, the
    /// question for the operator).
    #[getter]
    fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
    /// Advice for the model to read with the result (repeat stages, the failure track).
    #[getter]
    fn advisories(&self) -> Vec<String> {
        self.advisories.clone()
    }
    /// The engine that refused or asked: `"streak"`, `"breaker"` or `"toolbrake"`.
    #[getter]
    fn engine(&self) -> Option<&'static str> {
        self.engine
    }
    /// `LOOP_BRAKE`, `REPEAT_TOOL_BLOCKED`, `SHELL_HTTP_BLOCKED` or `STORE_UNAVAILABLE`.
    #[getter]
    fn code(&self) -> Option<&'static str> {
        self.code
    }
    /// The fingerprints that reached a gate (`fingerprint`, `count`, `limit`, `track`).
    #[getter]
    fn hits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.hits)
    }
    /// The call's id (pass it to `after` and `answer`).
    #[getter]
    fn call_id(&self) -> &str {
        &self.call_id
    }
    /// The session key the call counted in (a sub-agent's ends in `#agent:<id>`).
    #[getter]
    fn session(&self) -> &str {
        &self.session
    }
    /// Why toolbrake could not judge the call, when it could not (the call runs, failing
    /// open), else `None`.
    #[getter]
    fn degraded(&self) -> Option<&str> {
        self.degraded.as_deref()
    }
    fn __repr__(&self) -> String {
        format!(
            "Decision(verdict={}, engine={}, code={}, call_id={}, session={})",
            py_str(Some(self.verdict)),
            py_str(self.engine),
            py_str(self.code),
            py_str(Some(&self.call_id)),
            py_str(Some(&self.session))
        )
    }
}

/// What toolbrake made of a call's outcome.
#[pyclass(frozen, module = "toolbrake", name = "Recorded")]
pub struct PyRecorded {
    pub(crate) advisories: Vec<String>,
    pub(crate) failure: Value,
    pub(crate) degraded: Option<String>,
}

#[pymethods]
impl PyRecorded {
    /// Advice for the model to read after the result (the failure track).
    #[getter]
    fn advisories(&self) -> Vec<String> {
        self.advisories.clone()
    }
    /// The failure toolbrake classified (`kind`, `detail`), or `None` for a success.
    #[getter]
    fn failure<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.failure)
    }
    /// Why the outcome could not be recorded (the store failed, or too many calls were in
    /// flight), or could not be read (recorded as unknown output), else `None`.
    #[getter]
    fn degraded(&self) -> Option<&str> {
        self.degraded.as_deref()
    }
    fn __repr__(&self) -> String {
        let items: Vec<String> = self.advisories.iter().map(|a| py_str(Some(a))).collect();
        format!("Recorded(advisories=[{}])", items.join(", "))
    }
}

/// What a call did, said explicitly: its text, and whether it failed.
#[pyclass(frozen, module = "toolbrake", name = "Outcome")]
#[derive(Clone)]
pub struct PyOutcome {
    /// The output or error text the model saw.
    #[pyo3(get)]
    pub(crate) text: Option<String>,
    /// The call failed (raised, returned an error).
    #[pyo3(get)]
    pub(crate) is_error: Option<bool>,
    /// A process's exit code.
    #[pyo3(get)]
    pub(crate) exit_code: Option<i64>,
    /// An HTTP status.
    #[pyo3(get)]
    pub(crate) status_code: Option<i64>,
}

#[pymethods]
impl PyOutcome {
    #[new]
    #[pyo3(signature = (text=None, *, is_error=None, exit_code=None, status_code=None))]
    fn new(
        text: Option<String>,
        is_error: Option<bool>,
        exit_code: Option<i64>,
        status_code: Option<i64>,
    ) -> Self {
        PyOutcome {
            text,
            is_error,
            exit_code,
            status_code,
        }
    }
    fn __repr__(&self) -> String {
        let num = |n: Option<i64>| n.map_or("None".to_string(), |n| n.to_string());
        format!(
            "Outcome(text={}, is_error={}, exit_code={}, status_code={})",
            py_str(self.text.as_deref()),
            self.is_error
                .map_or("None", |b| if b { "True" } else { "False" }),
            num(self.exit_code),
            num(self.status_code)
        )
    }
}

/// What a returned value, a raised exception or an explicit `Outcome` says of a call, and
/// why it could not be read, when it could not. Reading never fails: the tool has run, and
/// its result belongs to its caller whatever toolbrake makes of it. A value with no JSON
/// form and no text (its `__str__` raises, it nests deeper than Python's recursion limit,
/// an integer too long to print) is recorded as a call whose output is unknown: never
/// evidence of progress, never a failure.
pub(crate) fn outcome_of(obj: Option<&Bound<'_, PyAny>>) -> (CoreOutcome, Option<String>) {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return (CoreOutcome::default(), None);
    };
    if let Ok(o) = obj.cast::<PyOutcome>() {
        let o = o.get();
        let outcome = CoreOutcome {
            text: o.text.clone(),
            is_error: o.is_error,
            exit_code: o.exit_code,
            status_code: o.status_code,
            ..CoreOutcome::default()
        };
        return (outcome, None);
    }
    if obj.is_instance_of::<pyo3::exceptions::PyBaseException>() {
        let text = obj.str().map(|s| s.to_string()).unwrap_or_default();
        let name = type_name(obj);
        let outcome = CoreOutcome {
            is_error: Some(true),
            text: Some(if text.is_empty() { name.clone() } else { text }),
            error_code: Some(name),
            ..CoreOutcome::default()
        };
        return (outcome, None);
    }
    // What the tool returned: text is its own text, any other value its canonical JSON
    // (what tells one result from the next); a value with no JSON form, its str().
    let text = match json_of(obj, "the result") {
        Ok(Value::String(s)) => Some(s),
        Ok(Value::Null) => None,
        Ok(v) => toolbrake_core::canonical::canonical_json(&v)
            .ok()
            .or_else(|| serde_json::to_string(&v).ok()),
        Err(_) => match obj.str() {
            Ok(s) => Some(s.to_string()),
            Err(e) => {
                // Only the names of the types: the exception's text is the tool's, and
                // may hold anything.
                let why = e
                    .get_type(obj.py())
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "an exception".into());
                let note = format!(
                    "toolbrake: a call's result of type {} could not be read (as JSON, nor by \
                     str(), which raised {why}): recorded as a call whose output is unknown",
                    type_name(obj)
                );
                return (CoreOutcome::default(), Some(note));
            }
        },
    };
    let outcome = CoreOutcome {
        text,
        ..CoreOutcome::default()
    };
    (outcome, None)
}
