//! What `llm` needs to know about a provider and a request, in its own types: the provider's
//! settings ([`provider`]), per-model settings ([`model_settings`]), reasoning levels and their
//! mappings ([`reasoning`]) and sampling parameters ([`sampling`]). Pure data with validation and
//! serde parsing; `config` reads them from the config file and re-exports them, so `llm` depends on
//! nothing of `config`'s.

pub mod model_settings;
pub mod provider;
pub mod reasoning;
pub mod sampling;

pub use model_settings::{ModelConfig, ModelOverrides, ParamOverride};
pub use provider::{ProviderConfig, ProviderKind};
pub use reasoning::{ReasoningLevel, ReasoningMapping, ReasoningTokens, ReasoningValue};
pub use sampling::SamplingParams;
