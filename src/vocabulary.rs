//! The run's vocabulary (SPEC §4.2, §5, §14): its events ([`events`]), what a run returns and how
//! it is accounted ([`result`]), its budgets ([`budget`]), its attachments, why it ended and where
//! it stands. The store, the cache, the limits, the agent and every headend speak these typed words
//! (the store keeps their names as text). It depends on nothing above it: only on the model's
//! message type (`llm::ChatMessage`, which a result's conversation holds) and `json_text`.

use serde::{Deserialize, Serialize};

pub mod attachment;
pub mod budget;
pub mod busy;
pub mod events;
pub mod result;

pub use attachment::{Attachment, AttachmentKind};
pub use busy::BusyPolicy;
pub use events::{AgentEvent, RunEvent};

/// Why a run ended (SPEC §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    FinalAnswer,
    TextFallback,
    Cached,
    MaxTurns,
    ContextLimit,
    UserStop,
    EmptyInput,
    Cancelled,
    AuthFailure,
    QuotaExceeded,
    RateLimited,
    LlmError,
    NoLlmResponse,
    ConfigError,
    InternalError,
    /// The process running it stopped (killed, lost power or network); another ended it.
    OwnerLost,
    /// The server shut down (its drain time ran out) before the run ended.
    ShuttingDown,
    /// The model called tools the client brought (SPEC §9.2); the client runs them and sends
    /// their results in its next request.
    ClientToolCalls,
    /// A model response passed the agent's `llmResponseMaxBytes`.
    OutputTooLarge,
    /// A json run's answer was text that does not parse or does not fit the schema.
    SchemaValidationFailed,
    /// The run reached its budget (SPEC §14) with `onBudget: fail`.
    BudgetExceeded,
}

impl ExitReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::FinalAnswer => "final_answer",
            Self::TextFallback => "text_fallback",
            Self::Cached => "cached",
            Self::MaxTurns => "max_turns",
            Self::ContextLimit => "context_limit",
            Self::UserStop => "user_stop",
            Self::EmptyInput => "empty_input",
            Self::Cancelled => "cancelled",
            Self::AuthFailure => "auth_failure",
            Self::QuotaExceeded => "quota_exceeded",
            Self::RateLimited => "rate_limited",
            Self::LlmError => "llm_error",
            Self::NoLlmResponse => "no_llm_response",
            Self::ConfigError => "config_error",
            Self::InternalError => "internal_error",
            Self::OwnerLost => "owner_lost",
            Self::ShuttingDown => "shutting_down",
            Self::ClientToolCalls => "client_tool_calls",
            Self::OutputTooLarge => "output_too_large",
            Self::SchemaValidationFailed => "schema_validation_failed",
            Self::BudgetExceeded => "budget_exceeded",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(text.to_string())).ok()
    }
}

/// Where a run stands (SPEC §4.2, `GET /v1/runs/{id}`): `queued`, `running`,
/// `waiting_approval` or `waiting_budget` (SPEC §14), then one of the ends `completed`, `failed`,
/// `cancelled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "TEXT", rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    WaitingApproval,
    WaitingBudget,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    /// The name the API and the store use.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::WaitingApproval => "waiting_approval",
            Self::WaitingBudget => "waiting_budget",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status named `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(text.to_string())).ok()
    }

    /// Every status, in a run's order.
    pub const ALL: [RunStatus; 7] = [
        Self::Queued,
        Self::Running,
        Self::WaitingApproval,
        Self::WaitingBudget,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The statuses of a run that has not ended: one in progress or waiting.
    pub const NOT_ENDED: [RunStatus; 4] = [
        Self::Queued,
        Self::Running,
        Self::WaitingApproval,
        Self::WaitingBudget,
    ];

    /// Whether the run is parked in the store, waiting for a person (a decision or a raise).
    pub fn is_waiting(&self) -> bool {
        matches!(self, Self::WaitingApproval | Self::WaitingBudget)
    }

    /// Whether the run has ended (`completed`, `failed` or `cancelled`).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_and_exit_reason_keeps_its_name() {
        for status in [
            RunStatus::Queued,
            RunStatus::Running,
            RunStatus::WaitingApproval,
            RunStatus::WaitingBudget,
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ] {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
            assert_eq!(
                serde_json::to_value(status).ok(),
                Some(status.as_str().into())
            );
        }
        assert_eq!(RunStatus::parse("paused"), None);
        assert_eq!(
            ExitReason::parse("schema_validation_failed"),
            Some(ExitReason::SchemaValidationFailed)
        );
    }
}
