//! What a finished run adds to the Prometheus metrics: sessions by exit reason, final reports,
//! LLM requests, tokens and cost, tool calls, retries and agentd's own overhead. Label values
//! come from configuration, never from what a model made up.

use super::Runtime;
use crate::agent::{AgentResult, ReportStatus};
use crate::vocabulary::result::{AccountingEntry, EntryStatus, LlmAccounting};

impl Runtime {
    pub(super) fn record_metrics(&self, agent: &str, result: &AgentResult) {
        let m = &self.metrics;
        m.sessions_total
            .with_label_values(&[agent, result.exit_reason.as_str()])
            .inc();
        if let Some(report) = &result.final_report {
            let status = match report.status {
                ReportStatus::Success => "success",
                ReportStatus::Failure => "failure",
            };
            m.agent
                .final_report_total
                .with_label_values(&[agent, status])
                .inc();
        }
        let mut attempts = 0u64;
        let mut upstream_ms = 0u64;
        // Sub-agents' entries are rolled in, but their time is inside the parent's tool call.
        let own = |lineage: &crate::vocabulary::result::Lineage| {
            lineage.txn_id.as_deref().is_none_or(|t| t == result.run_id)
        };
        for entry in &result.accounting {
            match entry {
                AccountingEntry::Llm(llm) => {
                    attempts += 1;
                    if own(&llm.lineage) {
                        upstream_ms += llm.latency;
                    }
                    self.record_llm_entry(agent, llm);
                }
                AccountingEntry::Tool(tool) => {
                    // A name the model made up must not become a label value.
                    if own(&tool.lineage) {
                        upstream_ms += tool.latency;
                    }
                    let made_up = tool
                        .error
                        .as_deref()
                        .is_some_and(|e| e.starts_with("unknown tool"));
                    let (server, name) = if made_up {
                        ("unknown", "unknown")
                    } else {
                        (tool.mcp_server.as_str(), tool.command.as_str())
                    };
                    let labels = [agent, server, name];
                    if tool.cached {
                        m.agent
                            .tool_cache_hits_total
                            .with_label_values(&labels)
                            .inc();
                        continue;
                    }
                    if tool.attempt.is_some_and(|attempt| attempt > 1) {
                        m.agent.tool_retries_total.with_label_values(&labels).inc();
                    }
                    m.agent
                        .tool_invocations_total
                        .with_label_values(&labels)
                        .inc();
                    m.agent
                        .tool_latency_ms
                        .with_label_values(&labels)
                        .observe(tool.latency as f64);
                    if tool.status == EntryStatus::Failed {
                        m.agent.tool_errors_total.with_label_values(&labels).inc();
                    }
                    if let Some(cost) = tool.cost_usd.filter(|cost| *cost > 0.0) {
                        m.agent
                            .tool_cost_usd_total
                            .with_label_values(&labels)
                            .inc_by(cost);
                    }
                }
            }
        }
        let overhead_ms = result.duration_ms.saturating_sub(upstream_ms);
        m.agent
            .overhead_seconds
            .with_label_values(&[agent])
            .observe(overhead_ms as f64 / 1000.0);
        // Every turn makes one first attempt; the others were retries.
        let retries = attempts.saturating_sub(u64::from(result.turns));
        if let (Some(target), true) = (
            self.agents
                .load()
                .get(agent)
                .and_then(|a| a.targets.first().cloned()),
            retries > 0,
        ) {
            m.llm_retries_total
                .with_label_values(&[agent, &target.provider, &target.model])
                .inc_by(retries);
        }
    }

    fn record_llm_entry(&self, agent: &str, llm: &LlmAccounting) {
        let m = &self.metrics;
        let labels = [agent, llm.provider.as_str(), llm.model.as_str()];
        let status = if llm.error.is_some() { "failed" } else { "ok" };
        m.llm_requests_total
            .with_label_values(&[agent, &llm.provider, &llm.model, status])
            .inc();
        m.llm_latency_ms
            .with_label_values(&labels)
            .observe(llm.latency as f64);
        m.llm_prompt_tokens_total
            .with_label_values(&labels)
            .inc_by(llm.tokens.input_tokens);
        m.llm_completion_tokens_total
            .with_label_values(&labels)
            .inc_by(llm.tokens.output_tokens);
        if let Some(cost) = llm.cost_usd.filter(|c| *c > 0.0) {
            m.agent
                .llm_cost_usd_total
                .with_label_values(&labels)
                .inc_by(cost);
        }
        if llm.error.is_some() {
            m.llm_errors_total.with_label_values(&labels).inc();
        }
    }
}
