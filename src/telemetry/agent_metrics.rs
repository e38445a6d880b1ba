//! The reference's agent metrics (SPEC §6) that describe sessions rather than HTTP: LLM cost,
//! tool invocations and cost, final reports and context-guard trips. Label values are agent, provider,
//! model and tool names from the configuration, never user input.

use prometheus::{
    CounterVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
};

use super::MetricsError;

#[derive(Clone)]
pub struct AgentMetrics {
    pub llm_cost_usd_total: CounterVec,
    pub tool_invocations_total: IntCounterVec,
    pub tool_latency_ms: HistogramVec,
    pub tool_errors_total: IntCounterVec,
    /// Tool cost in USD from `pricing.tools`.
    pub tool_cost_usd_total: CounterVec,
    /// Tool calls answered from the tool result cache (not executed).
    pub tool_cache_hits_total: IntCounterVec,
    /// Tries after the first of tool calls that got no answer (`retries`).
    pub tool_retries_total: IntCounterVec,
    pub final_report_total: IntCounterVec,
    pub context_guard_events_total: IntCounterVec,
    pub context_guard_remaining_tokens: IntGaugeVec,
    /// Time spent in agentd itself per run: duration minus upstream LLM and tool time.
    pub overhead_seconds: HistogramVec,
}

const GUARD_LABELS: &[&str] = &["agent", "provider", "model", "trigger", "outcome"];
const TOOL_LABELS: &[&str] = &["agent", "server", "tool"];

impl AgentMetrics {
    pub fn register(registry: &Registry) -> Result<Self, MetricsError> {
        let metrics = Self {
            llm_cost_usd_total: CounterVec::new(
                Opts::new(
                    "ai_agent_llm_cost_usd_total",
                    "LLM cost in USD from the pricing table or the provider.",
                ),
                &["agent", "provider", "model"],
            )?,
            tool_invocations_total: IntCounterVec::new(
                Opts::new(
                    "ai_agent_tool_invocations_total",
                    "Tool executions by agent, server and tool.",
                ),
                TOOL_LABELS,
            )?,
            tool_latency_ms: HistogramVec::new(
                HistogramOpts::new(
                    "ai_agent_tool_latency_ms",
                    "Tool execution latency in milliseconds.",
                )
                .buckets(vec![
                    1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
                    10000.0, 30000.0, 60000.0,
                ]),
                TOOL_LABELS,
            )?,
            tool_errors_total: IntCounterVec::new(
                Opts::new("ai_agent_tool_errors_total", "Failed tool executions."),
                TOOL_LABELS,
            )?,
            tool_cost_usd_total: CounterVec::new(
                Opts::new(
                    "ai_agent_tool_cost_usd_total",
                    "Tool cost in USD from pricing.tools.",
                ),
                TOOL_LABELS,
            )?,
            tool_cache_hits_total: IntCounterVec::new(
                Opts::new(
                    "ai_agent_tool_cache_hits_total",
                    "Tool calls answered from the tool result cache.",
                ),
                TOOL_LABELS,
            )?,
            tool_retries_total: IntCounterVec::new(
                Opts::new(
                    "ai_agent_tool_retries_total",
                    "Tool call tries after the first (transport failures and timeouts).",
                ),
                TOOL_LABELS,
            )?,
            final_report_total: IntCounterVec::new(
                Opts::new(
                    "ai_agent_final_report_total",
                    "Final reports by agent and status (success: the model's, failure: synthetic).",
                ),
                &["agent", "status"],
            )?,
            context_guard_events_total: IntCounterVec::new(
                Opts::new(
                    "ai_agent_context_guard_events_total",
                    "Context-guard evaluations that did not fit.",
                ),
                GUARD_LABELS,
            )?,
            context_guard_remaining_tokens: IntGaugeVec::new(
                Opts::new(
                    "ai_agent_context_guard_remaining_tokens",
                    "Tokens left under the limit at the last guard trip (negative: over).",
                ),
                GUARD_LABELS,
            )?,
            overhead_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "agentd_overhead_seconds",
                    "Time spent in agentd itself per run: duration minus upstream LLM and tool time.",
                )
                .buckets(vec![0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]),
                &["agent"],
            )?,
        };
        registry.register(Box::new(metrics.overhead_seconds.clone()))?;
        registry.register(Box::new(metrics.llm_cost_usd_total.clone()))?;
        registry.register(Box::new(metrics.tool_invocations_total.clone()))?;
        registry.register(Box::new(metrics.tool_latency_ms.clone()))?;
        registry.register(Box::new(metrics.tool_errors_total.clone()))?;
        registry.register(Box::new(metrics.tool_cost_usd_total.clone()))?;
        registry.register(Box::new(metrics.tool_cache_hits_total.clone()))?;
        registry.register(Box::new(metrics.tool_retries_total.clone()))?;
        registry.register(Box::new(metrics.final_report_total.clone()))?;
        registry.register(Box::new(metrics.context_guard_events_total.clone()))?;
        registry.register(Box::new(metrics.context_guard_remaining_tokens.clone()))?;
        Ok(metrics)
    }
}
