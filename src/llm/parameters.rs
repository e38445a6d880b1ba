//! Request parameters after the agent → provider → model resolution: the agent's sampling and
//! reasoning ([`SamplingParams`]), then the provider's `reasoning` mapping, then the model's
//! `reasoning` and `overrides` (a number forces a value, `null` omits the parameter).
//!
//! The result is vendor-neutral; each provider turns it into its own wire names and limits.
//! [`RequestParam`] says which of the parameters only a request sets (`stop`, the penalties,
//! `seed`, `logit_bias`) each kind of provider takes: its request builder sends exactly those,
//! and a headend tells the client about the rest.

use std::collections::BTreeMap;

use super::settings::{
    ModelConfig, ProviderConfig, ProviderKind, ReasoningLevel, ReasoningMapping, ReasoningTokens,
    ReasoningValue,
};

use super::SamplingParams;

/// What one request should carry, before vendor naming.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResolvedParams {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub repeat_penalty: Option<f64>,
    pub max_output_tokens: Option<u32>,
    /// `None`: send no reasoning parameter at all.
    pub reasoning: Option<ReasoningAsk>,
    pub stop: Option<Vec<String>>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub logit_bias: Option<BTreeMap<String, f64>>,
}

/// A sampling parameter only a request sets, which only some providers take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RequestParam {
    Stop,
    PresencePenalty,
    FrequencyPenalty,
    Seed,
    LogitBias,
}

impl RequestParam {
    pub const ALL: [RequestParam; 5] = [
        Self::Stop,
        Self::PresencePenalty,
        Self::FrequencyPenalty,
        Self::Seed,
        Self::LogitBias,
    ];

    /// The OpenAI name clients send it by.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::PresencePenalty => "presence_penalty",
            Self::FrequencyPenalty => "frequency_penalty",
            Self::Seed => "seed",
            Self::LogitBias => "logit_bias",
        }
    }

    /// Whether a provider of this kind sends it: the OpenAI dialects all of them; Anthropic stop
    /// sequences only; Gemini and Ollama everything but `logit_bias`; the scripted model none.
    pub fn taken_by(self, kind: ProviderKind) -> bool {
        match kind {
            ProviderKind::Openai | ProviderKind::OpenaiCompatible | ProviderKind::Openrouter => {
                true
            }
            ProviderKind::Anthropic => self == Self::Stop,
            ProviderKind::Google | ProviderKind::Ollama => self != Self::LogitBias,
            // The built-in scripted model plays its script whatever the sampling.
            ProviderKind::Scripted => false,
        }
    }

    /// Whether `sampling` sets it.
    pub fn is_set(self, sampling: &SamplingParams) -> bool {
        match self {
            Self::Stop => sampling.stop.as_ref().is_some_and(|s| !s.is_empty()),
            Self::PresencePenalty => sampling.presence_penalty.is_some(),
            Self::FrequencyPenalty => sampling.frequency_penalty.is_some(),
            Self::Seed => sampling.seed.is_some(),
            Self::LogitBias => sampling.logit_bias.as_ref().is_some_and(|b| !b.is_empty()),
        }
    }
}

/// Reasoning to ask for, in both vendor vocabularies; each provider uses the one it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningAsk {
    /// An effort name (`minimal`…`high`, or what the config maps the level to).
    pub effort: Option<String>,
    /// A thinking budget in tokens: explicit, configured, or derived from the level.
    pub budget_tokens: Option<u32>,
}

/// Budgets derived from a level: minimal 1024, low 30 %, medium 60 %, high 80 % of the output.
const MINIMAL_BUDGET: u32 = 1024;

fn derived_budget(level: ReasoningLevel, max_output_tokens: u32) -> Option<u32> {
    let share = match level {
        ReasoningLevel::Off => return None,
        ReasoningLevel::Minimal => return Some(MINIMAL_BUDGET),
        ReasoningLevel::Low => 30,
        ReasoningLevel::Medium => 60,
        ReasoningLevel::High => 80,
    };
    let budget = u64::from(max_output_tokens) * share / 100;
    Some(
        u32::try_from(budget)
            .unwrap_or(u32::MAX)
            .max(MINIMAL_BUDGET),
    )
}

/// The provider's and its models' parameter settings.
#[derive(Debug, Clone, Default)]
pub struct ParameterPolicy {
    provider_reasoning: Option<ReasoningMapping>,
    models: BTreeMap<String, ModelConfig>,
    /// Output size assumed when neither agent nor model sets one (for derived budgets).
    default_max_output: u32,
}

impl ParameterPolicy {
    pub fn from_config(config: &ProviderConfig, default_max_output: u32) -> Self {
        Self {
            provider_reasoning: config.reasoning.clone(),
            models: config.models.clone(),
            default_max_output,
        }
    }

    /// The message field that replays an assistant's reasoning to `model` (config
    /// `interleaved: true` means `reasoning_content`, a string names the field).
    pub fn interleaved_field(&self, model: &str) -> Option<String> {
        match self.models.get(model)?.interleaved.as_ref()? {
            serde_json::Value::Bool(true) => Some("reasoning_content".to_string()),
            serde_json::Value::String(field) if !field.trim().is_empty() => {
                Some(field.trim().to_string())
            }
            _ => None,
        }
    }

    /// Resolves what `model` gets for a request with `sampling`.
    pub fn resolve(&self, model: &str, sampling: &SamplingParams) -> ResolvedParams {
        let settings = self.models.get(model);
        let overrides = settings.map(|m| m.overrides.clone()).unwrap_or_default();
        let max_output_tokens = overrides
            .max_output_tokens
            .apply(sampling.max_output_tokens);
        let mapping = settings
            .and_then(|m| m.reasoning.as_ref())
            .or(self.provider_reasoning.as_ref());
        let reasoning = reasoning_ask(
            sampling.reasoning,
            sampling.reasoning_tokens,
            mapping,
            max_output_tokens.unwrap_or(self.default_max_output),
        );
        ResolvedParams {
            temperature: overrides.temperature.apply(sampling.temperature),
            top_p: overrides.top_p.apply(sampling.top_p),
            top_k: overrides.top_k.apply(sampling.top_k),
            repeat_penalty: overrides.repeat_penalty.apply(sampling.repeat_penalty),
            max_output_tokens,
            reasoning,
            stop: sampling.stop.clone().filter(|stop| !stop.is_empty()),
            presence_penalty: sampling.presence_penalty,
            frequency_penalty: sampling.frequency_penalty,
            seed: sampling.seed,
            logit_bias: sampling.logit_bias.clone().filter(|bias| !bias.is_empty()),
        }
    }
}

/// Sampling with every [`RequestParam`] set, for the providers' tests.
#[cfg(test)]
pub(crate) fn every_request_param() -> SamplingParams {
    SamplingParams {
        stop: Some(vec!["Observation:".into()]),
        presence_penalty: Some(0.5),
        frequency_penalty: Some(-0.5),
        seed: Some(42),
        logit_bias: Some(BTreeMap::from([("50256".into(), -100.0)])),
        ..SamplingParams::default()
    }
}

fn reasoning_ask(
    level: Option<ReasoningLevel>,
    tokens: Option<ReasoningTokens>,
    mapping: Option<&ReasoningMapping>,
    max_output_tokens: u32,
) -> Option<ReasoningAsk> {
    if matches!(mapping, Some(ReasoningMapping::Disabled))
        || level == Some(ReasoningLevel::Off)
        || tokens == Some(ReasoningTokens::Disabled)
    {
        return None;
    }
    let explicit_budget = match tokens {
        Some(ReasoningTokens::Budget(n)) => Some(n),
        _ => None,
    };
    let Some(level) = level else {
        // A budget alone still asks for reasoning; nothing at all leaves the vendor default.
        return explicit_budget.map(|budget| ReasoningAsk {
            effort: None,
            budget_tokens: Some(budget),
        });
    };
    let (effort, budget) = match mapping.and_then(|m| m.value_for(level)) {
        Some(ReasoningValue::Budget(n)) => (level.as_str().to_string(), Some(*n)),
        Some(ReasoningValue::Effort(e)) => (e.clone(), derived_budget(level, max_output_tokens)),
        None => (
            level.as_str().to_string(),
            derived_budget(level, max_output_tokens),
        ),
    };
    Some(ReasoningAsk {
        effort: Some(effort),
        budget_tokens: explicit_budget.or(budget),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_config;
    use serde_json::json;

    fn policy(provider: serde_json::Value) -> ParameterPolicy {
        let config = parse_config(json!({"providers": {"p": provider}}), "test").expect("config");
        ParameterPolicy::from_config(&config.providers["p"], 10_000)
    }

    fn sampling() -> SamplingParams {
        SamplingParams {
            temperature: Some(0.3),
            top_p: Some(0.9),
            top_k: Some(20),
            repeat_penalty: Some(1.1),
            max_output_tokens: None,
            reasoning: Some(ReasoningLevel::Medium),
            ..SamplingParams::default()
        }
    }

    #[test]
    fn request_parameters_pass_through_and_providers_take_what_they_can() {
        let asked = SamplingParams {
            stop: Some(vec!["Observation:".into()]),
            seed: Some(1),
            logit_bias: Some(BTreeMap::from([("50256".into(), -100.0)])),
            ..sampling()
        };
        let r = policy(json!({"type": "openai"})).resolve("m", &asked);
        assert_eq!(r.stop, asked.stop);
        assert_eq!(r.seed, Some(1));
        assert_eq!(r.logit_bias, asked.logit_bias);
        let empty = SamplingParams {
            stop: Some(Vec::new()),
            ..sampling()
        };
        assert_eq!(
            policy(json!({"type": "openai"})).resolve("m", &empty).stop,
            None
        );
        assert!(!RequestParam::Stop.is_set(&empty));
        assert!(
            RequestParam::ALL
                .iter()
                .all(|p| p.taken_by(ProviderKind::OpenaiCompatible))
        );
        let anthropic: Vec<_> = RequestParam::ALL
            .into_iter()
            .filter(|p| p.taken_by(ProviderKind::Anthropic))
            .collect();
        assert_eq!(anthropic, vec![RequestParam::Stop]);
        assert!(!RequestParam::LogitBias.taken_by(ProviderKind::Google));
        assert!(RequestParam::Seed.taken_by(ProviderKind::Ollama));
    }

    #[test]
    fn model_overrides_force_or_omit_and_leave_the_rest() {
        let p = policy(json!({"type": "openai", "models": {"m": {"overrides": {
            "temperature": null, "top_p": 1.0, "maxOutputTokens": 500}}}}));
        let r = p.resolve("m", &sampling());
        assert_eq!(r.temperature, None);
        assert_eq!(r.top_p, Some(1.0));
        assert_eq!(r.top_k, Some(20));
        assert_eq!(r.max_output_tokens, Some(500));
        let other = p.resolve("other", &sampling());
        assert_eq!(other.temperature, Some(0.3));
        assert_eq!(other.max_output_tokens, None);
    }

    #[test]
    fn levels_become_efforts_and_budgets() {
        let p = policy(json!({"type": "anthropic"}));
        let r = p.resolve("m", &sampling());
        assert_eq!(
            r.reasoning,
            Some(ReasoningAsk {
                effort: Some("medium".into()),
                budget_tokens: Some(6_000)
            })
        );
        let minimal = SamplingParams {
            reasoning: Some(ReasoningLevel::Minimal),
            ..sampling()
        };
        assert_eq!(
            p.resolve("m", &minimal)
                .reasoning
                .and_then(|r| r.budget_tokens),
            Some(1024)
        );
        let explicit = SamplingParams {
            reasoning_tokens: Some(ReasoningTokens::Budget(2500)),
            ..sampling()
        };
        assert_eq!(
            p.resolve("m", &explicit)
                .reasoning
                .and_then(|r| r.budget_tokens),
            Some(2500)
        );
        let budget_only = SamplingParams {
            reasoning: None,
            reasoning_tokens: Some(ReasoningTokens::Budget(4000)),
            ..sampling()
        };
        assert_eq!(
            p.resolve("m", &budget_only).reasoning,
            Some(ReasoningAsk {
                effort: None,
                budget_tokens: Some(4000)
            })
        );
    }

    #[test]
    fn mappings_and_off_switches_apply_in_order() {
        let p = policy(
            json!({"type": "openai", "reasoning": ["low", "low", "high", "high"],
            "models": {"plain": {"reasoning": null}, "budgeted": {"reasoning": 7777}}}),
        );
        assert_eq!(
            p.resolve("m", &sampling()).reasoning.and_then(|r| r.effort),
            Some("high".into())
        );
        assert_eq!(p.resolve("plain", &sampling()).reasoning, None);
        assert_eq!(
            p.resolve("budgeted", &sampling())
                .reasoning
                .and_then(|r| r.budget_tokens),
            Some(7777)
        );
        let off = SamplingParams {
            reasoning: Some(ReasoningLevel::Off),
            ..sampling()
        };
        assert_eq!(p.resolve("m", &off).reasoning, None);
        let silent = SamplingParams {
            reasoning: None,
            ..sampling()
        };
        assert_eq!(p.resolve("m", &silent).reasoning, None);
    }
}
