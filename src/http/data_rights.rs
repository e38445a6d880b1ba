//! A user's data rights (SPEC §14): `GET /api/{user_id}/export` (every conversation with its
//! messages, every run with its result, accounting, events and approvals, and the names of the
//! user's secrets, as one JSON document) and `DELETE /api/{user_id}` (erases all of it, secrets
//! and the response-cache entries of the user's runs included, leaving an audit tombstone with
//! counts only). The user itself or an admin.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::audit::actor_of;
use super::auth::Caller;
use super::chat::check_user;
use super::chat::wire::UserPath;
use super::error::{ApiError, ApiPath, ErrorBody};
use crate::audit::{AuditAction, AuditEvent};
use crate::runtime::{EraseError, Runtime};

#[utoipa::path(
    get,
    path = "/api/{user_id}/export",
    tag = "governance",
    summary = "Everything agentd keeps of a user, as one JSON document (the user or an admin)",
    params(UserPath),
    responses(
        (status = 200, description = "Conversations with messages, runs with results, accounting, events and approvals, secret names, files (metadata; content through the Files API) and schedules", body = Object),
        ErrorBody,
    ),
)]
pub async fn export_user(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(UserPath { user_id }): ApiPath<UserPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let export = runtime
        .export_user(&user_id)
        .await
        .map_err(ApiError::store)?;
    let event = AuditEvent::new(
        actor_of(&caller, &headers),
        AuditAction::UserExported,
        format!("user:{user_id}"),
    )
    .with_details(json!({"conversations": export.conversations, "runs": export.runs}));
    runtime.audit(event).await;
    Ok(axum::Json(export.document).into_response())
}

#[utoipa::path(
    delete,
    path = "/api/{user_id}",
    tag = "governance",
    summary = "Erase everything agentd keeps of a user (the user or an admin); 409 while a run of the user is in progress",
    params(UserPath),
    responses(
        (status = 200, description = "What was erased, as counts; an audit row without content records it", body = Object),
        ErrorBody,
    ),
)]
pub async fn erase_user(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(UserPath { user_id }): ApiPath<UserPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    check_user(&caller, &user_id)?;
    let erased = runtime
        .erase_user(&user_id)
        .await
        .map_err(|error| match error {
            EraseError::RunsInProgress(_) => ApiError::conflict(error.to_string()),
            EraseError::Store(error) => ApiError::store(error),
        })?;
    let counts = serde_json::to_value(&erased).unwrap_or_default();
    let event = AuditEvent::new(
        actor_of(&caller, &headers),
        AuditAction::UserErased,
        format!("user:{user_id}"),
    )
    .with_details(counts.clone());
    runtime.audit(event).await;
    Ok(axum::Json(json!({
        "object": "user.erased",
        "user_id": user_id,
        "erased": counts,
    }))
    .into_response())
}
