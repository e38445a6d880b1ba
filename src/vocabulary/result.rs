//! What a session returns (SPEC §5, contract §2 and §4–6): `AgentResult`, the final report,
//! accounting entries in the contract's record format, and the exit reasons of SPEC §4.2.

use serde::{Deserialize, Serialize};

use crate::llm::{ChatMessage, Usage};
pub use crate::vocabulary::{ExitReason, RunStatus};

/// Whether the report came from the model (`success`) or was made up by agentd (`failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportStatus {
    Success,
    Failure,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalReport {
    pub status: ReportStatus,
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_json: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// Unix milliseconds when the report was captured.
    #[serde(default)]
    pub ts: i64,
}

/// Token counts in the contract's accounting field names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenCounts {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    pub total_tokens: u64,
    /// Output tokens spent reasoning (part of `outputTokens`); left out when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl From<Usage> for TokenCounts {
    fn from(u: Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_tokens: u.cached_tokens,
            total_tokens: u.total(),
            reasoning_tokens: u.reasoning_tokens,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryStatus {
    Ok,
    Failed,
}

/// Multi-agent tracing fields of every accounting entry (contract §4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lineage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_id: Option<String>,
    /// `root:child:grandchild` agent names down to this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_txn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_txn_id: Option<String>,
}

/// One LLM attempt (contract §4): emitted after every attempt, failures included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmAccounting {
    pub timestamp: i64,
    pub status: EntryStatus,
    /// Milliseconds.
    pub latency: u64,
    pub provider: String,
    pub model: String,
    pub tokens: TokenCounts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The upstream that really served a routed call (OpenRouter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Which session in a multi-agent tree produced the entry.
    #[serde(flatten)]
    pub lineage: Lineage,
}

/// One tool execution (contract §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAccounting {
    pub timestamp: i64,
    pub status: EntryStatus,
    pub latency: u64,
    pub mcp_server: String,
    pub command: String,
    pub characters_in: usize,
    pub characters_out: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Map<String, serde_json::Value>>,
    /// From `pricing.tools`; absent for unpriced tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// `true` when the output came from the tool result cache (the tool was not called).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// Which try this entry is (1 the first) for tools with `retries`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// `xml` when the call travelled through an XML tag (contract §11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Which session in a multi-agent tree produced the entry.
    #[serde(flatten)]
    pub lineage: Lineage,
}

impl ToolAccounting {
    /// The entry of one finished call, timestamped now: `Failed` when it carries an error.
    pub fn finished(
        server: impl Into<String>,
        command: impl Into<String>,
        latency: u64,
        characters_in: usize,
        characters_out: usize,
        error: Option<String>,
        lineage: Lineage,
    ) -> Self {
        Self {
            timestamp: chrono::Utc::now().timestamp_millis(),
            status: if error.is_some() {
                EntryStatus::Failed
            } else {
                EntryStatus::Ok
            },
            latency,
            mcp_server: server.into(),
            command: command.into(),
            characters_in,
            characters_out,
            error,
            details: None,
            cost_usd: None,
            cached: false,
            attempt: None,
            source: None,
            lineage,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum AccountingEntry {
    Llm(LlmAccounting),
    Tool(ToolAccounting),
}

/// Usage totals in the snake_case shape of `run.finished` and `AgentResult`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    pub total_tokens: u64,
}

impl UsageTotals {
    /// Sums the LLM entries of an accounting list.
    pub fn from_accounting(entries: &[AccountingEntry]) -> Self {
        let mut totals = Self::default();
        for entry in entries {
            if let AccountingEntry::Llm(llm) = entry {
                totals.input_tokens += llm.tokens.input_tokens;
                totals.output_tokens += llm.tokens.output_tokens;
                totals.cached_tokens += llm.tokens.cached_tokens;
                totals.total_tokens += llm.tokens.total_tokens;
            }
        }
        totals
    }
}

/// The `run.finished` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub status: RunStatus,
    pub success: bool,
    pub exit_reason: ExitReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub usage: UsageTotals,
    pub cost_usd: f64,
    pub turns: u32,
    pub duration_ms: u64,
    /// For a run that ended `rate_limited`: how long the provider asked to wait, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
    /// For a run that ended `client_tool_calls`: the calls its client is to run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tool_calls: Vec<crate::llm::ToolCall>,
}

/// Everything a session did (SPEC §5); returned even when the run failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    pub run_id: String,
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub exit_reason: ExitReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_report: Option<FinalReport>,
    pub conversation: Vec<ChatMessage>,
    pub accounting: Vec<AccountingEntry>,
    pub usage: UsageTotals,
    pub cost_usd: f64,
    pub turns: u32,
    pub duration_ms: u64,
    /// For a run that ended `rate_limited`: how long the provider asked to wait, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
}

impl AgentResult {
    /// A run that ended with `error` before its session produced anything.
    pub fn ended_without_session(
        run_id: &str,
        exit_reason: ExitReason,
        error: String,
        duration_ms: u64,
    ) -> Self {
        Self {
            run_id: run_id.to_string(),
            success: false,
            error: Some(error),
            exit_reason,
            final_report: None,
            conversation: Vec::new(),
            accounting: Vec::new(),
            usage: UsageTotals::default(),
            cost_usd: 0.0,
            turns: 0,
            duration_ms,
            retry_after_secs: None,
        }
    }

    pub fn status(&self) -> RunStatus {
        match (self.success, self.exit_reason) {
            (_, ExitReason::Cancelled | ExitReason::ShuttingDown) => RunStatus::Cancelled,
            (true, _) => RunStatus::Completed,
            (false, _) => RunStatus::Failed,
        }
    }

    pub fn summary(&self) -> RunSummary {
        RunSummary {
            status: self.status(),
            success: self.success,
            exit_reason: self.exit_reason,
            error: self.error.clone(),
            usage: self.usage,
            cost_usd: self.cost_usd,
            turns: self.turns,
            duration_ms: self.duration_ms,
            retry_after_secs: self.retry_after_secs,
            client_tool_calls: self.client_tool_calls(),
        }
    }

    /// The calls a run that ended `client_tool_calls` leaves for its client (none otherwise).
    pub fn client_tool_calls(&self) -> Vec<crate::llm::ToolCall> {
        if self.exit_reason != ExitReason::ClientToolCalls {
            return Vec::new();
        }
        unanswered_calls(&self.conversation)
    }

    /// The answer text: `content_json` as JSON text for json reports, else `content`.
    pub fn answer_text(&self) -> String {
        match &self.final_report {
            Some(FinalReport {
                content_json: Some(json),
                ..
            }) => json.to_string(),
            Some(FinalReport {
                content: Some(text),
                ..
            }) => text.clone(),
            _ => String::new(),
        }
    }
}

/// The calls of the conversation's last assistant message that no `tool` message answers yet:
/// what a run that ended `client_tool_calls` leaves for its client.
pub fn unanswered_calls(conversation: &[ChatMessage]) -> Vec<crate::llm::ToolCall> {
    let Some(position) = conversation
        .iter()
        .rposition(|m| m.role == crate::llm::Role::Assistant)
    else {
        return Vec::new();
    };
    let answered: Vec<&str> = conversation[position + 1..]
        .iter()
        .filter(|m| m.role == crate::llm::Role::Tool)
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    conversation[position]
        .tool_calls
        .iter()
        .filter(|call| !answered.contains(&call.id.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounting_entries_use_contract_field_names() {
        let entry = AccountingEntry::Llm(LlmAccounting {
            timestamp: 1,
            status: EntryStatus::Ok,
            latency: 5,
            provider: "p".into(),
            model: "m".into(),
            tokens: TokenCounts {
                input_tokens: 3,
                output_tokens: 2,
                cached_tokens: 0,
                total_tokens: 5,
                reasoning_tokens: 0,
            },
            cost_usd: None,
            actual_provider: None,
            actual_model: None,
            stop_reason: Some("stop".into()),
            error: None,
            lineage: Lineage {
                call_path: Some("root:child".into()),
                ..Lineage::default()
            },
        });
        let json = serde_json::to_value(&entry).expect("json");
        assert_eq!(json["type"], "llm");
        assert_eq!(json["tokens"]["inputTokens"], 3);
        assert_eq!(json["tokens"]["totalTokens"], 5);
        assert_eq!(json["stopReason"], "stop");
        assert!(json.get("error").is_none());
        assert_eq!(
            json["callPath"], "root:child",
            "lineage fields sit at the top level"
        );
        assert!(json.get("lineage").is_none());
    }

    #[test]
    fn exit_reasons_round_trip_as_snake_case() {
        assert_eq!(
            serde_json::to_value(ExitReason::MaxTurns).expect("json"),
            "max_turns"
        );
        assert_eq!(
            ExitReason::parse("auth_failure"),
            Some(ExitReason::AuthFailure)
        );
        assert_eq!(ExitReason::parse("nope"), None);
        assert_eq!(ExitReason::NoLlmResponse.as_str(), "no_llm_response");
    }
}
