//! Reasoning settings as written in config and frontmatter: the level an agent asks for
//! (`reasoning`), an explicit budget (`reasoningTokens`), and how a provider or model maps levels
//! onto its own values (`providers.<p>.reasoning`, `providers.<p>.models.<m>.reasoning`).
//!
//! Only parsing and validation live here; turning a level into a wire parameter is the
//! providers' business (`llm::parameters`).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// How hard the model should think; `Off` asks for no reasoning at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningLevel {
    Off,
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningLevel {
    /// The level's name as OpenAI-style `reasoning_effort` values spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "none",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }

    /// Parses a frontmatter/config `reasoning` value. `Ok(None)` means "inherit"
    /// (`default`, `inherit`, empty); `none`/`unset`/`off` switch reasoning off.
    pub fn parse_setting(value: &Value) -> Result<Option<Self>, String> {
        let text = match value {
            Value::Null => return Ok(Some(Self::Off)),
            Value::String(text) => text.trim().to_ascii_lowercase(),
            other => {
                return Err(format!(
                    "reasoning must be one of none, minimal, low, medium, high (got {other})"
                ));
            }
        };
        match text.as_str() {
            "" | "default" | "inherit" => Ok(None),
            "none" | "unset" | "off" | "disabled" => Ok(Some(Self::Off)),
            "minimal" => Ok(Some(Self::Minimal)),
            "low" => Ok(Some(Self::Low)),
            "medium" => Ok(Some(Self::Medium)),
            "high" => Ok(Some(Self::High)),
            _ => Err(format!(
                "reasoning must be one of none, minimal, low, medium, high (got {text:?})"
            )),
        }
    }
}

/// An explicit reasoning budget (`reasoningTokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningTokens {
    Disabled,
    Budget(u32),
}

impl ReasoningTokens {
    /// Parses `reasoningTokens`: a positive token count, `0`/`"disabled"`/`"none"` to switch off.
    pub fn parse(value: &Value) -> Result<Self, String> {
        let bad = || format!("reasoningTokens must be a token count or \"disabled\" (got {value})");
        match value {
            Value::Number(n) => match n.as_u64() {
                Some(0) => Ok(Self::Disabled),
                Some(tokens) => u32::try_from(tokens).map(Self::Budget).map_err(|_| bad()),
                None => Err(bad()),
            },
            Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
                "disabled" | "none" | "off" => Ok(Self::Disabled),
                other => other
                    .parse::<u32>()
                    .map(|n| {
                        if n == 0 {
                            Self::Disabled
                        } else {
                            Self::Budget(n)
                        }
                    })
                    .map_err(|_| bad()),
            },
            _ => Err(bad()),
        }
    }
}

/// What a provider or model sends for a level: a token budget or a vendor effort string.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ReasoningValue {
    Budget(u32),
    Effort(String),
}

/// `providers.<p>.reasoning` / `models.<m>.reasoning`: one value for every level, one value per
/// level `[minimal, low, medium, high]`, or `null`/`"none"` to never send reasoning parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReasoningMapping {
    Disabled,
    Every(ReasoningValue),
    PerLevel([ReasoningValue; 4]),
}

impl ReasoningMapping {
    /// The value configured for `level`; `None` for `Off` (nothing is sent).
    pub fn value_for(&self, level: ReasoningLevel) -> Option<&ReasoningValue> {
        let slot = match level {
            ReasoningLevel::Off => return None,
            ReasoningLevel::Minimal => 0,
            ReasoningLevel::Low => 1,
            ReasoningLevel::Medium => 2,
            ReasoningLevel::High => 3,
        };
        match self {
            Self::Disabled => None,
            Self::Every(value) => Some(value),
            Self::PerLevel(values) => values.get(slot),
        }
    }
}

impl<'de> Deserialize<'de> for ReasoningMapping {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(deserializer)?;
        match &value {
            Value::Null => Ok(Self::Disabled),
            Value::String(s) if matches!(s.trim(), "none" | "disabled" | "off") => {
                Ok(Self::Disabled)
            }
            Value::Array(items) => {
                let values: Vec<ReasoningValue> = serde_json::from_value(value.clone())
                    .map_err(|e| D::Error::custom(format!("reasoning list: {e}")))?;
                let per_level: [ReasoningValue; 4] = values.try_into().map_err(|_| {
                    D::Error::custom(format!(
                        "reasoning list needs 4 entries [minimal, low, medium, high], got {}",
                        items.len()
                    ))
                })?;
                Ok(Self::PerLevel(per_level))
            }
            _ => serde_json::from_value(value.clone())
                .map(Self::Every)
                .map_err(|_| {
                    D::Error::custom(format!(
                        "reasoning must be a token budget, an effort name, a list of 4 of them, or null (got {value})"
                    ))
                }),
        }
    }
}

/// For `reasoning` keys: an explicit `null` means [`ReasoningMapping::Disabled`], not "absent"
/// (serde would otherwise read `null` into an `Option` as `None`).
pub fn explicit_mapping<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ReasoningMapping>, D::Error> {
    ReasoningMapping::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn levels_parse_with_inherit_and_off() {
        assert_eq!(
            ReasoningLevel::parse_setting(&json!("High")),
            Ok(Some(ReasoningLevel::High))
        );
        assert_eq!(ReasoningLevel::parse_setting(&json!("default")), Ok(None));
        assert_eq!(
            ReasoningLevel::parse_setting(&json!("none")),
            Ok(Some(ReasoningLevel::Off))
        );
        let err = ReasoningLevel::parse_setting(&json!("extreme")).unwrap_err();
        assert!(err.contains("extreme"), "{err}");
        assert!(ReasoningLevel::parse_setting(&json!(3)).is_err());
    }

    #[test]
    fn token_budgets_parse() {
        assert_eq!(
            ReasoningTokens::parse(&json!(2048)),
            Ok(ReasoningTokens::Budget(2048))
        );
        assert_eq!(
            ReasoningTokens::parse(&json!("disabled")),
            Ok(ReasoningTokens::Disabled)
        );
        assert_eq!(
            ReasoningTokens::parse(&json!(0)),
            Ok(ReasoningTokens::Disabled)
        );
        assert!(ReasoningTokens::parse(&json!(-3)).is_err());
        assert_eq!(
            ReasoningTokens::parse(&json!(u32::MAX)),
            Ok(ReasoningTokens::Budget(u32::MAX))
        );
        assert!(ReasoningTokens::parse(&json!(u64::from(u32::MAX) + 1)).is_err());
        assert!(ReasoningTokens::parse(&json!("lots")).is_err());
    }

    #[test]
    fn mappings_accept_one_value_four_values_or_null() {
        let every: ReasoningMapping = serde_json::from_value(json!(4096)).expect("number");
        assert_eq!(
            every.value_for(ReasoningLevel::Low),
            Some(&ReasoningValue::Budget(4096))
        );
        let per: ReasoningMapping =
            serde_json::from_value(json!(["low", "low", "medium", "high"])).expect("list");
        assert_eq!(
            per.value_for(ReasoningLevel::Medium),
            Some(&ReasoningValue::Effort("medium".into()))
        );
        assert_eq!(per.value_for(ReasoningLevel::Off), None);
        let off: ReasoningMapping = serde_json::from_value(json!(null)).expect("null");
        assert_eq!(off, ReasoningMapping::Disabled);
        let err = serde_json::from_value::<ReasoningMapping>(json!([1, 2])).unwrap_err();
        assert!(err.to_string().contains("4 entries"), "{err}");
    }

    #[test]
    fn a_bad_provider_mapping_is_named_by_its_config_path() {
        let err = crate::config::parse_config(
            json!({"providers": {"p": {"type": "openai", "models": {"m": {"reasoning": [1, 2, 3, 4, 5]}}}}}),
            "a.json",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("providers.p.models.m.reasoning") && err.contains("got 5"),
            "{err}"
        );
    }
}
