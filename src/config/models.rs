//! What agentd knows about each provider/model pair from the config: context window, safety
//! buffer, tokenizer and price. Resolution: model settings, then provider, then `defaults`,
//! then built-ins (131,072-token window, 256-token buffer).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Config, ConfigError, ModelConfig};

pub const DEFAULT_CONTEXT_WINDOW: u64 = 131_072;
pub const DEFAULT_BUFFER_TOKENS: u64 = 256;

/// `pricing`: `tools.<server or server__tool>` prices tool calls, every other key is a provider
/// whose models are priced per unit of tokens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pricing {
    pub tools: BTreeMap<String, ToolPrice>,
    pub models: BTreeMap<String, BTreeMap<String, ModelPrice>>,
}

/// Read key by key (not with `#[serde(flatten)]`, which buffers the values and loses the path
/// an error names).
impl<'de> Deserialize<'de> for Pricing {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PricingVisitor;

        impl<'de> serde::de::Visitor<'de> for PricingVisitor {
            type Value = Pricing;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of providers (and `tools`)")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Pricing, A::Error> {
                let mut pricing = Pricing::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "tools" {
                        pricing.tools = map.next_value()?;
                    } else {
                        let models = map.next_value()?;
                        pricing.models.insert(key, models);
                    }
                }
                Ok(pricing)
            }
        }

        deserializer.deserialize_map(PricingVisitor)
    }
}

/// `pricing.tools.<name>`: what one call of a tool costs, in USD.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolPrice {
    /// Per call, failed calls included.
    #[serde(default)]
    pub per_call: f64,
    /// Per thousand characters of arguments and output together.
    #[serde(default)]
    pub per_thousand_characters: f64,
}

impl Pricing {
    /// Every price is a finite number at or above zero: a typo'd negative price would make
    /// costs (and `costUsdPerDay` limits) shrink. The error names the key path.
    pub fn check(&self, file: &str) -> Result<(), ConfigError> {
        let model_prices = self.models.iter().flat_map(|(provider, models)| {
            models.iter().flat_map(move |(model, price)| {
                [
                    ("prompt", price.prompt),
                    ("completion", price.completion),
                    ("cacheRead", price.cache_read),
                    ("cacheWrite", price.cache_write),
                ]
                .map(|(key, value)| (format!("pricing.{provider}.{model}.{key}"), value))
            })
        });
        let tool_prices = self.tools.iter().flat_map(|(tool, price)| {
            [
                ("perCall", price.per_call),
                ("perThousandCharacters", price.per_thousand_characters),
            ]
            .map(|(key, value)| (format!("pricing.tools.{tool}.{key}"), value))
        });
        match model_prices
            .chain(tool_prices)
            .find(|(_, value)| !(value.is_finite() && *value >= 0.0))
        {
            Some((path, value)) => Err(ConfigError::Invalid {
                file: file.to_string(),
                path,
                message: format!("a price must be zero or more, not {value}"),
            }),
            None => Ok(()),
        }
    }
}

impl ToolPrice {
    pub fn cost(&self, characters: usize) -> f64 {
        self.per_call + self.per_thousand_characters * characters as f64 / 1000.0
    }
}

/// `pricing.<provider>.<model>`: prices per unit of tokens.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPrice {
    #[serde(default)]
    pub unit: PriceUnit,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub prompt: f64,
    #[serde(default)]
    pub completion: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub enum PriceUnit {
    #[serde(rename = "per_1k")]
    PerThousand,
    #[default]
    #[serde(rename = "per_1m")]
    PerMillion,
}

impl ModelPrice {
    /// Cost in the price's currency. `input` counts every prompt token, cache reads and writes
    /// included; those are charged at their own rates instead of the prompt rate.
    pub fn cost(&self, input: u64, output: u64, cache_read: u64, cache_write: u64) -> f64 {
        let divisor = match self.unit {
            PriceUnit::PerThousand => 1_000.0,
            PriceUnit::PerMillion => 1_000_000.0,
        };
        let plain_input = input.saturating_sub(cache_read).saturating_sub(cache_write);
        (self.prompt * plain_input as f64
            + self.completion * output as f64
            + self.cache_read * cache_read as f64
            + self.cache_write * cache_write as f64)
            / divisor
    }
}

/// The resolved facts about one provider/model pair.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFacts {
    pub context_window: u64,
    pub buffer_tokens: u64,
    /// `tokenizer` from model or provider settings (`tiktoken:o200k_base`, `approximate`, …).
    pub tokenizer: Option<String>,
    pub price: Option<ModelPrice>,
}

/// Model facts for every configured provider, looked up by `provider/model`.
#[derive(Debug, Clone, Default)]
pub struct ModelCatalog {
    providers: BTreeMap<String, ProviderFacts>,
    default_window: Option<u64>,
    default_buffer: Option<u64>,
    pricing: BTreeMap<String, BTreeMap<String, ModelPrice>>,
    tool_prices: BTreeMap<String, ToolPrice>,
}

#[derive(Debug, Clone, Default)]
struct ProviderFacts {
    kind: Option<super::ProviderKind>,
    context_window: Option<u64>,
    buffer_tokens: Option<u64>,
    tokenizer: Option<String>,
    models: BTreeMap<String, ModelConfig>,
}

impl ModelCatalog {
    pub fn from_config(config: &Config) -> Self {
        let providers = config
            .providers
            .iter()
            .map(|(name, p)| {
                let facts = ProviderFacts {
                    kind: Some(p.kind),
                    context_window: p.context_window,
                    buffer_tokens: p.context_window_buffer_tokens,
                    tokenizer: p.tokenizer.clone(),
                    models: p.models.clone(),
                };
                (name.clone(), facts)
            })
            .collect();
        Self {
            providers,
            default_window: config.defaults.context_window,
            default_buffer: config.defaults.context_window_buffer_tokens,
            pricing: config.pricing.models.clone(),
            tool_prices: config.pricing.tools.clone(),
        }
    }

    /// The cost of one call of `tool` (as the model names it, `server__tool`) on `server`:
    /// `pricing.tools.<server__tool>`, else `pricing.tools.<server>`; `None` when unpriced.
    pub fn tool_cost(&self, server: &str, tool: &str, characters: usize) -> Option<f64> {
        self.tool_prices
            .get(tool)
            .or_else(|| self.tool_prices.get(server))
            .map(|price| price.cost(characters))
    }

    /// The kind of the configured provider `provider` (`None`: not configured).
    pub fn provider_kind(&self, provider: &str) -> Option<super::ProviderKind> {
        self.providers.get(provider).and_then(|facts| facts.kind)
    }

    /// What `provider/model` reads besides text (see `model_input`).
    pub fn input(&self, provider: &str, model: &str) -> Vec<crate::vocabulary::AttachmentKind> {
        let Some(facts) = self.providers.get(provider) else {
            return super::model_input::ALL.to_vec();
        };
        if let Some(input) = facts.models.get(model).and_then(|m| m.input.clone()) {
            return input;
        }
        facts.kind.map_or_else(
            || super::model_input::ALL.to_vec(),
            |kind| super::model_input::default_input(kind, model).to_vec(),
        )
    }

    pub fn facts(&self, provider: &str, model: &str) -> ModelFacts {
        let provider_facts = self.providers.get(provider);
        let model_settings = provider_facts.and_then(|p| p.models.get(model));
        ModelFacts {
            context_window: model_settings
                .and_then(|m| m.context_window)
                .or(provider_facts.and_then(|p| p.context_window))
                .or(self.default_window)
                .unwrap_or(DEFAULT_CONTEXT_WINDOW),
            buffer_tokens: model_settings
                .and_then(|m| m.context_window_buffer_tokens)
                .or(provider_facts.and_then(|p| p.buffer_tokens))
                .or(self.default_buffer)
                .unwrap_or(DEFAULT_BUFFER_TOKENS),
            tokenizer: model_settings
                .and_then(|m| m.tokenizer.clone())
                .or_else(|| provider_facts.and_then(|p| p.tokenizer.clone())),
            price: self
                .pricing
                .get(provider)
                .and_then(|models| models.get(model))
                .cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_config;
    use serde_json::json;

    #[test]
    fn model_settings_beat_provider_beat_defaults_beat_builtins() {
        let config = parse_config(
            json!({
                "providers": {
                    "p": {"type": "openai", "contextWindow": 50000, "tokenizer": "approximate",
                          "models": {"big": {"contextWindow": 200000, "contextWindowBufferTokens": 1000}}},
                    "q": {"type": "openai"}
                },
                "defaults": {"contextWindowBufferTokens": 500},
                "pricing": {"p": {"big": {"unit": "per_1k", "prompt": 1.0, "completion": 2.0}}}
            }),
            "test",
        )
        .expect("config");
        let catalog = ModelCatalog::from_config(&config);
        let big = catalog.facts("p", "big");
        assert_eq!(
            (
                big.context_window,
                big.buffer_tokens,
                big.tokenizer.as_deref()
            ),
            (200000, 1000, Some("approximate"))
        );
        assert_eq!(big.price.map(|p| p.unit), Some(PriceUnit::PerThousand));
        let small = catalog.facts("p", "small");
        assert_eq!((small.context_window, small.buffer_tokens), (50000, 500));
        let other = catalog.facts("q", "m");
        assert_eq!(
            (other.context_window, other.buffer_tokens, other.price),
            (DEFAULT_CONTEXT_WINDOW, 500, None)
        );
    }

    #[test]
    fn cost_charges_cache_reads_and_writes_at_their_own_rates() {
        let price = ModelPrice {
            prompt: 2.0,
            completion: 10.0,
            cache_read: 0.5,
            cache_write: 3.0,
            ..ModelPrice::default()
        };
        // 1,000,000 prompt tokens of which 400,000 cache reads and 100,000 cache writes.
        let cost = price.cost(1_000_000, 100_000, 400_000, 100_000);
        assert!(
            (cost - (2.0 * 0.5 + 10.0 * 0.1 + 0.5 * 0.4 + 3.0 * 0.1)).abs() < 1e-9,
            "{cost}"
        );
        let per_k = ModelPrice {
            unit: PriceUnit::PerThousand,
            prompt: 1.0,
            ..ModelPrice::default()
        };
        assert!((per_k.cost(2_000, 0, 0, 0) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn unknown_price_keys_are_rejected_with_their_path() {
        let err = parse_config(json!({"pricing": {"p": {"m": {"promt": 1}}}}), "x")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("pricing.p.m") && err.contains("promt"),
            "{err}"
        );
    }
}
