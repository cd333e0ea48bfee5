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

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::{Map, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use toolbrake_core::config::ConfigError;

mod answers;
mod brake;
mod fork;
mod json;

use answers::{PyDecision, PyOutcome, PyRecorded};
use brake::NativeBrake;
use fork::{_fork_after_child, _fork_after_parent, _fork_before};
use json::json_of;

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
