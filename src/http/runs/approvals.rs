//! Tool approvals over HTTP (SPEC §8): `POST /v1/runs/{run_id}/approvals/{call_id}` decides a
//! waiting call (the run's user or an admin, on any replica), `GET /v1/runs/{run_id}/approvals`
//! lists a run's waiting calls. Only translates: the decision, its checks and the resumed run
//! are [`Runtime::decide_approval`]'s.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;

use super::visible_run;
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::http::shared::approvals::{
    ApprovalList, ApprovalRequest, ApprovalView, decider, decision_of,
};
use crate::runtime::Runtime;

/// The `{run_id}` and `{call_id}` of a decision.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ApprovalPath {
    /// The run's id.
    pub run_id: String,
    /// The waiting tool call's id (`call_id` of `tool.approval_requested`).
    pub call_id: String,
}

#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/approvals/{call_id}",
    tag = "runs",
    summary = "Approve (optionally with edited arguments) or deny a tool call waiting for approval",
    params(ApprovalPath),
    request_body = ApprovalRequest,
    responses(
        (status = 200, description = "The decision is recorded; the run goes on (on this replica, or the one that took it)", body = ApprovalView),
        (status = "default", description = "An error: 404 unknown run or call, 403 another user's run, 409 already decided or expired, 400 edited arguments that do not fit the tool's schema", body = ErrorBody),
    ),
)]
pub async fn decide_approval(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ApprovalPath { run_id, call_id }): ApiPath<ApprovalPath>,
    ApiJson(request): ApiJson<ApprovalRequest>,
) -> Result<Response, ApiError> {
    visible_run(&runtime, &caller, &run_id).await?;
    let decision = decision_of(request)?;
    let decided = runtime
        .decide_approval(&run_id, &call_id, decision, &decider(&caller))
        .await?;
    Ok(axum::Json(ApprovalView::from(decided)).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}/approvals",
    tag = "runs",
    summary = "The tool calls of a run waiting for approval",
    params(super::wire::RunPath),
    responses(
        (status = 200, description = "The waiting calls, oldest first", body = ApprovalList),
        ErrorBody,
    ),
)]
pub async fn list_run_approvals(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(super::wire::RunPath { run_id }): ApiPath<super::wire::RunPath>,
) -> Result<Response, ApiError> {
    visible_run(&runtime, &caller, &run_id).await?;
    let pending = runtime
        .pending_approvals(&run_id)
        .await
        .map_err(ApiError::store)?;
    Ok(axum::Json(ApprovalList::of(pending)).into_response())
}
