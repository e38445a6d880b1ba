//! The one sampling-parameters type: what an agent asks of the model (frontmatter over config
//! defaults), what a request overrides (OpenAI/Anthropic `temperature`, …), and what an LLM
//! request carries. `None` always means "not set": the layer below, and finally the upstream
//! default, applies.
//!
//! It lives in `llm::settings` beside the reasoning types it holds; `config` re-exports it for
//! parsing and `llm` as `llm::SamplingParams`. Only the type and its merge live
//! here: parsing of `reasoning` values stays in `reasoning`, wire naming in `llm::parameters`.
//!
//! Stop sequences, the OpenAI penalties, `seed` and `logit_bias` come only from a request (older
//! OpenAI clients send them); an agent file does not set them.

use std::collections::BTreeMap;

use super::reasoning::{ReasoningLevel, ReasoningTokens};

/// Sampling parameters; `None` means "do not send", so the layer below or the upstream default
/// applies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingParams {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub repeat_penalty: Option<f64>,
    pub max_output_tokens: Option<u32>,
    /// The reasoning level the agent asks for; `None` leaves the provider's default.
    pub reasoning: Option<ReasoningLevel>,
    /// An explicit reasoning budget, beating the one derived from the level.
    pub reasoning_tokens: Option<ReasoningTokens>,
    /// Text that ends the model's output where it appears (OpenAI `stop`).
    pub stop: Option<Vec<String>>,
    /// OpenAI's additive penalties, -2 to 2.
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    /// Asks the model for repeatable sampling.
    pub seed: Option<i64>,
    /// Token id (as text) to a bias of -100 to 100.
    pub logit_bias: Option<BTreeMap<String, f64>>,
}

impl SamplingParams {
    /// These settings with every field `overrides` sets put over them, field by field (the
    /// frontmatter over the config defaults, a request over its agent).
    pub fn overridden_by(&self, overrides: &SamplingParams) -> SamplingParams {
        SamplingParams {
            temperature: overrides.temperature.or(self.temperature),
            top_p: overrides.top_p.or(self.top_p),
            top_k: overrides.top_k.or(self.top_k),
            repeat_penalty: overrides.repeat_penalty.or(self.repeat_penalty),
            max_output_tokens: overrides.max_output_tokens.or(self.max_output_tokens),
            reasoning: overrides.reasoning.or(self.reasoning),
            reasoning_tokens: overrides.reasoning_tokens.or(self.reasoning_tokens),
            stop: overrides.stop.clone().or_else(|| self.stop.clone()),
            presence_penalty: overrides.presence_penalty.or(self.presence_penalty),
            frequency_penalty: overrides.frequency_penalty.or(self.frequency_penalty),
            seed: overrides.seed.or(self.seed),
            logit_bias: overrides
                .logit_bias
                .clone()
                .or_else(|| self.logit_bias.clone()),
        }
    }
}

/// The numeric sampling fields of a settings struct that spells them out (the frontmatter and
/// `defaults`, which keep their own fields so `deny_unknown_fields` still names a bad key — serde
/// ignores it under `#[serde(flatten)]`). Reasoning is left unset: its raw values are parsed, with
/// errors naming the file, by the registry.
macro_rules! numeric_sampling {
    ($settings:expr) => {{
        let settings = $settings;
        $crate::llm::settings::SamplingParams {
            temperature: settings.temperature,
            top_p: settings.top_p,
            top_k: settings.top_k,
            repeat_penalty: settings.repeat_penalty,
            max_output_tokens: settings.max_output_tokens,
            ..$crate::llm::settings::SamplingParams::default()
        }
    }};
}
pub(crate) use numeric_sampling;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_overrides_win_field_by_field() {
        let agent = SamplingParams {
            temperature: Some(0.5),
            top_p: Some(0.9),
            top_k: Some(40),
            max_output_tokens: Some(1000),
            reasoning: Some(ReasoningLevel::High),
            ..SamplingParams::default()
        };
        let request = SamplingParams {
            temperature: Some(0.0),
            max_output_tokens: Some(64),
            stop: Some(vec!["Observation:".into()]),
            seed: Some(7),
            ..SamplingParams::default()
        };
        let merged = agent.overridden_by(&request);
        assert_eq!(merged.stop, Some(vec!["Observation:".to_string()]));
        assert_eq!(merged.seed, Some(7));
        assert_eq!(merged.presence_penalty, None);
        assert_eq!(merged.temperature, Some(0.0));
        assert_eq!(merged.max_output_tokens, Some(64));
        assert_eq!(merged.top_p, Some(0.9));
        assert_eq!(merged.top_k, Some(40));
        assert_eq!(merged.reasoning, Some(ReasoningLevel::High));
        assert_eq!(agent.overridden_by(&SamplingParams::default()), agent);
    }
}
