//! The OpenTelemetry GenAI semantic conventions: the `invoke_agent {agent}`, `chat {model}` and
//! `execute_tool {tool}` spans with their `gen_ai.*` attributes, the GenAI client metrics
//! (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`), and W3C trace context
//! (`traceparent`) read from HTTP headers and MCP `_meta` and written into MCP `_meta`.
//!
//! Spans are `tracing` spans (their log names stay `session`, `llm`, `tool`); `otel.name`
//! gives the exported name and, like the attributes, is set only when exporting
//! ([`name_for_export`]), so log lines do not grow and nothing is formatted for them. Nothing
//! here costs anything when no exporter is configured.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, MeterProvider};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::{Map, Value};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::llm::Usage;

/// Bucket boundaries the conventions recommend for `gen_ai.client.token.usage`.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// Bucket boundaries the conventions recommend for `gen_ai.client.operation.duration` (s).
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// The `gen_ai.operation.name` values agentd reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    InvokeAgent,
    Chat,
    ExecuteTool,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvokeAgent => "invoke_agent",
            Self::Chat => "chat",
            Self::ExecuteTool => "execute_tool",
        }
    }
}

struct Instruments {
    token_usage: Histogram<u64>,
    operation_duration: Histogram<f64>,
}

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Creates the GenAI metrics on `provider` (once per process) and says whether message
/// content goes on spans.
pub(super) fn install(provider: &impl MeterProvider, capture_content: bool) {
    let meter = provider.meter("agentd");
    let _ = INSTRUMENTS.set(Instruments {
        token_usage: meter
            .u64_histogram("gen_ai.client.token.usage")
            .with_unit("{token}")
            .with_description("Number of input and output tokens used.")
            .with_boundaries(TOKEN_BUCKETS.to_vec())
            .build(),
        operation_duration: meter
            .f64_histogram("gen_ai.client.operation.duration")
            .with_unit("s")
            .with_description("GenAI operation duration.")
            .with_boundaries(DURATION_BUCKETS.to_vec())
            .build(),
    });
    CAPTURE_CONTENT.store(capture_content, Ordering::Relaxed);
    EXPORTING.store(true, Ordering::Relaxed);
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
}

fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Gives `span` its exported name and kind (`otel.name`, `otel.kind`, declared
/// `field::Empty`) when traces are exported; otherwise nothing is formatted and log lines do
/// not carry them.
pub fn name_for_export(span: &Span, name: std::fmt::Arguments<'_>, kind: &'static str) {
    if exporting() {
        span.record("otel.name", tracing::field::display(name));
        span.record("otel.kind", kind);
    }
}

/// Whether `chat` spans carry message content (`telemetry.otlp.captureContent`).
pub fn capture_content() -> bool {
    exporting() && CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// The `session` span's GenAI attributes: `invoke_agent {agent}`.
pub fn describe_agent(span: &Span, agent: &str, conversation_id: Option<&str>) {
    if !exporting() {
        return;
    }
    span.set_attribute("gen_ai.operation.name", Operation::InvokeAgent.as_str());
    span.set_attribute("gen_ai.provider.name", "agentd");
    span.set_attribute("gen_ai.agent.name", agent.to_string());
    if let Some(id) = conversation_id {
        span.set_attribute("gen_ai.conversation.id", id.to_string());
    }
}

/// What a finished agent run used, on its `invoke_agent` span.
pub fn record_agent_usage(span: &Span, input: u64, output: u64, cached: u64) {
    if !exporting() {
        return;
    }
    set_u64(span, "gen_ai.usage.input_tokens", input);
    set_u64(span, "gen_ai.usage.output_tokens", output);
    set_u64(span, "gen_ai.usage.cache_read.input_tokens", cached);
}

/// The `llm` span of one model call: `chat {model}`.
///
/// Without an exporter the span is at `debug` (disabled by the default filter): a log line
/// inside the call still carries the session's fields, and a request does not pay for a span
/// nobody reads. `RUST_LOG=debug` shows it.
pub fn chat_span(provider: &str, model: &str) -> Span {
    if !exporting() {
        return tracing::debug_span!("llm", ai.llm.provider = provider, ai.llm.model = model);
    }
    let span = tracing::info_span!(
        "llm",
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
        ai.llm.provider = provider,
        ai.llm.model = model,
    );
    name_for_export(&span, format_args!("chat {model}"), "client");
    span.set_attribute("gen_ai.operation.name", Operation::Chat.as_str());
    span.set_attribute("gen_ai.provider.name", provider.to_string());
    span.set_attribute("gen_ai.request.model", model.to_string());
    span
}

/// The span of one turn of a session: at `info` when traces are exported, else at `debug`
/// (see [`chat_span`]).
pub fn turn_span(turn: u32, is_final: bool) -> Span {
    if exporting() {
        tracing::info_span!("turn", ai.turn = turn, ai.turn.is_final = is_final)
    } else {
        tracing::debug_span!("turn", ai.turn = turn, ai.turn.is_final = is_final)
    }
}

/// One finished model call: what it used, on its span and in the GenAI metrics.
pub struct ChatOutcome<'a> {
    pub provider: &'a str,
    pub request_model: &'a str,
    /// The model that answered, when the provider said.
    pub response_model: Option<&'a str>,
    pub usage: Option<Usage>,
    pub duration: Duration,
    /// `error.type` of a failed call.
    pub error: Option<&'static str>,
}

/// Records `outcome` on `span` (the call's `chat` span) and in the metrics.
pub fn record_chat(span: &Span, outcome: &ChatOutcome<'_>) {
    if !exporting() {
        return;
    }
    let response_model = outcome.response_model.unwrap_or(outcome.request_model);
    span.set_attribute("gen_ai.response.model", response_model.to_string());
    if let Some(usage) = outcome.usage {
        set_u64(span, "gen_ai.usage.input_tokens", usage.input_tokens);
        set_u64(span, "gen_ai.usage.output_tokens", usage.output_tokens);
        set_u64(
            span,
            "gen_ai.usage.cache_read.input_tokens",
            usage.cached_tokens,
        );
        set_u64(
            span,
            "gen_ai.usage.cache_creation.input_tokens",
            usage.cache_write_tokens,
        );
        set_u64(
            span,
            "gen_ai.usage.reasoning.output_tokens",
            usage.reasoning_tokens,
        );
    }
    if let Some(error) = outcome.error {
        span.set_attribute("error.type", error);
    }
    record_chat_metrics(outcome, response_model);
}

fn record_chat_metrics(outcome: &ChatOutcome<'_>, response_model: &str) {
    let Some(instruments) = INSTRUMENTS.get() else {
        return;
    };
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", Operation::Chat.as_str()),
        KeyValue::new("gen_ai.provider.name", outcome.provider.to_string()),
        KeyValue::new("gen_ai.request.model", outcome.request_model.to_string()),
        KeyValue::new("gen_ai.response.model", response_model.to_string()),
    ];
    if let Some(error) = outcome.error {
        attributes.push(KeyValue::new("error.type", error));
    }
    instruments
        .operation_duration
        .record(outcome.duration.as_secs_f64(), &attributes);
    let Some(usage) = outcome.usage else {
        return;
    };
    for (kind, tokens) in [
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
    ] {
        let mut with_type = attributes.clone();
        with_type.push(KeyValue::new("gen_ai.token.type", kind));
        instruments.token_usage.record(tokens, &with_type);
    }
}

/// The messages sent to a model, on its span, when content capture is on.
pub fn record_chat_input(span: &Span, input: &impl serde::Serialize) {
    if !capture_content() {
        return;
    }
    if let Ok(text) = serde_json::to_string(input) {
        span.set_attribute("gen_ai.input.messages", text);
    }
}

/// The model's answer, on its span, when content capture is on.
pub fn record_chat_output(span: &Span, output: &str) {
    if capture_content() {
        span.set_attribute("gen_ai.output.messages", output.to_string());
    }
}

/// The `tool` span of one tool call: `execute_tool {tool}`.
pub fn tool_span(tool: &str, server: &str, call_id: &str) -> Span {
    let span = tracing::info_span!(
        "tool",
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
        ai.tool.name = tool,
        ai.tool.server = server,
    );
    if exporting() {
        name_for_export(&span, format_args!("execute_tool {tool}"), "internal");
        span.set_attribute("gen_ai.operation.name", Operation::ExecuteTool.as_str());
        span.set_attribute("gen_ai.tool.name", tool.to_string());
        span.set_attribute("gen_ai.tool.call.id", call_id.to_string());
        span.set_attribute("gen_ai.tool.type", "function");
    }
    span
}

fn set_u64(span: &Span, key: &'static str, value: u64) {
    span.set_attribute(key, i64::try_from(value).unwrap_or(i64::MAX));
}

/// The span of one MCP request this server answers (the conventions' MCP server spans):
/// `{method} {target}`, with `mcp.method.name`, the protocol version and, for `tools/call`, the
/// tool (here an agent) as `gen_ai.tool.name`. The trace context in the request's `_meta` is
/// its parent; without one it is a child of the HTTP request's span.
pub fn mcp_server_span(
    method: &str,
    target: Option<&str>,
    protocol_version: Option<&str>,
    meta: Option<&Map<String, Value>>,
) -> Span {
    let name = match target {
        Some(target) => format!("{method} {target}"),
        None => method.to_string(),
    };
    let span = tracing::info_span!("mcp", otel.name = %name, otel.kind = "server");
    if !exporting() {
        return span;
    }
    span.set_attribute("mcp.method.name", method.to_string());
    if let Some(version) = protocol_version {
        span.set_attribute("mcp.protocol.version", version.to_string());
    }
    if method == "tools/call"
        && let Some(tool) = target
    {
        span.set_attribute("gen_ai.operation.name", Operation::ExecuteTool.as_str());
        span.set_attribute("gen_ai.tool.name", tool.to_string());
    }
    if let Some(meta) = meta {
        adopt_meta_parent(&span, meta);
    }
    span
}

/// The span of one A2A JSON-RPC request this server answers: `{method} {agent}` with the RPC
/// conventions' `rpc.system` (`jsonrpc`) and `rpc.method`, and the agent as `gen_ai.agent.name`.
pub fn a2a_server_span(method: &str, agent: &str) -> Span {
    let span = tracing::info_span!(
        "a2a",
        otel.name = %format_args!("{method} {agent}"),
        otel.kind = "server",
    );
    if exporting() {
        span.set_attribute("rpc.system", "jsonrpc");
        span.set_attribute("rpc.service", "a2a");
        span.set_attribute("rpc.method", method.to_string());
        span.set_attribute("gen_ai.agent.name", agent.to_string());
    }
    span
}

/// Makes the W3C trace context in `headers` (`traceparent`, `tracestate`) the parent of `span`.
pub fn adopt_http_parent(span: &Span, headers: &axum::http::HeaderMap) {
    if !exporting() || !headers.contains_key("traceparent") {
        return;
    }
    let parent =
        TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    let _ = span.set_parent(parent);
}

/// Makes the trace context in an MCP request's `_meta` (`traceparent`, `tracestate`) the
/// parent of `span`.
pub fn adopt_meta_parent(span: &Span, meta: &Map<String, Value>) {
    if !exporting() || !meta.contains_key("traceparent") {
        return;
    }
    let carrier: std::collections::HashMap<String, String> = ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|key| {
            let value = meta.get(key)?.as_str()?;
            Some((key.to_string(), value.to_string()))
        })
        .collect();
    let parent = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(parent);
}

/// The current span's trace context as `_meta` entries (`traceparent`, `tracestate`) for an
/// outgoing MCP request; empty when nothing is exported.
pub fn current_meta() -> Map<String, Value> {
    let mut meta = Map::new();
    if !exporting() {
        return meta;
    }
    let mut carrier = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(&Span::current().context(), &mut carrier);
    for (key, value) in carrier {
        meta.insert(key, Value::String(value));
    }
    meta
}
