//! Building one [`Provider`] per configured provider: the type picks the adapter, `baseUrl`
//! defaults per vendor, and the provider's and its models' parameter settings travel with it.
//!
//! Configuration is read, never changed; a provider that cannot be built is a start-up error
//! naming it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::settings::{ProviderConfig, ProviderKind};

use super::Provider;
use super::anthropic::{AnthropicProvider, AnthropicSettings, request::DEFAULT_MAX_TOKENS};
use super::google::GoogleProvider;
use super::ollama::OllamaProvider;
use super::openai::{Dialect, OpenAiProvider, OpenAiSettings};
use super::parameters::ParameterPolicy;
use super::scripted::ScriptedProvider;
use super::upstream::Connection;

#[derive(Debug, thiserror::Error)]
#[error("providers.{provider}: {detail}")]
pub struct CatalogError {
    pub provider: String,
    pub detail: String,
}

/// Output size assumed for derived reasoning budgets when nothing sets `maxOutputTokens`.
const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 16_384;

/// Idle upstream connections kept per host: enough for thousands of short requests a second;
/// the rest of a burst of long streams is closed when it ends instead of holding descriptors
/// for the idle timeout.
const IDLE_CONNECTIONS_PER_HOST: usize = 256;

/// Every configured provider (`providers` of the config) by name, sharing one HTTP client (and
/// its connection pool).
pub fn build_providers(
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<BTreeMap<String, Arc<dyn Provider>>, CatalogError> {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_HOST)
        .build()
        .map_err(|e| CatalogError {
            provider: "*".into(),
            detail: format!("HTTP client: {e}"),
        })?;
    providers
        .iter()
        .map(|(name, provider)| Ok((name.clone(), build(&client, name, provider)?)))
        .collect()
}

fn build(
    client: &reqwest::Client,
    name: &str,
    config: &ProviderConfig,
) -> Result<Arc<dyn Provider>, CatalogError> {
    let fail = |detail: String| CatalogError {
        provider: name.to_string(),
        detail,
    };
    if config.kind == ProviderKind::Scripted {
        return scripted(name, config).map_err(fail);
    }
    let base_url =
        base_url(config).ok_or_else(|| fail("baseUrl is required for openai-compatible".into()))?;
    let connection = Connection {
        base_url,
        api_key: config.api_key.clone(),
        extra_headers: config
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        stream: config.stream.unwrap_or(true),
    };
    // Anthropic always sends max_tokens, so derived budgets follow its default.
    let default_output = match config.kind {
        ProviderKind::Anthropic => DEFAULT_MAX_TOKENS,
        _ => DEFAULT_MAX_OUTPUT_TOKENS,
    };
    let policy = ParameterPolicy::from_config(config, default_output);
    let client = client.clone();
    let openai = |dialect| OpenAiSettings {
        connection: connection.clone(),
        include_usage: config.include_usage.unwrap_or(true),
        dialect,
    };
    let built: Result<Arc<dyn Provider>, _> = match config.kind {
        ProviderKind::Openai => OpenAiProvider::new(client, name, openai(Dialect::OpenAi), policy)
            .map(|p| Arc::new(p) as _),
        ProviderKind::OpenaiCompatible => {
            OpenAiProvider::new(client, name, openai(Dialect::Compatible), policy)
                .map(|p| Arc::new(p) as _)
        }
        ProviderKind::Openrouter => {
            OpenAiProvider::new(client, name, openai(Dialect::OpenRouter), policy)
                .map(|p| Arc::new(p) as _)
        }
        ProviderKind::Anthropic => {
            let settings = AnthropicSettings {
                connection,
                prompt_caching: !config
                    .cache_strategy
                    .as_deref()
                    .is_some_and(|s| s.trim().eq_ignore_ascii_case("none")),
            };
            AnthropicProvider::new(client, name, settings, policy).map(|p| Arc::new(p) as _)
        }
        ProviderKind::Google => {
            GoogleProvider::new(client, name, &connection, policy).map(|p| Arc::new(p) as _)
        }
        ProviderKind::Ollama => {
            OllamaProvider::new(client, name, &connection, policy).map(|p| Arc::new(p) as _)
        }
        ProviderKind::Scripted => return scripted(name, config).map_err(fail),
    };
    built.map_err(|e| fail(e.to_string()))
}

/// The scripted provider; a `baseUrl`, `apiKey` or `headers` is a mistake it names (it
/// reaches nothing), except values a `${VAR:-}` left empty.
fn scripted(name: &str, config: &ProviderConfig) -> Result<Arc<dyn Provider>, String> {
    use secrecy::ExposeSecret;
    let set = [
        (
            "baseUrl",
            config
                .base_url
                .as_deref()
                .is_some_and(|u| !u.trim().is_empty()),
        ),
        (
            "apiKey",
            config
                .api_key
                .as_ref()
                .is_some_and(|k| !k.expose_secret().trim().is_empty()),
        ),
        ("headers", !config.headers.is_empty()),
    ];
    match set.iter().find(|(_, is_set)| *is_set) {
        Some((key, _)) => Err(format!(
            "{key} is not used by the scripted type, which calls no network; remove it, or use \
             another type to reach a model server"
        )),
        None => Ok(Arc::new(ScriptedProvider::new(name))),
    }
}

/// The configured `baseUrl`, else the vendor's public endpoint; `None` when there is neither.
fn base_url(config: &ProviderConfig) -> Option<String> {
    let default = match config.kind {
        ProviderKind::Openai => "https://api.openai.com/v1",
        ProviderKind::Openrouter => "https://openrouter.ai/api/v1",
        ProviderKind::Anthropic => "https://api.anthropic.com",
        ProviderKind::Google => "https://generativelanguage.googleapis.com/v1beta",
        ProviderKind::Ollama => "http://127.0.0.1:11434",
        ProviderKind::OpenaiCompatible | ProviderKind::Scripted => "",
    };
    config
        .base_url
        .clone()
        .filter(|u| !u.trim().is_empty())
        .or_else(|| (!default.is_empty()).then(|| default.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_config;
    use serde_json::json;

    fn build_all(providers: serde_json::Value) -> Result<Vec<String>, String> {
        let config = parse_config(json!({"providers": providers}), "t").expect("config");
        build_providers(&config.providers)
            .map(|p| p.keys().cloned().collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_type_builds_with_its_defaults() {
        let names = build_all(json!({
            "a": {"type": "anthropic", "apiKey": "k"},
            "g": {"type": "google"},
            "o": {"type": "ollama"},
            "r": {"type": "openrouter"},
            "x": {"type": "openai"},
            "c": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:1/v1"},
            "s": {"type": "scripted", "baseUrl": "", "apiKey": ""},
        }))
        .expect("all build");
        assert_eq!(names, ["a", "c", "g", "o", "r", "s", "x"]);
    }

    #[test]
    fn the_scripted_type_refuses_network_settings_by_name() {
        for (key, value) in [
            ("baseUrl", json!("http://127.0.0.1:9090/v1")),
            ("apiKey", json!("sk-1")),
            ("headers", json!({"X-A": "b"})),
        ] {
            let err = build_all(json!({"s": {"type": "scripted", key: value}})).unwrap_err();
            assert!(
                err.starts_with(&format!(
                    "providers.s: {key} is not used by the scripted type"
                )),
                "{err}"
            );
        }
    }

    #[test]
    fn missing_or_bad_base_urls_are_named() {
        let err = build_all(json!({"c": {"type": "openai-compatible"}})).unwrap_err();
        assert_eq!(
            err,
            "providers.c: baseUrl is required for openai-compatible"
        );
        let err = build_all(json!({"a": {"type": "anthropic", "baseUrl": "api.anthropic.com"}}))
            .unwrap_err();
        assert!(
            err.starts_with("providers.a: baseUrl \"api.anthropic.com\""),
            "{err}"
        );
    }
}
