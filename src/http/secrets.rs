//! Per-user tool credentials: `PUT /api/{user_id}/secrets/{name}` stores a secret that tool
//! headers read as `${caller.secret.NAME}`, `GET /api/{user_id}/secrets` lists the names and when
//! each was set, `DELETE` removes one. Write-only: no answer ever holds a value, and the body is
//! never logged (the value is a `SecretString` from the moment it is parsed). Sealing is
//! [`crate::secrets`]'s; this module only checks and translates. The same access rule as the
//! other per-user routes: a user-bound key for its own user, admins for anyone.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::audit::actor_of;
use super::auth::Caller;
use super::chat::check_user;
use super::chat::wire::UserPath;
use super::error::{ApiError, ApiPath, ErrorBody, parse_json_body, read_body};
use super::wire::ListObject;
use crate::audit::{AuditAction, AuditEvent};
use crate::config::secrets::{MAX_NAME_CHARS, is_valid_name};
use crate::runtime::Runtime;
use crate::secrets::{MAX_VALUE_BYTES, SecretsError, UserSecrets};

/// The `{user_id}` and `{name}` of a secret's route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SecretPath {
    /// The user whose secret it is (the same rule as in `UserPath`).
    #[param(pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._@+:-]{1,128}$")]
    pub user_id: String,
    /// The secret's name, as `${caller.secret.NAME}` names it: 1 to 64 letters, digits, `_`
    /// or `-`.
    #[param(pattern = r"^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
}

/// `PUT /api/{user_id}/secrets/{name}`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutSecret {
    /// The secret, 1 to 8192 bytes of UTF-8 without NUL. Never returned or logged.
    #[schema(value_type = String, min_length = 1, max_length = 8192)]
    pub value: SecretString,
}

/// The user's secrets: names and when each was set, never values.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecretList {
    pub object: ListObject,
    pub data: Vec<SecretSummary>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SecretSummary {
    pub name: String,
    /// RFC 3339: when the value was last set.
    pub updated_at: String,
}

/// The user's access first, then whether this server keeps secrets at all.
fn secrets_for<'a>(
    runtime: &'a Runtime,
    caller: &Caller,
    user_id: &str,
) -> Result<&'a Arc<UserSecrets>, ApiError> {
    check_user(caller, user_id)?;
    runtime.secrets().ok_or_else(|| {
        ApiError::not_configured(
            "User secrets are not configured on this server: set `secrets.key` (32 bytes as \
             64 hex characters or base64) in the configuration",
        )
        .with_param("secrets.key")
    })
}

fn check_name(name: &str) -> Result<(), ApiError> {
    if is_valid_name(name) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "A secret name is 1 to {MAX_NAME_CHARS} letters, digits, `_` or `-`"
    ))
    .with_param("name"))
}

fn check_value(value: &SecretString) -> Result<(), ApiError> {
    let length = value.expose_secret().len();
    if (1..=MAX_VALUE_BYTES).contains(&length) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "`value` is {length} bytes; a secret is 1 to {MAX_VALUE_BYTES} bytes"
    ))
    .with_param("value"))
}

fn secrets_error(error: SecretsError) -> ApiError {
    match error {
        SecretsError::Store(error) => ApiError::store(error),
        other => {
            tracing::error!(error = %other, "a user secret could not be sealed");
            ApiError::internal()
        }
    }
}

#[utoipa::path(
    put,
    path = "/api/{user_id}/secrets/{name}",
    tag = "secrets",
    summary = "Set one of the user's tool secrets (write-only)",
    params(SecretPath),
    request_body = PutSecret,
    responses(
        (status = 204, description = "Stored, encrypted; replaces a value set before"),
        ErrorBody,
    ),
)]
pub async fn put_secret(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(SecretPath { user_id, name }): ApiPath<SecretPath>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    let secrets = secrets_for(&runtime, &caller, &user_id)?;
    check_name(&name)?;
    let actor = actor_of(&caller, request.headers());
    let bytes = read_body(request, &()).await?;
    let body: PutSecret = parse_json_body(&bytes)?;
    check_value(&body.value)?;
    secrets
        .put(&user_id, &name, &body.value)
        .await
        .map_err(secrets_error)?;
    audit_secret(&runtime, actor, AuditAction::SecretSet, &user_id, &name).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The audit row of a secret change: its user and name, never its value.
async fn audit_secret(
    runtime: &Runtime,
    actor: crate::audit::Actor,
    action: AuditAction,
    user_id: &str,
    name: &str,
) {
    let event = AuditEvent::new(actor, action, format!("user:{user_id}/secret:{name}"));
    runtime.audit(event).await;
}

#[utoipa::path(
    get,
    path = "/api/{user_id}/secrets",
    tag = "secrets",
    summary = "The names of the user's tool secrets (never their values)",
    params(UserPath),
    responses(
        (status = 200, description = "Names and when each was set, by name", body = SecretList),
        ErrorBody,
    ),
)]
pub async fn list_secrets(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(UserPath { user_id }): ApiPath<UserPath>,
) -> Result<Response, ApiError> {
    let secrets = secrets_for(&runtime, &caller, &user_id)?;
    let names = secrets.names(&user_id).await.map_err(ApiError::store)?;
    Ok(axum::Json(SecretList {
        object: ListObject::List,
        data: names
            .into_iter()
            .map(|secret| SecretSummary {
                name: secret.name,
                updated_at: secret.updated_at.to_rfc3339(),
            })
            .collect(),
    })
    .into_response())
}

#[utoipa::path(
    delete,
    path = "/api/{user_id}/secrets/{name}",
    tag = "secrets",
    summary = "Delete one of the user's tool secrets",
    params(SecretPath),
    responses(
        (status = 204, description = "Deleted"),
        ErrorBody,
    ),
)]
pub async fn delete_secret(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(SecretPath { user_id, name }): ApiPath<SecretPath>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let secrets = secrets_for(&runtime, &caller, &user_id)?;
    check_name(&name)?;
    let deleted = secrets
        .delete(&user_id, &name)
        .await
        .map_err(ApiError::store)?;
    if deleted {
        let actor = actor_of(&caller, &headers);
        audit_secret(&runtime, actor, AuditAction::SecretDeleted, &user_id, &name).await;
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(
            ApiError::not_found(format!("This user has no secret named `{name}`"))
                .with_param("name"),
        )
    }
}
