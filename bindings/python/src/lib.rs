//! The native module of the `toolbrake` Python package (`toolbrake._native`): the Rust
//! core and the session service for Python agents (PyO3).
//!
//! It only translates. Python values cross into JSON here, refusing what JSON cannot hold
//! (a set, bytes, NaN, a cycle, an object with no JSON form) with a `TypeError` that names
//! the path, before anything is counted; the session service decides; the answer goes back
//! as a frozen `Decision` / `Recorded`. Configuration goes through the same loader as
//! `toolbrake.toml` (`toolbrake::settings`), so a `dict` gets the file's errors, and the
//! store through the same `[store]` table. Store I/O runs with the GIL released, so one
//! `Brake` serves many threads. Nothing unwinds into Python: a panic (a bug) is an
//! exception, and a store that fails is the configured failure policy, not an exception.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString,
    PyTuple,
};
use serde_json::{Map, Value};
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use toolbrake::settings::{self, shown_url, StoreKind, StoreSettings};
use toolbrake_core::config::{no_env, ConfigError};
use toolbrake_core::{Call, Engine, EngineError, Outcome as CoreOutcome, SessionState};
use toolbrake_session::{SessionError, Sessions};
use toolbrake_store::Store;

/// Nesting toolbrake reads (the core's limit).
const MAX_DEPTH: usize = 128;

/// One of the package's exception classes (`toolbrake._errors`), raised with `args`.
fn package_error<'py, A>(py: Python<'py>, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    match py
        .import("toolbrake._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1(args))
    {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}

fn toolbrake_error(py: Python<'_>, message: String) -> PyErr {
    package_error(py, "ToolBrakeError", (message,))
}

fn config_error(py: Python<'_>, prefix: &str, e: &ConfigError) -> PyErr {
    package_error(
        py,
        "ToolBrakeConfigError",
        (
            format!("toolbrake: {prefix}{e}"),
            e.key.clone(),
            e.value.clone(),
            e.rule.clone(),
        ),
    )
}

/// Runs `f`, turning a panic into an exception instead of unwinding into Python.
fn guarded<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(toolbrake_error(
            py,
            "toolbrake: internal error (a bug in toolbrake; nothing was decided)".into(),
        ))
    })
}

// ---------------------------------------------------------------------------------------
// Fork safety

/// Every native operation that takes a lock (the store's, a connection's) runs inside the
/// fork gate; `os.fork()` closes it first (`os.register_at_fork`, in the package's
/// `__init__`), waiting for the operations under way, so that no lock is held by a thread
/// the child will not have. The gate is a counter of operations under way plus a bit for a
/// fork being made: plain atomics, nothing a forked child can find half-taken.
mod fork_gate {
    use std::sync::atomic::{AtomicUsize, Ordering};

    const FORKING: usize = 1 << (usize::BITS - 1);
    static GATE: AtomicUsize = AtomicUsize::new(0);

    /// An operation under way (leaves the gate when dropped).
    pub struct Inside(());

    impl Drop for Inside {
        fn drop(&mut self) {
            GATE.fetch_sub(1, Ordering::Release);
        }
    }

    /// Enters the gate, waiting while a fork is being made.
    pub fn enter() -> Inside {
        let mut s = GATE.load(Ordering::Relaxed);
        loop {
            if s & FORKING != 0 {
                std::thread::yield_now();
                s = GATE.load(Ordering::Relaxed);
                continue;
            }
            match GATE.compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Inside(()),
                Err(now) => s = now,
            }
        }
    }

    /// Before a fork: no new operation starts, and those under way finish.
    pub fn close() {
        GATE.fetch_or(FORKING, Ordering::AcqRel);
        let mut spins = 0u32;
        while GATE.load(Ordering::Acquire) & !FORKING != 0 {
            spins += 1;
            if spins < 100 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// After a fork, in the parent: operations go on.
    pub fn open() {
        GATE.fetch_and(!FORKING, Ordering::AcqRel);
    }

    /// After a fork, in the child: its only thread is the one that forked.
    pub fn reset() {
        GATE.store(0, Ordering::Release);
    }
}

/// `os.register_at_fork(before=...)`: waits for the native operations under way (with the
/// GIL released: they finish without it).
#[pyfunction]
fn _fork_before(py: Python<'_>) {
    py.detach(fork_gate::close);
}

/// `os.register_at_fork(after_in_parent=...)`.
#[pyfunction]
fn _fork_after_parent() {
    fork_gate::open();
}

/// `os.register_at_fork(after_in_child=...)`.
#[pyfunction]
fn _fork_after_child() {
    fork_gate::reset();
}

// ---------------------------------------------------------------------------------------
// Python values as JSON

/// A path inside a value, as Python subscripts (`["items"][2]`).
fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

/// A type's name as Python code spells it: `int` for a builtin, `numpy.bool` for a
/// numpy scalar (its bare name would read as Python's own `bool`).
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    let t = obj.get_type();
    let name = t
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into());
    match t.module().map(|m| m.to_string()) {
        Ok(m) if m != "builtins" && !m.is_empty() => {
            // numpy's scalars live in `numpy` (`numpy._core...` is an implementation detail).
            let top = m.split('.').next().unwrap_or(&m);
            if top == "numpy" {
                format!("numpy.{name}")
            } else {
                format!("{m}.{name}")
            }
        }
        _ => name,
    }
}

/// How [`to_json`] reads a value: `default` turns an object with no JSON form of its own
/// into one that has (as `json.dumps`'s `default=`), called once per object.
struct Reader<'a, 'py> {
    what: &'a str,
    default: Option<&'a Bound<'py, PyAny>>,
}

/// Converts `obj` to JSON. `what` names the whole value in messages ("the arguments of
/// search"); `path` is where `obj` sits in it; `stack` holds the containers on the way
/// down (a cycle is a container met again on its own path).
fn to_json(
    obj: &Bound<'_, PyAny>,
    r: &Reader<'_, '_>,
    path: &mut String,
    stack: &mut Vec<usize>,
) -> PyResult<Value> {
    let what = r.what;
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_cow()
            .map(|s| Value::String(s.into_owned()))
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "toolbrake: {what} hold a string{} with a lone surrogate, which is not text \
                 toolbrake can judge",
                    at(path)
                ))
            });
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(PyTypeError::new_err(format!(
            "toolbrake: {what} hold an integer{} beyond 64 bits, which toolbrake cannot judge \
             exactly (pass it as a string)",
            at(path)
        )));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let v = f.value();
        return serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "toolbrake: {what} hold {v}{}, which JSON cannot represent",
                    at(path)
                ))
            });
    }
    let is_dict = obj.is_instance_of::<PyDict>();
    if is_dict || obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let id = obj.as_ptr() as usize;
        if stack.contains(&id) {
            return Err(PyTypeError::new_err(format!(
                "toolbrake: {what} refer back to themselves{} (a cycle), which JSON cannot \
                 represent",
                at(path)
            )));
        }
        if stack.len() >= MAX_DEPTH {
            return Err(PyValueError::new_err(format!(
                "toolbrake: {what} nest deeper than toolbrake reads ({MAX_DEPTH} levels){}; \
                 the call cannot be judged",
                at(path)
            )));
        }
        stack.push(id);
        let len = path.len();
        let out = if is_dict {
            let d = obj.cast::<PyDict>()?;
            let mut map = Map::with_capacity(d.len());
            for (k, v) in d.iter() {
                let Ok(key) = k.cast::<PyString>() else {
                    return Err(PyTypeError::new_err(format!(
                        "toolbrake: {what} hold a key {} ({}){}: JSON object keys are text",
                        k.repr().map(|r| r.to_string()).unwrap_or_default(),
                        type_name(&k),
                        at(path)
                    )));
                };
                let key = key.to_cow().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "toolbrake: {what} hold a key{} with a lone surrogate, which is not \
                         text toolbrake can judge",
                        at(path)
                    ))
                })?;
                let _ = write!(path, "[{}]", Value::String(key.to_string()));
                let v = to_json(&v, r, path, stack)?;
                path.truncate(len);
                map.insert(key.into_owned(), v);
            }
            Value::Object(map)
        } else {
            let mut items = Vec::new();
            for (i, v) in obj.try_iter()?.enumerate() {
                let _ = write!(path, "[{i}]");
                items.push(to_json(&v?, r, path, stack)?);
                path.truncate(len);
            }
            Value::Array(items)
        };
        stack.pop();
        return Ok(out);
    }
    let refuse = |kind: &str| {
        PyTypeError::new_err(format!(
            "toolbrake: {what} hold {kind}{}, which JSON cannot represent",
            at(path)
        ))
    };
    if obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyByteArray>() {
        return Err(refuse("bytes (decode them to text first)"));
    }
    if obj.is_instance_of::<PySet>() || obj.is_instance_of::<PyFrozenSet>() {
        return Err(refuse("a set (pass a sorted list)"));
    }
    // Objects with a JSON form of their own: pydantic models and dataclasses.
    let plain = if obj.hasattr("model_dump")? && !obj.is_instance_of::<pyo3::types::PyType>() {
        let kwargs = PyDict::new(obj.py());
        kwargs.set_item("mode", "json")?;
        Some(obj.call_method("model_dump", (), Some(&kwargs))?)
    } else if obj.hasattr("__dataclass_fields__")? && !obj.is_instance_of::<pyo3::types::PyType>() {
        Some(
            obj.py()
                .import("dataclasses")?
                .call_method1("asdict", (obj,))?,
        )
    } else {
        None
    };
    match plain {
        Some(p) => to_json(&p, r, path, stack),
        None => match r.default {
            // The hook's answer is read without the hook (no endless conversions).
            Some(f) => {
                let p = f.call1((obj,)).map_err(|e| {
                    if e.is_instance_of::<PyTypeError>(obj.py()) {
                        refuse(&format!("an object of type {}", type_name(obj)))
                    } else {
                        e
                    }
                })?;
                // A container it returned may hold more such objects (a class's
                // `__dict__`); any other answer is read without the hook (no endless
                // conversions).
                if p.is_instance_of::<PyDict>()
                    || p.is_instance_of::<PyList>()
                    || p.is_instance_of::<PyTuple>()
                {
                    to_json(&p, r, path, stack)
                } else {
                    to_json(
                        &p,
                        &Reader {
                            what,
                            default: None,
                        },
                        path,
                        stack,
                    )
                }
            }
            None => Err(refuse(&format!("an object of type {}", type_name(obj)))),
        },
    }
}

/// `obj` as JSON, or a `TypeError` / `ValueError` naming where it cannot be.
fn json_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    json_with(obj, what, None)
}

/// [`json_of`] with a `default` hook for objects with no JSON form of their own.
fn json_with(
    obj: &Bound<'_, PyAny>,
    what: &str,
    default: Option<&Bound<'_, PyAny>>,
) -> PyResult<Value> {
    let default = default.filter(|d| !d.is_none());
    to_json(
        obj,
        &Reader { what, default },
        &mut String::new(),
        &mut Vec::new(),
    )
}

/// A JSON value as a Python one.
fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for x in items {
                list.append(to_py(py, x)?)?;
            }
            list.into_any()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

// ---------------------------------------------------------------------------------------
// What crosses back

/// Text as a Python literal in a repr (`'text'`, or `None`).
fn py_str(s: Option<&str>) -> String {
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
    verdict: &'static str,
    message: Option<String>,
    advisories: Vec<String>,
    engine: Option<&'static str>,
    code: Option<&'static str>,
    hits: Value,
    call_id: String,
    session: String,
    degraded: Option<String>,
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
    advisories: Vec<String>,
    failure: Value,
    degraded: Option<String>,
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
    /// Why the outcome could not be recorded (the store failed), else `None`.
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
    text: Option<String>,
    /// The call failed (raised, returned an error).
    #[pyo3(get)]
    is_error: Option<bool>,
    /// A process's exit code.
    #[pyo3(get)]
    exit_code: Option<i64>,
    /// An HTTP status.
    #[pyo3(get)]
    status_code: Option<i64>,
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

/// What a returned value, a raised exception or an explicit `Outcome` says of a call.
fn outcome_of(obj: Option<&Bound<'_, PyAny>>) -> PyResult<CoreOutcome> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(CoreOutcome::default());
    };
    if let Ok(o) = obj.cast::<PyOutcome>() {
        let o = o.get();
        return Ok(CoreOutcome {
            text: o.text.clone(),
            is_error: o.is_error,
            exit_code: o.exit_code,
            status_code: o.status_code,
            ..CoreOutcome::default()
        });
    }
    if obj.is_instance_of::<pyo3::exceptions::PyBaseException>() {
        let text = obj.str().map(|s| s.to_string()).unwrap_or_default();
        let name = type_name(obj);
        return Ok(CoreOutcome {
            is_error: Some(true),
            text: Some(if text.is_empty() { name.clone() } else { text }),
            error_code: Some(name),
            ..CoreOutcome::default()
        });
    }
    // What the tool returned: text is its own text, any other value its canonical JSON
    // (what tells one result from the next); a value with no JSON form, its str().
    let text = match json_of(obj, "the result") {
        Ok(Value::String(s)) => Some(s),
        Ok(Value::Null) => None,
        Ok(v) => toolbrake_core::canonical::canonical_json(&v)
            .ok()
            .or_else(|| serde_json::to_string(&v).ok()),
        Err(_) => Some(obj.str()?.to_string()),
    };
    Ok(CoreOutcome {
        text,
        ..CoreOutcome::default()
    })
}

// ---------------------------------------------------------------------------------------
// The brake

/// Both engines over a session store, for Python (wrapped by `toolbrake.Brake`).
#[pyclass(frozen, module = "toolbrake._native")]
pub struct NativeBrake {
    engine: Engine,
    store: Arc<dyn Store>,
    fail_closed: bool,
    /// Call ids are `<prefix>-<n>`: the prefix is random, so processes sharing a store
    /// never reuse each other's ids.
    prefix: String,
    next: AtomicU64,
}

/// `store=` as `[store]` settings: `memory`, `sqlite`, `sqlite:PATH`, or a Redis URL.
fn store_spec(py: Python<'_>, spec: &str, s: &mut StoreSettings) -> PyResult<()> {
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
            let opened = py
                .detach(|| {
                    let _inside = fork_gate::enter();
                    st.open(StoreKind::Memory, &settings::process_env)
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
            let outcome = outcome_of(outcome)?;
            let key = toolbrake_session::key(session, agent);
            match py.detach(|| {
                let _inside = fork_gate::enter();
                self.sessions().post(&key, call_id, &outcome)
            }) {
                Ok(p) => Ok(PyRecorded {
                    advisories: p.advisories.into_iter().map(|a| a.text).collect(),
                    failure: serde_json::to_value(&p.failure).unwrap_or(Value::Null),
                    degraded: None,
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

/// The SHA-256 of the tool name, a newline and the canonical JSON of the arguments.
#[pyfunction]
#[pyo3(signature = (tool, args=None))]
fn call_hash(tool: &str, args: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let args = match args.filter(|a| !a.is_none()) {
        Some(a) => json_of(a, &format!("the arguments of {tool}"))?,
        None => Value::Object(Map::new()),
    };
    toolbrake_core::canonical::call_hash(tool, &args)
        .map_err(|e| PyValueError::new_err(format!("toolbrake: {e}")))
}

/// Text with credentials (tokens, keys, passwords) replaced, as toolbrake shows text.
#[pyfunction]
fn redact(text: &str) -> String {
    toolbrake_core::redact::redact(text).into_owned()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeBrake>()?;
    m.add_class::<PyDecision>()?;
    m.add_class::<PyRecorded>()?;
    m.add_class::<PyOutcome>()?;
    m.add_function(wrap_pyfunction!(call_hash, m)?)?;
    m.add_function(wrap_pyfunction!(redact, m)?)?;
    m.add_function(wrap_pyfunction!(_fork_before, m)?)?;
    m.add_function(wrap_pyfunction!(_fork_after_parent, m)?)?;
    m.add_function(wrap_pyfunction!(_fork_after_child, m)?)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
