//! Agent runs (SPEC §4): `GET /v1/agents[/{agent}]`, `POST /v1/agents/{agent}/runs` (the
//! AgentResult as JSON, or the run's events as SSE with `id: seq`), `GET /v1/runs/{id}`,
//! `GET /v1/runs/{id}/events` (stored events replayed from after `Last-Event-ID`, then followed
//! until `run.finished`), and `POST /v1/runs/{id}/cancel` (`stop` or `abort`).

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, ApiJson};
use super::sse::{sse_response, with_run_headers};
use crate::agent::AgentEvent;
use crate::config::{AgentSpec, OnDisconnect};
use crate::llm::ChatMessage;
use crate::runtime::{RunHandle, RunSubmission, Runtime, StartError};
use crate::store::{RunRecord, whole_result};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRequest {
    pub prompt: String,
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default)]
    pub schema: Option<Value>,
    #[serde(default)]
    pub history: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub on_disconnect: Option<OnDisconnect>,
    #[serde(default)]
    pub request_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    #[serde(default)]
    pub mode: Option<CancelMode>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CancelMode {
    /// A graceful final turn.
    Stop,
    /// End now.
    Abort,
}

pub fn agent_json(agent: &AgentSpec) -> Value {
    json!({
        "name": agent.name,
        "description": agent.description,
        "models": agent.targets.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "tools": agent.tools,
        "agents": agent.sub_agents,
        "output": {"format": agent.output_format, "schema": agent.output_schema},
        "finalization": format!("{:?}", agent.finalization).to_lowercase(),
    })
}

pub async fn list_agents(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
) -> impl IntoResponse {
    let data: Vec<Value> = runtime
        .agents()
        .iter()
        .filter(|a| caller.may_use_agent(&a.name))
        .map(|a| agent_json(a))
        .collect();
    axum::Json(json!({"object": "list", "data": data}))
}

pub async fn get_agent(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let agent = find_agent(&runtime, &caller, &name)?;
    Ok(axum::Json(agent_json(&agent)).into_response())
}

fn find_agent(runtime: &Runtime, caller: &Caller, name: &str) -> Result<Arc<AgentSpec>, ApiError> {
    let agent = runtime.agents().get(name).ok_or_else(|| {
        ApiError::not_found(format!(
            "No agent named `{name}`; GET /v1/agents lists them"
        ))
    })?;
    caller.check_agent(&agent.name)?;
    Ok(agent)
}

pub async fn create_run(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<RunRequest>,
) -> Result<Response, ApiError> {
    let agent = find_agent(&runtime, &caller, &name)?;
    if body.prompt.trim().is_empty() {
        return Err(ApiError::invalid_request("`prompt` must not be empty").with_param("prompt"));
    }
    let wants_stream = body.stream.unwrap_or(false) || accepts_event_stream(&headers);
    let on_disconnect = body
        .on_disconnect
        .unwrap_or(runtime.config().server.on_disconnect);
    let mut submission = RunSubmission::new(agent, body.prompt);
    submission.history = body.history;
    submission.format = body.format;
    submission.schema = body.schema;
    submission.user_id = caller.user_id.clone();
    submission.key = caller.limited_key.clone();
    submission.request_id = body.request_id;
    let handle = match runtime.start_run(submission).await {
        Ok(handle) => handle,
        Err(StartError::AlreadySubmitted { run_id }) => {
            return existing_run(&runtime, &caller, &run_id, wants_stream).await;
        }
        Err(error) => return Err(error.into()),
    };
    let run_id = handle.run_id.clone();
    let response = if wants_stream {
        sse_response(&runtime, numbered_events(handle, on_disconnect))
    } else {
        finished_result(handle, on_disconnect).await?
    };
    Ok(with_run_headers(response, &run_id, None))
}

fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

/// A retried submission: the first run's events (SSE) or its current state (JSON).
async fn existing_run(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    run_id: &str,
    stream: bool,
) -> Result<Response, ApiError> {
    if stream {
        return Ok(sse_response(
            runtime,
            stored_events(runtime, run_id.to_string(), 0),
        ));
    }
    match visible_run(runtime, caller, run_id).await {
        Ok(run) => Ok(axum::Json(run_json(runtime, &run).await?).into_response()),
        // The first submission has not recorded its run yet.
        Err(_) => Ok((
            StatusCode::ACCEPTED,
            axum::Json(json!({"run_id": run_id, "status": "running"})),
        )
            .into_response()),
    }
}

fn event_frame(seq: i64, kind: &str, data: &str) -> Result<Event, Infallible> {
    Ok(Event::default().id(seq.to_string()).event(kind).data(data))
}

/// The events of a run this request started as SSE frames numbered like the stored ones, until
/// `run.finished`.
pub fn numbered_events(
    handle: RunHandle,
    on_disconnect: OnDisconnect,
) -> impl Stream<Item = Result<Event, Infallible>> {
    async_stream::stream! {
        // A client that leaves cancels the run unless it asked the run to continue.
        let _cancel_on_drop = (on_disconnect == OnDisconnect::Cancel).then(|| handle.abort_on_drop());
        let mut events = handle.events;
        let mut seq = 0;
        while let Some(event) = events.recv().await {
            seq += 1;
            let finished = matches!(event, AgentEvent::RunFinished(_));
            yield event_frame(seq, event.kind(), event.data().as_str());
            if finished {
                return;
            }
        }
    }
}

async fn finished_result(
    handle: RunHandle,
    on_disconnect: OnDisconnect,
) -> Result<Response, ApiError> {
    let _cancel_on_drop = (on_disconnect == OnDisconnect::Cancel).then(|| handle.abort_on_drop());
    let result = handle.result.await.map_err(|_| ApiError::internal())?;
    Ok(axum::Json(result).into_response())
}

/// Stored events after `after`, then new ones as they are stored, until `run.finished`.
fn stored_events(
    runtime: &Arc<Runtime>,
    run_id: String,
    after: i64,
) -> impl Stream<Item = Result<Event, Infallible>> + use<> {
    runtime
        .follow_run_events(run_id, after)
        .map(move |event| match event {
            Ok(event) => event_frame(event.seq, &event.event_type, event.data.as_str()),
            Err(error) => event_frame(
                after + 1,
                "error",
                &ApiError::store(error).body()["error"].to_string(),
            ),
        })
}

/// The run, if it exists and the caller may see it (admins all, user keys their own), as it is
/// once everything queued for the store before this request is written.
async fn visible_run(
    runtime: &Runtime,
    caller: &Caller,
    run_id: &str,
) -> Result<RunRecord, ApiError> {
    let run = runtime
        .recorded_run(run_id)
        .await
        .map_err(ApiError::store)?;
    let run = run.ok_or_else(|| ApiError::not_found(format!("No run `{run_id}`")))?;
    if !caller.admin && run.user_id.as_deref() != caller.user_id.as_deref() {
        return Err(ApiError::forbidden("This API key may not read that run"));
    }
    Ok(run)
}

/// The run as `GET /v1/runs/{id}` shows it, with its whole result once it has finished.
async fn run_json(runtime: &Runtime, run: &RunRecord) -> Result<Value, ApiError> {
    let accounting = match &run.result {
        Some(_) => runtime
            .store()
            .list_accounting(&run.id)
            .await
            .map_err(ApiError::store)?,
        None => Vec::new(),
    };
    Ok(json!({
        "run_id": run.id,
        "agent": run.agent,
        "status": run.status,
        "exit_reason": run.exit_reason,
        "success": run.success,
        "conversation_id": run.conversation_id,
        "created_at": run.created_at.to_rfc3339(),
        "finished_at": run.finished_at.map(|t| t.to_rfc3339()),
        "duration_ms": run.duration_ms,
        "result": whole_result(run, &accounting),
    }))
}

pub async fn get_run(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path(run_id): Path<String>,
) -> Result<Response, ApiError> {
    let run = visible_run(&runtime, &caller, &run_id).await?;
    Ok(axum::Json(run_json(&runtime, &run).await?).into_response())
}

pub async fn run_events(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path(run_id): Path<String>,
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
    Ok(sse_response(
        &runtime,
        stored_events(&runtime, run_id, after),
    ))
}

pub async fn cancel_run(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    Path(run_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let run = visible_run(&runtime, &caller, &run_id).await?;
    // An empty body means the default mode, `abort`.
    let request: CancelRequest = if body.iter().all(u8::is_ascii_whitespace) {
        CancelRequest { mode: None }
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid_request(format!("Invalid cancel request: {e}")))?
    };
    let mode = request.mode.unwrap_or(CancelMode::Abort);
    let cancelled = match mode {
        CancelMode::Stop => runtime.cancel_run(&run_id, crate::runtime::CancelMode::Stop),
        CancelMode::Abort => runtime.cancel_run(&run_id, crate::runtime::CancelMode::Abort),
    };
    if !cancelled {
        return Err(ApiError::conflict(format!(
            "Run `{run_id}` is not running (status {})",
            run.status
        )));
    }
    let mode = if mode == CancelMode::Stop {
        "stop"
    } else {
        "abort"
    };
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({"run_id": run_id, "mode": mode, "status": "cancelling"})),
    )
        .into_response())
}
