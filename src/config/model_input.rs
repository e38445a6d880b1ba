//! What a model can read besides text (SPEC §11): `providers.<p>.models.<m>.input` (`["text",
//! "image", "pdf"]`), else a known default for the model's family. A model of a family known to
//! read text only gets text; other models of a multimodal vendor, and models this table does not
//! know, are taken to read images and PDFs (the vendor answers if they do not).

use crate::vocabulary::AttachmentKind;

use super::attachments::AttachmentMode;
use super::{AgentSpec, Config, ProviderKind};

pub(super) const ALL: &[AttachmentKind] = &[
    AttachmentKind::Text,
    AttachmentKind::Image,
    AttachmentKind::Pdf,
];
const TEXT_AND_IMAGES: &[AttachmentKind] = &[AttachmentKind::Text, AttachmentKind::Image];
const TEXT: &[AttachmentKind] = &[AttachmentKind::Text];

/// Model id fragments of families that read text only.
const TEXT_ONLY: [&str; 8] = [
    "gpt-3.5",
    "o1-mini",
    "o3-mini",
    "deepseek",
    "codestral",
    "text-embedding",
    "davinci",
    "babbage",
];

/// Ollama model id fragments of vision models (other Ollama models read text only).
const OLLAMA_VISION: [&str; 7] = [
    "llava",
    "vision",
    "gemma3",
    "qwen2.5vl",
    "qwen2.5-vl",
    "minicpm-v",
    "moondream",
];

/// What `provider/model` reads.
pub fn model_input(config: &Config, provider: &str, model: &str) -> Vec<AttachmentKind> {
    let Some(settings) = config.providers.get(provider) else {
        return ALL.to_vec();
    };
    if let Some(input) = settings.models.get(model).and_then(|m| m.input.clone()) {
        return input;
    }
    default_input(settings.kind, model).to_vec()
}

/// The kinds of remote attachment a provider's wire can carry as a URL: OpenAI-shaped chat
/// takes image URLs, Anthropic image and PDF URLs; the others take content only.
fn url_kinds(kind: ProviderKind) -> &'static [AttachmentKind] {
    match kind {
        ProviderKind::Openai | ProviderKind::OpenaiCompatible | ProviderKind::Openrouter => {
            &[AttachmentKind::Image]
        }
        ProviderKind::Anthropic => &[AttachmentKind::Image, AttachmentKind::Pdf],
        ProviderKind::Google | ProviderKind::Ollama | ProviderKind::Scripted => &[],
    }
}

/// Whether `provider` fetches a remote attachment of `kind` itself, so it gets the URL: its
/// wire carries such URLs and `fetchesUrls` (default: the vendor's own API, which does) says so.
pub fn fetches_url(config: &Config, provider: &str, kind: AttachmentKind) -> bool {
    let Some(settings) = config.providers.get(provider) else {
        return false;
    };
    let fetches = settings.fetches_urls.unwrap_or(matches!(
        settings.kind,
        ProviderKind::Openai | ProviderKind::Openrouter | ProviderKind::Anthropic
    ));
    fetches && url_kinds(settings.kind).contains(&kind)
}

/// Whether every model of `agent` gets a remote attachment of `kind` as its URL: then agentd
/// does not fetch it (a PDF some model reads as text is fetched, for its text).
pub fn passes_urls(config: &Config, agent: &AgentSpec, kind: AttachmentKind) -> bool {
    !wants_text_form(config, agent, kind)
        && !agent.targets.is_empty()
        && agent
            .targets
            .iter()
            .all(|target| fetches_url(config, &target.provider, kind))
}

/// Whether some model of `agent` gets the text form of a `kind` file: the agent says
/// `attachments: text`, `kind` is PDF, and one of its models does not read it.
pub fn wants_text_form(config: &Config, agent: &AgentSpec, kind: AttachmentKind) -> bool {
    agent.attachments == AttachmentMode::Text
        && kind == AttachmentKind::Pdf
        && agent
            .targets
            .iter()
            .any(|target| !model_input(config, &target.provider, &target.model).contains(&kind))
}

pub(super) fn default_input(kind: ProviderKind, model: &str) -> &'static [AttachmentKind] {
    let model = model.to_ascii_lowercase();
    match kind {
        ProviderKind::Ollama if OLLAMA_VISION.iter().any(|v| model.contains(v)) => TEXT_AND_IMAGES,
        ProviderKind::Ollama => TEXT,
        _ if TEXT_ONLY.iter().any(|t| model.contains(t)) => TEXT,
        _ => ALL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_families_have_their_defaults() {
        assert_eq!(
            default_input(ProviderKind::Anthropic, "claude-sonnet-4-5"),
            ALL
        );
        assert_eq!(default_input(ProviderKind::Openai, "gpt-3.5-turbo"), TEXT);
        assert_eq!(
            default_input(ProviderKind::Ollama, "llama3.2-vision"),
            TEXT_AND_IMAGES
        );
        assert_eq!(default_input(ProviderKind::Ollama, "qwen3:8b"), TEXT);
    }

    #[test]
    fn urls_go_to_the_vendors_that_fetch_them_unless_told_otherwise() {
        let config = crate::config::parse_config(
            serde_json::json!({"providers": {
                "o": {"type": "openai"},
                "a": {"type": "anthropic"},
                "v": {"type": "openai-compatible", "fetchesUrls": true},
                "c": {"type": "openai-compatible"},
                "g": {"type": "google", "fetchesUrls": true},
                "n": {"type": "anthropic", "fetchesUrls": false},
            }}),
            "test",
        )
        .expect("config");
        let (image, pdf) = (AttachmentKind::Image, AttachmentKind::Pdf);
        assert!(fetches_url(&config, "o", image) && !fetches_url(&config, "o", pdf));
        assert!(fetches_url(&config, "a", image) && fetches_url(&config, "a", pdf));
        assert!(fetches_url(&config, "v", image));
        assert!(
            !fetches_url(&config, "c", image),
            "unknown servers get bytes"
        );
        assert!(
            !fetches_url(&config, "g", image),
            "Gemini's wire takes no URL"
        );
        assert!(!fetches_url(&config, "n", image));
        assert!(!fetches_url(&config, "missing", image));
    }

    #[test]
    fn the_models_setting_beats_the_default() {
        let config = crate::config::parse_config(
            serde_json::json!({"providers": {"o": {"type": "openai", "models": {"gpt-4o": {"input": ["text"]}}}}}),
            "test",
        )
        .expect("config");
        assert_eq!(
            model_input(&config, "o", "gpt-4o"),
            vec![AttachmentKind::Text]
        );
        assert_eq!(model_input(&config, "o", "gpt-4.1"), ALL.to_vec());
    }
}
