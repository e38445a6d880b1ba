//! The wire format of agents and runs: the run request, an agent's description, a run's status,
//! the cancel request and its answer, and the 202 of a run that is recorded but not yet
//! readable. Types only; the handlers live in the parent module.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::config::{AgentSpec, OnDisconnect};
use crate::http::wire::{ListObject, string_constant};
use crate::llm::ChatMessage;
use crate::store::RunRecord;

/// The `{agent}` of a route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct AgentPath {
    /// The agent's name.
    pub agent: String,
}

/// The `{run_id}` of a route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    /// The run's id.
    pub run_id: String,
}

/// `POST /v1/agents/{agent}/runs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRequest {
    /// The task; not empty or only white space.
    #[schema(pattern = "\\S")]
    pub prompt: String,
    /// The output format, e.g. `markdown` or `json`; the agent's own by default.
    #[serde(default)]
    #[schema(
        pattern = r"^(json|markdown|markdown\+mermaid|slack-block-kit|text|tty|pipe|sub-agent)$"
    )]
    pub format: Option<String>,
    /// The JSON schema of a `json` answer.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub schema: Option<Value>,
    /// Earlier messages, `{role, content, tool_calls?, tool_call_id?}` as OpenAI writes them.
    #[serde(default)]
    #[schema(value_type = Vec<HistoryMessage>)]
    pub history: Vec<ChatMessage>,
    /// Answer with the run's events as SSE (as does `Accept: text/event-stream`).
    #[serde(default)]
    pub stream: Option<bool>,
    /// Whether a client that leaves cancels the run; the server's `onDisconnect` by default.
    #[serde(default)]
    pub on_disconnect: Option<OnDisconnect>,
    /// Makes the submission idempotent: the same id (1 to 256 characters) joins the run it
    /// started, on every replica and for at least a day.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub request_id: Option<String>,
    /// Answer `202 {run_id, status}` at once; the run goes on with no client attached (follow
    /// it with `GET /v1/runs/{run_id}/events`). With `stream`, the events stream as usual but
    /// a client that leaves never cancels the run.
    #[serde(default)]
    pub background: Option<bool>,
    /// What this run may spend (SPEC §14): each limit applies when it is lower than the
    /// agent's; a run that reaches one ends with `exit_reason: budget_exceeded`.
    #[serde(default)]
    pub budget: Option<crate::vocabulary::budget::RunBudget>,
    /// This run's own webhook receiver, told when it ends, fails or waits for approval (SPEC
    /// §13), signed with the server's `webhookDelivery.secret`.
    #[serde(default)]
    pub webhook: Option<crate::http::webhooks::RunWebhook>,
}

/// One earlier message of `history`, as OpenAI writes them (the document's view of the runtime's
/// chat message).
#[derive(Debug, ToSchema)]
#[expect(
    dead_code,
    reason = "a schema only: history is read into the runtime's own message type"
)]
pub struct HistoryMessage {
    pub role: HistoryRole,
    /// The text; absent for an assistant message that only calls tools.
    pub content: Option<String>,
    /// An assistant message's tool calls.
    #[serde(default)]
    pub tool_calls: Vec<HistoryToolCall>,
    /// The call a `tool` message answers.
    pub tool_call_id: Option<String>,
}

/// A tool call of an earlier assistant message.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "a schema only")]
pub struct HistoryToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the JSON text the model wrote.
    pub arguments: String,
}

#[derive(Debug, ToSchema)]
#[serde(rename_all = "lowercase")]
#[expect(dead_code, reason = "a schema only")]
pub enum HistoryRole {
    System,
    User,
    Assistant,
    Tool,
}

/// `POST /v1/runs/{run_id}/cancel`; an empty body is `{"mode": "abort"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    #[serde(default)]
    pub mode: Option<CancelMode>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CancelMode {
    /// A graceful final turn.
    Stop,
    /// End now.
    Abort,
}

/// What a cancel request set going.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CancellingStatus {
    /// `abort`: the run ends now, `cancelled`.
    Cancelling,
    /// `stop`: the model's current turn finishes; an answer completes the run, otherwise no
    /// more tools run and the model gets one last turn to answer (`exit_reason: user_stop`).
    Stopping,
}
string_constant!(RunningStatus::Running = "running");

impl CancelMode {
    /// The status a cancel request in this mode answers.
    pub fn status(self) -> CancellingStatus {
        match self {
            Self::Stop => CancellingStatus::Stopping,
            Self::Abort => CancellingStatus::Cancelling,
        }
    }

    /// What this mode does, for the answer's `detail`.
    pub fn detail(self) -> &'static str {
        match self {
            Self::Stop => {
                "the model's current turn finishes; if it is an answer, the run completes with \
                 it; otherwise no more tools run and the model gets one last turn to answer \
                 with what it has (exit_reason user_stop)"
            }
            Self::Abort => "the run ends now, cancelled; its partial output is kept",
        }
    }
}

/// The 202 answer to a cancel request.
#[derive(Debug, Serialize, ToSchema)]
pub struct CancelAnswer<'a> {
    pub run_id: &'a str,
    pub mode: CancelMode,
    pub status: CancellingStatus,
    /// What happens next, in words.
    pub detail: &'static str,
}

/// The 202 answer to a background run, or to a repeated `requestId` whose first run is not
/// recorded yet.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunAccepted<'a> {
    pub run_id: &'a str,
    pub status: RunningStatus,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub object: ListObject,
    pub data: Vec<AgentDescription>,
}

/// An agent as `GET /v1/agents` describes it.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentDescription {
    pub name: String,
    pub description: String,
    /// `provider/model` targets, in the order they are tried.
    pub models: Vec<String>,
    pub tools: Vec<String>,
    /// The sub-agents it may call.
    pub agents: Vec<String>,
    pub output: AgentOutput,
    /// How a session ends.
    pub finalization: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentOutput {
    pub format: String,
    /// The JSON schema of a `json` answer, or null.
    #[schema(required)]
    pub schema: Option<Value>,
}

impl From<&AgentSpec> for AgentDescription {
    fn from(agent: &AgentSpec) -> Self {
        Self {
            name: agent.name.clone(),
            description: agent.description.clone(),
            models: agent.targets.iter().map(ToString::to_string).collect(),
            tools: agent.tools.clone(),
            agents: agent.sub_agents.clone(),
            output: AgentOutput {
                format: agent.output_format.clone(),
                schema: agent.output_schema.clone(),
            },
            finalization: format!("{:?}", agent.finalization).to_lowercase(),
        }
    }
}

/// `GET /v1/runs/{run_id}`: where a run is and, once it has finished, its whole AgentResult.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunStatus<'a> {
    pub run_id: &'a str,
    pub agent: &'a str,
    /// `queued`, `running`, `waiting_approval`, `completed`, `failed` or `cancelled`.
    pub status: &'a str,
    #[schema(required)]
    pub exit_reason: Option<&'a str>,
    #[schema(required)]
    pub success: Option<bool>,
    #[schema(required)]
    pub conversation_id: Option<&'a str>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339; null until the run finishes.
    #[schema(required)]
    pub finished_at: Option<String>,
    #[schema(required)]
    pub duration_ms: Option<i64>,
    /// The AgentResult (answer, usage, accounting, final report); null until the run finishes.
    #[schema(required, value_type = Option<Object>)]
    pub result: Option<Value>,
    /// The admin that started the run acting for its user (`key:ID`, or `admin` on a server
    /// without keys); absent when the run's owner started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub acted_by: Option<&'a str>,
}

impl<'a> RunStatus<'a> {
    /// `result` is the run's whole result, as the store assembles it.
    pub fn new(run: &'a RunRecord, result: Option<Value>) -> Self {
        Self {
            run_id: &run.id,
            agent: &run.agent,
            status: run.status.as_str(),
            exit_reason: run.exit_reason.as_deref(),
            success: run.success,
            conversation_id: run.conversation_id.as_deref(),
            created_at: run.created_at.to_rfc3339(),
            finished_at: run.finished_at.map(|t| t.to_rfc3339()),
            duration_ms: run.duration_ms,
            result,
            acted_by: run.acted_by.as_deref(),
        }
    }
}

/// `POST /v1/runs/{run_id}/budget`: the limits to put in place of those the run crossed.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRaiseRequest {
    /// Each limit given replaces the lowest of the agent's, the key's and the request's; at
    /// least one.
    #[schema(schema_with = nonempty_run_budget)]
    pub raise: crate::vocabulary::budget::RunBudget,
}

/// `RunBudget`'s schema with at least one limit, as a raise needs.
fn nonempty_run_budget() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::PartialSchema;
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::Schema;
    match crate::vocabulary::budget::RunBudget::schema() {
        RefOr::T(Schema::Object(mut object)) => {
            object.min_properties = Some(1);
            RefOr::T(Schema::Object(object))
        }
        other => other,
    }
}

/// A raise taken: the run goes on under `budget`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetRaiseAnswer<'a> {
    pub run_id: &'a str,
    pub status: RunningStatus,
    /// The limits the run now runs under.
    pub budget: crate::vocabulary::budget::RunBudget,
}
