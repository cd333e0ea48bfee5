//! Reading the wire: what the relay reads of a message before deciding what to do with it
//! (the head of a client's or a server's message, ids as table keys, a call too deep to
//! parse), and the outcome of a `tools/call` answer.

use serde_json::value::RawValue;
use serde_json::{json, Value};
use toolbrake_core::Outcome;

/// What the relay reads of a client's message before deciding what to do with it: the
/// method (when a string) and the id, each as written, and the params left unparsed. `None`
/// when the message does not read that way (not JSON, a key twice, a method that is not a
/// string): the message is then parsed whole, as it always was.
pub(crate) struct ClientHead<'a> {
    pub(crate) method: Option<std::borrow::Cow<'a, str>>,
    pub(crate) id: Option<&'a RawValue>,
    pub(crate) params: Option<&'a RawValue>,
}

impl<'a> ClientHead<'a> {
    pub(crate) fn of(line: &'a str) -> Option<Self> {
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(default, borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            #[serde(default, borrow, deserialize_with = "present")]
            id: Option<&'a RawValue>,
            #[serde(default, borrow, deserialize_with = "present")]
            params: Option<&'a RawValue>,
        }
        let h: Head<'a> = serde_json::from_str(line).ok()?;
        Some(ClientHead {
            method: h.method,
            id: h.id,
            params: h.params,
        })
    }
}

/// What the relay reads of a server's message, in one pass: whether it has a method (a
/// request or a notification, not a response), its id as written and, for an answer in the
/// common shape, what a `tools/call`'s outcome is read from: no `error`, a `result` whose
/// `isError` is a boolean and whose content blocks are objects with string texts, borrowed
/// from the line. A message that does not read this way (another shape, a key twice) is
/// parsed whole, as it always was; the outcome of a tool's answer read here agrees with
/// [`tool_outcome`] of the whole message.
#[derive(serde::Deserialize)]
pub(crate) struct ServerHead<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    pub(crate) method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<FastResult<'a>>,
}

/// A key that is present, even as `null` (which `Option` alone would read as absent, where
/// the proxy's whole-message reading sees `Some(Value::Null)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

/// The key of a JSON-RPC id in the tables of requests in flight: its JSON text, written
/// compactly (`7`, `"a"`). An integer, nearly every id, is written without the formatting
/// machinery (the relay keys every request and answer by it).
pub(crate) fn id_key(id: &Value) -> String {
    if let Some(i) = id.as_i64() {
        return itoa::Buffer::new().format(i).to_owned();
    }
    if let Some(u) = id.as_u64() {
        return itoa::Buffer::new().format(u).to_owned();
    }
    id.to_string()
}

/// A JSON-RPC `tools/call` request too deep for a full parse: its id and a stand-in for its
/// params (the tool name, and the arguments replaced by the hash of their text).
pub(crate) fn unjudgeable_tool_call(line: &str) -> Option<(Value, Value)> {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        name: Option<String>,
        #[serde(borrow)]
        arguments: Option<&'a serde_json::value::RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Shallow<'a> {
        method: Option<String>,
        id: Option<Value>,
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    let msg: Shallow<'_> = serde_json::from_str(line).ok()?;
    if msg.method.as_deref() != Some("tools/call") {
        return None;
    }
    let id = msg.id?;
    let params = msg.params?;
    let name = params.name.unwrap_or_default();
    let raw = params.arguments.map(|a| a.get()).unwrap_or("");
    let digest = toolbrake_core::canonical::call_hash(&name, &Value::String(raw.to_string()))
        .unwrap_or_default();
    Some((
        id,
        json!({"name": name, "arguments": {"unjudgeable_arguments_sha256": digest}}),
    ))
}

#[derive(serde::Deserialize)]
pub(crate) struct FastResult<'a> {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
    #[serde(default, borrow)]
    content: Option<Vec<FastBlock<'a>>>,
}

#[derive(serde::Deserialize)]
pub(crate) struct FastBlock<'a> {
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

/// The outcome of a `tools/call` answer in the common shape, without parsing it whole;
/// `None` when it has another shape. Agrees with [`tool_outcome`] wherever it answers.
#[cfg(test)]
fn fast_tool_outcome(line: &str) -> Option<Outcome> {
    serde_json::from_str::<ServerHead<'_>>(line)
        .ok()?
        .tool_outcome()
}

impl ServerHead<'_> {
    /// The outcome of the answer this message is, when it was read in the common shape (it
    /// carries no `error`); `None` sends it to the whole reading.
    pub(crate) fn tool_outcome(self) -> Option<Outcome> {
        if self.error.is_some() {
            return None;
        }
        let mut outcome = Outcome::default();
        if self.result.as_ref().and_then(|r| r.is_error) == Some(true) {
            outcome.is_error = Some(true);
        }
        let text = self
            .result
            .and_then(|r| r.content)
            .map(|blocks| joined(blocks.iter().filter_map(|b| b.text.as_deref())))
            .unwrap_or_default();
        outcome.text = Some(text);
        Some(outcome)
    }
}

/// The outcome of a `tools/call` answer read whole: a JSON-RPC error or `isError: true` is
/// a failure, and the text is the content's text blocks.
pub(crate) fn tool_outcome(msg: &Value) -> Outcome {
    let mut outcome = Outcome::default();
    if let Some(err) = msg.get("error") {
        outcome.is_error = Some(true);
        outcome.error_code = err.get("code").map(|c| c.to_string());
        outcome.text = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string);
    } else {
        let result = msg.get("result");
        if result.and_then(|r| r.get("isError")) == Some(&Value::Bool(true)) {
            outcome.is_error = Some(true);
        }
        outcome.text = Some(text_of(result.and_then(|r| r.get("content"))));
    }
    outcome
}

fn text_of(content: Option<&Value>) -> String {
    content
        .and_then(Value::as_array)
        .map(|blocks| joined(blocks.iter().filter_map(|b| b.get("text")?.as_str())))
        .unwrap_or_default()
}

/// A result's text: its text blocks' texts, the empty ones left out, one per line.
fn joined<'a>(texts: impl Iterator<Item = &'a str>) -> String {
    texts
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A `tools/call` answer as a server may write it: the common shape, other shapes,
    /// and keys written twice.
    fn arb_answer() -> impl Strategy<Value = String> {
        let text = prop_oneof![
            Just(String::new()),
            Just("\"\"".to_string()),
            "[a-z \\n]{0,12}".prop_map(|t| serde_json::to_string(&t).unwrap()),
            Just("\"a\\\\u00e9\\\\n\"".to_string()),
            Just("null".to_string()),
            Just("5".to_string()),
        ];
        let block = prop_oneof![
            6 => text.prop_map(|t| if t.is_empty() {
                "{\"type\":\"text\"}".to_string()
            } else {
                format!("{{\"type\":\"text\",\"text\":{t}}}")
            }),
            2 => Just("{\"type\":\"image\",\"data\":\"AA==\"}".to_string()),
            1 => Just("\"bare\"".to_string()),
            1 => Just("7".to_string()),
        ];
        let content = prop_oneof![
            Just(None),
            Just(Some("null".to_string())),
            Just(Some("\"text\"".to_string())),
            prop::collection::vec(block, 0..4).prop_map(|b| Some(format!("[{}]", b.join(",")))),
        ];
        let is_error = prop_oneof![
            Just(None),
            Just(Some("true")),
            Just(Some("false")),
            Just(Some("null")),
            Just(Some("\"true\"")),
        ];
        let result = (is_error, content, any::<bool>()).prop_map(|(e, c, twice)| {
            let mut members = Vec::new();
            if let Some(e) = e {
                members.push(format!("\"isError\":{e}"));
            }
            if let Some(c) = c {
                members.push(format!("\"content\":{c}"));
                if twice {
                    members.push("\"content\":[]".to_string());
                }
            }
            format!("{{{}}}", members.join(","))
        });
        let result = prop_oneof![
            4 => result.prop_map(Some),
            1 => Just(None),
            1 => Just(Some("null".to_string())),
            1 => Just(Some("3".to_string())),
        ];
        let error = prop_oneof![
            4 => Just(None),
            1 => Just(Some("null".to_string())),
            1 => Just(Some("{\"code\":-32000,\"message\":\"boom\"}".to_string())),
        ];
        (result, error).prop_map(|(r, e)| {
            let mut members = vec!["\"jsonrpc\":\"2.0\"".to_string(), "\"id\":1".to_string()];
            if let Some(r) = r {
                members.push(format!("\"result\":{r}"));
            }
            if let Some(e) = e {
                members.push(format!("\"error\":{e}"));
            }
            format!("{{{}}}", members.join(","))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Reading an answer's outcome without parsing it whole gives what reading it
        /// whole gives, wherever the quick reading answers.
        #[test]
        fn the_quick_outcome_is_the_whole_answers_outcome(line in arb_answer()) {
            if let Some(quick) = fast_tool_outcome(&line) {
                let whole: Value = serde_json::from_str(&line).unwrap();
                prop_assert_eq!(quick, tool_outcome(&whole), "{}", line);
            }
        }
    }

    proptest! {
        #[test]
        fn an_id_is_keyed_by_its_compact_json_text(
            i in any::<i64>(),
            u in any::<u64>(),
            f in any::<f64>(),
            s in "\\PC{0,8}",
        ) {
            for id in [json!(i), json!(u), json!(f), json!(s), json!(null), json!([i])] {
                prop_assert_eq!(id_key(&id), id.to_string());
            }
        }
    }

    #[test]
    fn the_common_answers_are_read_quickly() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"no"}],"isError":true}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"structuredContent":{"a":1}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":""},{"type":"text","text":"a\u00e9"},{"type":"image","data":"AA=="},{"type":"text","text":"b"}]}}"#,
        ] {
            let whole: Value = serde_json::from_str(line).unwrap();
            assert_eq!(
                fast_tool_outcome(line),
                Some(tool_outcome(&whole)),
                "{line}"
            );
        }
        // Errors and other shapes are read whole.
        assert_eq!(
            fast_tool_outcome(r#"{"jsonrpc":"2.0","id":4,"error":null}"#),
            None
        );
        assert_eq!(
            fast_tool_outcome(r#"{"jsonrpc":"2.0","id":5,"result":{"content":"x"}}"#),
            None
        );
    }
}
