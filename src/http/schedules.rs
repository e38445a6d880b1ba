//! Schedules over HTTP (SPEC §13): `POST/GET /v1/schedules`, `GET/PATCH/DELETE
//! /v1/schedules/{id}`, `POST /v1/schedules/{id}/run` (now) and `GET /v1/schedules/{id}/runs`.
//! A schedule belongs to its creator (its runs too); an admin reaches every one. Every change
//! is an audit row (`schedule.changed`). A bad cron, an unknown zone or agent is a 400 naming
//! the field.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Caller;
use super::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use super::webhooks::{RunWebhook, checked_webhook};
use super::wire::ListObject;
use crate::audit::{AuditAction, AuditEvent};
use crate::runtime::Runtime;
use crate::runtime::schedules::{Missed, Overlap, Timetable};
use crate::runtime::schedules_api::RunNowError;
use crate::store::{ScheduleFire, ScheduleRecord};

const NO_SUCH_SCHEDULE: &str = "No such schedule: GET /v1/schedules lists yours";

/// `POST /v1/schedules`, and `PATCH /v1/schedules/{id}` (every field optional there).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    /// The agent each run runs.
    #[serde(default)]
    pub agent: Option<String>,
    /// The task of each run (`input` is the same).
    #[serde(default, alias = "input")]
    pub prompt: Option<String>,
    /// Five fields (minute hour day month weekday) or a name: `@hourly`, `@daily`, `@weekly`,
    /// `@monthly`, `@yearly`.
    #[serde(default)]
    pub cron: Option<String>,
    /// An IANA zone (`Europe/Paris`); `UTC` by default. Due times follow its daylight saving.
    #[serde(default)]
    pub timezone: Option<String>,
    /// The user the runs are for (admins only); the caller by default.
    #[serde(default)]
    pub user: Option<String>,
    /// A conversation of the user's each run continues.
    #[serde(default)]
    pub conversation_id: Option<String>,
    #[serde(default)]
    pub overlap: Option<Overlap>,
    #[serde(default)]
    pub missed: Option<Missed>,
    #[serde(default)]
    pub webhook: Option<RunWebhook>,
    #[serde(default)]
    pub enabled: Option<bool>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SchedulePath {
    /// The schedule's id.
    pub id: String,
}

/// A schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleView {
    pub id: String,
    pub agent: String,
    pub prompt: String,
    pub cron: String,
    pub timezone: String,
    #[schema(required)]
    pub user: Option<String>,
    #[schema(required)]
    pub conversation_id: Option<String>,
    pub overlap: String,
    pub missed: String,
    #[schema(required)]
    pub webhook_url: Option<String>,
    pub enabled: bool,
    /// RFC 3339: the next due time; null while disabled.
    #[schema(required)]
    pub next_due_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&ScheduleRecord> for ScheduleView {
    fn from(s: &ScheduleRecord) -> Self {
        Self {
            id: s.id.clone(),
            agent: s.agent.clone(),
            prompt: s.prompt.clone(),
            cron: s.cron.clone(),
            timezone: s.timezone.clone(),
            user: s.owner.clone(),
            conversation_id: s.conversation_id.clone(),
            overlap: s.overlap.clone(),
            missed: s.missed.clone(),
            webhook_url: s.webhook_url.clone(),
            enabled: s.enabled,
            next_due_at: s.next_due_at.map(|at| at.to_rfc3339()),
            created_at: s.created_at.to_rfc3339(),
            updated_at: s.updated_at.to_rfc3339(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    pub object: ListObject,
    pub data: Vec<ScheduleView>,
}

/// One due time of a schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleRunView {
    /// RFC 3339: the due time (or when it was run by hand).
    pub due_at: String,
    /// `fired`, `queued` (behind the previous run), `skipped` (overlap or missed), `failed` (the
    /// run could not start); `claimed` while a replica starts it.
    pub status: String,
    #[schema(required)]
    pub run_id: Option<String>,
    /// The replica that fired it.
    pub replica: String,
    pub fired_at: String,
}

impl From<&ScheduleFire> for ScheduleRunView {
    fn from(f: &ScheduleFire) -> Self {
        Self {
            due_at: f.due_at.to_rfc3339(),
            status: f.status.clone(),
            run_id: f.run_id.clone(),
            replica: f.replica.clone(),
            fired_at: f.fired_at.to_rfc3339(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleRunList {
    pub object: ListObject,
    pub data: Vec<ScheduleRunView>,
}

/// The request applied over `base` (or a new schedule), checked field by field.
fn applied(
    runtime: &Runtime,
    caller: &Caller,
    base: Option<ScheduleRecord>,
    request: ScheduleRequest,
) -> Result<ScheduleRecord, ApiError> {
    let now = Utc::now();
    let missing =
        |field: &str| ApiError::invalid_request(format!("`{field}` is required")).with_param(field);
    let mut s = match base {
        Some(base) => base,
        None => ScheduleRecord {
            id: format!("sch_{}", uuid::Uuid::now_v7().simple()),
            owner: caller.owner(),
            key_id: caller.key_id.clone(),
            agent: request.agent.clone().ok_or_else(|| missing("agent"))?,
            prompt: request.prompt.clone().ok_or_else(|| missing("prompt"))?,
            cron: request.cron.clone().ok_or_else(|| missing("cron"))?,
            timezone: "UTC".into(),
            conversation_id: None,
            overlap: Overlap::default().as_str().into(),
            missed: Missed::default().as_str().into(),
            webhook_url: None,
            enabled: true,
            next_due_at: None,
            created_at: now,
            updated_at: now,
        },
    };
    if let Some(agent) = request.agent {
        s.agent = agent;
    }
    if runtime.agents().get(&s.agent).is_none() {
        return Err(ApiError::invalid_request(format!(
            "`agent`: no agent named {:?}; GET /v1/agents lists them",
            s.agent
        ))
        .with_param("agent"));
    }
    let agent = caller
        .named_agent(runtime, &s.agent)
        .map_err(|error| error.with_param("agent"))?;
    s.agent = agent.name.clone();
    if let Some(prompt) = request.prompt {
        s.prompt = prompt;
    }
    if s.prompt.trim().is_empty() {
        return Err(ApiError::invalid_request("`prompt` must not be empty").with_param("prompt"));
    }
    if let Some(cron) = request.cron {
        s.cron = cron;
    }
    if let Some(timezone) = request.timezone {
        s.timezone = timezone;
    }
    let table = Timetable::parse(&s.cron, &s.timezone).map_err(|(field, why)| {
        ApiError::invalid_request(format!("`{field}`: {why}")).with_param(field)
    })?;
    if let Some(user) = request.user {
        if !(caller.admin && caller.acted_by.is_none()) && caller.owner().as_deref() != Some(&user)
        {
            return Err(
                ApiError::forbidden("Only admins may schedule runs for another user")
                    .with_param("user"),
            );
        }
        s.owner = Some(user);
    }
    if let Some(conversation) = request.conversation_id {
        s.conversation_id = Some(conversation);
    }
    if let Some(overlap) = request.overlap {
        s.overlap = overlap.as_str().into();
    }
    if let Some(missed) = request.missed {
        s.missed = missed.as_str().into();
    }
    if let Some(url) = checked_webhook(runtime, request.webhook)? {
        s.webhook_url = Some(url);
    }
    if let Some(enabled) = request.enabled {
        s.enabled = enabled;
    }
    s.next_due_at = s.enabled.then(|| table.next_after(now)).flatten();
    s.updated_at = now;
    Ok(s)
}

/// The schedule when the caller may reach it, else 404.
async fn reachable(
    runtime: &Runtime,
    caller: &Caller,
    id: &str,
) -> Result<ScheduleRecord, ApiError> {
    runtime
        .schedule(id)
        .await
        .map_err(ApiError::store)?
        .filter(|s| caller.may_reach(s.owner.as_deref()))
        .ok_or_else(|| ApiError::not_found(NO_SUCH_SCHEDULE))
}

async fn audit_change(
    runtime: &Runtime,
    caller: &Caller,
    headers: &HeaderMap,
    id: &str,
    change: &str,
) {
    let event = AuditEvent::new(
        super::audit::actor_of(caller, headers),
        AuditAction::ScheduleChanged,
        format!("schedule:{id}"),
    )
    .with_details(serde_json::json!({"change": change}));
    runtime.audit(event).await;
}

#[utoipa::path(post, path = "/v1/schedules", tag = "schedules", summary = "Create a schedule",
    request_body = ScheduleRequest,
    responses((status = 201, description = "The schedule", body = ScheduleView), ErrorBody))]
pub async fn create_schedule(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<ScheduleRequest>,
) -> Result<Response, ApiError> {
    let schedule = applied(&runtime, &caller, None, request)?;
    runtime
        .save_schedule(&schedule)
        .await
        .map_err(ApiError::store)?;
    audit_change(&runtime, &caller, &headers, &schedule.id, "created").await;
    Ok((
        StatusCode::CREATED,
        axum::Json(ScheduleView::from(&schedule)),
    )
        .into_response())
}

#[utoipa::path(get, path = "/v1/schedules", tag = "schedules", summary = "Your schedules (an admin's: all)",
    responses((status = 200, description = "The schedules", body = ScheduleList), ErrorBody))]
pub async fn list_schedules(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let admin = caller.admin && caller.acted_by.is_none();
    let owner = caller.owner();
    let filter = if admin {
        None
    } else {
        Some(owner.as_deref().unwrap_or_default())
    };
    let schedules = runtime.schedules(filter).await.map_err(ApiError::store)?;
    Ok(axum::Json(ScheduleList {
        object: ListObject::List,
        data: schedules.iter().map(ScheduleView::from).collect(),
    })
    .into_response())
}

#[utoipa::path(get, path = "/v1/schedules/{id}", tag = "schedules", summary = "A schedule",
    params(SchedulePath),
    responses((status = 200, description = "The schedule", body = ScheduleView), ErrorBody))]
pub async fn get_schedule(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(SchedulePath { id }): ApiPath<SchedulePath>,
) -> Result<Response, ApiError> {
    let schedule = reachable(&runtime, &caller, &id).await?;
    Ok(axum::Json(ScheduleView::from(&schedule)).into_response())
}

#[utoipa::path(patch, path = "/v1/schedules/{id}", tag = "schedules", summary = "Change a schedule",
    params(SchedulePath), request_body = ScheduleRequest,
    responses((status = 200, description = "The schedule", body = ScheduleView), ErrorBody))]
pub async fn update_schedule(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    ApiPath(SchedulePath { id }): ApiPath<SchedulePath>,
    ApiJson(request): ApiJson<ScheduleRequest>,
) -> Result<Response, ApiError> {
    let base = reachable(&runtime, &caller, &id).await?;
    let schedule = applied(&runtime, &caller, Some(base), request)?;
    runtime
        .save_schedule(&schedule)
        .await
        .map_err(ApiError::store)?;
    audit_change(&runtime, &caller, &headers, &id, "updated").await;
    Ok(axum::Json(ScheduleView::from(&schedule)).into_response())
}

#[utoipa::path(delete, path = "/v1/schedules/{id}", tag = "schedules", summary = "Delete a schedule",
    params(SchedulePath),
    responses((status = 204, description = "Deleted; its runs stay"), ErrorBody))]
pub async fn delete_schedule(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    ApiPath(SchedulePath { id }): ApiPath<SchedulePath>,
) -> Result<Response, ApiError> {
    reachable(&runtime, &caller, &id).await?;
    runtime
        .delete_schedule(&id)
        .await
        .map_err(ApiError::store)?;
    audit_change(&runtime, &caller, &headers, &id, "deleted").await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(post, path = "/v1/schedules/{id}/run", tag = "schedules", summary = "Run a schedule now",
    params(SchedulePath),
    responses((status = 202, description = "The run started (`run_id`)", body = Object), ErrorBody))]
pub async fn run_schedule_now(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(SchedulePath { id }): ApiPath<SchedulePath>,
) -> Result<Response, ApiError> {
    let schedule = reachable(&runtime, &caller, &id).await?;
    let run_id = runtime
        .run_schedule_now(&schedule)
        .await
        .map_err(|error| match error {
            RunNowError::NotStarted(_) => ApiError::conflict(error.to_string()),
            RunNowError::Store(error) => ApiError::store(error),
        })?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({"run_id": run_id})),
    )
        .into_response())
}

#[utoipa::path(get, path = "/v1/schedules/{id}/runs", tag = "schedules", summary = "A schedule's due times and their runs, newest first",
    params(SchedulePath),
    responses((status = 200, description = "The due times", body = ScheduleRunList), ErrorBody))]
pub async fn schedule_runs(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(SchedulePath { id }): ApiPath<SchedulePath>,
) -> Result<Response, ApiError> {
    reachable(&runtime, &caller, &id).await?;
    let fires = runtime
        .schedule_history(&id)
        .await
        .map_err(ApiError::store)?;
    Ok(axum::Json(ScheduleRunList {
        object: ListObject::List,
        data: fires.iter().map(ScheduleRunView::from).collect(),
    })
    .into_response())
}
