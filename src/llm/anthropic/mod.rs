//! The Anthropic Messages API provider (`POST {base}/v1/messages`, `x-api-key`,
//! `anthropic-version`), streaming or not, with extended thinking, signature round-trip and
//! prompt caching. Request mapping is in [`request`], response decoding in [`decode`].

pub mod decode;
pub mod request;

use async_trait::async_trait;

use super::parameters::ParameterPolicy;
use super::upstream::{
    Connection, Framing, KeyHeader, Reading, Upstream, UpstreamSetupError, endpoint, strip_base,
};
use super::{DeltaStream, LlmError, LlmRequest, Provider};
use decode::{EventDecoder, decode_message};
use request::{DEFAULT_MAX_TOKENS, STREAM_FROM_MAX_TOKENS, Shape, request_body};

/// The API version this provider speaks; configured `headers` may replace it.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

#[derive(Clone)]
pub struct AnthropicSettings {
    /// `https://api.anthropic.com` (a trailing `/v1` is accepted too).
    pub connection: Connection,
    /// Mark the system prompt and the last message `cache_control: ephemeral`.
    pub prompt_caching: bool,
}

pub struct AnthropicProvider {
    upstream: Upstream,
    url: reqwest::Url,
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
        let connection = &settings.connection;
        let upstream = Upstream::connect(
            client,
            provider,
            connection,
            KeyHeader::Named("x-api-key"),
            &[("anthropic-version", ANTHROPIC_VERSION)],
        )?;
        Ok(Self {
            upstream,
            url: endpoint(format!(
                "{}/v1/messages",
                strip_base(&connection.base_url, "/v1")
            ))?,
            shape: Shape {
                stream: connection.stream,
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
        let max_tokens = params.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        let shape = Shape {
            stream: self.shape.stream || max_tokens >= STREAM_FROM_MAX_TOKENS,
            ..self.shape
        };
        let body = request_body(&request, &params, &shape);
        let reading = if shape.stream {
            Reading::Stream(Framing::Sse, EventDecoder::default())
        } else {
            Reading::Whole(Box::new(decode_message))
        };
        self.upstream
            .exchange(&self.url, &request, body, reading)
            .await
    }
}
