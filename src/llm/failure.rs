//! Classifying upstream failures into [`LlmError`] once, whatever the vendor: HTTP statuses with
//! every vendor's error body (OpenAI, Anthropic, Gemini, Ollama, OpenRouter), `Retry-After` in
//! its forms, transport errors, and the redaction that keeps credentials out of every message.
//!
//! Nothing here retries or logs; it only decides what a failure *is*.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

use super::LlmError;

/// Replaces every known secret (API keys, credential headers, URL passwords and query values)
/// in error text, so no message, log line or API response can leak one.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    values: Vec<String>,
}

const REDACTED: &str = "[redacted]";

impl Secrets {
    /// Remembers `value` as secret; values too short to be credentials are ignored, since
    /// redacting them would mangle ordinary words.
    pub fn add(&mut self, value: &str) {
        let value = value.trim();
        if value.len() >= 6 && !self.values.iter().any(|v| v == value) {
            self.values.push(value.to_string());
        }
    }

    /// Remembers the password and query values of a URL.
    pub fn add_url_parts(&mut self, url: &str) {
        let Ok(parsed) = reqwest::Url::parse(url) else {
            return;
        };
        if let Some(password) = parsed.password() {
            self.add(password);
        }
        for (_, value) in parsed.query_pairs() {
            self.add(&value);
        }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in &self.values {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }

    pub fn redact_error(&self, error: LlmError) -> LlmError {
        error.map_message(|message| self.redact(&message))
    }
}

/// A transport failure: what went wrong (connection refused, name not resolved, TLS, timeout)
/// and the endpoint it happened on, named without its query or credentials.
pub fn classify_transport_error(error: reqwest::Error, endpoint: &reqwest::Url) -> LlmError {
    let timed_out = error.is_timeout();
    let text = format!(
        "cannot reach {}: {}",
        endpoint_name(endpoint),
        transport_cause(&error)
    );
    if timed_out {
        LlmError::Timeout(text)
    } else {
        LlmError::Network(text)
    }
}

/// `scheme://host:port/path` of `url`: no user, password or query, which may hold a key.
pub fn endpoint_name(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or("?");
    match url.port_or_known_default() {
        Some(port) => format!("{}://{host}:{port}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

/// The root cause of a transport error in words a user can act on.
fn transport_cause(error: &reqwest::Error) -> String {
    let mut innermost = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        innermost = cause.to_string();
        source = cause.source();
    }
    let lower = innermost.to_ascii_lowercase();
    if lower.contains("connection refused") {
        return "connection refused (nothing listens there)".into();
    }
    let kind = if error.is_timeout() {
        "timed out"
    } else if lower.contains("dns")
        || lower.contains("failed to lookup")
        || lower.contains("name or service not known")
        || lower.contains("no address associated")
    {
        "the host name does not resolve"
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake")
    {
        "TLS failed"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "the connection failed"
    };
    format!("{kind}: {innermost}")
}

/// The vendor's error code and message, from any of the error body shapes:
/// `{"error":{"message","type"|"code"}}` (OpenAI, OpenRouter, Anthropic under `type:error`),
/// `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message"}}` (Gemini), `{"error":"…"}`
/// (Ollama).
pub fn error_parts(body: &Value) -> Option<(String, String)> {
    let error = body.get("error")?;
    if let Some(text) = error.as_str() {
        return Some((String::new(), text.to_string()));
    }
    let code = ["code", "type", "status"]
        .iter()
        .filter_map(|k| error.get(*k).and_then(Value::as_str))
        .find(|c| !c.is_empty())
        .unwrap_or_default()
        .to_string();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    Some((code, message))
}

/// An error reported inside a successful (200) body or stream: classified by its code.
pub fn classify_error_body(body: &Value) -> Option<LlmError> {
    let (code, message) = error_parts(body)?;
    let status = body
        .pointer("/error/code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok());
    Some(classify(status, &code, message, None))
}

/// A whole (non-streamed) response body as JSON; an error object in it is classified.
pub fn parse_whole_body(text: &str) -> Result<Value, LlmError> {
    let body: Value = serde_json::from_str(text).map_err(|e| {
        LlmError::InvalidResponse(format!(
            "response is not JSON ({e}): {}",
            truncate(text, 200)
        ))
    })?;
    match classify_error_body(&body) {
        Some(error) => Err(error),
        None => Ok(body),
    }
}

/// Maps an HTTP failure onto the error classes the session loop acts on.
pub fn classify_status(status: u16, body: &str, retry_after: Option<Duration>) -> LlmError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let (code, detail) = parsed
        .as_ref()
        .and_then(error_parts)
        .unwrap_or_else(|| (String::new(), truncate(body, 300).to_string()));
    let retry_after = retry_after.or_else(|| parsed.as_ref().and_then(google_retry_delay));
    classify(
        Some(status),
        &code,
        format!("HTTP {status}: {detail}"),
        retry_after,
    )
}

fn classify(
    status: Option<u16>,
    code: &str,
    message: String,
    retry_after: Option<Duration>,
) -> LlmError {
    let code = code.to_ascii_lowercase();
    let lower = message.to_ascii_lowercase();
    let quota = matches!(
        code.as_str(),
        "insufficient_quota" | "quota_exceeded" | "billing_error" | "billing_not_active"
    ) || lower.contains("credit balance")
        || lower.contains("insufficient credits");
    let auth = matches!(
        code.as_str(),
        "authentication_error" | "permission_error" | "invalid_api_key" | "unauthenticated"
    ) || lower.contains("api key not valid")
        || lower.contains("api_key_invalid");
    match (status, code.as_str()) {
        (Some(401 | 403), _) => LlmError::Auth(message),
        (Some(402), _) => LlmError::QuotaExceeded(message),
        _ if quota => LlmError::QuotaExceeded(message),
        _ if auth => LlmError::Auth(message),
        (Some(429), _) | (_, "rate_limit_error" | "rate_limit_exceeded" | "resource_exhausted") => {
            LlmError::RateLimit {
                retry_after,
                message,
            }
        }
        (Some(408 | 504), _) | (_, "timeout_error" | "deadline_exceeded") => {
            LlmError::Timeout(message)
        }
        _ => LlmError::Model(message),
    }
}

/// Gemini puts the wait in the body: `details[].retryDelay: "30s"` of a `RetryInfo`.
fn google_retry_delay(body: &Value) -> Option<Duration> {
    body.pointer("/error/details")?
        .as_array()?
        .iter()
        .filter_map(|d| d.get("retryDelay").and_then(Value::as_str))
        .find_map(|delay| {
            let secs: f64 = delay.trim().strip_suffix('s')?.parse().ok()?;
            (secs >= 0.0).then(|| Duration::from_secs_f64(secs))
        })
}

/// `Retry-After` in seconds or as an HTTP date, or OpenAI's `retry-after-ms`.
pub fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, chrono::Utc::now())
}

fn retry_after_at(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    // A date in the past means "now", not "no advice".
    Some(
        (when.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

/// At most `max` characters of `text`, cut on a character boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn statuses_map_to_error_classes() {
        assert!(matches!(classify_status(401, "", None), LlmError::Auth(_)));
        assert!(matches!(classify_status(403, "", None), LlmError::Auth(_)));
        assert!(matches!(
            classify_status(402, "{}", None),
            LlmError::QuotaExceeded(_)
        ));
        assert!(matches!(
            classify_status(
                429,
                r#"{"error":{"code":"insufficient_quota","message":"pay"}}"#,
                None
            ),
            LlmError::QuotaExceeded(_)
        ));
        let limited = classify_status(429, "{}", Some(Duration::from_secs(2)));
        assert_eq!(
            limited,
            LlmError::RateLimit {
                retry_after: Some(Duration::from_secs(2)),
                message: "HTTP 429: {}".into()
            }
        );
        assert!(
            matches!(classify_status(503, "down", None), LlmError::Model(m) if m.contains("503"))
        );
        assert!(matches!(
            classify_status(504, "", None),
            LlmError::Timeout(_)
        ));
        assert!(matches!(
            classify_status(408, "", None),
            LlmError::Timeout(_)
        ));
    }

    #[test]
    fn vendor_bodies_are_understood() {
        let anthropic_billing = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#;
        assert!(matches!(
            classify_status(400, anthropic_billing, None),
            LlmError::QuotaExceeded(_)
        ));
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert!(
            matches!(classify_status(529, overloaded, None), LlmError::Model(m) if m.contains("Overloaded"))
        );
        let gemini = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"slow","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"17s"}]}}"#;
        assert_eq!(
            classify_status(429, gemini, None),
            LlmError::RateLimit {
                retry_after: Some(Duration::from_secs(17)),
                message: "HTTP 429: slow".into()
            }
        );
        let gemini_key = r#"{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"API key not valid. Please pass a valid API key."}}"#;
        assert!(matches!(
            classify_status(400, gemini_key, None),
            LlmError::Auth(_)
        ));
        let ollama = r#"{"error":"model 'x' not found"}"#;
        assert!(
            matches!(classify_status(404, ollama, None), LlmError::Model(m) if m == "HTTP 404: model 'x' not found")
        );
    }

    #[test]
    fn in_stream_errors_are_classified_by_code() {
        let body: Value = serde_json::from_str(
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"later"}}"#,
        )
        .expect("json");
        assert!(matches!(
            classify_error_body(&body),
            Some(LlmError::RateLimit { .. })
        ));
        let body: Value = serde_json::from_str(r#"{"error":{"message":"boom"}}"#).expect("json");
        assert_eq!(
            classify_error_body(&body),
            Some(LlmError::Model("boom".into()))
        );
    }

    #[test]
    fn retry_after_accepts_seconds_milliseconds_and_http_dates() {
        let now = chrono::DateTime::parse_from_rfc2822("Wed, 21 Oct 2015 07:28:00 GMT")
            .expect("date")
            .with_timezone(&chrono::Utc);
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after_at(&headers, now), Some(Duration::from_secs(3)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:45 GMT"),
        );
        assert_eq!(retry_after_at(&headers, now), Some(Duration::from_secs(45)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:00:00 GMT"),
        );
        assert_eq!(retry_after_at(&headers, now), Some(Duration::ZERO));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after_at(&headers, now), None);
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(
            retry_after_at(&headers, now),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn secrets_are_redacted_from_messages_and_urls() {
        let mut secrets = Secrets::default();
        secrets.add("sk-live-123456");
        secrets.add("abc");
        secrets.add("six-ch");
        secrets.add("fivec");
        secrets.add_url_parts("https://user:hunter22@example.com/v1?key=AIzaSECRET99");
        let error = secrets.redact_error(LlmError::Auth(
            "bad key sk-live-123456 for hunter22 with AIzaSECRET99 abc six-ch fivec".into(),
        ));
        assert_eq!(
            error,
            LlmError::Auth(
                "bad key [redacted] for [redacted] with [redacted] abc [redacted] fivec".into()
            ),
            "six characters and up are secrets; shorter values are too common to redact"
        );
    }
}
