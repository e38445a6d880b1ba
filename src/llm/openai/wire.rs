//! A borrowed view of a Chat Completions body (`chat.completion.chunk` or `chat.completion`):
//! each level keeps the fields the decoder reads as raw JSON slices of the frame, so a
//! streamed chunk is read without building a `serde_json::Value` tree or copying a string
//! that has no escapes. Lenient like the `Value` accessors it replaced: a field of an
//! unexpected type reads as absent, and `null` as missing.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

type Raw<'a> = Option<&'a RawValue>;

/// The top level of a body.
#[derive(Deserialize, Default)]
pub struct Body<'a> {
    /// An `error` key, whatever its value (even `null`): the body reports a failure.
    #[serde(rename = "error", default, deserialize_with = "present")]
    pub has_error: bool,
    #[serde(borrow, default)]
    choices: Raw<'a>,
    #[serde(borrow, default)]
    usage: Raw<'a>,
    #[serde(borrow, default)]
    provider: Raw<'a>,
    #[serde(borrow, default)]
    model: Raw<'a>,
}

/// The first choice: its `delta` (streamed) or `message` (whole), and why it finished.
#[derive(Deserialize, Default)]
pub struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Raw<'a>,
    #[serde(borrow, default)]
    message: Raw<'a>,
    #[serde(borrow, default)]
    finish_reason: Raw<'a>,
}

/// What a delta or message adds: text, reasoning and tool-call fragments.
#[derive(Deserialize, Default)]
pub struct Delta<'a> {
    #[serde(borrow, default)]
    reasoning_content: Raw<'a>,
    #[serde(borrow, default)]
    reasoning: Raw<'a>,
    #[serde(borrow, default)]
    content: Raw<'a>,
    #[serde(borrow, default)]
    tool_calls: Raw<'a>,
}

/// One tool-call fragment.
#[derive(Deserialize, Default)]
pub struct Call<'a> {
    #[serde(borrow, default)]
    index: Raw<'a>,
    #[serde(borrow, default)]
    id: Raw<'a>,
    #[serde(borrow, default)]
    function: Raw<'a>,
}

#[derive(Deserialize, Default)]
struct Function<'a> {
    #[serde(borrow, default)]
    name: Raw<'a>,
    #[serde(borrow, default)]
    arguments: Raw<'a>,
}

/// Why `Body::parse` failed: the text is not JSON (the parser's message).
pub struct NotJson(pub String);

impl<'a> Body<'a> {
    /// Reads `text`. JSON that is not an object of the expected shape (an array, a duplicated
    /// key) reads as an empty body, as it did through `Value` accessors.
    pub fn parse(text: &'a str) -> Result<Self, NotJson> {
        // serde would read a struct from an array too (fields by position): objects only.
        let parsed = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).ok()
        } else {
            None
        };
        match parsed {
            Some(body) => Ok(body),
            None => match serde_json::from_str::<serde::de::IgnoredAny>(text) {
                Ok(_) => Ok(Self::default()),
                Err(error) => Err(NotJson(error.to_string())),
            },
        }
    }

    pub fn first_choice(&self) -> Option<Choice<'a>> {
        first(self.choices).and_then(|choice| object(Some(choice)))
    }

    /// `usage`, when it is an object (rare: once per response, so a `Value` is fine).
    pub fn usage(&self) -> Option<Value> {
        self.usage
            .filter(|raw| raw.get().starts_with('{'))
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
    }

    pub fn provider(&self) -> Option<Cow<'a, str>> {
        text(self.provider)
    }

    pub fn model(&self) -> Option<Cow<'a, str>> {
        text(self.model)
    }
}

impl<'a> Choice<'a> {
    pub fn delta(&self) -> Option<Delta<'a>> {
        object(self.delta)
    }

    pub fn message(&self) -> Option<Delta<'a>> {
        object(self.message)
    }

    pub fn finish_reason(&self) -> Option<Cow<'a, str>> {
        text(self.finish_reason)
    }
}

impl<'a> Delta<'a> {
    /// Reasoning text, from `reasoning_content` (DeepSeek, vLLM) or else `reasoning`.
    pub fn reasoning(&self) -> Option<Cow<'a, str>> {
        non_empty(text(self.reasoning_content)).or_else(|| non_empty(text(self.reasoning)))
    }

    pub fn content(&self) -> Option<Cow<'a, str>> {
        non_empty(text(self.content))
    }

    /// The tool-call fragments, when `tool_calls` is an array; entries that are not objects
    /// read as empty fragments.
    pub fn tool_calls(&self) -> Option<Vec<Call<'a>>> {
        let calls = self.tool_calls.filter(|raw| raw.get().starts_with('['))?;
        let entries: Vec<&'a RawValue> = serde_json::from_str(calls.get()).ok()?;
        Some(
            entries
                .into_iter()
                .map(|entry| object(Some(entry)).unwrap_or_default())
                .collect(),
        )
    }
}

impl<'a> Call<'a> {
    pub fn index(&self) -> Option<usize> {
        self.index
            .and_then(|raw| serde_json::from_str::<u64>(raw.get()).ok())
            .and_then(|index| usize::try_from(index).ok())
    }

    pub fn id(&self) -> Option<Cow<'a, str>> {
        non_empty(text(self.id))
    }

    pub fn name(&self) -> Option<Cow<'a, str>> {
        let function: Function<'a> = object(self.function)?;
        non_empty(text(function.name))
    }

    /// The arguments as JSON text: a string as it is, `null` or none as empty, anything else
    /// (some servers send an object) as its compact JSON.
    pub fn arguments(&self) -> String {
        let Some(raw) = object::<Function<'a>>(self.function).and_then(|f| f.arguments) else {
            return String::new();
        };
        match text(Some(raw)) {
            Some(text) => text.into_owned(),
            None => serde_json::from_str::<Value>(raw.get())
                .map(|value| value.to_string())
                .unwrap_or_default(),
        }
    }
}

/// The first element of an array.
fn first(raw: Raw<'_>) -> Raw<'_> {
    let array = raw.filter(|raw| raw.get().starts_with('['))?;
    let entries: Vec<&RawValue> = serde_json::from_str(array.get()).ok()?;
    entries.first().copied()
}

/// An object read as `T`; anything else (or a malformed object) as absent.
fn object<'a, T: Deserialize<'a>>(raw: Raw<'a>) -> Option<T> {
    let raw = raw.filter(|raw| raw.get().starts_with('{'))?;
    serde_json::from_str(raw.get()).ok()
}

/// A string, borrowed when it has no escapes; anything else as absent.
fn text(raw: Raw<'_>) -> Option<Cow<'_, str>> {
    let raw = raw.filter(|raw| raw.get().starts_with('"'))?.get();
    match serde_json::from_str::<&str>(raw) {
        Ok(borrowed) => Some(Cow::Borrowed(borrowed)),
        Err(_) => serde_json::from_str::<String>(raw).ok().map(Cow::Owned),
    }
}

fn non_empty(text: Option<Cow<'_, str>>) -> Option<Cow<'_, str>> {
    text.filter(|text| !text.is_empty())
}

fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_borrow_unless_escaped_and_wrong_types_read_as_absent() {
        let body = Body::parse(
            r#"{"choices":[{"delta":{"content":"plain","reasoning":"tab\tbed","tool_calls":{}},"finish_reason":7}],"model":5}"#,
        )
        .ok()
        .expect("parses");
        let choice = body.first_choice().expect("a choice");
        let delta = choice.delta().expect("a delta");
        assert!(matches!(delta.content(), Some(Cow::Borrowed("plain"))));
        assert!(matches!(delta.reasoning(), Some(Cow::Owned(text)) if text == "tab\tbed"));
        assert!(delta.tool_calls().is_none(), "an object is not a list");
        assert!(choice.finish_reason().is_none(), "a number is not a reason");
        assert!(body.model().is_none());
    }

    #[test]
    fn error_key_is_seen_even_when_null_and_odd_json_is_an_empty_body() {
        for text in [r#"{"error":null}"#, r#"{"error":{"message":"x"}}"#] {
            assert!(Body::parse(text).ok().expect("parses").has_error, "{text}");
        }
        for text in ["[1,2]", r#"{"choices":[],"choices":[]}"#, "\"text\""] {
            let body = Body::parse(text).ok().expect("JSON");
            assert!(!body.has_error && body.first_choice().is_none(), "{text}");
        }
        assert!(Body::parse("{not json").is_err());
    }

    #[test]
    fn call_fields_are_lenient() {
        let body = Body::parse(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":-1,"id":"","function":{"name":"n","arguments":null}},3,{"index":2,"function":{"arguments":{"b":1,"a":[true]}}}]}}]}"#,
        )
        .ok()
        .expect("parses");
        let calls = body
            .first_choice()
            .and_then(|c| c.delta())
            .and_then(|d| d.tool_calls())
            .expect("calls");
        assert_eq!(calls.len(), 3);
        assert_eq!((calls[0].index(), calls[0].id()), (None, None));
        assert_eq!(calls[0].name().as_deref(), Some("n"));
        assert_eq!(calls[0].arguments(), "");
        assert_eq!((calls[1].index(), calls[1].name()), (None, None));
        assert_eq!(calls[2].index(), Some(2));
        let object: Value = serde_json::from_str(r#"{"b":1,"a":[true]}"#).expect("json");
        assert_eq!(calls[2].arguments(), object.to_string());
    }
}
