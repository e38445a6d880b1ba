//! Logs and traces: one global `tracing` subscriber writing logfmt (default) or JSON lines to
//! stderr, filtered by `RUST_LOG` (default `info,rmcp=warn`), plus an OpenTelemetry layer that
//! exports spans over OTLP/HTTP when `telemetry.otlp.endpoint` is set (off by default and in
//! in-process tests; see [`super::otlp`]). Secrets never reach a log line: keys are `SecretString`s and headers are not logged.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{TraceContextExt, TracerProvider};
use opentelemetry_sdk::metrics::SdkMeterProvider;
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

/// Keeps the exporters alive; [`TelemetryGuard::shutdown`] flushes pending spans and metrics.
#[must_use = "dropping the guard stops trace export"]
pub struct TelemetryGuard {
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
}

impl TelemetryGuard {
    /// Flushes and stops the exporters. Their shutdown blocks until the last export is sent
    /// through this runtime, so it runs on a blocking thread.
    pub async fn shutdown(self) {
        let Self {
            tracer_provider,
            meter_provider,
        } = self;
        let flush = tokio::task::spawn_blocking(move || {
            // Export failures at exit are not worth failing the exit for.
            if let Some(provider) = tracer_provider {
                let _ = provider.shutdown();
            }
            if let Some(provider) = meter_provider {
                let _ = provider.shutdown();
            }
        });
        let _ = flush.await;
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
    let tracer_provider = config
        .otlp
        .as_ref()
        .map(super::otlp::tracer_provider)
        .transpose()?;
    let meter_provider = config
        .otlp
        .as_ref()
        .map(super::otlp::meter_provider)
        .transpose()?;
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
        if let (Some(provider), Some(otlp)) = (&meter_provider, &config.otlp) {
            super::genai::install(provider, otlp.capture_content);
        }
    }
    Ok(TelemetryGuard {
        tracer_provider,
        meter_provider,
    })
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
