//! A provider as configured under `providers.<name>`: the dialect it speaks, where it is, its
//! key, and the per-model settings. `config` parses it; `llm::catalog` builds a provider from it.

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;

use super::model_settings::ModelConfig;
use super::reasoning::{self, ReasoningMapping};

/// The LLM dialect a provider speaks.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    Openai,
    OpenaiCompatible,
    Anthropic,
    Google,
    Ollama,
    Openrouter,
    /// agentd's built-in scripted model (`llm::scripted`): no network, no key.
    Scripted,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderConfig {
    #[serde(rename = "type")]
    pub kind: ProviderKind,
    pub api_key: Option<SecretString>,
    pub base_url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Stream responses over SSE (default) or request one JSON body.
    pub stream: Option<bool>,
    /// Request `stream_options.include_usage` (default true; some servers reject it).
    pub include_usage: Option<bool>,
    pub context_window: Option<u64>,
    pub context_window_buffer_tokens: Option<u64>,
    pub tokenizer: Option<String>,
    /// How reasoning levels map onto this provider's values (a budget, an effort name, a list
    /// of 4 for `[minimal, low, medium, high]`, or `null` to never send reasoning).
    #[serde(default, deserialize_with = "reasoning::explicit_mapping")]
    pub reasoning: Option<ReasoningMapping>,
    pub tool_choice: Option<String>,
    /// `none` turns prompt caching off (Anthropic `cache_control`); anything else leaves it on.
    pub cache_strategy: Option<String>,
    /// Whether remote attachment URLs go to this provider as URLs, for it to fetch (default:
    /// yes for `openai`, `openrouter` and `anthropic`; `false` has agentd fetch them).
    pub fetches_urls: Option<bool>,
    pub custom: Option<Value>,
    /// Per-model settings, keyed by the upstream model id.
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
}
