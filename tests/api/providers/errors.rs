//! Every failure class, for every wire format: HTTP statuses with each vendor's error body,
//! `Retry-After` in seconds and as an HTTP date, malformed frames, cut streams, the inactivity
//! timeout, and API keys that must never show in an error.

use std::sync::Arc;
use std::time::Duration;

use agentd::llm::{LlmError, Provider, SamplingParams};
use serde_json::{Value, json};

use super::{KEY, call, provider, request};
use crate::support::mock_llm::{MockLlm, Reply, anthropic, gemini, ollama, openai};

#[derive(Debug, Clone, Copy)]
enum Wire {
    OpenAi,
    OpenRouter,
    Anthropic,
    Google,
    Ollama,
}

const EVERY_WIRE: [Wire; 5] = [
    Wire::OpenAi,
    Wire::OpenRouter,
    Wire::Anthropic,
    Wire::Google,
    Wire::Ollama,
];

impl Wire {
    fn config(self, base_url: &str, timeout_ms: u64) -> (Value, Duration) {
        let config = match self {
            Self::OpenAi => {
                json!({"type": "openai-compatible", "baseUrl": format!("{base_url}/v1")})
            }
            Self::OpenRouter => {
                json!({"type": "openrouter", "baseUrl": format!("{base_url}/api/v1")})
            }
            Self::Anthropic => json!({"type": "anthropic", "baseUrl": base_url}),
            Self::Google => json!({"type": "google", "baseUrl": format!("{base_url}/v1beta")}),
            Self::Ollama => json!({"type": "ollama", "baseUrl": base_url}),
        };
        (config, Duration::from_millis(timeout_ms))
    }

    fn provider(self, mock: &MockLlm) -> Arc<dyn Provider> {
        self.provider_with_timeout(mock, 5_000).0
    }

    fn provider_with_timeout(
        self,
        mock: &MockLlm,
        timeout_ms: u64,
    ) -> (Arc<dyn Provider>, Duration) {
        let (mut config, timeout) = self.config(&mock.origin(), timeout_ms);
        config["apiKey"] = json!(KEY);
        (provider(config), timeout)
    }

    /// The mock answers in the format the provider's request path asks for; only OpenRouter's
    /// dialect differs.
    fn success(self, script: &Reply) -> Reply {
        match self {
            Self::OpenRouter => script.clone().with_dialect(openai::Dialect::openrouter()),
            _ => script.clone(),
        }
    }

    /// The vendor's error body for `status`.
    fn error(self, status: u16, message: &str) -> Value {
        match self {
            Self::OpenAi | Self::OpenRouter => openai::error("api_error", None, message),
            Self::Anthropic => anthropic::error("api_error", message),
            Self::Google => gemini::error(status, "UNKNOWN", message),
            Self::Ollama => ollama::error(message),
        }
    }
}

fn class(error: &LlmError) -> &'static str {
    match error {
        LlmError::RateLimit { .. } => "rate_limit",
        LlmError::Auth(_) => "auth_error",
        LlmError::QuotaExceeded(_) => "quota_exceeded",
        LlmError::Model(_) => "model_error",
        LlmError::Network(_) => "network_error",
        LlmError::Timeout(_) => "timeout",
        LlmError::InvalidResponse(_) => "invalid_response",
        LlmError::TooLarge(_) => "too_large",
    }
}

async fn failure(wire: Wire, reply: Reply) -> LlmError {
    let mock = MockLlm::start().await;
    mock.push(reply);
    call(
        wire.provider(&mock).as_ref(),
        request("m", SamplingParams::default()),
    )
    .await
    .expect_err("the call fails")
}

#[tokio::test]
async fn http_statuses_map_to_the_same_class_for_every_wire_format() {
    let cases = [
        (401, "auth_error"),
        (403, "auth_error"),
        (402, "quota_exceeded"),
        (408, "timeout"),
        (500, "model_error"),
        (503, "model_error"),
        (504, "timeout"),
    ];
    for wire in EVERY_WIRE {
        for (status, expected) in cases {
            let error = failure(wire, Reply::status(status, wire.error(status, "it failed"))).await;
            assert_eq!(class(&error), expected, "{wire:?} HTTP {status}: {error}");
            assert!(error.to_string().contains("it failed"), "{wire:?}: {error}");
        }
    }
}

#[tokio::test]
async fn rate_limits_carry_retry_after_in_seconds_and_as_an_http_date() {
    for wire in EVERY_WIRE {
        let seconds =
            Reply::status(429, wire.error(429, "slow down")).with_header("retry-after", "7");
        match failure(wire, seconds).await {
            LlmError::RateLimit { retry_after, .. } => {
                assert_eq!(retry_after, Some(Duration::from_secs(7)), "{wire:?}")
            }
            other => panic!("{wire:?}: {other:?}"),
        }
        let when = (chrono::Utc::now() + chrono::Duration::seconds(30))
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        let dated =
            Reply::status(429, wire.error(429, "slow down")).with_header("retry-after", &when);
        match failure(wire, dated).await {
            LlmError::RateLimit {
                retry_after: Some(wait),
                ..
            } => assert!(
                wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
                "{wire:?}: {wait:?}"
            ),
            other => panic!("{wire:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn quota_errors_are_told_apart_from_rate_limits() {
    let openai_quota = openai::error(
        "insufficient_quota",
        Some("insufficient_quota"),
        "You exceeded your quota",
    );
    assert_eq!(
        class(&failure(Wire::OpenAi, Reply::status(429, openai_quota)).await),
        "quota_exceeded"
    );
    let credit = anthropic::error(
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API.",
    );
    assert_eq!(
        class(&failure(Wire::Anthropic, Reply::status(400, credit)).await),
        "quota_exceeded"
    );
}

/// An upstream that never stops, streamed or as one body, ends at the request's bound (1 MiB
/// here) with a fatal error, for every wire format.
#[tokio::test]
async fn an_endless_response_is_too_large_for_every_wire_format_streamed_or_whole() {
    for wire in EVERY_WIRE {
        for streamed in [true, false] {
            let mock = MockLlm::start().await;
            mock.push(Reply::endless());
            let (mut config, _) = wire.config(&mock.origin(), 5_000);
            config["apiKey"] = json!(KEY);
            config["stream"] = json!(streamed);
            let mut bounded = request("m", SamplingParams::default());
            bounded.max_response_bytes = 1024 * 1024;
            let error = tokio::time::timeout(
                Duration::from_secs(30),
                call(provider(config).as_ref(), bounded),
            )
            .await
            .unwrap_or_else(|_| panic!("{wire:?} streamed {streamed}: the call never ends"))
            .expect_err("the call fails");
            assert_eq!(
                class(&error),
                "too_large",
                "{wire:?} streamed {streamed}: {error}"
            );
            assert!(error.is_fatal(), "never retried");
        }
    }
}

#[tokio::test]
async fn malformed_frames_are_invalid_responses() {
    for wire in EVERY_WIRE {
        let error = failure(wire, Reply::malformed()).await;
        assert_eq!(class(&error), "invalid_response", "{wire:?}: {error}");
    }
}

#[tokio::test]
async fn a_stream_cut_mid_way_is_a_retryable_network_error() {
    let script = Reply::text("a long enough answer to be cut somewhere in the middle");
    for wire in EVERY_WIRE {
        let error = failure(wire, wire.success(&script).cut_after_fraction(0.5)).await;
        assert_eq!(class(&error), "network_error", "{wire:?}: {error}");
        assert!(!error.is_fatal());
    }
}

#[tokio::test]
async fn silence_past_the_llm_timeout_fails_but_a_slow_live_stream_does_not() {
    let script = Reply::text("slow but steady");
    let runs = EVERY_WIRE.map(|wire| {
        let script = script.clone();
        async move {
            let mock = MockLlm::start().await;
            // ~10 chunks, 150 ms apart: 1.5 s in all, never 400 ms of silence.
            mock.push(
                wire.success(&script)
                    .split_every(128)
                    .with_chunk_gap(Duration::from_millis(150)),
            );
            mock.push(
                wire.success(&script)
                    .split_every(128)
                    .stall_before(2, Duration::from_millis(1500)),
            );
            let (p, timeout) = wire.provider_with_timeout(&mock, 400);
            let mut live = request("m", SamplingParams::default());
            live.timeout = timeout;
            let started = std::time::Instant::now();
            let steady = call(p.as_ref(), live.clone()).await;
            assert_eq!(
                steady.map(|r| r.text),
                Ok("slow but steady".to_string()),
                "{wire:?}"
            );
            assert!(
                started.elapsed() > timeout,
                "{wire:?}: the whole stream outlasts the timeout, only silence counts"
            );
            let stalled = call(p.as_ref(), live).await.expect_err("stalls");
            assert_eq!(class(&stalled), "timeout", "{wire:?}: {stalled}");
        }
    });
    futures_util::future::join_all(runs).await;
}

#[tokio::test]
async fn api_keys_never_appear_in_error_messages() {
    for wire in EVERY_WIRE {
        let echo = wire.error(401, &format!("Incorrect API key provided: {KEY}"));
        let error = failure(wire, Reply::status(401, echo)).await;
        assert_eq!(class(&error), "auth_error");
        assert!(!error.to_string().contains(KEY), "{wire:?}: {error}");
        assert!(
            error.to_string().contains("[redacted]"),
            "{wire:?}: {error}"
        );
    }
    // A key in the URL (userinfo or query) and in a configured header, with nothing listening.
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = unused.local_addr().expect("addr").port();
    drop(unused);
    let secret_in_query = "AIzaQuerySecret123456";
    let secret_in_user = "userinfo-secret-98765";
    let p = provider(json!({
        "type": "openai-compatible",
        "baseUrl": format!("http://bob:{secret_in_user}@127.0.0.1:{port}/v1?key={secret_in_query}"),
        "headers": {"X-Api-Key": "header-secret-55555"},
    }));
    let error = call(p.as_ref(), request("m", SamplingParams::default()))
        .await
        .expect_err("nothing listens");
    assert_eq!(class(&error), "network_error", "{error}");
    let text = format!("{error} {error:?}");
    for secret in [secret_in_query, secret_in_user, "header-secret-55555"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    // A configured credential header echoed back by the upstream is redacted too.
    let mock = MockLlm::start().await;
    mock.push(Reply::status(
        403,
        openai::error(
            "permission_error",
            None,
            "key header-secret-55555 is not allowed",
        ),
    ));
    let p = provider(json!({
        "type": "openai-compatible",
        "baseUrl": format!("{}/v1", mock.origin()),
        "headers": {"X-Api-Key": "header-secret-55555"},
    }));
    let error = call(p.as_ref(), request("m", SamplingParams::default()))
        .await
        .expect_err("forbidden");
    assert!(
        !error.to_string().contains("header-secret-55555"),
        "{error}"
    );
}
