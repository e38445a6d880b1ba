//! Telemetry: the Prometheus registry with every metric handle agentd updates, and the
//! tracing subscriber setup. Metric label values are bounded: route templates, configured
//! agent, provider and model names, status codes; never user ids or raw paths.

mod agent_metrics;
pub mod genai;
mod logging;
pub mod otlp;

pub use logging::{
    TelemetryError, TelemetryGuard, init_telemetry, trace_id_of_current_span, traces_exported,
};

pub use agent_metrics::AgentMetrics;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// Every metric handle, registered in one registry (not the process-global default).
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub http_requests_total: IntCounterVec,
    pub http_request_duration_seconds: HistogramVec,
    pub sessions_active: IntGauge,
    pub sessions_total: IntCounterVec,
    pub sse_streams_active: IntGauge,
    pub llm_requests_total: IntCounterVec,
    pub llm_latency_ms: HistogramVec,
    pub llm_prompt_tokens_total: IntCounterVec,
    pub llm_completion_tokens_total: IntCounterVec,
    pub llm_errors_total: IntCounterVec,
    pub llm_retries_total: IntCounterVec,
    /// Cost, tools, final reports and the context guard.
    pub agent: AgentMetrics,
    /// Calls waiting for a slot of each tool queue.
    pub queue_depth: IntGaugeVec,
    /// Slots of each tool queue held now.
    pub queue_in_use: IntGaugeVec,
    pub queue_wait_duration_ms: HistogramVec,
    /// Run events not stored, by `reason` (`queue_full`, `store_error`, `refused`, `closed`).
    pub run_events_dropped_total: IntCounterVec,
    /// Rows the store refused to hold (a data error), by `kind` (`run`, `event`).
    pub run_records_refused_total: IntCounterVec,
    /// Runs answered from the response cache, by agent.
    pub cache_hits_total: IntCounterVec,
    /// Tool approvals (SPEC §8): calls that started waiting, by agent.
    pub approvals_requested_total: IntCounterVec,
    /// Waits ended, by `decision` (`approve`, `deny`, `expired`, `cancelled`).
    pub approvals_decided_total: IntCounterVec,
    /// How long calls waited for their decision, by `decision`.
    pub approval_wait_seconds: HistogramVec,
    /// Runs waiting for approval now, in the whole store (refreshed by every sweep).
    pub runs_waiting_approval: IntGauge,
}

#[derive(Debug, thiserror::Error)]
#[error("metrics registry: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

impl Metrics {
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, MetricsError> {
                let metric = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(metric.clone()))?;
                Ok(metric)
            };
        let histogram = |name: &str,
                         help: &str,
                         labels: &[&str],
                         buckets: Vec<f64>|
         -> Result<HistogramVec, MetricsError> {
            let metric =
                HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)?;
            registry.register(Box::new(metric.clone()))?;
            Ok(metric)
        };
        let gauge = |name: &str, help: &str| -> Result<IntGauge, MetricsError> {
            let metric = IntGauge::new(name, help)?;
            registry.register(Box::new(metric.clone()))?;
            Ok(metric)
        };
        let gauges =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntGaugeVec, MetricsError> {
                let metric = IntGaugeVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(metric.clone()))?;
                Ok(metric)
            };
        let llm = &["agent", "provider", "model"];
        Ok(Self {
            queue_depth: gauges(
                "ai_agent_queue_depth",
                "Tool calls waiting for a slot, by queue.",
                &["queue"],
            )?,
            queue_in_use: gauges(
                "ai_agent_queue_in_use",
                "Tool queue slots in use, by queue.",
                &["queue"],
            )?,
            queue_wait_duration_ms: histogram(
                "ai_agent_queue_wait_duration_ms",
                "Time a tool call waited for its queue slot, in milliseconds.",
                &["queue"],
                vec![
                    1.0, 5.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
                    30000.0, 60000.0, 120000.0,
                ],
            )?,
            http_requests_total: counter(
                "agentd_http_requests_total",
                "HTTP requests by route template, method and status.",
                &["route", "method", "status"],
            )?,
            http_request_duration_seconds: histogram(
                "agentd_http_request_duration_seconds",
                "Time to produce the HTTP response head, by route template and method.",
                &["route", "method"],
                vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0, 30.0, 60.0, 120.0,
                ],
            )?,
            sessions_active: gauge("agentd_sessions_active", "Sessions running now.")?,
            sessions_total: counter(
                "agentd_sessions_total",
                "Finished sessions by agent and exit reason.",
                &["agent", "exit_reason"],
            )?,
            sse_streams_active: gauge("agentd_sse_streams_active", "SSE responses open now.")?,
            llm_requests_total: counter(
                "ai_agent_llm_requests_total",
                "LLM attempts by agent, provider, model and status.",
                &["agent", "provider", "model", "status"],
            )?,
            llm_latency_ms: histogram(
                "ai_agent_llm_latency_ms",
                "LLM attempt latency in milliseconds.",
                llm,
                vec![
                    50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0, 60000.0,
                    120000.0,
                ],
            )?,
            llm_prompt_tokens_total: counter(
                "ai_agent_llm_prompt_tokens_total",
                "Prompt tokens reported by providers.",
                llm,
            )?,
            llm_completion_tokens_total: counter(
                "ai_agent_llm_completion_tokens_total",
                "Completion tokens reported by providers.",
                llm,
            )?,
            llm_errors_total: counter("ai_agent_llm_errors_total", "Failed LLM attempts.", llm)?,
            llm_retries_total: counter(
                "ai_agent_llm_retries_total",
                "LLM attempts after the first within a turn.",
                llm,
            )?,
            agent: AgentMetrics::register(&registry)?,
            run_events_dropped_total: counter(
                "agentd_run_events_dropped_total",
                "Run events that were not stored for replay, by reason.",
                &["reason"],
            )?,
            run_records_refused_total: counter(
                "agentd_run_records_refused_total",
                "Run rows and run events the store refused (a data error); isolated and not retried.",
                &["kind"],
            )?,
            cache_hits_total: counter(
                "agentd_cache_hits_total",
                "Runs answered from the response cache, by agent.",
                &["agent"],
            )?,
            approvals_requested_total: counter(
                "agentd_approvals_requested_total",
                "Tool calls that waited for a person's approval, by agent.",
                &["agent"],
            )?,
            approvals_decided_total: counter(
                "agentd_approvals_decided_total",
                "Tool approval waits ended, by decision (approve, deny, expired, cancelled).",
                &["decision"],
            )?,
            approval_wait_seconds: histogram(
                "agentd_approval_wait_seconds",
                "How long tool calls waited for their approval decision, by decision.",
                &["decision"],
                vec![
                    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 86400.0,
                ],
            )?,
            runs_waiting_approval: gauge(
                "agentd_runs_waiting_approval",
                "Runs waiting for a tool approval now (every replica's, from the store).",
            )?,
            registry,
        })
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        // Encoding into a Vec cannot fail for well-formed families.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buffer);
        String::from_utf8(buffer).unwrap_or_default()
    }
}

/// Holds a gauge up by one for as long as it lives (open streams, running sessions).
pub struct GaugeGuard(prometheus::IntGauge);

impl GaugeGuard {
    pub fn new(gauge: prometheus::IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_renders_registered_metrics() {
        let metrics = Metrics::new().expect("metrics");
        metrics
            .http_requests_total
            .with_label_values(&["/health", "GET", "200"])
            .inc();
        metrics.sessions_active.set(2);
        let text = metrics.render();
        assert!(
            text.contains(
                r#"agentd_http_requests_total{method="GET",route="/health",status="200"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains("agentd_sessions_active 2"));
    }
}
