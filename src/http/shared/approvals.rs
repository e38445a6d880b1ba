//! Answers to tool approvals (SPEC §8) as every headend takes them: the decision body of the
//! approvals route, the waiting calls as listed, who decided, and the runtime's refusals of a
//! wait's answers as each headend's error (Responses `mcp_approval_response` items, AG-UI
//! `resume` entries, the runs API's decision route).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::agent::approval::Decision;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::wire::ListObject;
use crate::runtime::{ApprovalError, WaitAnswerError};
use crate::store::ApprovalRecord;

/// The longest `reason` kept with a denial (the model reads it).
pub const MAX_REASON_CHARS: usize = 4096;

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionKind {
    Approve,
    Deny,
}

/// `POST /v1/runs/{run_id}/approvals/{call_id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    pub decision: DecisionKind,
    /// With `approve`: the arguments the tool runs with instead of the model's; they must fit
    /// the tool's schema. Ignored with `deny`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Map<String, Value>>,
    /// Why: with `deny`, what the model is told (`denied: <reason>`; "by the user" when
    /// absent); with `approve`, a note kept with the decision and its event.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// One waiting (or decided) tool call.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalView {
    pub run_id: String,
    pub call_id: String,
    pub agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    pub tool: String,
    pub server: String,
    #[schema(value_type = Object)]
    pub arguments: Value,
    /// RFC 3339.
    pub requested_at: String,
    /// RFC 3339: when the wait ends as `expired`.
    pub expires_at: String,
    /// `approve`, `deny`, `expired`, `cancelled`; absent while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub arguments_edited: Option<Value>,
}

impl From<ApprovalRecord> for ApprovalView {
    fn from(a: ApprovalRecord) -> Self {
        let time = |t: chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        Self {
            run_id: a.run_id,
            call_id: a.call_id,
            agent: a.agent,
            user_id: a.user_id,
            tool: a.tool,
            server: a.server,
            arguments: a.arguments,
            requested_at: time(a.requested_at),
            expires_at: time(a.expires_at),
            decision: a.decision,
            decided_by: a.decided_by,
            reason: a.reason,
            arguments_edited: a.edited_arguments,
        }
    }
}

/// A list of waiting calls.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalList {
    pub object: ListObject,
    pub data: Vec<ApprovalView>,
}

impl ApprovalList {
    pub fn of(approvals: Vec<ApprovalRecord>) -> Self {
        Self {
            object: ListObject::List,
            data: approvals.into_iter().map(Into::into).collect(),
        }
    }
}

/// Who decided, as `tool.approval_decided` names them: the user, else the key.
pub fn decider(caller: &Caller) -> String {
    caller.decider()
}

pub fn decision_of(request: ApprovalRequest) -> Result<Decision, ApiError> {
    if let Some(reason) = &request.reason
        && reason.chars().count() > MAX_REASON_CHARS
    {
        return Err(ApiError::invalid_request(format!(
            "`reason` is at most {MAX_REASON_CHARS} characters"
        ))
        .with_param("reason"));
    }
    Ok(match request.decision {
        DecisionKind::Approve => Decision::Approve {
            arguments: request.arguments,
            note: request.reason,
        },
        DecisionKind::Deny => Decision::Deny {
            reason: request.reason,
        },
    })
}

impl From<ApprovalError> for ApiError {
    fn from(error: ApprovalError) -> Self {
        match error {
            ApprovalError::CallNotFound { .. } => ApiError::not_found(error.to_string()),
            ApprovalError::AlreadyDecided { .. } | ApprovalError::Expired { .. } => {
                ApiError::conflict(error.to_string())
            }
            ApprovalError::InvalidArguments { .. } => {
                ApiError::invalid_request(error.to_string()).with_param("arguments")
            }
            ApprovalError::Store(error) => ApiError::store(error),
        }
    }
}

/// Where a headend that answers a whole wait at once keeps what an error names.
pub struct WaitAnswerParams<'a> {
    /// The field of the answer at an index (`input[2].approval_request_id`).
    pub answer: &'a dyn Fn(usize) -> String,
    /// The field of the edited arguments of the answer at an index.
    pub arguments: &'a dyn Fn(usize) -> String,
    /// The field to name when a waiting call has no answer (`input`, `resume`).
    pub unanswered: &'static str,
    /// The id the client knows a call by.
    pub client_id: &'a dyn Fn(&str) -> String,
}

/// The runtime's refusal of a wait's answers as the headend's error: an answer naming no
/// waiting call (or answering one twice, or a call left out) is a 400, a call already decided
/// or expired a 409, as on the decision route.
pub fn wait_answer_error(error: WaitAnswerError, params: &WaitAnswerParams<'_>) -> ApiError {
    let message = |call_id: &str, text: &str| format!("`{}` {text}", (params.client_id)(call_id));
    match error {
        WaitAnswerError::NotWaiting { index, call_id } => ApiError::invalid_request(message(
            &call_id,
            "matches no tool call waiting for approval",
        ))
        .with_param((params.answer)(index)),
        WaitAnswerError::Twice { index, call_id } => {
            ApiError::invalid_request(message(&call_id, "is answered twice"))
                .with_param((params.answer)(index))
        }
        WaitAnswerError::AlreadyDecided {
            index,
            call_id,
            decision,
        } => ApiError::conflict(message(
            &call_id,
            &format!("was already decided ({decision})"),
        ))
        .with_param((params.answer)(index)),
        WaitAnswerError::Unanswered { call_id } => ApiError::invalid_request(message(
            &call_id,
            "waits too and has no answer: answer every call of the wait together",
        ))
        .with_param(params.unanswered),
        WaitAnswerError::Decision { index, source } => match source {
            ApprovalError::CallNotFound { call_id, .. } => ApiError::invalid_request(message(
                &call_id,
                "matches no tool call waiting for approval",
            ))
            .with_param((params.answer)(index)),
            ApprovalError::InvalidArguments { .. } => {
                ApiError::from(source).with_param((params.arguments)(index))
            }
            other => ApiError::from(other).with_param((params.answer)(index)),
        },
        WaitAnswerError::Store(error) => ApiError::store(error),
    }
}
