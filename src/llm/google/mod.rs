//! The Google Gemini provider (`{base}/models/{model}:streamGenerateContent?alt=sse` or
//! `:generateContent`, `x-goog-api-key`), with function calling and thinking. Request mapping is
//! in [`request`], response decoding in [`decode`].
//!
//! The key travels in a header, never in the URL, so no error or log line can carry it.

pub mod decode;
pub mod request;

use async_trait::async_trait;

use super::parameters::ParameterPolicy;
use super::upstream::{Connection, Framing, KeyHeader, Reading, Upstream, UpstreamSetupError};
use super::{DeltaStream, LlmError, LlmRequest, Provider};
use decode::{ResponseDecoder, decode_body};
use request::request_body;

pub struct GoogleProvider {
    upstream: Upstream,
    base_url: String,
    stream: bool,
    policy: ParameterPolicy,
}

impl GoogleProvider {
    /// `connection.base_url` is like `https://generativelanguage.googleapis.com/v1beta`.
    pub fn new(
        client: reqwest::Client,
        provider: &str,
        connection: &Connection,
        policy: ParameterPolicy,
    ) -> Result<Self, UpstreamSetupError> {
        let upstream = Upstream::connect(
            client,
            provider,
            connection,
            KeyHeader::Named("x-goog-api-key"),
            &[],
        )?;
        Ok(Self {
            upstream,
            base_url: connection.base_url.trim_end_matches('/').to_string(),
            stream: connection.stream,
            policy,
        })
    }

    fn url(&self, model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        if self.stream {
            format!(
                "{}/models/{model}:streamGenerateContent?alt=sse",
                self.base_url
            )
        } else {
            format!("{}/models/{model}:generateContent", self.base_url)
        }
    }
}

#[async_trait]
impl Provider for GoogleProvider {
    async fn stream(&self, request: LlmRequest) -> Result<DeltaStream, LlmError> {
        let params = self.policy.resolve(&request.model, &request.sampling);
        let body = request_body(&request, &params);
        let reading = if self.stream {
            Reading::Stream(Framing::Sse, ResponseDecoder::default())
        } else {
            Reading::Whole(Box::new(decode_body))
        };
        // The model is part of the path: parsed per call (a model name that makes it invalid
        // is the model's fault, reported as such).
        let url = reqwest::Url::parse(&self.url(&request.model))
            .map_err(|e| LlmError::Model(format!("model {:?} in the URL: {e}", request.model)))?;
        self.upstream.exchange(&url, &request, body, reading).await
    }
}
