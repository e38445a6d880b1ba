//! Sending one request body to a vendor endpoint, shared by every provider: fixed headers (with
//! credentials marked sensitive and remembered for redaction), the first-byte timeout, failure
//! classification, and the handling of optional parameters an upstream rejects.
//!
//! A parameter the upstream rejects (HTTP 400/422 naming it) is logged once per model, dropped
//! from this request (which is retried at once) and omitted from every later request to that
//! model. Only parameters the body builder marked optional are ever dropped.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};
use tracing::warn;

use super::LlmError;
use super::failure::{Secrets, classify_status, classify_transport_error, parse_retry_after};

#[derive(Debug, thiserror::Error)]
pub enum UpstreamSetupError {
    #[error("invalid header {name:?}: {detail}")]
    InvalidHeader { name: String, detail: String },
    #[error("baseUrl {url:?} must start with http:// or https://")]
    BadBaseUrl { url: String },
}

/// A request parameter the body builder may drop: where it sits in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalParam {
    /// Object keys leading to the parameter; the last one is its wire name.
    pub path: &'static [&'static str],
}

impl OptionalParam {
    pub const fn at(path: &'static [&'static str]) -> Self {
        Self { path }
    }

    pub fn name(&self) -> &'static str {
        self.path.last().copied().unwrap_or_default()
    }
}

/// A JSON request body and the optional parameters it carries.
#[derive(Debug, Clone, Default)]
pub struct WireBody {
    pub body: Map<String, Value>,
    optional: Vec<OptionalParam>,
}

impl WireBody {
    pub fn new(body: Map<String, Value>) -> Self {
        Self {
            body,
            optional: Vec::new(),
        }
    }

    /// Sets an optional parameter (creating parent objects); `None` leaves it out.
    pub fn set_optional(&mut self, param: OptionalParam, value: Option<Value>) {
        let Some(value) = value else {
            return;
        };
        let Some((last, parents)) = param.path.split_last() else {
            return;
        };
        let mut object = &mut self.body;
        for key in parents {
            let entry = object
                .entry(key.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            let Value::Object(inner) = entry else {
                return;
            };
            object = inner;
        }
        object.insert(last.to_string(), value);
        self.optional.push(param);
    }

    pub fn contains(&self, param: OptionalParam) -> bool {
        self.optional.contains(&param)
    }

    fn remove(&mut self, param: OptionalParam) {
        self.optional.retain(|p| *p != param);
        let Some((last, parents)) = param.path.split_last() else {
            return;
        };
        let mut object = &mut self.body;
        for key in parents {
            match object.get_mut(*key) {
                Some(Value::Object(inner)) => object = inner,
                _ => return,
            }
        }
        object.remove(*last);
        // An emptied parent (e.g. `options: {}`) would only be noise.
        if let Some((parent_key, grand)) = parents.split_last() {
            let mut holder = &mut self.body;
            for key in grand {
                match holder.get_mut(*key) {
                    Some(Value::Object(inner)) => holder = inner,
                    _ => return,
                }
            }
            if holder
                .get(*parent_key)
                .is_some_and(|v| v.as_object().is_some_and(Map::is_empty))
            {
                holder.remove(*parent_key);
            }
        }
    }

    /// The optional parameter an upstream error message names, if any.
    fn named_in(&self, message: &str) -> Option<OptionalParam> {
        let message = normalise(message);
        self.optional
            .iter()
            .copied()
            .find(|p| message.contains(&normalise(p.name())))
    }
}

/// `top_k`, `topK` and `top-k` all become `topk`, so vendors' spellings match each other.
fn normalise(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
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
pub struct HeaderSpec {
    pub name: String,
    pub value: String,
    pub secret: bool,
}

impl HeaderSpec {
    pub fn secret(name: &str, value: String) -> Self {
        Self {
            name: name.to_string(),
            value,
            secret: true,
        }
    }

    /// A configured header; its value is treated as secret when its name suggests a credential.
    pub fn configured(name: &str, value: &str) -> Self {
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

impl Upstream {
    /// `base_url` is checked and its password/query values remembered as secrets.
    pub fn new(
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

    pub fn secrets(&self) -> Arc<Secrets> {
        Arc::clone(&self.secrets)
    }

    /// POSTs `body` to `url`; a successful response's body is left to the caller. Optional
    /// parameters the upstream rejects are dropped and the request retried (see module docs).
    pub async fn post(
        &self,
        url: &str,
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
        url: &str,
        body: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<Result<reqwest::Response, (LlmError, Option<String>)>, LlmError> {
        let call = self
            .client
            .post(url)
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
            .map_err(|e| self.secrets.redact_error(classify_transport_error(e)))?;
        if response.status().is_success() {
            return Ok(Ok(response));
        }
        let status = response.status().as_u16();
        let retry_after = parse_retry_after(response.headers());
        let text = tokio::time::timeout(timeout, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let error = classify_status(status, &text, retry_after);
        let names_params = matches!(status, 400 | 422);
        Ok(Err((error, names_params.then_some(text))))
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

/// Reads a whole (non-streamed) body within `timeout`.
pub async fn read_body(
    response: reqwest::Response,
    timeout: Duration,
    secrets: &Secrets,
) -> Result<String, LlmError> {
    tokio::time::timeout(timeout, response.text())
        .await
        .map_err(|_| LlmError::Timeout("the response body did not arrive in time".into()))?
        .map_err(|e| secrets.redact_error(classify_transport_error(e)))
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
    use serde_json::json;

    const TOP_K: OptionalParam = OptionalParam::at(&["generationConfig", "topK"]);
    const TEMPERATURE: OptionalParam = OptionalParam::at(&["temperature"]);

    #[test]
    fn optional_params_are_set_found_by_any_spelling_and_removed() {
        let mut body = WireBody::new(Map::new());
        body.set_optional(TOP_K, Some(json!(40)));
        body.set_optional(TEMPERATURE, Some(json!(0.2)));
        body.set_optional(OptionalParam::at(&["absent"]), None);
        assert_eq!(
            Value::Object(body.body.clone()),
            json!({"generationConfig": {"topK": 40}, "temperature": 0.2})
        );
        assert_eq!(
            body.named_in("Unsupported parameter: 'top_k' is not supported"),
            Some(TOP_K)
        );
        assert_eq!(body.named_in("something else entirely"), None);
        body.remove(TOP_K);
        assert_eq!(
            Value::Object(body.body.clone()),
            json!({"temperature": 0.2})
        );
        assert!(!body.contains(TOP_K));
    }

    #[test]
    fn base_urls_are_normalised() {
        assert_eq!(strip_base("http://h:1/v1/", "/v1"), "http://h:1");
        assert_eq!(strip_base("http://h:1", "/v1"), "http://h:1");
        assert_eq!(strip_base("http://h:1/api", "/api"), "http://h:1");
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
