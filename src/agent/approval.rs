//! Tool calls that wait for a person (SPEC §8), on the session's side: what a waiting call is,
//! the decisions that end a wait, and the [`Checkpoint`] a run becomes while it waits — its whole
//! state (conversation, turn counters, accounting so far, the context guard, the XML nonce and
//! slot counter, the turn's calls and the replies already made), so the run can continue later
//! in another process exactly where it stopped.
//!
//! Holds data only: the session parks and resumes runs, the runtime stores checkpoints.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::SessionRequest;
use super::context_guard::ContextGuard;
use crate::config::agent_file::Transport;
use crate::llm::{ChatMessage, SamplingParams, ToolCall};
use crate::vocabulary::result::{AccountingEntry, AgentResult};

/// A tool call that was not executed because it waits for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub call_id: String,
    pub tool: String,
    pub server: String,
    /// The (repaired) arguments the model gave.
    pub arguments: Value,
    pub expires_at: DateTime<Utc>,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run the tool, with these arguments instead of the model's when given; `note` is the
    /// person's reason, kept with the decision and its event (the model is not told).
    Approve {
        arguments: Option<Map<String, Value>>,
        note: Option<String>,
    },
    Deny {
        reason: Option<String>,
    },
    /// Nobody decided within `approvalTimeout`: a denial.
    Expired,
}

impl Decision {
    /// `approve`, `deny` or `expired` (the `decision` of `tool.approval_decided`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Approve { .. } => "approve",
            Self::Deny { .. } => "deny",
            Self::Expired => "expired",
        }
    }

    /// What the model is told instead of the tool's result when the call did not run.
    pub fn denial_reply(&self) -> Option<String> {
        match self {
            Self::Approve { .. } => None,
            Self::Deny { reason } => Some(format!(
                "denied: {}",
                reason
                    .as_deref()
                    .filter(|r| !r.trim().is_empty())
                    .unwrap_or("by the user")
            )),
            Self::Expired => Some("denied: approval timed out".into()),
        }
    }

    /// The person's reason (a denial's, or an approval's note).
    pub fn reason(&self) -> Option<String> {
        match self {
            Self::Deny { reason } => reason.clone(),
            Self::Approve { note, .. } => note.clone(),
            Self::Expired => None,
        }
    }
}

/// The decision on one waiting call, and who made it.
#[derive(Debug, Clone, PartialEq)]
pub struct DecidedCall {
    pub call_id: String,
    pub decision: Decision,
    /// A user id, `admin`, or `agentd` (expiry).
    pub by: String,
}

/// The sampling a request put over its agent's (the numeric settings; a reasoning override
/// is not kept across a wait).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KeptSampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub repeat_penalty: Option<f64>,
    pub max_output_tokens: Option<u32>,
    /// A request's `stop`, penalties, `seed` and `logit_bias` (absent in waits stored before
    /// they were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_bias: Option<std::collections::BTreeMap<String, f64>>,
}

impl From<&SamplingParams> for KeptSampling {
    fn from(p: &SamplingParams) -> Self {
        Self {
            temperature: p.temperature,
            top_p: p.top_p,
            top_k: p.top_k,
            repeat_penalty: p.repeat_penalty,
            max_output_tokens: p.max_output_tokens,
            stop: p.stop.clone(),
            presence_penalty: p.presence_penalty,
            frequency_penalty: p.frequency_penalty,
            seed: p.seed,
            logit_bias: p.logit_bias.clone(),
        }
    }
}

impl From<&KeptSampling> for SamplingParams {
    fn from(k: &KeptSampling) -> Self {
        Self {
            temperature: k.temperature,
            top_p: k.top_p,
            top_k: k.top_k,
            repeat_penalty: k.repeat_penalty,
            max_output_tokens: k.max_output_tokens,
            stop: k.stop.clone(),
            presence_penalty: k.presence_penalty,
            frequency_penalty: k.frequency_penalty,
            seed: k.seed,
            logit_bias: k.logit_bias.clone(),
            ..Self::default()
        }
    }
}

/// The turn a run stopped in: its calls, the replies of those that ran, and those waiting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitingTurn {
    pub turn: u32,
    pub calls: Vec<ToolCall>,
    /// One per call: `None` for a waiting call.
    pub replies: Vec<Option<String>>,
    pub pending: Vec<PendingCall>,
}

/// The XML transport's state across the wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XmlCheckpoint {
    pub nonce: String,
    pub next_slot: u32,
    /// `xml` (every call a tag) rather than `xml-final`.
    pub full: bool,
}

/// Everything a waiting run needs to continue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub run_id: String,
    /// The agent's name: its spec is looked up again where the run continues.
    pub agent: String,
    pub prompt: String,
    pub conversation_id: Option<String>,
    pub format: Option<String>,
    pub schema: Option<Value>,
    pub user_id: Option<String>,
    pub transport: Option<Transport>,
    pub overrides: KeptSampling,
    /// The conversation so far (system prompt and history included).
    pub conversation: Vec<ChatMessage>,
    pub accounting: Vec<AccountingEntry>,
    pub turns: u32,
    pub max_turns: u32,
    pub forced_final: Option<String>,
    pub guard: ContextGuard,
    pub xml: Option<XmlCheckpoint>,
    pub waiting: WaitingTurn,
    /// Time the run spent running before it waited (its `duration_ms` goes on from here).
    pub elapsed_ms: u64,
    /// The id of the API key whose limits the run counts against (`auth.keys[].limits`), set
    /// by the runtime as it parks the run: whichever replica resumes it takes one of that key's
    /// run slots and adds the run's usage to the key's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_key: Option<String>,
    /// The key's and request's budget (SPEC §14), kept across the wait.
    #[serde(default)]
    pub budget: crate::vocabulary::budget::RunBudget,
    /// The limits raised while the run waited for its budget: they replace the agent's, the
    /// key's and the request's (SPEC §14, `POST /v1/runs/{id}/budget`).
    #[serde(
        default,
        skip_serializing_if = "crate::vocabulary::budget::RunBudget::is_unlimited"
    )]
    pub budget_raise: crate::vocabulary::budget::RunBudget,
    /// Set when the run waits for a raise of its budget rather than for approvals: the limit it
    /// crossed (its waiting turn then has no calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_wait: Option<crate::vocabulary::budget::BudgetExceeded>,
}

impl Checkpoint {
    /// The request the run continues under, with its agent's current spec.
    pub fn request(&self, agent: std::sync::Arc<crate::config::AgentSpec>) -> SessionRequest {
        SessionRequest {
            run_id: self.run_id.clone(),
            agent,
            prompt: self.prompt.clone(),
            history: Vec::new(),
            overrides: (&self.overrides).into(),
            conversation_id: self.conversation_id.clone(),
            format: self.format.clone(),
            schema: self.schema.clone(),
            user_id: self.user_id.clone(),
            parent: None,
            transport: self.transport,
            // Client tools are not kept across a wait: the resumed run offers the agent's own.
            client_tools: Default::default(),
            budget: self.budget,
            budget_raise: self.budget_raise,
            // The checkpoint's transcript names them; content is loaded again on resume.
            attachments: Vec::new(),
        }
    }
}

/// How a session stopped: ended with its result, or waiting for decisions.
#[derive(Debug)]
pub enum SessionEnd {
    Finished(Box<AgentResult>),
    Waiting(Box<Checkpoint>),
}
