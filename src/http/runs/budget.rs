//! `POST /v1/runs/{run_id}/budget` (SPEC §14): raises the budget of a run waiting for it, by
//! the run's user or an admin, on any replica; the run goes on where it stopped.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::visible_run;
use super::wire::{BudgetRaiseAnswer, BudgetRaiseRequest, RunPath, RunningStatus};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::runtime::{BudgetRaiseError, Runtime};

#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/budget",
    tag = "runs",
    summary = "Raise the budget of a run waiting for it (status waiting_budget); the run goes on",
    params(RunPath),
    request_body = BudgetRaiseRequest,
    responses(
        (status = 202, description = "The budget was raised; the run goes on", body = BudgetRaiseAnswer),
        (status = "default", description = "An error: 400 naming the limit, 404, 409 when the run does not wait for its budget or the raise leaves it past it", body = ErrorBody),
    ),
)]
pub async fn raise_budget(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(RunPath { run_id }): ApiPath<RunPath>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<BudgetRaiseRequest>,
) -> Result<Response, ApiError> {
    let run = visible_run(&runtime, &caller, &run_id).await?;
    if !run
        .user_id
        .as_deref()
        .is_none_or(|user| caller.may_act_for(user))
        && !caller.admin
    {
        return Err(ApiError::forbidden(
            "Only the run's user or an admin may raise its budget",
        ));
    }
    let raised = runtime
        .raise_budget(&run_id, request.raise)
        .await
        .map_err(raise_error)?;
    let audited = crate::audit::AuditEvent::new(
        crate::http::audit::actor_of(&caller, &headers),
        crate::audit::AuditAction::BudgetRaised,
        format!("run:{run_id}"),
    )
    .with_details(serde_json::json!({ "raise": request.raise, "budget": raised.budget }));
    runtime.audit(audited).await;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(BudgetRaiseAnswer {
            run_id: &run_id,
            status: RunningStatus::Running,
            budget: raised.budget,
        }),
    )
        .into_response())
}

fn raise_error(error: BudgetRaiseError) -> ApiError {
    let message = error.to_string();
    match error {
        BudgetRaiseError::Invalid { field, .. } => {
            let param = if field == "raise" {
                field.to_string()
            } else {
                format!("raise.{field}")
            };
            ApiError::invalid_request(message).with_param(param)
        }
        BudgetRaiseError::NotFound(_) => ApiError::not_found(message),
        BudgetRaiseError::NotWaiting { .. } => ApiError::conflict(message),
        BudgetRaiseError::StillCrossed { limit, .. } => {
            ApiError::conflict(message).with_param(format!("raise.{limit}"))
        }
        BudgetRaiseError::Store(error) => ApiError::store(error),
    }
}
