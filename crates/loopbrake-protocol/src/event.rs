//! Input events of the protocol (README, "The event protocol"), parsed with an error message for every
//! missing or mistyped field. Unknown fields are ignored (forward compatibility); error
//! messages never quote argument values.

use loopbrake_core::Outcome;
use serde_json::{Map, Value};

/// One input event.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A tool call is about to run.
    Call {
        /// Session key.
        session: String,
        /// Call id.
        id: String,
        /// Tool name.
        tool: String,
        /// Arguments (`{}` when absent).
        args: Value,
        /// Sub-agent id: the call is counted in its own session.
        agent: Option<String>,
        /// The W3C `traceparent` of the agent's trace, for loopbrake's span of this call
        /// (a value that is not a string is ignored, as the W3C ignores an invalid one).
        traceparent: Option<String>,
    },
    /// The operator's answer to an ask.
    Answer {
        /// Call id.
        id: String,
        /// Approved or declined.
        approved: bool,
        /// The call's session, when given (call ids are unique per session only).
        session: Option<String>,
    },
    /// The call ran.
    Result {
        /// Call id.
        id: String,
        /// What happened.
        outcome: Outcome,
        /// The call's session, when given (call ids are unique per session only).
        session: Option<String>,
    },
    /// A real human message.
    User {
        /// Session key.
        session: String,
    },
    /// The session is over.
    End {
        /// Session key.
        session: String,
    },
}

fn string_field(obj: &Map<String, Value>, key: &str) -> Result<String, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Err(format!("missing required field `{key}`")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("field `{key}` must be a string")),
    }
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("field `{key}` must be a string")),
    }
}

fn outcome(v: Value) -> Result<Outcome, String> {
    let Value::Object(obj) = v else {
        return Err("field `outcome` must be an object".into());
    };
    let mut o = Outcome::default();
    for (k, val) in obj {
        if val.is_null() {
            // `null` means absent for every outcome field.
            continue;
        }
        let bad = |t: &str| format!("field `outcome.{k}` must be {t}");
        match k.as_str() {
            "is_error" => o.is_error = Some(val.as_bool().ok_or_else(|| bad("a boolean"))?),
            "timed_out" => o.timed_out = Some(val.as_bool().ok_or_else(|| bad("a boolean"))?),
            "sandbox_denied" => {
                o.sandbox_denied = Some(val.as_bool().ok_or_else(|| bad("a boolean"))?)
            }
            "aborted" => o.aborted = Some(val.as_bool().ok_or_else(|| bad("a boolean"))?),
            "background" => o.background = Some(val.as_bool().ok_or_else(|| bad("a boolean"))?),
            "exit_code" => o.exit_code = Some(val.as_i64().ok_or_else(|| bad("an integer"))?),
            "status_code" => o.status_code = Some(val.as_i64().ok_or_else(|| bad("an integer"))?),
            "signal" => o.signal = Some(val.as_str().ok_or_else(|| bad("a string"))?.to_string()),
            "error_code" => {
                o.error_code = Some(val.as_str().ok_or_else(|| bad("a string"))?.to_string())
            }
            "text" => match val {
                Value::String(t) => o.text = Some(t),
                _ => return Err(bad("a string")),
            },
            _ => {}
        }
    }
    Ok(o)
}

/// Parses one event object.
pub fn parse(v: &Value) -> Result<Event, String> {
    parse_owned(v.clone())
}

/// Parses one event object, taking its parts (the arguments are not copied).
pub fn parse_owned(v: Value) -> Result<Event, String> {
    let Value::Object(mut obj) = v else {
        return Err("an event must be a JSON object".into());
    };
    let obj = &mut obj;
    let kind = string_field(obj, "event")?;
    match kind.as_str() {
        "call" => {
            let args = match obj.remove("args") {
                None => Value::Object(Map::new()),
                Some(a) => a,
            };
            if let Some(ts) = obj.get("ts") {
                if !ts.is_null() && !ts.is_i64() && !ts.is_u64() {
                    return Err("field `ts` must be an integer (ms since the Unix epoch)".into());
                }
            }
            Ok(Event::Call {
                session: string_field(obj, "session")?,
                id: string_field(obj, "id")?,
                tool: string_field(obj, "tool")?,
                args,
                agent: opt_string(obj, "agent")?,
                traceparent: obj
                    .get("traceparent")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            })
        }
        "answer" => Ok(Event::Answer {
            id: string_field(obj, "id")?,
            approved: match obj.get("approved") {
                Some(Value::Bool(b)) => *b,
                None | Some(Value::Null) => return Err("missing required field `approved`".into()),
                Some(_) => return Err("field `approved` must be a boolean".into()),
            },
            session: opt_string(obj, "session")?,
        }),
        "result" => Ok(Event::Result {
            id: string_field(obj, "id")?,
            outcome: match obj.remove("outcome") {
                None | Some(Value::Null) => Outcome::default(),
                Some(o) => outcome(o)?,
            },
            session: opt_string(obj, "session")?,
        }),
        "user" => Ok(Event::User {
            session: string_field(obj, "session")?,
        }),
        "end" => Ok(Event::End {
            session: string_field(obj, "session")?,
        }),
        other => Err(format!(
            "unknown event {:?} (expected call, answer, result, user or end)",
            other.chars().take(32).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            parse(&json!([])).unwrap_err(),
            "an event must be a JSON object"
        );
        assert_eq!(
            parse(&json!({"event": "call", "id": "1", "tool": "t"})).unwrap_err(),
            "missing required field `session`"
        );
        assert_eq!(
            parse(&json!({"event": "call", "session": 1, "id": "1", "tool": "t"})).unwrap_err(),
            "field `session` must be a string"
        );
        assert_eq!(
            parse(&json!({"event": "answer", "id": "1", "approved": "yes"})).unwrap_err(),
            "field `approved` must be a boolean"
        );
        assert_eq!(
            parse(&json!({"event": "result", "id": "1", "outcome": {"exit_code": "1"}}))
                .unwrap_err(),
            "field `outcome.exit_code` must be an integer"
        );
        assert!(parse(&json!({"event": "nope"}))
            .unwrap_err()
            .starts_with("unknown event"));
    }

    #[test]
    fn args_default_to_an_empty_object_and_nulls_are_absent() {
        let e =
            parse(&json!({"event": "call", "session": "s", "id": "1", "tool": "t", "extra": 1}))
                .unwrap();
        assert!(matches!(e, Event::Call { ref args, .. } if args == &json!({})));
        let e = parse(
            &json!({"event": "result", "id": "1", "outcome": {"exit_code": null, "text": "x"}}),
        )
        .unwrap();
        assert!(matches!(e, Event::Result { ref outcome, .. } if outcome.exit_code.is_none()));
    }
}
