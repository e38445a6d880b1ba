//! The A2A headend (SPEC §9.5): every agent is an A2A v1.0 agent with its card at
//! `/a2a/{agent}/.well-known/agent-card.json` and JSON-RPC at `/a2a/{agent}`; the server's card
//! at `/.well-known/agent-card.json` lists every agent as a skill. `SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`, `SubscribeToTask`, the
//! push-notification config methods (SPEC §13, [`push`]), and the 0.3 names (`message/send`,
//! `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`,
//! `tasks/pushNotificationConfig/*`), answered in the revision the method name belongs to.
//!
//! Only translation lives here: runs start through [`Runtime::start_run`], streams are the run's
//! stored events followed with [`Runtime::follow_run_events`] (so a stream resumed on another
//! replica reads the same), tasks are read from the run store. Same auth as every route.

pub mod push;
pub mod rest;
mod tasks;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::Instrument;

use super::auth::Caller;
use super::error::{ApiError, ApiPath, ErrorBody};
use super::json_rpc::RetryLater;
use super::shared::attachments::AttachmentIntake;
use super::shared::cursor::PageCursor;
use super::shared::drive::{self, Events, OnLeave};
use super::sse::with_run_headers;
use crate::config::{AgentSpec, OnDisconnect};
use crate::runtime::{
    CancelMode, CancelOutcome, ConversationTurn, RunSubmission, Runtime, StartError,
};
use crate::store::{RunCursor, RunFilter, RunRecord};
use crate::vocabulary::RunStatus;
use wire::{Dialect, TaskState};

/// The user that owns the conversations (`contextId`s) of callers whose key has no user.
pub const KEYLESS_A2A_USER: &str = "a2a";
/// Tasks listed per page unless the client asks for another size.
const DEFAULT_PAGE_SIZE: u32 = 50;
const MAX_PAGE_SIZE: u32 = 100;
/// How long `CancelTask` waits for the run to end before answering with its state.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// The A2A protocol version of the JSON-RPC interface.
const PROTOCOL_VERSION: &str = "1.0";

/// A2A's JSON-RPC error codes.
mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
}

/// A JSON-RPC error naming what is wrong; `data` says more when a client can act on it (the
/// wait before a retry).
#[derive(Debug)]
struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn task_not_found(id: &str) -> Self {
        Self::new(
            code::TASK_NOT_FOUND,
            format!("no task `{id}` of this agent"),
        )
    }
}

impl From<RetryLater> for RpcError {
    fn from(later: RetryLater) -> Self {
        Self {
            code: i64::from(later.code),
            message: later.message,
            data: Some(later.data),
        }
    }
}

impl From<StartError> for RpcError {
    fn from(error: StartError) -> Self {
        let error = match RetryLater::of_start_error(error) {
            Ok(later) => return later.into(),
            Err(error) => error,
        };
        match error {
            StartError::ConversationNotFound(id) => Self::new(
                code::INVALID_PARAMS,
                format!("message.contextId: no context `{id}` for this caller"),
            ),
            StartError::InvalidOutput(_) => Self::new(code::INVALID_PARAMS, error.to_string()),
            StartError::ConversationBusy => Self::new(
                code::INVALID_PARAMS,
                "message.contextId: the context is still answering another message",
            ),
            StartError::InvalidRequestId { .. } => {
                Self::new(code::INVALID_PARAMS, format!("message.messageId: {error}"))
            }
            StartError::Store(_) => Self::new(code::INTERNAL, "the task could not be recorded"),
            other => Self::new(code::INTERNAL, other.to_string()),
        }
    }
}

/// One JSON-RPC request.
#[derive(Debug, Deserialize)]
struct RpcRequest {
    jsonrpc: Option<String>,
    #[serde(default)]
    id: Value,
    method: Option<String>,
    #[serde(default)]
    params: Value,
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn rpc_error(id: &Value, error: &RpcError) -> Value {
    let mut body = json!({"code": error.code, "message": error.message});
    if let Some(data) = &error.data {
        body["data"] = data.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "error": body})
}

/// The A2A methods, by either revision's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Send,
    Stream,
    Get,
    List,
    Cancel,
    Subscribe,
    SetPushConfig,
    GetPushConfig,
    ListPushConfigs,
    DeletePushConfig,
}

fn method(name: &str) -> Option<(Method, Dialect)> {
    Some(match name {
        "SendMessage" => (Method::Send, Dialect::V1),
        "SendStreamingMessage" => (Method::Stream, Dialect::V1),
        "GetTask" => (Method::Get, Dialect::V1),
        "ListTasks" => (Method::List, Dialect::V1),
        "CancelTask" => (Method::Cancel, Dialect::V1),
        "SubscribeToTask" => (Method::Subscribe, Dialect::V1),
        "CreateTaskPushNotificationConfig" => (Method::SetPushConfig, Dialect::V1),
        "GetTaskPushNotificationConfig" => (Method::GetPushConfig, Dialect::V1),
        "ListTaskPushNotificationConfigs" => (Method::ListPushConfigs, Dialect::V1),
        "DeleteTaskPushNotificationConfig" => (Method::DeletePushConfig, Dialect::V1),
        "tasks/pushNotificationConfig/set" => (Method::SetPushConfig, Dialect::V03),
        "tasks/pushNotificationConfig/get" => (Method::GetPushConfig, Dialect::V03),
        "tasks/pushNotificationConfig/list" => (Method::ListPushConfigs, Dialect::V03),
        "tasks/pushNotificationConfig/delete" => (Method::DeletePushConfig, Dialect::V03),
        "message/send" => (Method::Send, Dialect::V03),
        "message/stream" => (Method::Stream, Dialect::V03),
        "tasks/get" => (Method::Get, Dialect::V03),
        "tasks/list" => (Method::List, Dialect::V03),
        "tasks/cancel" => (Method::Cancel, Dialect::V03),
        "tasks/resubscribe" => (Method::Subscribe, Dialect::V03),
        _ => return None,
    })
}

fn params<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, RpcError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        RpcError::new(
            code::INVALID_PARAMS,
            format!("params.{path}: {}", error.into_inner()),
        )
    })
}

/// The base URL clients reached this server at, for the cards' interface URLs.
fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get("x-forwarded-host")
        .or_else(|| headers.get(axum::http::header::HOST))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("http");
    format!("{scheme}://{host}")
}

fn skill(agent: &AgentSpec) -> Value {
    let output = if agent.output_format == "json" {
        "application/json"
    } else {
        "text/plain"
    };
    json!({
        "id": agent.name,
        "name": agent.name,
        "description": if agent.description.is_empty() { format!("The {} agent.", agent.name) } else { agent.description.clone() },
        "tags": ["agentd"],
        "inputModes": if agent.input_schema.is_some() { json!(["application/json"]) } else { json!(["text/plain"]) },
        "outputModes": [output],
    })
}

fn card(name: &str, description: &str, url: &str, skills: Vec<Value>) -> Value {
    json!({
        "name": name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": PROTOCOL_VERSION},
        ],
        // 0.3 clients read these.
        "url": url,
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": true},
        // 1.0's shape (`httpAuthSecurityScheme`) beside 0.3's (`type`, `scheme`): a 1.0 client
        // ignores the 0.3 fields (the a2a-sdk maps them), a 0.3 one the 1.0 field.
        "securitySchemes": {"bearer": {
            "type": "http", "scheme": "Bearer",
            "httpAuthSecurityScheme": {"scheme": "Bearer"},
        }},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
    })
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct A2aAgentPath {
    /// The agent's name.
    agent: String,
}

#[utoipa::path(
    get,
    path = "/.well-known/agent-card.json",
    tag = "a2a",
    summary = "The server's A2A agent card: every agent this key may use as a skill",
    responses(
        (status = 200, description = "The agent card", body = Object),
        ErrorBody,
    ),
)]
pub async fn server_card(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let base = base_url(&headers);
    let agents: Vec<Arc<AgentSpec>> = runtime
        .agents()
        .iter()
        .filter(|a| caller.may_use_agent(&a.name))
        .cloned()
        .collect();
    // The server's own interface is its first agent's; each agent has its own card too.
    let url = agents.first().map_or_else(
        || format!("{base}/a2a"),
        |a| format!("{base}/a2a/{}", a.name),
    );
    let skills = agents.iter().map(|a| skill(a)).collect();
    axum::Json(card(
        "agentd",
        "agentd agents; each has its own card at /a2a/{agent}/.well-known/agent-card.json",
        &url,
        skills,
    ))
    .into_response()
}

#[utoipa::path(
    get,
    path = "/a2a/{agent}/.well-known/agent-card.json",
    tag = "a2a",
    summary = "One agent's A2A agent card",
    params(A2aAgentPath),
    responses(
        (status = 200, description = "The agent card", body = Object),
        ErrorBody,
    ),
)]
pub async fn agent_card(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aAgentPath { agent: name }): ApiPath<A2aAgentPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let agent = caller.named_agent(&runtime, &name)?;
    Ok(axum::Json(agent_card_of(&agent, &headers)).into_response())
}

/// One agent's card, its interfaces at the URL the client reached this server at.
fn agent_card_of(agent: &AgentSpec, headers: &HeaderMap) -> Value {
    let url = format!("{}/a2a/{}", base_url(headers), agent.name);
    let description = if agent.description.is_empty() {
        format!("The {} agent.", agent.name)
    } else {
        agent.description.clone()
    };
    card(&agent.name, &description, &url, vec![skill(agent)])
}

#[utoipa::path(
    post,
    path = "/a2a/{agent}",
    tag = "a2a",
    summary = "A2A JSON-RPC: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, the push-notification config methods (and the 0.3 names)",
    params(A2aAgentPath),
    request_body(content = Object, description = "One JSON-RPC request", content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC response; streaming methods answer with SSE frames each holding one", content(
            (Object = "application/json"),
            (crate::http::wire::ServerSentEvent = "text/event-stream"),
        )),
        ErrorBody,
    ),
)]
pub async fn rpc(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aAgentPath { agent: name }): ApiPath<A2aAgentPath>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let agent = caller.named_agent(&runtime, &name)?;
    let request: RpcRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            let error = RpcError::new(
                code::PARSE_ERROR,
                format!("the body is not a JSON-RPC request: {error}"),
            );
            return Ok(axum::Json(rpc_error(&Value::Null, &error)).into_response());
        }
    };
    let id = request.id.clone();
    let span = crate::telemetry::genai::a2a_server_span(
        request.method.as_deref().unwrap_or(""),
        &agent.name,
    );
    let answer = dispatch(&runtime, &caller, agent, request)
        .instrument(span)
        .await;
    Ok(match answer {
        Ok(Answer::Json(result)) => axum::Json(rpc_result(&id, result)).into_response(),
        Ok(Answer::Stream { run, dialect }) => {
            let events = Events::followed(&runtime, run.id.clone(), 0);
            let translator = tasks::TaskTranslator::new(&run, dialect);
            let stream = drive::stream(&runtime, events, translator, OnLeave::Continue);
            with_run_headers(stream, &run.id, None)
        }
        Err(error) => axum::Json(rpc_error(&id, &error)).into_response(),
    })
}

enum Answer {
    Json(Value),
    /// The task as it is, then its events as status and artifact updates until it ends.
    Stream {
        run: Box<RunRecord>,
        dialect: Dialect,
    },
}

async fn dispatch(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    agent: Arc<AgentSpec>,
    request: RpcRequest,
) -> Result<Answer, RpcError> {
    if request.jsonrpc.as_deref() != Some("2.0") {
        return Err(RpcError::new(
            code::INVALID_REQUEST,
            "`jsonrpc` must be \"2.0\"",
        ));
    }
    let name = request
        .method
        .ok_or_else(|| RpcError::new(code::INVALID_REQUEST, "`method` is missing"))?;
    let (method, dialect) = method(&name).ok_or_else(|| {
        RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("no method `{name}`: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, Create/Get/List/DeleteTaskPushNotificationConfig (or their 0.3 names)"),
        )
    })?;
    let p = request.params;
    match method {
        Method::Send => send(runtime, caller, agent, params(p)?, dialect).await,
        Method::Stream => stream(runtime, caller, agent, params(p)?, dialect).await,
        Method::Get => {
            let p: wire::TaskParams = params(p)?;
            let run = task_run(runtime, caller, &agent, &p.id).await?;
            Ok(Answer::Json(
                tasks::task_of_run(&run, p.history_length, dialect).to_json(dialect),
            ))
        }
        Method::List => list(runtime, caller, &agent, params(p)?, dialect).await,
        Method::Cancel => cancel(runtime, caller, &agent, params(p)?, dialect).await,
        Method::Subscribe => subscribe(runtime, caller, &agent, params(p)?, dialect).await,
        Method::SetPushConfig => set_push_config(runtime, caller, &agent, p, dialect).await,
        Method::GetPushConfig => {
            let (task, id) = params::<push::ConfigRef>(p)?.names(dialect)?;
            task_run(runtime, caller, &agent, &task).await?;
            let config = push::find(runtime, caller, &task, &id).await?;
            Ok(Answer::Json(push::to_json(&config, dialect)))
        }
        Method::ListPushConfigs => {
            let task = params::<push::ListParams>(p)?.task(dialect)?;
            task_run(runtime, caller, &agent, &task).await?;
            let configs = runtime
                .push_configs(&task, &push::owner(caller))
                .await
                .map_err(|_| RpcError::new(code::INTERNAL, "the configs could not be listed"))?;
            let configs: Vec<Value> = configs.iter().map(|c| push::to_json(c, dialect)).collect();
            Ok(Answer::Json(match dialect {
                Dialect::V1 => json!({"configs": configs, "nextPageToken": ""}),
                Dialect::V03 => json!(configs),
            }))
        }
        Method::DeletePushConfig => {
            let (task, id) = params::<push::ConfigRef>(p)?.names(dialect)?;
            task_run(runtime, caller, &agent, &task).await?;
            let deleted = runtime
                .delete_push_config(&task, &push::owner(caller), &id)
                .await
                .map_err(|_| RpcError::new(code::INTERNAL, "the config could not be deleted"))?;
            if !deleted {
                return Err(push::not_found(&task, &id));
            }
            Ok(Answer::Json(match dialect {
                Dialect::V1 => json!({}),
                Dialect::V03 => Value::Null,
            }))
        }
    }
}

/// `CreateTaskPushNotificationConfig` / `tasks/pushNotificationConfig/set`.
async fn set_push_config(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    agent: &AgentSpec,
    p: Value,
    dialect: Dialect,
) -> Result<Answer, RpcError> {
    let (task, incoming, field) = match dialect {
        Dialect::V1 => {
            let p: push::CreateParams = params(p)?;
            (p.task_id, p.config, "params")
        }
        Dialect::V03 => {
            let p: push::SetParams = params(p)?;
            (
                p.task_id,
                p.push_notification_config,
                "params.pushNotificationConfig",
            )
        }
    };
    let run = task_run(runtime, caller, agent, &task).await?;
    let config = push::checked(runtime, caller, &run.id, incoming, dialect, field)?;
    push::store(runtime, &config).await?;
    Ok(Answer::Json(push::to_json(&config, dialect)))
}

/// The push-notification config a message's `configuration` carries, checked before the task
/// starts (stored once it has an id).
fn message_push_config(
    configuration: &wire::SendConfiguration,
) -> Option<(push::IncomingConfig, &'static str)> {
    match (
        &configuration.task_push_notification_config,
        &configuration.push_notification_config,
    ) {
        (Some(config), _) => Some((
            config.clone(),
            "params.configuration.taskPushNotificationConfig",
        )),
        (None, Some(config)) => Some((
            config.clone(),
            "params.configuration.pushNotificationConfig",
        )),
        (None, None) => None,
    }
}

/// Checks the message's push-notification config (its URL through the address guard) before
/// anything starts; the id is the task's once it has one.
fn checked_message_push(
    runtime: &Runtime,
    caller: &Caller,
    configuration: &wire::SendConfiguration,
    dialect: Dialect,
) -> Result<Option<push::PendingConfig>, RpcError> {
    let Some((incoming, field)) = message_push_config(configuration) else {
        return Ok(None);
    };
    // Checked under a placeholder task id; the real one is set once the task starts.
    let config = push::checked(runtime, caller, "", incoming.clone(), dialect, field)?;
    Ok(Some(push::PendingConfig {
        config,
        explicit_id: incoming.id.filter(|id| !id.is_empty()).is_some(),
    }))
}

/// Stores a message's checked config for the task it started.
async fn store_message_push(
    runtime: &Runtime,
    pending: Option<push::PendingConfig>,
    task_id: &str,
) -> Result<(), RpcError> {
    let Some(pending) = pending else {
        return Ok(());
    };
    let mut config = pending.config;
    config.task_id = task_id.to_string();
    if !pending.explicit_id {
        config.id = task_id.to_string();
    }
    push::store(runtime, &config).await
}

/// The run a task id names, if it is this agent's and the caller may see it.
async fn task_run(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    id: &str,
) -> Result<RunRecord, RpcError> {
    let run = runtime
        .find_run(id)
        .await
        .map_err(|_| RpcError::new(code::INTERNAL, "the task could not be read"))?
        .ok_or_else(|| RpcError::task_not_found(id))?;
    if !caller.may_see_run(&run) || run.agent != agent.name {
        return Err(RpcError::task_not_found(id));
    }
    Ok(run)
}

/// How long a run whose `run.finished` event was seen may take to be recorded as ended.
const END_RECORD_WAIT: Duration = Duration::from_secs(5);
const END_RECORD_POLL: Duration = Duration::from_millis(20);

/// The task's run once its end is recorded (its `run.finished` event comes a moment before),
/// or as it is after [`END_RECORD_WAIT`].
async fn ended_task_run(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    id: &str,
) -> Result<RunRecord, RpcError> {
    let deadline = tokio::time::Instant::now() + END_RECORD_WAIT;
    loop {
        let run = task_run(runtime, caller, agent, id).await?;
        let ended = TaskState::from_run_status(run.status).is_terminal();
        if ended || tokio::time::Instant::now() >= deadline {
            return Ok(run);
        }
        tokio::time::sleep(END_RECORD_POLL).await;
    }
}

/// The run an incoming message starts: its prompt, the conversation its `contextId` names.
fn submission(
    caller: &Caller,
    agent: Arc<AgentSpec>,
    message: &wire::IncomingMessage,
) -> Result<RunSubmission, RpcError> {
    if message.task_id.as_deref().is_some_and(|t| !t.is_empty()) {
        return Err(RpcError::new(
            code::UNSUPPORTED_OPERATION,
            "message.taskId: a task takes no further messages; send without taskId (with its contextId to continue the conversation)",
        ));
    }
    let prompt = message.prompt();
    if prompt.trim().is_empty() {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            "message.parts: no text or data part, or only empty ones",
        ));
    }
    let mut submission = caller.submission(agent, prompt);
    if submission.user_id.is_none() {
        submission.user_id = Some(KEYLESS_A2A_USER.to_string());
    }
    submission.request_id = message.message_id.clone().filter(|id| !id.is_empty());
    // A task runs on when its client leaves; CancelTask ends it. Its id is the client's to
    // ask about later.
    submission.on_disconnect = OnDisconnect::Continue;
    submission.handed_out = true;
    submission.conversation = Some(match message.context_id.as_deref() {
        Some(id) if !id.is_empty() => ConversationTurn::Continue(id.to_string()),
        _ => ConversationTurn::Start,
    });
    Ok(submission)
}

/// The message's `FilePart`s, stored (SPEC §11); a refused one is invalid params naming it.
async fn files(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    message: &wire::IncomingMessage,
) -> Result<Vec<crate::vocabulary::Attachment>, RpcError> {
    let mut intake = AttachmentIntake::new(runtime, caller, agent);
    let mut stored = Vec::new();
    for (part, file) in message.files() {
        let attachment = intake
            .chat_attachment(&file, &part)
            .await
            .map_err(|error| RpcError::new(code::INVALID_PARAMS, error.message))?;
        stored.push(attachment);
    }
    Ok(stored)
}

/// Starts the run, or finds the one an earlier delivery of the same message started.
async fn start(runtime: &Arc<Runtime>, submission: RunSubmission) -> Result<String, RpcError> {
    match runtime.start_run(submission).await {
        Ok(handle) => {
            let run_id = handle.run_id.clone();
            // The run is followed from the store; its events are not read here.
            drop(handle.into_result());
            Ok(run_id)
        }
        Err(StartError::AlreadySubmitted { run_id }) => Ok(run_id),
        Err(error) => Err(error.into()),
    }
}

async fn send(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    agent: Arc<AgentSpec>,
    params: wire::SendParams,
    dialect: Dialect,
) -> Result<Answer, RpcError> {
    let configuration = params.configuration.unwrap_or_default();
    let immediately =
        configuration.return_immediately == Some(true) || configuration.blocking == Some(false);
    let pending_push = checked_message_push(runtime, caller, &configuration, dialect)?;
    let mut submission = submission(caller, Arc::clone(&agent), &params.message)?;
    submission.attachments = files(runtime, caller, &agent, &params.message).await?;
    let run_id = start(runtime, submission).await?;
    store_message_push(runtime, pending_push, &run_id).await?;
    if !immediately {
        // Wait for the run's end: follow its events until `run.finished`.
        drive::until_finished(Events::followed(runtime, run_id.clone(), 0))
            .await
            .map_err(|error| RpcError::new(code::INTERNAL, error.to_string()))?;
    }
    let run = if immediately {
        task_run(runtime, caller, &agent, &run_id).await?
    } else {
        ended_task_run(runtime, caller, &agent, &run_id).await?
    };
    let task = tasks::task_of_run(&run, configuration.history_length, dialect).to_json(dialect);
    Ok(Answer::Json(match dialect {
        Dialect::V1 => json!({"task": task}),
        Dialect::V03 => task,
    }))
}

async fn stream(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    agent: Arc<AgentSpec>,
    params: wire::SendParams,
    dialect: Dialect,
) -> Result<Answer, RpcError> {
    let configuration = params.configuration.clone().unwrap_or_default();
    let pending_push = checked_message_push(runtime, caller, &configuration, dialect)?;
    let mut submission = submission(caller, Arc::clone(&agent), &params.message)?;
    submission.attachments = files(runtime, caller, &agent, &params.message).await?;
    let run_id = start(runtime, submission).await?;
    store_message_push(runtime, pending_push, &run_id).await?;
    let run = task_run(runtime, caller, &agent, &run_id).await?;
    Ok(Answer::Stream {
        run: Box::new(run),
        dialect,
    })
}

async fn subscribe(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    agent: &AgentSpec,
    params: wire::TaskParams,
    dialect: Dialect,
) -> Result<Answer, RpcError> {
    let run = task_run(runtime, caller, agent, &params.id).await?;
    if TaskState::from_run_status(run.status).is_terminal() {
        return Err(RpcError::new(
            code::UNSUPPORTED_OPERATION,
            format!(
                "task `{}` has ended ({}); GetTask reads it",
                run.id, run.status
            ),
        ));
    }
    Ok(Answer::Stream {
        run: Box::new(run),
        dialect,
    })
}

async fn cancel(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    agent: &AgentSpec,
    params: wire::TaskParams,
    dialect: Dialect,
) -> Result<Answer, RpcError> {
    let run = task_run(runtime, caller, agent, &params.id).await?;
    let not_cancelable = |status: RunStatus| {
        RpcError::new(
            code::TASK_NOT_CANCELABLE,
            format!("task `{}` is not running (status {status})", params.id),
        )
    };
    match runtime.cancel_run(&run.id, CancelMode::Abort).await {
        Ok(CancelOutcome::Cancelled | CancelOutcome::Requested) => {}
        Ok(CancelOutcome::NotRunning(status)) => return Err(not_cancelable(status)),
        Ok(CancelOutcome::NotFound) => return Err(RpcError::task_not_found(&params.id)),
        Err(_) => {
            return Err(RpcError::new(
                code::INTERNAL,
                "the task could not be cancelled",
            ));
        }
    }
    // Answer with the ended task when it ends soon, else as it is.
    let events = Events::followed(runtime, run.id.clone(), 0);
    // A follow that failed ends the wait as the run's end would.
    let finished = tokio::time::timeout(CANCEL_WAIT, drive::until_finished(events)).await;
    let run = match finished {
        Ok(_) => ended_task_run(runtime, caller, agent, &run.id).await?,
        Err(_) => task_run(runtime, caller, agent, &run.id).await?,
    };
    Ok(Answer::Json(
        tasks::task_of_run(&run, params.history_length, dialect).to_json(dialect),
    ))
}

async fn list(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    agent: &AgentSpec,
    params: wire::ListParams,
    dialect: Dialect,
) -> Result<Answer, RpcError> {
    let page_size = params
        .page_size
        .filter(|s| *s > 0)
        .unwrap_or(DEFAULT_PAGE_SIZE);
    if page_size > MAX_PAGE_SIZE {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            format!("params.pageSize: at most {MAX_PAGE_SIZE}"),
        ));
    }
    let statuses = match params
        .status
        .as_deref()
        .filter(|s| !s.is_empty() && *s != "TASK_STATE_UNSPECIFIED")
    {
        Some(state) => vec![
            TaskState::parse(state)
                .ok_or_else(|| {
                    RpcError::new(
                        code::INVALID_PARAMS,
                        format!("params.status: no task state `{state}`"),
                    )
                })?
                .run_status()
                .to_string(),
        ],
        None => Vec::new(),
    };
    let filter = RunFilter {
        owner: caller.own_runs(),
        agent: Some(agent.name.clone()),
        agents_allowed: None,
        statuses,
        conversation_id: params.context_id.filter(|c| !c.is_empty()),
        after: params
            .page_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(page_cursor)
            .transpose()?,
        limit: page_size,
    };
    let runs = runtime
        .list_runs(&filter)
        .await
        .map_err(|_| RpcError::new(code::INTERNAL, "the tasks could not be listed"))?;
    let next_page_token = if runs.len() == page_size as usize {
        runs.last()
            .map(|r| PageCursor::encode(r.created_at, &r.id))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let tasks: Vec<Value> = runs
        .iter()
        .map(|run| {
            tasks::task_of_run(run, Some(params.history_length.unwrap_or(0)), dialect)
                .to_json(dialect)
        })
        .collect();
    Ok(Answer::Json(json!({
        "tasks": tasks,
        "nextPageToken": next_page_token,
        "pageSize": page_size,
        "totalSize": tasks.len(),
    })))
}

/// A `nextPageToken` this server returned: `<created_at in µs>|<task id>`.
fn page_cursor(token: &str) -> Result<RunCursor, RpcError> {
    let cursor = PageCursor::parse(token).ok_or_else(|| {
        RpcError::new(
            code::INVALID_PARAMS,
            "params.pageToken: not a nextPageToken this server returned",
        )
    })?;
    Ok(RunCursor {
        created_at: cursor.at,
        id: cursor.id,
    })
}
