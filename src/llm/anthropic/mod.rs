//! The Anthropic Messages API provider (`POST {base}/v1/messages`, `x-api-key`,
//! `anthropic-version`), streaming or not, with extended thinking, signature round-trip and
//! prompt caching. Request mapping is in [`request`], response decoding in [`decode`].

pub mod decode;
pub mod request;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};

use super::parameters::ParameterPolicy;
use super::stream::{Frames, decode_frames, response_bytes};
use super::upstream::{HeaderSpec, Upstream, UpstreamSetupError, read_body, strip_base};
use super::{DeltaStream, LlmError, LlmRequest, Provider};
use decode::{EventDecoder, decode_message};
use request::{Shape, request_body};

/// The API version this provider speaks; configured `headers` may replace it.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

#[derive(Clone)]
pub struct AnthropicSettings {
    /// `https://api.anthropic.com` (a trailing `/v1` is accepted too).
    pub base_url: String,
    pub api_key: Option<SecretString>,
    pub extra_headers: Vec<(String, String)>,
    pub stream: bool,
    /// Mark the system prompt and the last message `cache_control: ephemeral`.
    pub prompt_caching: bool,
}

pub struct AnthropicProvider {
    upstream: Upstream,
    url: String,
    shape: Shape,
    policy: ParameterPolicy,
}

impl AnthropicProvider {
    pub fn new(
        client: reqwest::Client,
        provider: &str,
        settings: AnthropicSettings,
        policy: ParameterPolicy,
    ) -> Result<Self, UpstreamSetupError> {
        let mut headers = Vec::new();
        if let Some(key) = settings
            .api_key
            .as_ref()
            .map(ExposeSecret::expose_secret)
            .filter(|k| !k.is_empty())
        {
            headers.push(HeaderSpec::secret("x-api-key", key.to_string()));
        }
        if !settings
            .extra_headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("anthropic-version"))
        {
            headers.push(HeaderSpec::configured(
                "anthropic-version",
                ANTHROPIC_VERSION,
            ));
        }
        for (name, value) in &settings.extra_headers {
            headers.push(HeaderSpec::configured(name, value));
        }
        let upstream = Upstream::new(client, provider, &settings.base_url, headers)?;
        let url = format!("{}/v1/messages", strip_base(&settings.base_url, "/v1"));
        Ok(Self {
            upstream,
            url,
            shape: Shape {
                stream: settings.stream,
                prompt_caching: settings.prompt_caching,
            },
            policy,
        })
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    async fn stream(&self, request: LlmRequest) -> Result<DeltaStream, LlmError> {
        let params = self.policy.resolve(&request.model, &request.sampling);
        let body = request_body(&request, &params, &self.shape);
        let response = self
            .upstream
            .post(&self.url, &request.model, body, request.timeout)
            .await?;
        let secrets = self.upstream.secrets();
        if !self.shape.stream {
            let text = read_body(response, request.timeout, &secrets).await?;
            let deltas = decode_message(&text).map_err(|e| secrets.redact_error(e))?;
            return Ok(Box::pin(futures_util::stream::iter(
                deltas.into_iter().map(Ok),
            )));
        }
        let frames = Frames::sse(response_bytes(response, request.timeout));
        Ok(decode_frames(frames, EventDecoder::default(), secrets))
    }
}
