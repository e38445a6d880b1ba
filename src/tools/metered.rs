//! Records `ai_agent_tool_*` metrics around one agent's view of a tool provider. Labels stay
//! bounded: the agent and server come from the configuration and the tool label is a name the
//! provider lists, or `unknown` for anything the model made up.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::time::Instant;

use super::{ToolOutcome, ToolProvider};
use crate::llm::ToolDefinition;
use crate::telemetry::Metrics;

/// The tool label of a name the provider does not list.
const UNKNOWN_TOOL: &str = "unknown";

/// A provider whose calls are counted and timed for one agent.
pub struct Metered {
    agent: String,
    inner: Arc<dyn ToolProvider>,
    metrics: Metrics,
}

impl Metered {
    pub fn new(agent: &str, inner: Arc<dyn ToolProvider>, metrics: Metrics) -> Self {
        Self {
            agent: agent.to_string(),
            inner,
            metrics,
        }
    }
}

#[async_trait]
impl ToolProvider for Metered {
    fn namespace(&self) -> &str {
        self.inner.namespace()
    }

    async fn list_tools(&self) -> Vec<ToolDefinition> {
        self.inner.list_tools().await
    }

    async fn call(&self, name: &str, arguments: Value, timeout: Duration) -> ToolOutcome {
        let qualified = format!("{}__{name}", self.inner.namespace());
        let known = self
            .inner
            .list_tools()
            .await
            .iter()
            .any(|d| d.name == qualified);
        let mut record = Invocation {
            labels: [
                self.agent.clone(),
                self.inner.namespace().to_string(),
                if known { name } else { UNKNOWN_TOOL }.to_string(),
            ],
            metrics: &self.metrics,
            started: Instant::now(),
            failed: None,
        };
        let outcome = self.inner.call(name, arguments, timeout).await;
        record.failed = Some(matches!(outcome, ToolOutcome::Failed(_)));
        outcome
    }
}

/// Records one call when dropped; a call abandoned midway (the session's own timeout or an
/// abort dropped it) counts as failed.
struct Invocation<'a> {
    labels: [String; 3],
    metrics: &'a Metrics,
    started: Instant,
    failed: Option<bool>,
}

impl Drop for Invocation<'_> {
    fn drop(&mut self) {
        let failed = self.failed.unwrap_or(true);
        let [agent, server, tool] = &self.labels;
        let labels = [agent.as_str(), server.as_str(), tool.as_str()];
        let status = if failed { "failed" } else { "ok" };
        self.metrics
            .tool_invocations_total
            .with_label_values(&[agent.as_str(), server.as_str(), tool.as_str(), status])
            .inc();
        self.metrics
            .tool_latency_ms
            .with_label_values(&labels)
            .observe(self.started.elapsed().as_secs_f64() * 1000.0);
        if failed {
            self.metrics
                .tool_errors_total
                .with_label_values(&labels)
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Slow;

    #[async_trait]
    impl ToolProvider for Slow {
        fn namespace(&self) -> &str {
            "srv"
        }
        async fn list_tools(&self) -> Vec<ToolDefinition> {
            vec![ToolDefinition {
                name: "srv__nap".into(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
            }]
        }
        async fn call(&self, name: &str, _arguments: Value, _timeout: Duration) -> ToolOutcome {
            if name == "nap" {
                tokio::time::sleep(Duration::from_secs(10)).await;
                return ToolOutcome::Ok("rested".into());
            }
            ToolOutcome::Failed("no such tool".into())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn calls_are_counted_by_known_tool_and_abandoned_calls_fail() {
        let metrics = Metrics::new().expect("metrics");
        let metered = Metered::new("bot", Arc::new(Slow), metrics.clone());
        let timeout = Duration::from_secs(60);
        assert_eq!(
            metered.call("nap", Value::Null, timeout).await,
            ToolOutcome::Ok("rested".into())
        );
        metered.call("made_up", Value::Null, timeout).await;
        let abandoned = tokio::time::timeout(
            Duration::from_secs(1),
            metered.call("nap", Value::Null, timeout),
        );
        assert!(abandoned.await.is_err());
        let text = metrics.render();
        for line in [
            r#"ai_agent_tool_invocations_total{agent="bot",server="srv",status="ok",tool="nap"} 1"#,
            r#"ai_agent_tool_invocations_total{agent="bot",server="srv",status="failed",tool="nap"} 1"#,
            r#"ai_agent_tool_invocations_total{agent="bot",server="srv",status="failed",tool="unknown"} 1"#,
            r#"ai_agent_tool_errors_total{agent="bot",server="srv",tool="nap"} 1"#,
            r#"ai_agent_tool_latency_ms_count{agent="bot",server="srv",tool="nap"} 2"#,
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
        assert!(
            !text.contains("made_up"),
            "model-made names never become labels"
        );
    }
}
