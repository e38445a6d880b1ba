//! JSON kept as the text it was serialized to. What the store writes (event data, a run's
//! result and final report, accounting entries) is serialized once, straight from the typed
//! value, and bound to the database as that text: no `serde_json::Value` tree is built and torn
//! down on a session's path, and replaying a stored event sends its text as read.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// One JSON value as text. Two are equal when they hold the same JSON, whatever the spacing
/// and key order (PostgreSQL's `jsonb` gives back neither as written). Shared, not copied, when
/// cloned: a run's live followers and the recorder hold the same event text.
#[derive(Clone)]
pub struct JsonText(Arc<RawValue>);

impl JsonText {
    /// Serializes `value`; a value serde cannot write as JSON (a map with non-string keys)
    /// becomes `null`, as the types stored here never are.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Self {
        serde_json::value::to_raw_value(value).map_or_else(|_| Self::null(), |raw| Self(raw.into()))
    }

    pub fn null() -> Self {
        Self::from(Value::Null)
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// Parses the text back into a tree (for readers that edit or inspect it).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.as_str()).unwrap_or(Value::Null)
    }
}

impl From<Value> for JsonText {
    fn from(value: Value) -> Self {
        Self::of(&value)
    }
}

impl From<Box<RawValue>> for JsonText {
    fn from(raw: Box<RawValue>) -> Self {
        Self(raw.into())
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str() || self.to_value() == other.to_value()
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Written as the JSON it holds (not as a string).
impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(|raw| Self(raw.into()))
    }
}

/// An optional whole number that accepts `60` and `60.0` alike, as JSON Schema's `integer`
/// does, and nothing negative, fractional or past `u64`'s range (serde's `u64` refuses `60.0`).
pub fn optional_whole_u64<'de, D>(deserializer: D) -> Result<Option<u64>, D::Error>
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
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    });
    whole.map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!("{number} is not a whole number of 0 or more"))
    })
}

/// [`optional_whole_u64`] for a count that must be 1 to `u32::MAX`.
pub fn optional_whole_nonzero_u32<'de, D>(
    deserializer: D,
) -> Result<Option<std::num::NonZeroU32>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let Some(number) = optional_whole_u64(deserializer)? else {
        return Ok(None);
    };
    u32::try_from(number)
        .ok()
        .and_then(std::num::NonZeroU32::new)
        .map(Some)
        .ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{number} is not a whole number from 1 to {}",
                u32::MAX
            ))
        })
}

/// [`optional_whole_u64`] for a count that must be 1 or more.
pub fn optional_whole_nonzero_u64<'de, D>(
    deserializer: D,
) -> Result<Option<std::num::NonZeroU64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let Some(number) = optional_whole_u64(deserializer)? else {
        return Ok(None);
    };
    std::num::NonZeroU64::new(number)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom("0 is not a whole number of 1 or more"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn serializes_once_and_embeds_as_json_not_as_a_string() {
        let text = JsonText::of(&json!({"b": 1, "a": [true, null]}));
        assert_eq!(text.as_str(), r#"{"a":[true,null],"b":1}"#);
        let outer = serde_json::to_string(&json!({"data": text.to_value()})).expect("json");
        assert_eq!(
            serde_json::to_string(&Outer { data: &text }).expect("json"),
            outer
        );
    }

    #[derive(Serialize)]
    struct Outer<'a> {
        data: &'a JsonText,
    }

    #[test]
    fn equal_when_the_same_json_whatever_the_spacing_and_key_order() {
        let written = JsonText::of(&json!({"n": 1, "text": "chunk ✓"}));
        let from_jsonb: JsonText =
            serde_json::from_str(r#"{"text": "chunk ✓", "n": 1}"#).expect("json");
        assert_eq!(written, from_jsonb);
        assert_ne!(written, JsonText::of(&json!({"n": 2, "text": "chunk ✓"})));
    }

    #[test]
    fn a_map_json_cannot_hold_becomes_null() {
        let mut map = std::collections::HashMap::new();
        map.insert((1, 2), "tuple keys");
        assert_eq!(JsonText::of(&map).as_str(), "null");
    }
}
