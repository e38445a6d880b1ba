//! A Chat Completions body (`chat.completion.chunk` or `chat.completion`) as the decoder reads
//! it. A well-formed body is read in one pass into these structs, strings borrowed from the
//! frame unless they hold escapes, so a streamed chunk builds no `serde_json::Value` tree.
//! A body with a field of an unexpected type (a number for a string, an object for the
//! arguments, a key twice) is read again through `Value` accessors, where such a field reads
//! as absent, so dialects the strict shape does not fit decode as they always did.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// The top level of a body.
#[derive(Deserialize, Default, Debug, PartialEq)]
pub struct Body<'a> {
    /// An `error` key, whatever its value (even `null`): the body reports a failure.
    #[serde(rename = "error", default, deserialize_with = "present")]
    pub has_error: bool,
    #[serde(borrow, default)]
    pub choices: Option<Vec<Choice<'a>>>,
    /// Any JSON; the decoder reads it when it is an object.
    #[serde(default)]
    pub usage: Option<Value>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub provider: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub model: Option<Cow<'a, str>>,
}

/// A choice: its `delta` (streamed) or `message` (whole), and why it finished.
#[derive(Deserialize, Default, Debug, PartialEq)]
pub struct Choice<'a> {
    #[serde(borrow, default)]
    pub delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    pub message: Option<Delta<'a>>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub finish_reason: Option<Cow<'a, str>>,
}

/// What a delta or message adds: text, reasoning and tool-call fragments.
#[derive(Deserialize, Default, Debug, PartialEq)]
pub struct Delta<'a> {
    #[serde(borrow, default, deserialize_with = "text")]
    pub reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub tool_calls: Option<Vec<Call<'a>>>,
}

/// One tool-call fragment.
#[derive(Deserialize, Default, Debug, PartialEq)]
pub struct Call<'a> {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub function: Option<Function<'a>>,
}

#[derive(Deserialize, Default, Debug, PartialEq)]
pub struct Function<'a> {
    #[serde(borrow, default, deserialize_with = "text")]
    pub name: Option<Cow<'a, str>>,
    /// JSON text: a string as it is, `null` as empty, any other JSON (some servers send an
    /// object) as its compact text.
    #[serde(borrow, default, deserialize_with = "arguments_text")]
    pub arguments: Cow<'a, str>,
}

/// Why `Body::parse` failed: the text is not JSON (the parser's message).
#[derive(Debug)]
pub struct NotJson(pub String);

impl<'a> Body<'a> {
    /// Reads `text`, strictly in one pass or, when a field does not fit, leniently.
    pub fn parse(text: &'a str) -> Result<Self, NotJson> {
        // serde would read a struct from an array too (fields by position): objects only.
        let strict = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).ok()
        } else {
            None
        };
        match strict {
            Some(body) => Ok(body),
            None => serde_json::from_str::<Value>(text)
                .map(|value| Body::from_value(&value))
                .map_err(|error| NotJson(error.to_string())),
        }
    }

    pub fn first_choice(&self) -> Option<&Choice<'a>> {
        self.choices.as_ref()?.first()
    }
}

/// The lenient reading: what the `Value` accessors find, a field of another type as absent.
impl Body<'static> {
    fn from_value(body: &Value) -> Self {
        Self {
            has_error: body.get("error").is_some(),
            choices: body
                .get("choices")
                .and_then(|choices| choices.get(0))
                .map(|choice| vec![Choice::from_value(choice)]),
            usage: body.get("usage").cloned(),
            provider: text_of(body.get("provider")),
            model: text_of(body.get("model")),
        }
    }
}

impl Choice<'static> {
    fn from_value(choice: &Value) -> Self {
        Self {
            delta: choice.get("delta").map(Delta::from_value),
            message: choice.get("message").map(Delta::from_value),
            finish_reason: text_of(choice.get("finish_reason")),
        }
    }
}

impl Delta<'static> {
    fn from_value(delta: &Value) -> Self {
        Self {
            reasoning_content: text_of(delta.get("reasoning_content")),
            reasoning: text_of(delta.get("reasoning")),
            content: text_of(delta.get("content")),
            tool_calls: delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| calls.iter().map(Call::from_value).collect()),
        }
    }
}

impl Call<'static> {
    fn from_value(call: &Value) -> Self {
        let function = call.get("function");
        Self {
            index: call.get("index").and_then(Value::as_u64),
            id: text_of(call.get("id")),
            function: function.map(|function| Function {
                name: text_of(function.get("name")),
                arguments: Cow::Owned(match function.get("arguments") {
                    Some(Value::String(text)) => text.clone(),
                    None | Some(Value::Null) => String::new(),
                    Some(other) => other.to_string(),
                }),
            }),
        }
    }
}

fn text_of(value: Option<&Value>) -> Option<Cow<'static, str>> {
    value
        .and_then(Value::as_str)
        .map(|text| Cow::Owned(text.to_string()))
}

/// A string, borrowed from the input when it holds no escapes, or `null`.
fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    struct Text;
    impl<'de> serde::de::Visitor<'de> for Text {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string or null")
        }
        fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(text)))
        }
        fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(text.to_string())))
        }
        fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(text)))
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_str(self)
        }
    }
    deserializer.deserialize_option(Text)
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| true)
}

fn arguments_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Cow<'de, str>, D::Error> {
    let raw = <&'de RawValue>::deserialize(deserializer)?.get();
    if raw.starts_with('"') {
        return Ok(match serde_json::from_str::<&'de str>(raw) {
            Ok(borrowed) => Cow::Borrowed(borrowed),
            Err(_) => {
                Cow::Owned(serde_json::from_str::<String>(raw).map_err(serde::de::Error::custom)?)
            }
        });
    }
    if raw == "null" {
        return Ok(Cow::Borrowed(""));
    }
    let value: Value = serde_json::from_str(raw).map_err(serde::de::Error::custom)?;
    Ok(Cow::Owned(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Body<'_> {
        Body::parse(text).expect("JSON")
    }

    #[test]
    fn well_formed_chunks_borrow_their_strings_unless_escaped() {
        let body = parse(
            r#"{"id":"x","choices":[{"index":0,"delta":{"content":"plain","reasoning":"tab\tbed"},"finish_reason":null}]}"#,
        );
        let delta = body
            .first_choice()
            .and_then(|c| c.delta.as_ref())
            .expect("delta");
        assert!(matches!(delta.content, Some(Cow::Borrowed("plain"))));
        assert!(matches!(&delta.reasoning, Some(Cow::Owned(text)) if text == "tab\tbed"));
    }

    #[test]
    fn a_field_of_another_type_reads_as_absent_and_the_rest_is_kept() {
        let body = parse(
            r#"{"choices":[{"delta":{"content":"kept","tool_calls":{}},"finish_reason":7}],"model":5}"#,
        );
        let choice = body.first_choice().expect("a choice");
        let delta = choice.delta.as_ref().expect("a delta");
        assert_eq!(delta.content.as_deref(), Some("kept"));
        assert!(delta.tool_calls.is_none(), "an object is not a list");
        assert!(choice.finish_reason.is_none(), "a number is not a reason");
        assert!(body.model.is_none());
    }

    #[test]
    fn error_key_is_seen_even_when_null_and_other_json_is_an_empty_body() {
        for text in [r#"{"error":null}"#, r#"{"error":{"message":"x"}}"#] {
            assert!(parse(text).has_error, "{text}");
        }
        for text in ["[1,2]", "\"text\"", "3"] {
            assert_eq!(parse(text), Body::default(), "{text}");
        }
        let twice = parse(r#"{"model":"a","model":"b"}"#);
        assert_eq!(
            twice.model.as_deref(),
            Some("b"),
            "the last of a repeated key"
        );
        assert!(Body::parse("{not json").is_err());
    }

    #[test]
    fn arguments_are_json_text_whatever_was_sent() {
        let object: Value = serde_json::from_str(r#"{"b":1,"a":[true]}"#).expect("json");
        for (arguments, expected) in [
            (r#""{\"k\":1}""#, r#"{"k":1}"#.to_string()),
            ("null", String::new()),
            (r#"{"b":1,"a":[true]}"#, object.to_string()),
        ] {
            let text = format!(
                r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":1,"function":{{"name":"n","arguments":{arguments}}}}}]}}}}]}}"#
            );
            let body = parse(&text);
            let call = &body
                .first_choice()
                .and_then(|c| c.delta.as_ref())
                .and_then(|d| d.tool_calls.as_ref())
                .expect("calls")[0];
            let function = call.function.as_ref().expect("function");
            assert_eq!(
                (call.index, function.arguments.as_ref()),
                (Some(1), expected.as_str()),
                "{arguments}"
            );
        }
    }

    #[test]
    fn tool_call_entries_of_another_type_are_empty_fragments() {
        let body = parse(r#"{"choices":[{"delta":{"tool_calls":[3,{"index":-1,"id":"a"}]}}]}"#);
        let calls = body
            .first_choice()
            .and_then(|c| c.delta.as_ref())
            .and_then(|d| d.tool_calls.as_ref())
            .expect("calls");
        assert_eq!(calls[0], Call::default());
        assert_eq!((calls[1].index, calls[1].id.as_deref()), (None, Some("a")));
    }
}
