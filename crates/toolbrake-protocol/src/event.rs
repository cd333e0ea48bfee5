//! Input events of the protocol (docs/protocol.md), parsed with an error message for every
//! missing or mistyped field. Unknown fields are ignored (forward compatibility); error
//! messages never quote argument values.

use serde::Deserialize;
use serde_json::{Map, Value};
use std::borrow::Cow;
use toolbrake_core::Outcome;

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
        /// The W3C `traceparent` of the agent's trace, for toolbrake's span of this call
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

/// One event line read straight into an [`Event`], without building a JSON value of the
/// whole line: the common case of a well-formed event. `None` for anything else (not UTF-8,
/// not JSON, a field missing, mistyped or given twice, an unknown event), which the
/// general path ([`parse_owned`] of the parsed line) then reads, with its error message.
/// Where this returns an event, it is the event that path reads (a property test holds it).
pub fn parse_fast(line: &[u8]) -> Option<Event> {
    let text = std::str::from_utf8(line).ok()?;
    let f: Fast<'_> = serde_json::from_str(text).ok()?;
    let owned = |s: Option<Cow<'_, str>>| s.map(Cow::into_owned);
    match f.event.as_ref() {
        "call" => {
            match &f.ts {
                None | Some(Value::Null) => {}
                Some(ts) if ts.is_i64() || ts.is_u64() => {}
                Some(_) => return None,
            }
            Some(Event::Call {
                session: owned(f.session)?,
                id: owned(f.id)?,
                tool: owned(f.tool)?,
                args: f.args.unwrap_or_else(|| Value::Object(Map::new())),
                agent: owned(f.agent),
                traceparent: match f.traceparent {
                    Some(Value::String(t)) => Some(t),
                    _ => None,
                },
            })
        }
        "answer" => Some(Event::Answer {
            id: owned(f.id)?,
            approved: f.approved?,
            session: owned(f.session),
        }),
        "result" => Some(Event::Result {
            id: owned(f.id)?,
            outcome: f.outcome.map(FastOutcome::into_outcome).unwrap_or_default(),
            session: owned(f.session),
        }),
        "user" => Some(Event::User {
            session: owned(f.session)?,
        }),
        "end" => Some(Event::End {
            session: owned(f.session)?,
        }),
        _ => None,
    }
}

/// The fields of an event line, typed; a field that does not fit fails the whole read (and
/// the general path says why). `null` reads as absent, as it does there.
#[derive(Deserialize)]
struct Fast<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(default, borrow)]
    session: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    agent: Option<Cow<'a, str>>,
    /// Present even when `null` (then the arguments are `null`, as the general path reads).
    #[serde(default, deserialize_with = "present")]
    args: Option<Value>,
    #[serde(default)]
    ts: Option<Value>,
    #[serde(default)]
    traceparent: Option<Value>,
    #[serde(default)]
    approved: Option<bool>,
    #[serde(default)]
    outcome: Option<FastOutcome>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct FastOutcome {
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(default)]
    timed_out: Option<bool>,
    #[serde(default)]
    sandbox_denied: Option<bool>,
    #[serde(default)]
    aborted: Option<bool>,
    #[serde(default)]
    background: Option<bool>,
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default)]
    status_code: Option<i64>,
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    error_code: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

impl FastOutcome {
    fn into_outcome(self) -> Outcome {
        Outcome {
            is_error: self.is_error,
            timed_out: self.timed_out,
            sandbox_denied: self.sandbox_denied,
            aborted: self.aborted,
            background: self.background,
            exit_code: self.exit_code,
            status_code: self.status_code,
            signal: self.signal,
            error_code: self.error_code,
            text: self.text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Lines shaped like events: a well-formed event of each kind, then fields removed, set
    /// to values of every type (`null` too) or given twice.
    fn event_line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = prop::sample::select(vec![
            "event",
            "session",
            "id",
            "tool",
            "args",
            "agent",
            "traceparent",
            "ts",
            "approved",
            "outcome",
            "other",
        ]);
        let outcome_key = prop::sample::select(vec![
            "is_error",
            "exit_code",
            "status_code",
            "signal",
            "text",
            "aborted",
            "x",
        ]);
        let scalar = prop::sample::select(vec![
            "null",
            "true",
            "1",
            "-3",
            "18446744073709551615",
            "1.5",
            "\"s\"",
            "\"a\\u0062\"",
            "[1,{}]",
            "{\"k\":[null]}",
            "{}",
            "\"call\"",
            "\"answer\"",
            "\"result\"",
        ]);
        let outcome = prop::collection::vec((outcome_key, scalar.clone()), 0..4).prop_map(|f| {
            let f: Vec<String> = f.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", f.join(","))
        });
        let value = prop_oneof![scalar.prop_map(str::to_string), outcome];
        // 0: remove the key, 1: set it (the first occurrence), 2: give it (again) at the end.
        let edit = (0u8..3, key, value);
        let base = prop::sample::select(vec![
            r#""event":"call","session":"s","id":"1","tool":"t","args":{"a":1}"#,
            r#""event":"answer","id":"1","approved":true,"session":"s""#,
            r#""event":"result","id":"1","outcome":{"exit_code":1},"session":"s""#,
            r#""event":"user","session":"s""#,
            r#""event":"end","session":"s""#,
        ]);
        (base, prop::collection::vec(edit, 0..4)).prop_map(|(base, edits)| {
            let mut fields: Vec<(String, String)> = base
                .split(',')
                .map(|f| {
                    let (k, v) = f.split_once(':').unwrap();
                    (k.trim_matches('"').to_string(), v.to_string())
                })
                .collect();
            for (op, k, v) in edits {
                match op {
                    0 => fields.retain(|(f, _)| f != k),
                    1 => match fields.iter_mut().find(|(f, _)| f == k) {
                        Some(f) => f.1 = v,
                        None => fields.push((k.to_string(), v)),
                    },
                    _ => fields.push((k.to_string(), v)),
                }
            }
            let f: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", f.join(","))
        })
    }

    proptest::proptest! {
        // Many cases: one edit in a few dozen is the one that matters (a field removed,
        // made `null` or mistyped), and each case costs microseconds.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(8192))]
        #[test]
        fn the_typed_read_agrees_with_the_general_path(line in event_line()) {
            if let Some(fast) = parse_fast(line.as_bytes()) {
                let v: Value = serde_json::from_str(&line).unwrap();
                proptest::prop_assert_eq!(Ok(fast), parse_owned(v), "{}", line);
            }
        }
    }

    /// The typed read does take the lines it is for (else the property above holds
    /// vacuously): every kind of event, with `null`s and unknown fields.
    #[test]
    fn the_typed_read_takes_well_formed_events() {
        for line in [
            r#"{"event":"call","session":"s","id":"1","tool":"t","args":{"a":[1]},"ts":5,"x":1}"#,
            r#"{"event":"call","session":"s","id":"1","tool":"t","args":null,"agent":null}"#,
            r#"{"event":"answer","id":"1","approved":true}"#,
            r#"{"event":"result","id":"1","outcome":{"exit_code":2,"text":"no","signal":null}}"#,
            r#"{"event":"user","session":"s"}"#,
            r#"{"event":"end","session":"s"}"#,
        ] {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(
                parse_fast(line.as_bytes()),
                Some(parse_owned(v).unwrap()),
                "{line}"
            );
        }
    }

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
