//! Sending one request body to a vendor endpoint, shared by every provider: fixed headers (with
//! credentials marked sensitive and remembered for redaction), the first-byte timeout, failure
//! classification, and the handling of optional parameters an upstream rejects.
//!
//! A parameter the upstream rejects (HTTP 400/422 naming it) is logged once per model, dropped
//! from this request (which is retried at once) and omitted from every later request to that
//! model. Only parameters the body builder marked optional ([`WireBody`]) are ever dropped.
//!
//! No body is read without a bound: a whole (non-streamed) response body or one line of a
//! streamed one may be at most [`frame_bound`] of the request's `max_response_bytes`, and only
//! the first [`ERROR_BODY_BYTES`] of an error body are read.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};
use tracing::warn;

use secrecy::{ExposeSecret, SecretString};

use super::failure::{Secrets, classify_status, classify_transport_error, parse_retry_after};
use super::stream::{FrameDecoder, Frames, decode_frames, frame_bound, response_bytes};
pub use super::wire_body::{OptionalParam, WireBody};
use super::{DeltaStream, LlmDelta, LlmError, LlmRequest};

#[derive(Debug, thiserror::Error)]
pub enum UpstreamSetupError {
    #[error("invalid header {name:?}: {detail}")]
    InvalidHeader { name: String, detail: String },
    #[error("baseUrl {url:?} must start with http:// or https://")]
    BadBaseUrl { url: String },
    #[error("baseUrl gives the endpoint {url:?}, which is not a valid URL: {detail}")]
    BadEndpoint { url: String, detail: String },
}

/// The most of an error response's body that is read: enough for any vendor's error object.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// Told with a refused connection to this machine: most often a local model server (Ollama,
/// vLLM, the benchmarks' mock) that is not running.
const LOCAL_UPSTREAM_HINT: &str = "start the model server on this machine, or try agentd without one through its built-in scripted provider (`\"type\": \"scripted\"`; the example config uses it when AGENTD_LLM_BASE_URL is unset)";

/// Whether `url` points at this machine (a loopback address or `localhost`).
fn is_local_address(url: &Url) -> bool {
    url.host_str().is_some_and(|host| {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || bare
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// What every provider type is configured with.
#[derive(Clone)]
pub struct Connection {
    pub base_url: String,
    pub api_key: Option<SecretString>,
    /// Configured `headers`; they replace same-named defaults.
    pub extra_headers: Vec<(String, String)>,
    /// Stream the response, or ask for one whole body.
    pub stream: bool,
}

/// How a vendor wants the API key.
#[derive(Debug, Clone, Copy)]
pub enum KeyHeader {
    /// `Authorization: Bearer KEY`.
    Bearer,
    /// The key as the value of this header (`x-api-key`, `x-goog-api-key`).
    Named(&'static str),
}

/// Decodes one whole (non-streamed) response body.
pub type WholeDecoder = Box<dyn FnOnce(&str) -> Result<Vec<LlmDelta>, LlmError> + Send>;

/// How a response body is read.
pub enum Reading<D> {
    /// Frames decoded as they arrive.
    Stream(Framing, D),
    /// One body, decoded whole.
    Whole(WholeDecoder),
}

/// How a streamed body is cut into frames.
#[derive(Debug, Clone, Copy)]
pub enum Framing {
    Sse,
    Lines,
}

/// Connection facts of one configured provider, shared by all its requests.
pub struct Upstream {
    client: reqwest::Client,
    headers: HeaderMap,
    /// The configured provider name, for logs.
    provider: String,
    secrets: Arc<Secrets>,
    /// (model, parameter) pairs the upstream refused; never sent again.
    rejected: Mutex<HashSet<(String, &'static str)>>,
}

/// A header the provider sends on every request; `secret` values are redacted from errors.
struct HeaderSpec {
    pub name: String,
    pub value: String,
    pub secret: bool,
}

impl HeaderSpec {
    fn secret(name: &str, value: String) -> Self {
        Self {
            name: name.to_string(),
            value,
            secret: true,
        }
    }

    /// A configured header; its value is treated as secret when its name suggests a credential.
    fn configured(name: &str, value: &str) -> Self {
        let lower = name.to_ascii_lowercase();
        let secret = ["auth", "key", "token", "secret", "cookie"]
            .iter()
            .any(|hint| lower.contains(hint));
        Self {
            name: name.to_string(),
            value: value.to_string(),
            secret,
        }
    }
}

/// Parses a provider's endpoint once, when the provider is built: reqwest would otherwise parse
/// the URL text again on every call.
pub fn endpoint(url: String) -> Result<Url, UpstreamSetupError> {
    Url::parse(&url).map_err(|error| UpstreamSetupError::BadEndpoint {
        detail: error.to_string(),
        url,
    })
}

impl Upstream {
    /// The upstream for `connection`: the key in `key` form, then `defaults` unless configured
    /// `headers` name them, then the configured headers.
    pub fn connect(
        client: reqwest::Client,
        provider: &str,
        connection: &Connection,
        key: KeyHeader,
        defaults: &[(&str, &str)],
    ) -> Result<Self, UpstreamSetupError> {
        let mut headers = Vec::new();
        if let Some(secret) = connection
            .api_key
            .as_ref()
            .map(ExposeSecret::expose_secret)
            .filter(|k| !k.is_empty())
        {
            headers.push(match key {
                KeyHeader::Bearer => {
                    HeaderSpec::secret("authorization", format!("Bearer {secret}"))
                }
                KeyHeader::Named(name) => HeaderSpec::secret(name, secret.to_string()),
            });
        }
        let configured = |name: &str| {
            connection
                .extra_headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        for (name, value) in defaults.iter().filter(|(n, _)| !configured(n)) {
            headers.push(HeaderSpec::configured(name, value));
        }
        for (name, value) in &connection.extra_headers {
            headers.push(HeaderSpec::configured(name, value));
        }
        Self::new(client, provider, &connection.base_url, headers)
    }

    /// `base_url` is checked and its password/query values remembered as secrets.
    fn new(
        client: reqwest::Client,
        provider: &str,
        base_url: &str,
        headers: Vec<HeaderSpec>,
    ) -> Result<Self, UpstreamSetupError> {
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(UpstreamSetupError::BadBaseUrl {
                url: base_url.to_string(),
            });
        }
        let mut secrets = Secrets::default();
        secrets.add_url_parts(base_url);
        let mut map = HeaderMap::new();
        for spec in headers {
            let invalid = |detail: String| UpstreamSetupError::InvalidHeader {
                name: spec.name.clone(),
                detail,
            };
            let name =
                HeaderName::from_bytes(spec.name.as_bytes()).map_err(|e| invalid(e.to_string()))?;
            let mut value = HeaderValue::from_str(&spec.value)
                .map_err(|_| invalid("the value has characters a header cannot carry".into()))?;
            if spec.secret {
                value.set_sensitive(true);
                secrets.add(&spec.value);
                if let Some(token) = spec.value.strip_prefix("Bearer ") {
                    secrets.add(token);
                }
            }
            map.insert(name, value);
        }
        Ok(Self {
            client,
            headers: map,
            provider: provider.to_string(),
            secrets: Arc::new(secrets),
            rejected: Mutex::new(HashSet::new()),
        })
    }

    fn secrets(&self) -> Arc<Secrets> {
        Arc::clone(&self.secrets)
    }

    /// POSTs `body` to `url`; a successful response's body is left to the caller. Optional
    /// parameters the upstream rejects are dropped and the request retried (see module docs).
    pub async fn post(
        &self,
        url: &Url,
        model: &str,
        mut body: WireBody,
        timeout: Duration,
    ) -> Result<reqwest::Response, LlmError> {
        for param in body.optional.clone() {
            if self.is_rejected(model, param) {
                body.remove(param);
            }
        }
        loop {
            let (error, detail) = match self.send_once(url, &body.body, timeout).await? {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            let rejected = detail.as_deref().and_then(|text| body.named_in(text));
            match rejected {
                Some(param) => {
                    self.remember_rejected(model, param, &error);
                    body.remove(param);
                }
                None => return Err(self.secrets.redact_error(error)),
            }
        }
    }

    /// One attempt: `Ok(Ok(response))` on success, `Ok(Err((error, body)))` on an HTTP failure
    /// (with the body text when the status may name a rejected parameter), `Err` otherwise.
    async fn send_once(
        &self,
        url: &Url,
        body: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<Result<reqwest::Response, (LlmError, Option<String>)>, LlmError> {
        let call = self
            .client
            .post(url.clone())
            .headers(self.headers.clone())
            .json(body)
            .send();
        let response = tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| {
                LlmError::Timeout(format!(
                    "no response headers within {} ms",
                    timeout.as_millis()
                ))
            })?
            .map_err(|e| self.unreachable(e, url))?;
        if response.status().is_success() {
            return Ok(Ok(response));
        }
        let status = response.status().as_u16();
        let retry_after = parse_retry_after(response.headers());
        let text = tokio::time::timeout(timeout, body_prefix(response, ERROR_BODY_BYTES))
            .await
            .unwrap_or_default();
        let error = classify_status(status, &text, retry_after);
        let names_params = matches!(status, 400 | 422);
        Ok(Err((error, names_params.then_some(text))))
    }

    /// A request that never reached the upstream: classified, redacted, and logged as a warning
    /// naming the endpoint and the cause (with what to do when nothing listens on this machine).
    fn unreachable(&self, error: reqwest::Error, url: &Url) -> LlmError {
        let refused = error.is_connect();
        let mut error = self
            .secrets
            .redact_error(classify_transport_error(error, url));
        if refused && is_local_address(url) {
            error = error.with_hint(LOCAL_UPSTREAM_HINT);
        }
        warn!(provider = %self.provider, %error, "the model provider could not be reached");
        error
    }

    fn is_rejected(&self, model: &str, param: OptionalParam) -> bool {
        self.rejected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&(model.to_string(), param.name()))
    }

    fn remember_rejected(&self, model: &str, param: OptionalParam, error: &LlmError) {
        let first_time = self
            .rejected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((model.to_string(), param.name()));
        if first_time {
            warn!(
                provider = %self.provider,
                model,
                parameter = param.name(),
                error = %self.secrets.redact(&error.to_string()),
                "the upstream rejected a request parameter; it is omitted for this model from now on"
            );
        }
    }
}

impl Upstream {
    /// One call: POSTs `body` for `request` (see [`Upstream::post`]) and reads the response as
    /// `reading` says.
    pub async fn exchange<D: FrameDecoder>(
        &self,
        url: &Url,
        request: &LlmRequest,
        body: WireBody,
        reading: Reading<D>,
    ) -> Result<DeltaStream, LlmError> {
        let response = self
            .post(url, &request.model, body, request.timeout)
            .await?;
        self.deltas(response, url, request, reading).await
    }

    /// The deltas of a successful response, read as `reading` says; errors are redacted.
    async fn deltas<D: FrameDecoder>(
        &self,
        response: reqwest::Response,
        url: &Url,
        request: &LlmRequest,
        reading: Reading<D>,
    ) -> Result<DeltaStream, LlmError> {
        let timeout = request.timeout;
        let decode_whole = match reading {
            Reading::Stream(framing, decoder) => {
                let bytes = response_bytes(response, timeout, request.max_response_bytes);
                let frames = match framing {
                    Framing::Sse => Frames::sse(bytes),
                    Framing::Lines => Frames::lines(bytes),
                };
                return Ok(decode_frames(frames, decoder, self.secrets()));
            }
            Reading::Whole(decode) => decode,
        };
        let bound = frame_bound(request.max_response_bytes);
        let body = tokio::time::timeout(timeout, body_within(response, bound))
            .await
            .map_err(|_| LlmError::Timeout("the response body did not arrive in time".into()))?
            .map_err(|failure| match failure {
                BodyFailure::TooLarge => LlmError::TooLarge(format!(
                    "the response body passed {bound} bytes (twice llmResponseMaxBytes of {} bytes, plus 64 KiB)",
                    request.max_response_bytes
                )),
                BodyFailure::Transport(e) => {
                    self.secrets.redact_error(classify_transport_error(e, url))
                }
            })?;
        let text = String::from_utf8_lossy(&body);
        let deltas = decode_whole(&text).map_err(|e| self.secrets.redact_error(e))?;
        Ok(Box::pin(futures_util::stream::iter(
            deltas.into_iter().map(Ok),
        )))
    }
}

/// Why a whole body was not read.
enum BodyFailure {
    TooLarge,
    Transport(reqwest::Error),
}

/// The whole body, or [`BodyFailure::TooLarge`] as soon as it passes `max` bytes (at once when
/// its `Content-Length` says so).
async fn body_within(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, BodyFailure> {
    let announced = response.content_length().unwrap_or(0);
    if usize::try_from(announced).map_or(true, |announced| announced > max) {
        return Err(BodyFailure::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyFailure::Transport)? {
        if body.len().saturating_add(chunk.len()) > max {
            return Err(BodyFailure::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// At most the first `max` bytes of the body, as text; a broken body gives what arrived.
async fn body_prefix(mut response: reqwest::Response, max: usize) -> String {
    let mut body = Vec::new();
    while body.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(max - body.len())]),
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// `{base}` without trailing slashes and without a trailing `suffix` segment (e.g. `/v1`), so
/// both `http://host` and `http://host/v1` name the same server.
pub fn strip_base(base: &str, suffix: &str) -> String {
    let trimmed = base.trim().trim_end_matches('/');
    trimmed
        .strip_suffix(suffix)
        .unwrap_or(trimmed)
        .trim_end_matches('/')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_addresses_on_this_machine_get_the_local_hint() {
        for local in [
            "http://127.0.0.1:9090/v1",
            "http://127.1.2.3:1",
            "http://localhost:11434",
            "http://LOCALHOST:1",
            "http://[::1]:8000/v1",
        ] {
            assert!(
                is_local_address(&Url::parse(local).expect("url")),
                "{local}"
            );
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://10.0.0.1:9090",
            "http://[2001:db8::1]:1",
        ] {
            assert!(
                !is_local_address(&Url::parse(remote).expect("url")),
                "{remote}"
            );
        }
        assert!(!LOCAL_UPSTREAM_HINT.contains("mock_upstream"));
    }

    #[test]
    fn base_urls_are_normalised() {
        assert_eq!(strip_base("http://h:1/v1/", "/v1"), "http://h:1");
        assert_eq!(strip_base("http://h:1", "/v1"), "http://h:1");
        assert_eq!(strip_base("http://h:1/api", "/api"), "http://h:1");
    }

    #[test]
    fn an_endpoint_is_parsed_once_and_a_bad_one_is_named() {
        let url = endpoint("http://h:1/v1/chat/completions".into()).expect("valid");
        assert_eq!(url.path(), "/v1/chat/completions");
        let err = endpoint("http://h:99999/v1/messages".into())
            .expect_err("port out of range")
            .to_string();
        assert!(
            err.starts_with("baseUrl gives the endpoint \"http://h:99999/v1/messages\""),
            "{err}"
        );
    }

    #[test]
    fn bad_base_url_and_header_are_named() {
        let client = reqwest::Client::new();
        let err = Upstream::new(client.clone(), "p", "ftp://x", Vec::new())
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("baseUrl \"ftp://x\" must start with http:// or https://")
        );
        let err = Upstream::new(
            client,
            "p",
            "http://x",
            vec![HeaderSpec::configured("X-Bad", "a\nb")],
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains("X-Bad"), "{err}");
    }
}
