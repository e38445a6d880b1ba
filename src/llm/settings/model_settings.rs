//! Per-model settings under `providers.<p>.models.<model>`: context size, reasoning mapping and
//! the `overrides` that force or omit a request parameter for that model only.
//!
//! Pure data with validation; the providers apply it (`llm::parameters`).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::reasoning::{ReasoningMapping, explicit_mapping};

/// One model's settings. Every key is optional; unknown keys are an error naming the key.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelConfig {
    pub context_window: Option<u64>,
    pub context_window_buffer_tokens: Option<u64>,
    pub tokenizer: Option<String>,
    /// Replay reasoning to this model on later turns (`true` or the field name to use).
    pub interleaved: Option<Value>,
    #[serde(default)]
    pub overrides: ModelOverrides,
    /// How reasoning levels map onto this model's values; beats the provider's `reasoning`.
    #[serde(default, deserialize_with = "explicit_mapping")]
    pub reasoning: Option<ReasoningMapping>,
    pub tool_choice: Option<String>,
    /// What the model reads (`["text", "image", "pdf"]`); a known default when unset (SPEC §11).
    pub input: Option<Vec<crate::vocabulary::AttachmentKind>>,
}

/// Parameters forced (`number`) or omitted (`null`) for one model, whatever the agent says.
/// Keys accept camelCase and the snake_case the reference uses (`top_p`, `repeat_penalty`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelOverrides {
    #[serde(default)]
    pub temperature: ParamOverride<f64>,
    #[serde(default, alias = "top_p")]
    pub top_p: ParamOverride<f64>,
    #[serde(default, alias = "top_k")]
    pub top_k: ParamOverride<u32>,
    #[serde(default, alias = "repeat_penalty")]
    pub repeat_penalty: ParamOverride<f64>,
    #[serde(default, alias = "max_output_tokens", alias = "max_tokens")]
    pub max_output_tokens: ParamOverride<u32>,
}

/// One override: absent (the agent's value stands), `null` (never send), or a forced value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum ParamOverride<T> {
    #[default]
    Inherit,
    Omit,
    Force(T),
}

impl<T: Copy> ParamOverride<T> {
    /// The value to send given what the agent asked for.
    pub fn apply(self, requested: Option<T>) -> Option<T> {
        match self {
            Self::Inherit => requested,
            Self::Omit => None,
            Self::Force(value) => Some(value),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ParamOverride<T> {
    /// Only called when the key is present, so `null` here means "omit".
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(deserializer)? {
            None => Self::Omit,
            Some(value) => Self::Force(value),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_distinguish_absent_null_and_forced() {
        let model: ModelConfig = serde_json::from_value(json!({
            "overrides": {"temperature": null, "top_p": 0.5, "topK": 40}
        }))
        .expect("valid");
        let o = &model.overrides;
        assert_eq!(o.temperature, ParamOverride::Omit);
        assert_eq!(o.top_p, ParamOverride::Force(0.5));
        assert_eq!(o.top_k, ParamOverride::Force(40));
        assert_eq!(o.repeat_penalty, ParamOverride::Inherit);
        assert_eq!(o.temperature.apply(Some(0.2)), None);
        assert_eq!(o.top_p.apply(Some(0.9)), Some(0.5));
        assert_eq!(o.repeat_penalty.apply(Some(1.1)), Some(1.1));
    }

    #[test]
    fn null_reasoning_disables_and_unknown_keys_are_named() {
        let model: ModelConfig = serde_json::from_value(json!({"reasoning": null})).expect("valid");
        assert_eq!(model.reasoning, Some(ReasoningMapping::Disabled));
        let absent: ModelConfig = serde_json::from_value(json!({})).expect("valid");
        assert_eq!(absent.reasoning, None);
        let err = serde_json::from_value::<ModelConfig>(json!({"overrides": {"temp": 1}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("temp"), "{err}");
        let err = serde_json::from_value::<ModelConfig>(json!({"overrides": {"topK": "many"}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid type"), "{err}");
    }
}
