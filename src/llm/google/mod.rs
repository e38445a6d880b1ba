//! The Google Gemini provider (`{base}/models/{model}:streamGenerateContent?alt=sse` or
//! `:generateContent`, `x-goog-api-key`), with function calling and thinking. Request mapping is
//! in [`request`], response decoding in [`decode`].
//!
//! The key travels in a header, never in the URL, so no error or log line can carry it.

pub mod decode;
pub mod request;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};

use super::parameters::ParameterPolicy;
use super::stream::{Frames, decode_frames, response_bytes};
use super::upstream::{HeaderSpec, Upstream, UpstreamSetupError, read_body};
use super::{DeltaStream, LlmError, LlmRequest, Provider};
use decode::{ResponseDecoder, decode_body};
use request::request_body;

#[derive(Clone)]
pub struct GoogleSettings {
    /// `https://generativelanguage.googleapis.com/v1beta`.
    pub base_url: String,
    pub api_key: Option<SecretString>,
    pub extra_headers: Vec<(String, String)>,
    pub stream: bool,
}

pub struct GoogleProvider {
    upstream: Upstream,
    base_url: String,
    stream: bool,
    policy: ParameterPolicy,
}

impl GoogleProvider {
    pub fn new(
        client: reqwest::Client,
        provider: &str,
        settings: GoogleSettings,
        policy: ParameterPolicy,
    ) -> Result<Self, UpstreamSetupError> {
        let mut headers = Vec::new();
        if let Some(key) = settings
            .api_key
            .as_ref()
            .map(ExposeSecret::expose_secret)
            .filter(|k| !k.is_empty())
        {
            headers.push(HeaderSpec::secret("x-goog-api-key", key.to_string()));
        }
        for (name, value) in &settings.extra_headers {
            headers.push(HeaderSpec::configured(name, value));
        }
        let upstream = Upstream::new(client, provider, &settings.base_url, headers)?;
        Ok(Self {
            upstream,
            base_url: settings.base_url.trim_end_matches('/').to_string(),
            stream: settings.stream,
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
        let response = self
            .upstream
            .post(
                &self.url(&request.model),
                &request.model,
                body,
                request.timeout,
            )
            .await?;
        let secrets = self.upstream.secrets();
        if !self.stream {
            let text = read_body(response, request.timeout, &secrets).await?;
            let deltas = decode_body(&text).map_err(|e| secrets.redact_error(e))?;
            return Ok(Box::pin(futures_util::stream::iter(
                deltas.into_iter().map(Ok),
            )));
        }
        let frames = Frames::sse(response_bytes(response, request.timeout));
        Ok(decode_frames(frames, ResponseDecoder::default(), secrets))
    }
}
