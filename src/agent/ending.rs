//! How a run ends and how its [`AgentResult`] is assembled: the final report's status comes from
//! its source (model → `success`, agentd's synthetic report → `failure`), never from the model.
//! The [`Transcript`] is what the run accumulates for that result; recording an accounting entry
//! keeps it there and emits it. Nothing here decides when a run ends: the session does.

use std::time::Instant;

use super::SessionRequest;
use super::events::{AgentEvent, EventSink};
use crate::llm::ChatMessage;
use crate::vocabulary::result::{
    AccountingEntry, AgentResult, ExitReason, FinalReport, ReportStatus, UsageTotals,
};

/// The outcome of the turn loop, before the result is assembled.
#[derive(Debug, Clone)]
pub(super) struct Ending {
    pub exit_reason: ExitReason,
    pub success: bool,
    pub error: Option<String>,
    pub report: Option<FinalReport>,
    /// The answer reached the client while it streamed (XML final tag); it is not published
    /// again.
    pub answer_streamed: bool,
    /// A rate-limited end: how long the provider asked to wait, in seconds.
    pub retry_after_secs: Option<u64>,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Ending {
    /// A run that ended without any report (fatal error, cancellation, bad input).
    pub fn failure(exit_reason: ExitReason, error: impl Into<String>) -> Self {
        Self {
            exit_reason,
            success: false,
            error: Some(error.into()),
            report: None,
            answer_streamed: false,
            retry_after_secs: None,
        }
    }

    /// The model's own answer: a final report (tool or text) with `status: success`.
    pub fn answer(
        exit_reason: ExitReason,
        format: &str,
        content: Option<String>,
        content_json: Option<serde_json::Value>,
        metadata: Option<serde_json::Value>,
    ) -> Self {
        let report = FinalReport {
            status: ReportStatus::Success,
            format: format.to_string(),
            content,
            content_json,
            metadata,
            ts: now_ms(),
        };
        Self {
            exit_reason,
            success: true,
            error: None,
            report: Some(report),
            answer_streamed: false,
            retry_after_secs: None,
        }
    }

    /// The model called the client's tools: the run ends for the client to run them.
    pub fn client_tool_calls() -> Self {
        Self {
            exit_reason: ExitReason::ClientToolCalls,
            success: true,
            error: None,
            report: None,
            answer_streamed: false,
            retry_after_secs: None,
        }
    }

    /// agentd's synthetic failure report (turns exhausted, context overflow, stop without answer).
    pub fn synthetic_failure(
        exit_reason: ExitReason,
        format: &str,
        reason: &str,
        message: &str,
    ) -> Self {
        let report = FinalReport {
            status: ReportStatus::Failure,
            format: format.to_string(),
            content: Some(message.to_string()),
            content_json: None,
            metadata: Some(serde_json::json!({ "reason": reason })),
            ts: now_ms(),
        };
        Self {
            exit_reason,
            success: false,
            error: Some(message.to_string()),
            report: Some(report),
            answer_streamed: false,
            retry_after_secs: None,
        }
    }
}

/// Everything accumulated while the run was going.
pub(super) struct Transcript {
    pub conversation: Vec<ChatMessage>,
    pub accounting: Vec<AccountingEntry>,
    pub turns: u32,
}

impl Transcript {
    /// Keeps an accounting entry in the run's transcript and emits it.
    pub async fn record(&mut self, events: &EventSink, entry: AccountingEntry) {
        self.accounting.push(entry.clone());
        events.emit(AgentEvent::Accounting(Box::new(entry))).await;
    }
}

pub(super) fn assemble(
    request: &SessionRequest,
    started: Instant,
    transcript: Transcript,
    ending: Ending,
) -> AgentResult {
    let cost_usd = total_cost(&transcript.accounting);
    AgentResult {
        run_id: request.run_id.clone(),
        success: ending.success,
        error: ending.error,
        exit_reason: ending.exit_reason,
        final_report: ending.report,
        usage: UsageTotals::from_accounting(&transcript.accounting),
        conversation: transcript.conversation,
        accounting: transcript.accounting,
        cost_usd,
        turns: transcript.turns,
        duration_ms: started.elapsed().as_millis() as u64,
        retry_after_secs: ending.retry_after_secs,
    }
}

/// The run's cost: the sum of its LLM and tool entries' costs. Folded from `0.0`: an empty `f64` sum is
/// `-0.0`, which JSON clients would see as `"cost_usd": -0.0`.
fn total_cost(accounting: &[AccountingEntry]) -> f64 {
    accounting
        .iter()
        .filter_map(|entry| match entry {
            AccountingEntry::Llm(llm) => llm.cost_usd,
            AccountingEntry::Tool(tool) => tool.cost_usd,
        })
        .fold(0.0, |total, cost| total + cost)
}

#[cfg(test)]
mod cost_tests {
    use super::*;

    #[test]
    fn a_run_without_priced_calls_costs_positive_zero() {
        let cost = total_cost(&[]);
        assert_eq!(serde_json::to_string(&cost).expect("json"), "0.0");
    }
}
