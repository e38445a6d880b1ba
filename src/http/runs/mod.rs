//! Agent runs (SPEC §4): `GET /v1/agents[/{agent}]`, `POST /v1/agents/{agent}/runs` (the
//! AgentResult as JSON, or the run's events as SSE with `id: seq`), `GET /v1/runs/{id}`,
//! `GET /v1/runs/{id}/events` (stored events replayed from after `Last-Event-ID`, then followed
//! until `run.finished`), and `POST /v1/runs/{id}/cancel` (`stop` or `abort`). This module holds
//! the handlers; [`wire`] holds the bodies and [`list`] `GET /v1/runs`.

pub mod approvals;
pub mod budget;
pub mod list;
pub mod wire;

use std::sync::Arc;

use super::auth::Caller;
use super::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use super::shared::run_events::{numbered_events, stored_events};
use super::sse::with_run_headers;
use super::wire::ListObject;
use crate::config::OnDisconnect;
use crate::llm::Role;
use crate::runtime::{CancelOutcome, RunHandle, Runtime, StartError};
use crate::store::{RunRecord, whole_result};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use wire::{
    AgentDescription, AgentList, AgentPath, CancelAnswer, CancelMode, CancelRequest, RunAccepted,
    RunPath, RunRequest, RunStatus, RunningStatus,
};

#[utoipa::path(
    get,
    path = "/v1/agents",
    tag = "runs",
    summary = "The agents this key may run",
    responses(
        (status = 200, description = "The agents", body = AgentList),
        ErrorBody,
    ),
)]
pub async fn list_agents(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
) -> axum::Json<AgentList> {
    let data = runtime
        .agents()
        .iter()
        .filter(|a| caller.may_use_agent(&a.name))
        .map(|a| AgentDescription::from(a.as_ref()))
        .collect();
    axum::Json(AgentList {
        object: ListObject::List,
        data,
    })
}

#[utoipa::path(
    get,
    path = "/v1/agents/{agent}",
    tag = "runs",
    summary = "One agent",
    params(AgentPath),
    responses(
        (status = 200, description = "The agent", body = AgentDescription),
        ErrorBody,
    ),
)]
pub async fn get_agent(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(AgentPath { agent: name }): ApiPath<AgentPath>,
) -> Result<axum::Json<AgentDescription>, ApiError> {
    let agent = caller.named_agent(&runtime, &name)?;
    Ok(axum::Json(AgentDescription::from(agent.as_ref())))
}

#[utoipa::path(
    post,
    path = "/v1/agents/{agent}/runs",
    tag = "runs",
    summary = "Start a run: its AgentResult, or its events as SSE",
    params(AgentPath),
    request_body = RunRequest,
    responses(
        (status = 200, description = "The AgentResult; with `stream: true` or `Accept: text/event-stream` the run's events (`id: 1, 2, 3…`, `event: run.started` … `run.finished`). A repeated `requestId` answers with the first run: its events, or its status", 
            content(
                (Object = "application/json"),
                (crate::http::wire::ServerSentEvent = "text/event-stream"),
            )),
        (status = 202, description = "A background run, or a repeated `requestId` whose first run is not recorded yet", body = RunAccepted),
        ErrorBody,
    ),
)]
pub async fn create_run(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(AgentPath { agent: name }): ApiPath<AgentPath>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<RunRequest>,
) -> Result<Response, ApiError> {
    let agent = caller.named_agent(&runtime, &name)?;
    if body.prompt.trim().is_empty() {
        return Err(ApiError::invalid_request("`prompt` must not be empty").with_param("prompt"));
    }
    let background = body.background.unwrap_or(false);
    let wants_stream = body.stream.unwrap_or(false) || accepts_event_stream(&headers);
    // A background run is never cancelled by a client leaving, streamed or not.
    let on_disconnect = if background {
        OnDisconnect::Continue
    } else {
        body.on_disconnect
            .unwrap_or(runtime.config().server.on_disconnect)
    };
    let budget = body.budget.unwrap_or_default();
    budget.check().map_err(|(limit, detail)| {
        ApiError::invalid_request(detail).with_param(format!("budget.{limit}"))
    })?;
    let mut submission = caller.submission(agent, body.prompt);
    submission.budget = submission.budget.lowest(budget);
    submission.history = body.history;
    submission.format = body.format;
    submission.schema = body.schema;
    submission.request_id = body.request_id;
    submission.on_disconnect = on_disconnect;
    submission.handed_out = background;
    submission.webhook = crate::http::webhooks::checked_webhook(&runtime, body.webhook)?;
    let handle = match runtime.start_run(submission).await {
        Ok(handle) => handle,
        Err(StartError::AlreadySubmitted { run_id }) => {
            return existing_run(&runtime, &caller, &run_id, wants_stream).await;
        }
        Err(error) => return Err(error.into()),
    };
    let run_id = handle.run_id.clone();
    let response = if background && !wants_stream {
        // The handle is dropped: the run is recorded and followed, never cancelled by a client.
        drop(handle);
        accepted(&run_id)
    } else if wants_stream {
        numbered_events(&runtime, handle, on_disconnect)
    } else {
        finished_result(&caller, handle, on_disconnect).await?
    };
    Ok(with_run_headers(response, &run_id, None))
}

fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

/// How long a retried submission waits for its first run to be recorded before answering 202.
const UNRECORDED_RUN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A retried submission: the first run's events (SSE) or its current state (JSON).
async fn existing_run(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    run_id: &str,
    stream: bool,
) -> Result<Response, ApiError> {
    if stream {
        return Ok(stored_events(runtime, run_id.to_string(), 0));
    }
    // The first submission's run may be executing on another replica and not recorded yet:
    // its start is written within the recorder's flush interval.
    runtime
        .wait_for_run(run_id, UNRECORDED_RUN_WAIT)
        .await
        .map_err(ApiError::store)?;
    match visible_run(runtime, caller, run_id).await {
        Ok(run) => Ok(axum::Json(run_status(runtime, caller, &run).await?).into_response()),
        // The first submission has not recorded its run yet.
        Err(_) => Ok(accepted(run_id)),
    }
}

/// `202 {run_id, status: running}`.
fn accepted(run_id: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        axum::Json(RunAccepted {
            run_id,
            status: RunningStatus::Running,
        }),
    )
        .into_response()
}

async fn finished_result(
    caller: &Caller,
    handle: RunHandle,
    on_disconnect: OnDisconnect,
) -> Result<Response, ApiError> {
    let _cancel_on_drop = (on_disconnect == OnDisconnect::Cancel).then(|| handle.abort_on_drop());
    let mut result = handle
        .into_result()
        .await
        .map_err(|_| ApiError::internal())?;
    if !caller.may_read_definitions() {
        result
            .conversation
            .retain(|message| message.role != Role::System);
    }
    Ok(axum::Json(result).into_response())
}

/// A stored result as `caller` may see it: the agent's system prompt (the conversation's
/// system messages) only for callers who may read agent definitions.
fn shown_result(caller: &Caller, mut result: serde_json::Value) -> serde_json::Value {
    if !caller.may_read_definitions()
        && let Some(conversation) = result
            .get_mut("conversation")
            .and_then(serde_json::Value::as_array_mut)
    {
        conversation
            .retain(|message| message.get("role").and_then(|r| r.as_str()) != Some("system"));
    }
    result
}

/// The run, if it exists and the caller may see it (admins all, user keys their own), as it is
/// once everything queued for the store before this request is written.
pub(super) async fn visible_run(
    runtime: &Runtime,
    caller: &Caller,
    run_id: &str,
) -> Result<RunRecord, ApiError> {
    let run = runtime.find_run(run_id).await.map_err(ApiError::store)?;
    let run = run.ok_or_else(|| ApiError::not_found(format!("No run `{run_id}`")))?;
    if !caller.may_see_run(&run) {
        return Err(ApiError::forbidden("This API key may not read that run"));
    }
    Ok(run)
}

/// The run as `GET /v1/runs/{id}` shows it, with its whole result once it has finished.
async fn run_status<'a>(
    runtime: &Runtime,
    caller: &Caller,
    run: &'a RunRecord,
) -> Result<RunStatus<'a>, ApiError> {
    let accounting = match &run.result {
        Some(_) => runtime
            .run_accounting(&run.id)
            .await
            .map_err(ApiError::store)?,
        None => Vec::new(),
    };
    let result = whole_result(run, &accounting).map(|result| shown_result(caller, result));
    Ok(RunStatus::new(run, result))
}

#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}",
    tag = "runs",
    summary = "A run's status and, once finished, its AgentResult",
    params(RunPath),
    responses(
        (status = 200, description = "The run", body = RunStatus),
        ErrorBody,
    ),
)]
pub async fn get_run(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(RunPath { run_id }): ApiPath<RunPath>,
) -> Result<Response, ApiError> {
    let run = visible_run(&runtime, &caller, &run_id).await?;
    Ok(axum::Json(run_status(&runtime, &caller, &run).await?).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/runs/{run_id}/events",
    tag = "runs",
    summary = "A run's events: stored ones after Last-Event-ID, then live ones",
    params(
        RunPath,
        ("Last-Event-ID" = Option<i64>, Header, nullable = false, minimum = 0, description = "Resume after this event id"),
    ),
    responses(
        (status = 200, description = "The run's events (`id: <seq>`, `event: <type>`, `data: <json>`) until `run.finished`", content_type = "text/event-stream", body = crate::http::wire::ServerSentEvent),
        ErrorBody,
    ),
)]
pub async fn run_events(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(RunPath { run_id }): ApiPath<RunPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    visible_run(&runtime, &caller, &run_id).await?;
    let after = match headers
        .get("last-event-id")
        .map(|v| v.to_str().map(str::trim))
    {
        None => 0,
        Some(Ok(text)) => text
            .parse::<i64>()
            .ok()
            .filter(|seq| *seq >= 0)
            .ok_or_else(|| {
                ApiError::invalid_request(format!(
                    "Last-Event-ID {text:?} is not an event id (a number)"
                ))
                .with_param("Last-Event-ID")
            })?,
        Some(Err(_)) => {
            return Err(
                ApiError::invalid_request("Last-Event-ID is not text").with_param("Last-Event-ID")
            );
        }
    };
    Ok(stored_events(&runtime, run_id, after))
}

#[utoipa::path(
    post,
    path = "/v1/runs/{run_id}/cancel",
    tag = "runs",
    summary = "Stop (graceful final turn) or abort a run",
    params(RunPath),
    request_body(content = Option<CancelRequest>, description = "An empty body aborts"),
    responses(
        (status = 202, description = "The run is being cancelled", body = CancelAnswer),
        (status = "default", description = "An error; 409 when the run is no longer running", body = ErrorBody),
    ),
)]
pub async fn cancel_run(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(RunPath { run_id }): ApiPath<RunPath>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let run = visible_run(&runtime, &caller, &run_id).await?;
    // An empty body, or `null`, means the default mode, `abort`.
    let request: CancelRequest = if body.iter().all(u8::is_ascii_whitespace) {
        CancelRequest { mode: None }
    } else {
        serde_json::from_slice::<Option<CancelRequest>>(&body)
            .map_err(|e| ApiError::invalid_request(format!("Invalid cancel request: {e}")))?
            .unwrap_or(CancelRequest { mode: None })
    };
    let mode = request.mode.unwrap_or(CancelMode::Abort);
    let runtime_mode = match mode {
        CancelMode::Stop => crate::runtime::CancelMode::Stop,
        CancelMode::Abort => crate::runtime::CancelMode::Abort,
    };
    match runtime.cancel_run(&run_id, runtime_mode).await {
        Ok(CancelOutcome::Cancelled | CancelOutcome::Requested) => {}
        Ok(CancelOutcome::NotRunning(status)) => {
            return Err(ApiError::conflict(format!(
                "Run `{run_id}` is not running (status {status})"
            )));
        }
        Ok(CancelOutcome::NotFound) => {
            return Err(ApiError::not_found(format!("No run `{run_id}`")));
        }
        Err(error) => return Err(ApiError::store(error)),
    }
    let _ = run;
    let audited = crate::audit::AuditEvent::new(
        crate::http::audit::actor_of(&caller, &headers),
        crate::audit::AuditAction::RunCancelled,
        format!("run:{run_id}"),
    )
    .with_details(serde_json::json!({ "mode": runtime_mode.as_str() }));
    runtime.audit(audited).await;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(CancelAnswer {
            run_id: &run_id,
            mode,
            status: mode.status(),
            detail: mode.detail(),
        }),
    )
        .into_response())
}
