//! Python values as JSON and back: what cannot be JSON (a set, bytes, NaN, a cycle) is a
//! `TypeError` naming its path.

use crate::MAX_DEPTH;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString,
    PyTuple,
};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// A path inside a value, as Python subscripts (`["items"][2]`).
pub(crate) fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

/// A type's name as Python code spells it: `int` for a builtin, `numpy.bool` for a
/// numpy scalar (its bare name would read as Python's own `bool`).
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
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
pub(crate) struct Reader<'a, 'py> {
    what: &'a str,
    default: Option<&'a Bound<'py, PyAny>>,
}

/// Converts `obj` to JSON. `what` names the whole value in messages ("the arguments of
/// search"); `path` is where `obj` sits in it; `stack` holds the containers on the way
/// down (a cycle is a container met again on its own path).
pub(crate) fn to_json(
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
pub(crate) fn json_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    json_with(obj, what, None)
}

/// [`json_of`] with a `default` hook for objects with no JSON form of their own.
pub(crate) fn json_with(
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
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
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
