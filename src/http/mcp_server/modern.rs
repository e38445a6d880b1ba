//! MCP 2026-07-28 (SPEC §15): the stateless revision, answered here rather than by rmcp, which
//! speaks the earlier ones. A request is of this revision when it names it (in
//! `_meta["io.modelcontextprotocol/protocolVersion"]` or the `MCP-Protocol-Version` header) or
//! is `server/discover`. This module owns `server/discover`, the `Mcp-Method` / `Mcp-Name`
//! header checks, `resultType` and the cache hints on results, and the Tasks extension
//! (`io.modelcontextprotocol/tasks`): a `tools/call` from a client declaring it is answered with
//! a task that IS the durable run (its id the run id), so `tasks/get`, `tasks/update` (an
//! approval's answer) and `tasks/cancel` work on any replica sharing the store.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use futures_util::StreamExt;

use super::param_headers;
use super::progress::{ProgressFrames, progress_token};
use super::tools::{agent_tool, call_input};
use crate::agent::approval::Decision;
use crate::config::{AgentSpec, OnDisconnect};
use crate::http::auth::Caller;
use crate::http::shared::drive::{self, Events, Frame, OnLeave};
use crate::http::sse::sse_response;
use crate::runtime::{CancelMode, CancelOutcome, RunHandle, Runtime, StartError};
use crate::store::RunRecord;
use crate::vocabulary::RunStatus;

/// The revision this module serves.
pub const VERSION: &str = "2026-07-28";
/// Every revision `/mcp` answers (the older two through rmcp).
pub const SUPPORTED_VERSIONS: [&str; 3] = [VERSION, "2025-11-25", "2025-06-18"];
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// How long a client may keep `tools/list` (the agents change only with the configuration).
const LIST_TTL_MS: u64 = 60_000;
/// How long a client may keep `server/discover`.
const DISCOVER_TTL_MS: u64 = 3_600_000;
/// The polling interval suggested for tasks.
const POLL_INTERVAL_MS: u64 = 1_000;

/// JSON-RPC and MCP error codes used here.
mod code {
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const HEADER_MISMATCH: i64 = -32020;
    pub const MISSING_CAPABILITY: i64 = -32021;
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}

/// A JSON-RPC error with the HTTP status it travels with.
#[derive(Debug)]
pub struct McpError {
    status: StatusCode,
    code: i64,
    message: String,
    data: Option<Value>,
}

impl McpError {
    pub(super) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::OK,
            code,
            message: message.into(),
            data: None,
        }
    }

    fn bad_request(code: i64, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            ..Self::new(code, message)
        }
    }

    pub(super) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    pub(super) fn internal(message: impl Into<String>) -> Self {
        Self::new(code::INTERNAL, message)
    }

    fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub(super) fn task_not_found(id: &str) -> Self {
        Self::invalid_params(format!("params.taskId: no task `{id}` for this key"))
    }

    /// The JSON-RPC error answering request `id`, with its HTTP status.
    pub(super) fn answer(self, id: Value) -> Response {
        let mut body = json!({"code": self.code, "message": self.message});
        if let Some(data) = self.data {
            body["data"] = data;
        }
        let answer = json!({"jsonrpc": "2.0", "id": id, "error": body});
        (self.status, axum::Json(answer)).into_response()
    }
}

impl From<rmcp::ErrorData> for McpError {
    fn from(error: rmcp::ErrorData) -> Self {
        Self {
            status: StatusCode::OK,
            code: i64::from(error.code.0),
            message: error.message.to_string(),
            data: error.data,
        }
    }
}

/// The methods this revision serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Discover,
    ListTools,
    CallTool,
    GetTask,
    UpdateTask,
    CancelTask,
    /// `subscriptions/listen`: task status notifications ([`super::subscriptions`]).
    Listen,
}

impl Method {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "server/discover" => Self::Discover,
            "tools/list" => Self::ListTools,
            "tools/call" => Self::CallTool,
            "tasks/get" => Self::GetTask,
            "tasks/update" => Self::UpdateTask,
            "tasks/cancel" => Self::CancelTask,
            "subscriptions/listen" => Self::Listen,
            _ => return None,
        })
    }

    fn is_task_method(self) -> bool {
        matches!(self, Self::GetTask | Self::UpdateTask | Self::CancelTask)
    }

    /// The body field `Mcp-Name` mirrors, for the methods that carry one.
    fn name_field(self) -> Option<&'static str> {
        match self {
            Self::CallTool => Some("name"),
            Self::GetTask | Self::UpdateTask | Self::CancelTask => Some("taskId"),
            Self::Discover | Self::ListTools | Self::Listen => None,
        }
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn meta(message: &Value) -> Option<&Map<String, Value>> {
    message
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object)
}

/// Whether `message` (with its headers) speaks the 2026-07-28 revision.
pub fn is_modern(headers: &HeaderMap, message: &Value) -> bool {
    let method = message.get("method").and_then(Value::as_str);
    method == Some("server/discover")
        || header(headers, "mcp-protocol-version") == Some(VERSION)
        || meta(message).is_some_and(|m| m.contains_key(META_VERSION))
}

/// A header value as the transport encodes it: plain ASCII, or `=?base64?…?=`.
pub(super) fn decoded_header(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_string()),
    }
}

/// The protocol version the request names, checked against the header and the served ones.
fn check_version(headers: &HeaderMap, message: &Value) -> Result<(), McpError> {
    let in_meta = meta(message)
        .and_then(|m| m.get(META_VERSION))
        .and_then(Value::as_str);
    let in_header = header(headers, "mcp-protocol-version").map(str::trim);
    // A disagreement is named before either value is judged.
    if let (Some(body), Some(sent)) = (in_meta, in_header)
        && body != sent
    {
        return Err(McpError::bad_request(
            code::HEADER_MISMATCH,
            format!(
                "Header mismatch: MCP-Protocol-Version header value '{sent}' does not match body value '{body}'"
            ),
        ));
    }
    let requested = in_meta.or(in_header);
    if let Some(requested) = requested
        && requested != VERSION
    {
        return Err(McpError::bad_request(
            code::UNSUPPORTED_VERSION,
            "Unsupported protocol version",
        )
        .with_data(json!({"supported": SUPPORTED_VERSIONS, "requested": requested})));
    }
    Ok(())
}

/// Every request of this revision carries its version and the client's capabilities in
/// `params._meta` (the client's info is optional).
fn check_meta(message: &Value) -> Result<(), McpError> {
    let missing = |what: String| McpError::bad_request(code::INVALID_PARAMS, what);
    let Some(found) = meta(message) else {
        return Err(missing(format!(
            "params._meta: missing; a {VERSION} request carries `{META_VERSION}` and `{META_CAPABILITIES}` there"
        )));
    };
    if !found.contains_key(META_VERSION) {
        return Err(missing(format!("params._meta: `{META_VERSION}` missing")));
    }
    match found.get(META_CAPABILITIES) {
        Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(missing(format!(
            "params._meta: `{META_CAPABILITIES}` must be an object"
        ))),
        None => Err(missing(format!(
            "params._meta: `{META_CAPABILITIES}` missing (send {{}} when the client declares none)"
        ))),
    }
}

/// `Mcp-Method` and `Mcp-Name` must be sent and match the body (SEP-2243).
fn check_headers(headers: &HeaderMap, method_name: &str, message: &Value) -> Result<(), McpError> {
    let mismatch = |what: String| McpError::bad_request(code::HEADER_MISMATCH, what);
    match header(headers, "mcp-method").map(str::trim) {
        None => {
            return Err(mismatch(
                "Header mismatch: the Mcp-Method header is missing".into(),
            ));
        }
        Some(sent) if sent != method_name => {
            return Err(mismatch(format!(
                "Header mismatch: Mcp-Method header value '{sent}' does not match body value '{method_name}'"
            )));
        }
        Some(_) => {}
    }
    let Some(field) = Method::parse(method_name).and_then(Method::name_field) else {
        return Ok(());
    };
    let body = message
        .get("params")
        .and_then(|p| p.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let sent = header(headers, "mcp-name").ok_or_else(|| {
        mismatch(format!(
            "Header mismatch: the Mcp-Name header is missing (it carries params.{field})"
        ))
    })?;
    match decoded_header(sent.trim()) {
        Some(sent) if sent == body => Ok(()),
        Some(sent) => Err(mismatch(format!(
            "Header mismatch: Mcp-Name header value '{sent}' does not match body value '{body}'"
        ))),
        None => Err(mismatch(
            "Header mismatch: Mcp-Name is not valid base64 in its =?base64?…?= form".into(),
        )),
    }
}

fn server_info() -> Value {
    json!({META_SERVER_INFO: {"name": "agentd", "version": env!("CARGO_PKG_VERSION")}})
}

/// A complete result: `resultType` and the server's identity added.
fn complete(mut result: Value) -> Value {
    if let Value::Object(map) = &mut result {
        map.insert("resultType".into(), json!("complete"));
        map.entry("_meta").or_insert_with(server_info);
    }
    result
}

/// Answers one 2026-07-28 message posted to `/mcp`.
pub async fn answer(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    headers: &HeaderMap,
    message: Value,
) -> Response {
    let Some(id) = message.get("id").cloned() else {
        // A notification: nothing to answer (`notifications/cancelled` is read before).
        return StatusCode::ACCEPTED.into_response();
    };
    let span = request_span(headers, &message);
    match dispatch(runtime, caller, headers, &message)
        .instrument(span)
        .await
    {
        Ok(Reply::Result(result)) => {
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
        }
        Ok(Reply::Stream(response)) => response,
        Err(error) => error.answer(id),
    }
}

/// How a request is answered: one JSON result, or an SSE stream (progress, then the result).
enum Reply {
    Result(Value),
    Stream(Response),
}

/// The request's server span: under the trace in its `_meta`, named by its method and, for a
/// tool call, the agent.
fn request_span(headers: &HeaderMap, message: &Value) -> tracing::Span {
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let params = message.get("params");
    let target = params
        .filter(|_| method == "tools/call")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str);
    let version = meta(message)
        .and_then(|m| m.get(META_VERSION))
        .and_then(Value::as_str)
        .or_else(|| header(headers, "mcp-protocol-version"));
    crate::telemetry::genai::mcp_server_span(method, target, version, meta(message))
}

async fn dispatch(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    headers: &HeaderMap,
    message: &Value,
) -> Result<Reply, McpError> {
    let method_name = message
        .get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::bad_request(code::INVALID_REQUEST, "method: missing"))?;
    check_version(headers, message)?;
    check_headers(headers, method_name, message)?;
    check_meta(message)?;
    let method = Method::parse(method_name).ok_or_else(|| McpError {
        status: StatusCode::NOT_FOUND,
        ..McpError::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: `{method_name}` (this server serves tools, tasks and task subscriptions)"),
        )
    })?;
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    if method.is_task_method() && !wants_tasks(&params) {
        return Err(missing_tasks_extension(format!(
            "`{method_name}` is a method of the {TASKS_EXTENSION} extension"
        )));
    }
    let result = match method {
        Method::Discover => discover(),
        Method::ListTools => list_tools(runtime, caller),
        Method::CallTool => {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            return call_tool(runtime, caller, headers, &params, id).await;
        }
        Method::GetTask => {
            let run = task_run(runtime, caller, &task_id(&params)?).await?;
            complete(task_view(runtime, &run).await?)
        }
        Method::Listen => {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            let stream = super::subscriptions::listen(runtime, caller, &params, id).await?;
            return Ok(Reply::Stream(stream));
        }
        Method::UpdateTask => update_task(runtime, caller, &params).await?,
        Method::CancelTask => cancel_task(runtime, caller, &params).await?,
    };
    Ok(Reply::Result(result))
}

fn discover() -> Value {
    complete(json!({
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": {"tools": {}, "extensions": {TASKS_EXTENSION: {}}},
        "instructions": "Each tool is an agentd agent: call it with a self-contained task (`prompt`) \
                         or the arguments its input schema asks for; the answer is its final report. \
                         Clients declaring io.modelcontextprotocol/tasks get a task to poll.",
        "ttlMs": DISCOVER_TTL_MS,
        "cacheScope": "public",
    }))
}

fn list_tools(runtime: &Arc<Runtime>, caller: &Caller) -> Value {
    let mut tools: Vec<Value> = runtime
        .agents()
        .iter()
        .filter(|agent| caller.may_use_agent(&agent.name))
        .filter_map(|agent| {
            let mut tool = serde_json::to_value(agent_tool(agent)).ok()?;
            tool["execution"] = json!({"taskSupport": task_support(agent)});
            Some(tool)
        })
        .collect();
    // A deterministic order, so clients and prompt caches can keep the list.
    tools.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    // The list depends on the key: shared caches must not keep it.
    complete(json!({"tools": tools, "ttlMs": LIST_TTL_MS, "cacheScope": "private"}))
}

/// An agent that asks a person to approve tool calls can be served only as a task (the
/// approval is the task's `input_required`); any other may be called either way.
fn task_support(agent: &AgentSpec) -> &'static str {
    if agent.approvals.is_empty() {
        "optional"
    } else {
        "required"
    }
}

/// The -32021 error of a request the client cannot be served without the Tasks extension.
pub(super) fn missing_tasks_extension(why: String) -> McpError {
    McpError::bad_request(
        code::MISSING_CAPABILITY,
        format!(
            "Missing required client capabilities: extensions ({why}: declare {TASKS_EXTENSION} \
             in _meta[\"{META_CAPABILITIES}\"])"
        ),
    )
    .with_data(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}))
}

fn tasks_required(agent: &str) -> McpError {
    missing_tasks_extension(format!(
        "agent `{agent}` asks a person to approve tool calls, which only a task can wait for"
    ))
}

/// The `Mcp-Param-*` headers the agent's input schema declares, checked against the call.
fn check_param_headers(
    headers: &HeaderMap,
    agent: &AgentSpec,
    params: &Value,
) -> Result<(), McpError> {
    let Some(schema) = &agent.input_schema else {
        return Ok(());
    };
    let declared = param_headers::declarations(schema);
    let arguments = params.get("arguments").unwrap_or(&Value::Null);
    param_headers::check(&declared, arguments, headers, decoded_header).map_err(|mismatch| {
        McpError::bad_request(
            code::HEADER_MISMATCH,
            format!("Header mismatch: {}", mismatch.message),
        )
        .with_data(json!({"mismatch": {"header": mismatch.header, "body": mismatch.message}}))
    })
}

/// Whether the request's client capabilities declare the Tasks extension.
pub(super) fn wants_tasks(params: &Value) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get(META_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some()
}

fn start_error(error: StartError) -> McpError {
    match error {
        StartError::InvalidOutput(_) => McpError::invalid_params(error.to_string()),
        other => McpError::internal(other.to_string()),
    }
}

async fn call_tool(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    headers: &HeaderMap,
    params: &Value,
    id: Value,
) -> Result<Reply, McpError> {
    let agent = called_agent(runtime, caller, params)?;
    check_param_headers(headers, &agent, params)?;
    if wants_tasks(params) {
        let mut task = task_base(&start_task(runtime, caller, params).await?);
        task["resultType"] = json!("task");
        return Ok(Reply::Result(task));
    }
    if !agent.approvals.is_empty() {
        return Err(tasks_required(&agent.name));
    }
    let handle = start_call(runtime, caller, params, OnDisconnect::Cancel).await?;
    if let Some(token) = progress_token(params) {
        return Ok(Reply::Stream(progress_stream(runtime, handle, token, id)));
    }
    let result = handle
        .result
        .await
        .map_err(|_| McpError::internal("the run ended without a result"))?;
    Ok(Reply::Result(complete_call_result(&result)))
}

fn complete_call_result(result: &crate::agent::AgentResult) -> Value {
    match serde_json::to_value(super::tools::call_result(result)) {
        Ok(value) => complete(value),
        Err(error) => {
            json!({"content": [{"type": "text", "text": error.to_string()}], "isError": true})
        }
    }
}

/// A call that asked for progress: `notifications/progress` with its token as the run works,
/// then the result, on one SSE stream; a client that leaves cancels the run.
fn progress_stream(runtime: &Arc<Runtime>, handle: RunHandle, token: Value, id: Value) -> Response {
    let on_leave = OnLeave::Cancel(handle.abort_on_drop());
    let RunHandle { events, result, .. } = handle;
    let last = futures_util::stream::once(async move {
        let answer = match result.await {
            Ok(result) => {
                json!({"jsonrpc": "2.0", "id": id, "result": complete_call_result(&result)})
            }
            Err(_) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code::INTERNAL, "message": "the run ended without a result"}})
            }
        };
        Frame::data(answer.to_string())
    });
    let frames =
        drive::frames(Events::Live(events), ProgressFrames::new(token), on_leave).chain(last);
    sse_response(runtime, frames.map(|frame| Ok(frame.into_sse())))
}

/// The agent a `tools/call` names (`params.name`), if the caller may use it.
fn called_agent(
    runtime: &Runtime,
    caller: &Caller,
    params: &Value,
) -> Result<Arc<AgentSpec>, McpError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::invalid_params("params.name: missing"))?;
    runtime
        .agents()
        .get(name)
        .filter(|agent| caller.may_use_agent(&agent.name))
        .ok_or_else(|| {
            McpError::invalid_params(format!(
                "params.name: no agent named `{name}` for this key; tools/list names the agents it may use"
            ))
        })
}

/// Starts the run a `tools/call` asks for (`params.name`, `params.arguments`).
async fn start_call(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Value,
    on_disconnect: OnDisconnect,
) -> Result<RunHandle, McpError> {
    let agent = called_agent(runtime, caller, params)?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map.clone()),
        Some(_) => {
            return Err(McpError::invalid_params(
                "params.arguments: must be an object",
            ));
        }
    };
    let input = call_input(&agent, arguments)?;
    let attachments = input.stored_attachments(runtime, caller, &agent).await?;
    let mut submission = caller.submission(agent, input.prompt);
    submission.format = input.format;
    submission.attachments = attachments;
    submission.on_disconnect = on_disconnect;
    runtime.start_run(submission).await.map_err(start_error)
}

/// Starts a `tools/call` as a task: a run that outlives the request, durable (and so visible
/// to `tasks/get` on any replica) before this returns it.
pub(super) async fn start_task(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Value,
) -> Result<RunRecord, McpError> {
    let handle = start_call(runtime, caller, params, OnDisconnect::Continue).await?;
    let run_id = handle.run_id.clone();
    // The run is followed from the store.
    drop(handle.into_result());
    task_run(runtime, caller, &run_id).await
}

pub(super) fn task_id(params: &Value) -> Result<String, McpError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .ok_or_else(|| McpError::invalid_params("params.taskId: missing"))
}

/// The run a task id names, if the caller may see it.
pub(super) async fn task_run(
    runtime: &Runtime,
    caller: &Caller,
    id: &str,
) -> Result<RunRecord, McpError> {
    let run = runtime
        .find_run(id)
        .await
        .map_err(|_| McpError::internal("the task could not be read"))?
        .ok_or_else(|| McpError::task_not_found(id))?;
    if !caller.may_see_run(&run) {
        return Err(McpError::task_not_found(id));
    }
    Ok(run)
}

/// A task's status as the run's status reads.
pub(super) fn task_status(status: RunStatus) -> &'static str {
    match status {
        // A run waiting for a raise of its budget waits for its user or an admin on the runs
        // API, not for an answer the MCP client can give: it is still working.
        RunStatus::Queued | RunStatus::Running | RunStatus::WaitingBudget => "working",
        RunStatus::WaitingApproval => "input_required",
        RunStatus::Completed => "completed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

pub(super) fn rfc3339(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The `Task` fields every view of a run carries.
fn task_base(run: &RunRecord) -> Value {
    let mut task = json!({
        "taskId": run.id,
        "status": task_status(run.status),
        "createdAt": rfc3339(run.created_at),
        "lastUpdatedAt": rfc3339(run.finished_at.unwrap_or(run.created_at)),
        "ttlMs": Value::Null,
        "pollIntervalMs": POLL_INTERVAL_MS,
    });
    if let Some(error) = &run.error {
        task["statusMessage"] = json!(error);
    }
    task
}

/// The tool result a finished run is, as `tools/call` would have answered it.
pub(super) fn call_result_of_run(run: &RunRecord) -> Value {
    if run.success != Some(true) {
        let message = run
            .error
            .clone()
            .unwrap_or_else(|| format!("the run ended: {}", run.status.as_str()));
        return json!({"content": [{"type": "text", "text": message}], "isError": true});
    }
    let report = run.final_report.as_ref();
    let text = report
        .and_then(|r| r.get("content"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": false});
    if let Some(structured) = report
        .and_then(|r| r.get("content_json"))
        .filter(|v| !v.is_null())
    {
        result["structuredContent"] = structured.clone();
    }
    result
}

/// The form a waiting tool call is put to the client as: approve or deny, with a reason.
pub(super) fn approval_request(tool: &str, server: &str, arguments: &Value) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": format!("Approve the call of `{tool}` ({server}) with arguments {arguments}?"),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "decision": {"type": "string", "enum": ["approve", "deny"]},
                    "reason": {"type": "string"}
                },
                "required": ["decision"]
            }
        }
    })
}

/// The detailed task `tasks/get` answers: with its result, error or input requests.
pub(super) async fn task_view(runtime: &Runtime, run: &RunRecord) -> Result<Value, McpError> {
    let mut task = task_base(run);
    match run.status {
        RunStatus::Completed | RunStatus::Failed if run.success.is_some() => {
            task["status"] = json!("completed");
            task["result"] = call_result_of_run(run);
        }
        RunStatus::Failed => {
            let message = run.error.clone().unwrap_or_else(|| "the run failed".into());
            task["error"] = json!({"code": code::INTERNAL, "message": message});
        }
        RunStatus::WaitingApproval => {
            let waiting = runtime
                .pending_approvals(&run.id)
                .await
                .map_err(|_| McpError::internal("the task's approvals could not be read"))?;
            let requests: Map<String, Value> = waiting
                .iter()
                .map(|a| {
                    (
                        a.call_id.clone(),
                        approval_request(&a.tool, &a.server, &a.arguments),
                    )
                })
                .collect();
            task["inputRequests"] = Value::Object(requests);
        }
        _ => {}
    }
    Ok(task)
}

/// An elicitation answer as an approval decision: `accept` with `decision: approve` runs the
/// tool, anything else (deny, decline, cancel) refuses it.
pub(super) fn decision_of_response(response: &Value) -> Decision {
    let content = response.get("content");
    let reason = content
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let accepted = response.get("action").and_then(Value::as_str) == Some("accept");
    let approves = content
        .and_then(|c| c.get("decision"))
        .and_then(Value::as_str)
        == Some("approve");
    if accepted && approves {
        Decision::Approve {
            arguments: None,
            note: reason,
        }
    } else {
        Decision::Deny { reason }
    }
}

async fn update_task(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Value,
) -> Result<Value, McpError> {
    let run = task_run(runtime, caller, &task_id(params)?).await?;
    let responses = params
        .get("inputResponses")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            McpError::invalid_params("params.inputResponses: missing or not an object")
        })?;
    let waiting = runtime
        .pending_approvals(&run.id)
        .await
        .map_err(|_| McpError::internal("the task's approvals could not be read"))?;
    for (call_id, response) in responses {
        // Keys that are not outstanding are ignored, as the extension asks.
        if !waiting.iter().any(|a| &a.call_id == call_id) {
            continue;
        }
        let decision = decision_of_response(response);
        if let Err(error) = runtime
            .decide_approval(&run.id, call_id, decision, &caller.decider())
            .await
        {
            tracing::debug!(%error, %call_id, "MCP task input not taken");
        }
    }
    Ok(complete(json!({})))
}

async fn cancel_task(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Value,
) -> Result<Value, McpError> {
    let run = task_run(runtime, caller, &task_id(params)?).await?;
    match runtime.cancel_run(&run.id, CancelMode::Abort).await {
        Ok(CancelOutcome::Cancelled | CancelOutcome::Requested | CancelOutcome::NotRunning(_)) => {
            Ok(complete(json!({})))
        }
        Ok(CancelOutcome::NotFound) => Err(McpError::task_not_found(&run.id)),
        Err(_) => Err(McpError::internal("the task could not be cancelled")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base64_sentinel_header_is_decoded_and_a_plain_one_kept() {
        assert_eq!(
            decoded_header("=?base64?aMOpbGxv?=").as_deref(),
            Some("héllo")
        );
        assert_eq!(decoded_header("plain").as_deref(), Some("plain"));
        assert_eq!(decoded_header("=?base64?***?="), None);
    }

    #[test]
    fn an_elicitation_accepting_approve_approves_and_anything_else_denies() {
        let approve = json!({"action": "accept", "content": {"decision": "approve"}});
        assert!(matches!(
            decision_of_response(&approve),
            Decision::Approve { .. }
        ));
        let deny = json!({"action": "accept", "content": {"decision": "deny", "reason": "no"}});
        assert!(matches!(
            decision_of_response(&deny),
            Decision::Deny { reason: Some(_) }
        ));
        assert!(matches!(
            decision_of_response(&json!({"action": "decline"})),
            Decision::Deny { .. }
        ));
    }
}
