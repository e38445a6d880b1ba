//! OTLP/HTTP export of spans and metrics: the exporters, their providers, and the HTTP client
//! they send through.
//!
//! The SDK exports from threads of its own (the batch span processor, the periodic metric
//! reader) that run no Tokio runtime, so reqwest's async client panicked there ("there is no
//! reactor running") and no span ever left the process. [`TokioHttpClient`] hands each request
//! to the server's runtime and waits for the answer from whatever thread asked.

use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;

use super::logging::TelemetryError;
use crate::config::OtlpConfig;

/// How long an export may take when `telemetry.otlp.timeoutMs` is not set.
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(2_000);
/// How often metrics are exported when `telemetry.otlp.metricsIntervalMs` is not set.
const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);

/// Sends the exporters' requests with reqwest on a Tokio runtime, from any thread.
#[derive(Debug, Clone)]
pub struct TokioHttpClient {
    runtime: tokio::runtime::Handle,
    client: reqwest::Client,
}

impl TokioHttpClient {
    /// A client on the current runtime; `None` outside one.
    pub fn on_current_runtime(timeout: Duration) -> Result<Self, String> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "OTLP export needs a Tokio runtime".to_string())?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self { runtime, client })
    }
}

#[async_trait::async_trait]
impl HttpClient for TokioHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = sent.await??;
        let mut response = Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

/// The trace and metric endpoints of a config: `endpoint` is the traces URL
/// (`…/v1/traces`); metrics go to `metricsEndpoint`, else the same base with `/v1/metrics`.
pub fn metrics_endpoint(otlp: &OtlpConfig) -> String {
    if let Some(explicit) = &otlp.metrics_endpoint {
        return explicit.clone();
    }
    let base = otlp
        .endpoint
        .strip_suffix("/v1/traces")
        .unwrap_or(otlp.endpoint.trim_end_matches('/'));
    format!("{base}/v1/metrics")
}

fn resource(otlp: &OtlpConfig) -> Resource {
    let service = otlp.service_name.clone().unwrap_or_else(|| "agentd".into());
    Resource::builder().with_service_name(service).build()
}

fn exporter_error(endpoint: &str, detail: impl ToString) -> TelemetryError {
    TelemetryError::Exporter {
        endpoint: endpoint.to_string(),
        detail: detail.to_string(),
    }
}

fn client(otlp: &OtlpConfig) -> Result<TokioHttpClient, TelemetryError> {
    let timeout = otlp
        .timeout_ms
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
    TokioHttpClient::on_current_runtime(timeout).map_err(|e| exporter_error(&otlp.endpoint, e))
}

/// Spans in batches to `otlp.endpoint`.
pub fn tracer_provider(otlp: &OtlpConfig) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client(otlp)?)
        .with_endpoint(otlp.endpoint.clone())
        .with_timeout(
            otlp.timeout_ms
                .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        )
        .build()
        .map_err(|e| exporter_error(&otlp.endpoint, e))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource(otlp))
        .build())
}

/// Metrics every `metricsIntervalMs` to the metrics endpoint.
pub fn meter_provider(otlp: &OtlpConfig) -> Result<SdkMeterProvider, TelemetryError> {
    let endpoint = metrics_endpoint(otlp);
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_http_client(client(otlp)?)
        .with_endpoint(endpoint.clone())
        .with_timeout(
            otlp.timeout_ms
                .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        )
        .build()
        .map_err(|e| exporter_error(&endpoint, e))?;
    let interval = otlp
        .metrics_interval_ms
        .map_or(DEFAULT_METRICS_INTERVAL, Duration::from_millis);
    let reader = PeriodicReader::builder(exporter)
        .with_interval(interval)
        .build();
    Ok(SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(resource(otlp))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: &str) -> OtlpConfig {
        OtlpConfig {
            endpoint: endpoint.into(),
            timeout_ms: None,
            service_name: None,
            metrics_endpoint: None,
            metrics_interval_ms: None,
            capture_content: false,
        }
    }

    /// Polls `future` on this thread, parking between wakes: no runtime, like the SDK's threads.
    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
        let mut context = std::task::Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
                return output;
            }
            std::thread::park();
        }
    }

    #[test]
    fn metrics_go_beside_the_traces() {
        assert_eq!(
            metrics_endpoint(&config("http://c:4318/v1/traces")),
            "http://c:4318/v1/metrics"
        );
        assert_eq!(
            metrics_endpoint(&config("http://c:4318/")),
            "http://c:4318/v1/metrics"
        );
    }

    #[test]
    fn a_client_from_a_thread_without_a_runtime_reaches_the_runtime() {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let client = runtime
            .block_on(async { TokioHttpClient::on_current_runtime(DEFAULT_TIMEOUT) })
            .expect("client");
        // Nothing listens on port 9 of loopback: the point is an error, not a panic.
        let outcome = std::thread::spawn(move || {
            let request = Request::post("http://127.0.0.1:9/v1/traces")
                .body(Bytes::from_static(b"x"))
                .expect("request");
            block_on(client.send_bytes(request))
        })
        .join()
        .expect("the export thread does not panic");
        assert!(outcome.is_err());
    }
}
