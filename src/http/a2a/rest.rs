//! A2A 1.0's HTTP+JSON binding (SPEC §15) beside JSON-RPC, under the same agent URL:
//! `POST /a2a/{agent}/message:send`, `POST …/message:stream`, `GET …/tasks`,
//! `GET …/tasks/{id}`, `POST …/tasks/{id}:cancel`, `GET|POST …/tasks/{id}:subscribe` and
//! `GET …/extendedAgentCard`, and a task's push-notification configs at
//! `…/tasks/{id}/pushNotificationConfigs[/{config_id}]`. Each request is the JSON-RPC method's `params` (query parameters
//! for the reads) and is answered by the same dispatch: results as `application/a2a+json`
//! without an envelope, streams as SSE frames each holding one `StreamResponse`, errors as
//! `google.rpc.Status` with an `ErrorInfo` naming the A2A reason, at the binding's HTTP status.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::tasks::TaskTranslator;
use super::{A2aAgentPath, Answer, RpcError, RpcRequest, code, dispatch};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiPath, ErrorBody};
use crate::http::shared::drive::{self, Events, OnLeave};
use crate::http::sse::with_run_headers;
use crate::runtime::Runtime;

/// The binding's media type.
const A2A_JSON: &str = "application/a2a+json";
/// The domain of the binding's `ErrorInfo`s.
const ERROR_DOMAIN: &str = "a2a-protocol.org";
/// JSON-RPC's "retry later" codes, as the A2A errors carry them.
const RATE_LIMITED: i64 = crate::http::json_rpc::RATE_LIMITED as i64;
const UNAVAILABLE: i64 = crate::http::json_rpc::UNAVAILABLE as i64;
/// Query parameters read as numbers (the rest stay strings).
const NUMERIC_QUERY: [&str; 2] = ["pageSize", "historyLength"];

/// `{agent}/tasks/{task}`: a task id, or a task id with its custom method (`ID:cancel`).
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct A2aTaskPath {
    /// The agent's name.
    agent: String,
    /// The task id; `POST` takes `{id}:cancel` or `{id}:subscribe`, `GET` `{id}:subscribe` too.
    task: String,
}

/// The binding's error answer, shared by every route of it: a `google.rpc.Status` naming the
/// A2A reason (`application/a2a+json`), or agentd's error for an unknown agent or a refused key.
pub struct A2aErrors;

impl utoipa::IntoResponses for A2aErrors {
    fn responses() -> std::collections::BTreeMap<
        String,
        utoipa::openapi::RefOr<utoipa::openapi::response::Response>,
    > {
        use utoipa::openapi::{Content, ObjectBuilder, Ref, ResponseBuilder, Type};
        let status = ResponseBuilder::new()
            .description(
                "A google.rpc.Status naming the A2A reason; an unknown agent or a refused key as agentd's error",
            )
            .content(
                A2A_JSON,
                Content::new(Some(ObjectBuilder::new().schema_type(Type::Object).build())),
            )
            .content(
                "application/json",
                Content::new(Some(Ref::from_schema_name("ErrorBody"))),
            )
            .build();
        std::collections::BTreeMap::from([("default".to_string(), status.into())])
    }
}

/// What a task route asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskVerb {
    Get,
    Cancel,
    Subscribe,
}

/// Splits `ID:verb`; a bare id is a read (GET only).
fn task_verb(segment: &str, is_post: bool) -> Option<(&str, TaskVerb)> {
    match segment.rsplit_once(':') {
        Some((id, "cancel")) if is_post => Some((id, TaskVerb::Cancel)),
        Some((id, "subscribe")) => Some((id, TaskVerb::Subscribe)),
        Some(_) => None,
        None if !is_post => Some((segment, TaskVerb::Get)),
        None => None,
    }
}

/// The query string as method params: `pageSize` and `historyLength` as numbers.
fn query_params(query: HashMap<String, String>) -> Result<Value, RpcError> {
    let mut params = Map::new();
    for (name, value) in query {
        let value = if NUMERIC_QUERY.contains(&name.as_str()) {
            value.parse::<u64>().map(Value::from).map_err(|_| {
                RpcError::new(
                    code::INVALID_PARAMS,
                    format!("{name}: `{value}` is not a whole number"),
                )
            })?
        } else {
            Value::String(value)
        };
        params.insert(name, value);
    }
    Ok(Value::Object(params))
}

/// The binding's HTTP status, gRPC status and A2A reason of a JSON-RPC error code.
fn error_mapping(code: i64) -> (StatusCode, &'static str, &'static str) {
    match code {
        code::TASK_NOT_FOUND => (StatusCode::NOT_FOUND, "NOT_FOUND", "TASK_NOT_FOUND"),
        code::TASK_NOT_CANCELABLE => (
            StatusCode::BAD_REQUEST,
            "FAILED_PRECONDITION",
            "TASK_NOT_CANCELABLE",
        ),
        code::UNSUPPORTED_OPERATION => (
            StatusCode::BAD_REQUEST,
            "FAILED_PRECONDITION",
            "UNSUPPORTED_OPERATION",
        ),
        code::INVALID_PARAMS => (
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "INVALID_PARAMS",
        ),
        code::INVALID_REQUEST | code::PARSE_ERROR => (
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "INVALID_REQUEST",
        ),
        code::METHOD_NOT_FOUND => (StatusCode::NOT_FOUND, "NOT_FOUND", "METHOD_NOT_FOUND"),
        RATE_LIMITED => (
            StatusCode::TOO_MANY_REQUESTS,
            "RESOURCE_EXHAUSTED",
            "RATE_LIMITED",
        ),
        UNAVAILABLE => (
            StatusCode::SERVICE_UNAVAILABLE,
            "UNAVAILABLE",
            "UNAVAILABLE",
        ),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            "INTERNAL_ERROR",
        ),
    }
}

/// An error as the binding answers it: `{"error": {code, status, message, details: [ErrorInfo]}}`,
/// with `Retry-After` when the JSON-RPC error says how long to wait.
fn error_response(error: &RpcError) -> Response {
    let (status, grpc_status, reason) = error_mapping(error.code);
    let metadata: Map<String, Value> = error
        .data
        .as_ref()
        .and_then(Value::as_object)
        .map(|data| {
            data.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        Value::String(v.to_string().trim_matches('"').into()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let body = json!({"error": {
        "code": status.as_u16(),
        "status": grpc_status,
        "message": error.message,
        "details": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": ERROR_DOMAIN,
            "metadata": metadata,
        }],
    }});
    let mut response = (status, a2a_json(body)).into_response();
    let retry_after = error
        .data
        .as_ref()
        .and_then(|d| d.get("retry_after_seconds"))
        .and_then(Value::as_u64);
    if let Some(seconds) = retry_after
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// A JSON body labelled with the binding's media type.
fn a2a_json(body: Value) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(A2A_JSON))],
        body.to_string(),
    )
        .into_response()
}

/// Runs `method` with `params` through the JSON-RPC dispatch and answers in the binding's form.
async fn answer(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    agent_name: &str,
    method: &str,
    params: Value,
) -> Result<Response, ApiError> {
    let agent = caller.named_agent(runtime, agent_name)?;
    let request = RpcRequest {
        jsonrpc: Some("2.0".into()),
        id: Value::Null,
        method: Some(method.into()),
        params,
    };
    let span = crate::telemetry::genai::a2a_server_span(method, &agent.name);
    let answer = dispatch(runtime, caller, agent, request)
        .instrument(span)
        .await;
    Ok(match answer {
        Ok(Answer::Json(result)) => a2a_json(result),
        Ok(Answer::Stream { run, dialect }) => {
            let events = Events::followed(runtime, run.id.clone(), 0);
            let translator = TaskTranslator::without_envelope(&run, dialect);
            let stream = drive::stream(runtime, events, translator, OnLeave::Continue);
            with_run_headers(stream, &run.id, None)
        }
        Err(error) => error_response(&error),
    })
}

/// The request body as params: an empty body is `{}`; anything else must be a JSON object.
fn body_params(body: &[u8]) -> Result<Value, RpcError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(RpcError::new(
            code::INVALID_REQUEST,
            "the body must be a JSON object",
        )),
        Err(error) => Err(RpcError::new(
            code::PARSE_ERROR,
            format!("the body is not JSON: {error}"),
        )),
    }
}

#[utoipa::path(
    post,
    path = "/a2a/{agent}/message:send",
    tag = "a2a",
    summary = "A2A HTTP+JSON: send a message (SendMessage); the task or message as application/a2a+json",
    params(A2aAgentPath),
    request_body(content = Object, description = "A SendMessageRequest", content_type = "application/json"),
    responses(
        (status = 200, description = "A SendMessageResponse", content_type = "application/a2a+json", body = Object),
        A2aErrors,
    ),
)]
pub async fn message_send(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aAgentPath { agent }): ApiPath<A2aAgentPath>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    match body_params(&body) {
        Ok(params) => answer(&runtime, &caller, &agent, "SendMessage", params).await,
        Err(error) => Ok(error_response(&error)),
    }
}

#[utoipa::path(
    post,
    path = "/a2a/{agent}/message:stream",
    tag = "a2a",
    summary = "A2A HTTP+JSON: send a message and stream the task (SendStreamingMessage)",
    params(A2aAgentPath),
    request_body(content = Object, description = "A SendMessageRequest", content_type = "application/json"),
    responses(
        (status = 200, description = "SSE frames, each one StreamResponse", content_type = "text/event-stream", body = crate::http::wire::ServerSentEvent),
        A2aErrors,
    ),
)]
pub async fn message_stream(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aAgentPath { agent }): ApiPath<A2aAgentPath>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    match body_params(&body) {
        Ok(params) => answer(&runtime, &caller, &agent, "SendStreamingMessage", params).await,
        Err(error) => Ok(error_response(&error)),
    }
}

#[utoipa::path(
    get,
    path = "/a2a/{agent}/tasks",
    tag = "a2a",
    summary = "A2A HTTP+JSON: the agent's tasks (ListTasks; pageSize, pageToken, contextId, status, historyLength)",
    params(A2aAgentPath),
    responses(
        (status = 200, description = "A ListTasksResponse", content_type = "application/a2a+json", body = Object),
        A2aErrors,
    ),
)]
pub async fn list_tasks(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aAgentPath { agent }): ApiPath<A2aAgentPath>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    match query_params(query) {
        Ok(params) => answer(&runtime, &caller, &agent, "ListTasks", params).await,
        Err(error) => Ok(error_response(&error)),
    }
}

#[utoipa::path(
    get,
    path = "/a2a/{agent}/tasks/{task}",
    tag = "a2a",
    summary = "A2A HTTP+JSON: a task (GetTask; historyLength), or `{id}:subscribe` to follow it",
    params(A2aTaskPath),
    responses(
        (status = 200, description = "The Task, or SSE frames for `:subscribe`", content(
            (Object = "application/a2a+json"),
            (crate::http::wire::ServerSentEvent = "text/event-stream"),
        )),
        A2aErrors,
    ),
)]
pub async fn read_task(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aTaskPath { agent, task }): ApiPath<A2aTaskPath>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let Some((id, verb)) = task_verb(&task, false) else {
        return Ok(error_response(&unknown_task_method(&task)));
    };
    let mut params = match query_params(query) {
        Ok(params) => params,
        Err(error) => return Ok(error_response(&error)),
    };
    params["id"] = json!(id);
    let method = match verb {
        TaskVerb::Subscribe => "SubscribeToTask",
        _ => "GetTask",
    };
    answer(&runtime, &caller, &agent, method, params).await
}

#[utoipa::path(
    post,
    path = "/a2a/{agent}/tasks/{task}",
    tag = "a2a",
    summary = "A2A HTTP+JSON: `{id}:cancel` (CancelTask) or `{id}:subscribe` (SubscribeToTask)",
    params(A2aTaskPath),
    responses(
        (status = 200, description = "The Task, or SSE frames for `:subscribe`", content(
            (Object = "application/a2a+json"),
            (crate::http::wire::ServerSentEvent = "text/event-stream"),
        )),
        A2aErrors,
    ),
)]
pub async fn act_on_task(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aTaskPath { agent, task }): ApiPath<A2aTaskPath>,
) -> Result<Response, ApiError> {
    let Some((id, verb)) = task_verb(&task, true) else {
        return Ok(error_response(&unknown_task_method(&task)));
    };
    let method = match verb {
        TaskVerb::Cancel => "CancelTask",
        _ => "SubscribeToTask",
    };
    answer(&runtime, &caller, &agent, method, json!({"id": id})).await
}

/// `{agent}/tasks/{task}/pushNotificationConfigs/{config}`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct A2aPushConfigPath {
    /// The agent's name.
    agent: String,
    /// The task id.
    task: String,
    /// The config's id.
    config: String,
}

#[utoipa::path(
    post,
    path = "/a2a/{agent}/tasks/{task}/pushNotificationConfigs",
    tag = "a2a",
    summary = "A2A HTTP+JSON: give a task a push-notification receiver (CreateTaskPushNotificationConfig)",
    params(A2aTaskPath),
    request_body(content = Object, description = "A TaskPushNotificationConfig: url, token?, authentication?, id?", content_type = "application/json"),
    responses(
        (status = 200, description = "The config, its credentials left out", content_type = "application/a2a+json", body = Object),
        A2aErrors,
    ),
)]
pub async fn create_push_config(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aTaskPath { agent, task }): ApiPath<A2aTaskPath>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let mut params = match body_params(&body) {
        Ok(params) => params,
        Err(error) => return Ok(error_response(&error)),
    };
    params["taskId"] = json!(task);
    answer(
        &runtime,
        &caller,
        &agent,
        "CreateTaskPushNotificationConfig",
        params,
    )
    .await
}

#[utoipa::path(
    get,
    path = "/a2a/{agent}/tasks/{task}/pushNotificationConfigs",
    tag = "a2a",
    summary = "A2A HTTP+JSON: the caller's push-notification configs of a task (ListTaskPushNotificationConfigs)",
    params(A2aTaskPath),
    responses(
        (status = 200, description = "A ListTaskPushNotificationConfigsResponse", content_type = "application/a2a+json", body = Object),
        A2aErrors,
    ),
)]
pub async fn list_push_configs(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aTaskPath { agent, task }): ApiPath<A2aTaskPath>,
) -> Result<Response, ApiError> {
    let params = json!({"taskId": task});
    answer(
        &runtime,
        &caller,
        &agent,
        "ListTaskPushNotificationConfigs",
        params,
    )
    .await
}

#[utoipa::path(
    get,
    path = "/a2a/{agent}/tasks/{task}/pushNotificationConfigs/{config}",
    tag = "a2a",
    summary = "A2A HTTP+JSON: one of the caller's push-notification configs (GetTaskPushNotificationConfig)",
    params(A2aPushConfigPath),
    responses(
        (status = 200, description = "The config", content_type = "application/a2a+json", body = Object),
        A2aErrors,
    ),
)]
pub async fn get_push_config(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(path): ApiPath<A2aPushConfigPath>,
) -> Result<Response, ApiError> {
    on_push_config(&runtime, &caller, path, "GetTaskPushNotificationConfig").await
}

#[utoipa::path(
    delete,
    path = "/a2a/{agent}/tasks/{task}/pushNotificationConfigs/{config}",
    tag = "a2a",
    summary = "A2A HTTP+JSON: delete one of the caller's push-notification configs (DeleteTaskPushNotificationConfig)",
    params(A2aPushConfigPath),
    responses(
        (status = 200, description = "Deleted", content_type = "application/a2a+json", body = Object),
        A2aErrors,
    ),
)]
pub async fn delete_push_config(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(path): ApiPath<A2aPushConfigPath>,
) -> Result<Response, ApiError> {
    on_push_config(&runtime, &caller, path, "DeleteTaskPushNotificationConfig").await
}

/// `method` on the push-notification config `path` names.
async fn on_push_config(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    path: A2aPushConfigPath,
    method: &str,
) -> Result<Response, ApiError> {
    let params = json!({"taskId": path.task, "id": path.config});
    answer(runtime, caller, &path.agent, method, params).await
}

fn unknown_task_method(segment: &str) -> RpcError {
    RpcError::new(
        code::METHOD_NOT_FOUND,
        format!(
            "tasks/{segment}: GET takes `{{id}}` or `{{id}}:subscribe`, POST `{{id}}:cancel` or `{{id}}:subscribe`"
        ),
    )
}

#[utoipa::path(
    get,
    path = "/a2a/{agent}/extendedAgentCard",
    tag = "a2a",
    summary = "A2A: the agent's card for an authenticated caller (GetExtendedAgentCard)",
    params(A2aAgentPath),
    responses(
        (status = 200, description = "The agent card", content_type = "application/a2a+json", body = Object),
        (status = "default", description = "An unknown agent or a refused key", body = ErrorBody),
    ),
)]
pub async fn extended_card(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(A2aAgentPath { agent }): ApiPath<A2aAgentPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let agent = caller.named_agent(&runtime, &agent)?;
    Ok(a2a_json(super::agent_card_of(&agent, &headers)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_segments_name_their_method_by_http_verb() {
        assert_eq!(task_verb("t1", false), Some(("t1", TaskVerb::Get)));
        assert_eq!(task_verb("t1", true), None);
        assert_eq!(task_verb("t1:cancel", true), Some(("t1", TaskVerb::Cancel)));
        assert_eq!(task_verb("t1:cancel", false), None);
        assert_eq!(
            task_verb("t1:subscribe", false),
            Some(("t1", TaskVerb::Subscribe))
        );
        assert_eq!(task_verb("t1:pause", true), None);
    }

    #[test]
    fn numeric_query_parameters_are_numbers_and_bad_ones_are_named() {
        let query = HashMap::from([
            ("pageSize".to_string(), "10".to_string()),
            ("status".to_string(), "TASK_STATE_WORKING".to_string()),
        ]);
        let params = query_params(query).expect("params");
        assert_eq!(
            params,
            json!({"pageSize": 10, "status": "TASK_STATE_WORKING"})
        );
        let bad = query_params(HashMap::from([("pageSize".to_string(), "ten".to_string())]))
            .expect_err("refused");
        assert!(bad.message.contains("pageSize"), "{}", bad.message);
    }

    #[test]
    fn errors_carry_the_bindings_status_and_reason() {
        assert_eq!(
            error_mapping(code::TASK_NOT_FOUND),
            (StatusCode::NOT_FOUND, "NOT_FOUND", "TASK_NOT_FOUND")
        );
        assert_eq!(
            error_mapping(code::INVALID_PARAMS).0,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(error_mapping(RATE_LIMITED).0, StatusCode::TOO_MANY_REQUESTS);
    }
}
