//! Logs and traces: one global `tracing` subscriber writing logfmt (default) or JSON lines to
//! stderr, filtered by `RUST_LOG` (default `info,rmcp=warn`), plus an OpenTelemetry layer that
//! exports spans over OTLP/HTTP when `telemetry.otlp.endpoint` is set (off by default and in
//! tests). Secrets never reach a log line: keys are `SecretString`s and headers are not logged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::{TraceContextExt, TracerProvider};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::{LogFormatSetting, TelemetryConfig};

/// `info`, but rmcp only from `warn`: it logs every MCP handshake in full at `info`.
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("telemetry.otlp: cannot build the exporter for {endpoint}: {detail}")]
    Exporter { endpoint: String, detail: String },
}

/// Keeps the trace exporter alive; [`TelemetryGuard::shutdown`] flushes pending spans.
#[must_use = "dropping the guard stops trace export"]
pub struct TelemetryGuard {
    tracer_provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    pub fn shutdown(self) {
        if let Some(provider) = self.tracer_provider {
            // Export failures at exit are not worth failing the exit for.
            let _ = provider.shutdown();
        }
    }
}

/// Installs the global subscriber. A second call (tests) keeps the first subscriber.
pub fn init_telemetry(config: &TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let lines = match config.log_format {
        LogFormatSetting::Logfmt => tracing_logfmt::builder()
            .layer()
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormatSetting::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let tracer_provider = config.otlp.as_ref().map(tracer_provider).transpose()?;
    let otel = tracer_provider.as_ref().map(|provider| {
        let service = config
            .otlp
            .as_ref()
            .and_then(|o| o.service_name.clone())
            .unwrap_or_else(|| "agentd".into());
        tracing_opentelemetry::layer().with_tracer(provider.tracer(service))
    });
    let exporting = otel.is_some();
    let installed = Registry::default()
        .with(filter)
        .with(lines)
        .with(otel)
        .try_init();
    if installed.is_ok() {
        TRACES_EXPORTED.store(exporting, Ordering::Relaxed);
    }
    Ok(TelemetryGuard { tracer_provider })
}

fn tracer_provider(otlp: &crate::config::OtlpConfig) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(otlp.endpoint.clone())
        .with_timeout(Duration::from_millis(otlp.timeout_ms.unwrap_or(2_000)))
        .build()
        .map_err(|e| TelemetryError::Exporter {
            endpoint: otlp.endpoint.clone(),
            detail: e.to_string(),
        })?;
    let service = otlp.service_name.clone().unwrap_or_else(|| "agentd".into());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// Whether the installed subscriber exports traces (spans then carry OpenTelemetry trace ids).
static TRACES_EXPORTED: AtomicBool = AtomicBool::new(false);

pub fn traces_exported() -> bool {
    TRACES_EXPORTED.load(Ordering::Relaxed)
}

/// The OpenTelemetry trace id of the current span, when traces are exported.
pub fn trace_id_of_current_span() -> Option<String> {
    let context = tracing::Span::current().context();
    let span = context.span();
    let span_context = span.span_context();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}
