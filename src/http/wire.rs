//! What every API family's wire module shares: `string_constant!`, which declares a field whose
//! value never varies (`"object": "chat.completion.chunk"`, `"type": "message"`) as a one-value
//! enum, so the generated OpenAPI document states the exact string instead of "any string".
//! It also holds what every family's bodies share: the shape of a server-sent event in the
//! document, and token counts that accept a whole number written as `162.0` (JSON Schema's
//! `integer` allows it, so a client generated from the document may send it).
//! Families keep their own bodies in `<family>/wire.rs`; nothing family-specific belongs here.

/// `string_constant!(ChunkObject::ChatCompletionChunk = "chat.completion.chunk")` declares
/// `enum ChunkObject { ChatCompletionChunk }` serialised as that string.
macro_rules! string_constant {
    ($(#[$doc:meta])* $name:ident :: $variant:ident = $value:tt) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
        pub enum $name {
            #[serde(rename = $value)]
            $variant,
        }
    };
}

pub(crate) use string_constant;

string_constant!(
    /// `"list"`: OpenAI's envelope for a list of objects, used by every listing route.
    ListObject::List = "list"
);

string_constant!(
    /// `"assistant"`: the role of every answer, in the OpenAI and the Anthropic shape.
    AssistantRole::Assistant = "assistant"
);

/// One server-sent event, as the document describes every `text/event-stream` answer (the shape
/// OpenAPI 3.2 gives stream items): `data` always, `event` and `id` where the stream names and
/// numbers its events.
#[derive(Debug, utoipa::ToSchema)]
#[expect(
    dead_code,
    reason = "a schema only: frames are written by the SSE writer"
)]
pub struct ServerSentEvent {
    /// The frame's JSON (or `[DONE]` at the end of an OpenAI stream).
    pub data: String,
    /// The event's type (`run.started`, `output`, …; Anthropic's `message_start`, …).
    pub event: Option<String>,
    /// The event's number in its run (`Last-Event-ID` resumes after it).
    pub id: Option<String>,
}

/// An optional count that accepts `162` and `162.0` alike, and nothing negative or fractional.
pub fn optional_whole_number<'de, D>(deserializer: D) -> Result<Option<u32>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let whole = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= f64::from(u32::MAX))
            .map(|f| f as u64)
    });
    whole
        .and_then(|n| u32::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{number} is not a whole number from 0 to {}",
                u32::MAX
            ))
        })
}

/// An optional signed integer (a seed) that accepts `-7` and `-7.0` alike, as JSON Schema's
/// `integer` does, and nothing fractional or out of the 64-bit range.
pub fn optional_whole_signed<'de, D>(deserializer: D) -> Result<Option<i64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    // 2^63 as a float: the first value past i64::MAX.
    const PAST_I64: f64 = 9_223_372_036_854_775_808.0;
    let whole = number.as_i64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= -PAST_I64 && *f < PAST_I64)
            .map(|f| f as i64)
    });
    whole.map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "{number} is not a whole number in the 64-bit range"
        ))
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Seeded {
        #[serde(default, deserialize_with = "super::optional_whole_signed")]
        seed: Option<i64>,
    }

    fn seed(json: &str) -> Result<Option<i64>, String> {
        serde_json::from_str::<Seeded>(json)
            .map(|s| s.seed)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn seeds_are_whole_numbers_in_either_notation() {
        assert_eq!(seed(r#"{"seed": 109832.0}"#), Ok(Some(109_832)));
        assert_eq!(seed(r#"{"seed": -7}"#), Ok(Some(-7)));
        assert_eq!(seed(r#"{"seed": 9223372036854775807}"#), Ok(Some(i64::MAX)));
        assert_eq!(seed("{}"), Ok(None));
        for bad in ["1.5", "9223372036854775808", "1e300", "\"7\""] {
            assert!(seed(&format!(r#"{{"seed": {bad}}}"#)).is_err(), "{bad}");
        }
    }

    #[derive(Deserialize)]
    struct Tokens {
        #[serde(default, deserialize_with = "super::optional_whole_number")]
        max: Option<u32>,
    }

    fn max(json: &str) -> Result<Option<u32>, String> {
        serde_json::from_str::<Tokens>(json)
            .map(|t| t.max)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn whole_numbers_are_counts_in_either_notation() {
        assert_eq!(max(r#"{"max": 162}"#), Ok(Some(162)));
        assert_eq!(max(r#"{"max": 162.0}"#), Ok(Some(162)));
        assert_eq!(max(r#"{"max": null}"#), Ok(None));
        assert_eq!(max("{}"), Ok(None));
        assert_eq!(max(r#"{"max": 4294967295}"#), Ok(Some(u32::MAX)));
        for bad in ["1.5", "-1", "4294967296", "1e300", "\"7\""] {
            assert!(max(&format!(r#"{{"max": {bad}}}"#)).is_err(), "{bad}");
        }
    }
}
