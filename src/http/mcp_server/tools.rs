//! The MCP server handler: one tool per agent the caller may use, and `tools/call` as a run of
//! that agent through the run pipeline, its events turned into progress notifications. An agent
//! without an input schema of its own takes files in `attachments` (SPEC §11), stored as the
//! per-user chat stores them.

use std::sync::Arc;
use tracing::Instrument;

use rmcp::model::ErrorCode;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::calls::{InFlightCalls, request_key};
use super::progress::progress_message;
use crate::agent::{AgentEvent, AgentResult};
use crate::config::{AgentSpec, OnDisconnect};
use crate::http::auth::Caller;
use crate::http::json_rpc::RetryLater;
use crate::http::shared::attachments::{AttachmentIntake, ChatAttachment};
use crate::runtime::{Runtime, StartError};
use crate::tools::schema::ArgumentSchema;
use crate::vocabulary::Attachment;

/// The MCP view of the agents; one per request (the server is stateless).
#[derive(Clone)]
pub struct AgentTools {
    runtime: Arc<Runtime>,
    calls: Arc<InFlightCalls>,
}

impl AgentTools {
    pub fn new(runtime: Arc<Runtime>, calls: Arc<InFlightCalls>) -> Self {
        Self { runtime, calls }
    }
}

/// The caller the auth layer found for the HTTP request carrying this message.
fn caller_of(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request carries no caller", None))
}

/// The arguments of an agent without an `input` schema.
pub fn default_input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1, "description": "The task for the agent, self-contained."},
            "format": {"type": "string", "description": "Output format for this call (markdown, text, json, …); the agent's own when absent."},
            "attachments": {
                "type": "array",
                "description": "Files for the agent (images, PDFs, text): each with exactly one of `data` (base64), `url` (https or data:) or `file_id` (the Files API).",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "media_type": {"type": "string"},
                        "data": {"type": "string"},
                        "url": {"type": "string"},
                        "file_id": {"type": "string"}
                    },
                    "additionalProperties": false
                }
            }
        },
        "required": ["prompt"],
        "additionalProperties": false
    })
}

/// The schema a caller's arguments must match.
pub fn input_schema(agent: &AgentSpec) -> Value {
    agent
        .input_schema
        .clone()
        .unwrap_or_else(default_input_schema)
}

fn as_object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The tool an agent is: its name, description, input schema and, for JSON agents with an
/// object schema, its output schema.
pub fn agent_tool(agent: &AgentSpec) -> Tool {
    let description = if agent.description.is_empty() {
        format!("Run the {} agent.", agent.name)
    } else {
        agent.description.clone()
    };
    let tool = Tool::new(
        agent.name.clone(),
        description,
        Arc::new(as_object(input_schema(agent))),
    );
    match &agent.output_schema {
        Some(schema @ Value::Object(map))
            if agent.output_format == "json" && map.get("type") == Some(&json!("object")) =>
        {
            tool.with_raw_output_schema(Arc::new(as_object(schema.clone())))
        }
        _ => tool,
    }
}

/// What a call asks the agent: its prompt, output format and files.
pub(super) struct CallInput {
    pub(super) prompt: String,
    pub(super) format: Option<String>,
    /// `arguments.attachments` of an agent without an input schema of its own (SPEC §11).
    pub(super) attachments: Vec<ChatAttachment>,
}

/// Where a call's files are: the error of a refused one names `arguments.attachments[i]`.
const ATTACHMENTS_FIELD: &str = "arguments.attachments";

impl CallInput {
    /// Stores the call's files for `agent`; a refused one is invalid params naming it, with
    /// the HTTP status and code the other headends answer it with.
    pub(super) async fn stored_attachments(
        &self,
        runtime: &Runtime,
        caller: &Caller,
        agent: &AgentSpec,
    ) -> Result<Vec<Attachment>, ErrorData> {
        if self.attachments.is_empty() {
            return Ok(Vec::new());
        }
        AttachmentIntake::new(runtime, caller, agent)
            .chat_attachments(&self.attachments, ATTACHMENTS_FIELD)
            .await
            .map_err(|error| {
                let data = json!({
                    "param": error.param,
                    "status": error.status.as_u16(),
                    "code": error.code,
                });
                ErrorData::invalid_params(error.message, Some(data))
            })
    }
}

/// Checks `arguments` against the agent's input schema; the error names what is wrong.
pub(super) fn call_input(
    agent: &AgentSpec,
    arguments: Option<JsonObject>,
) -> Result<CallInput, ErrorData> {
    let arguments = Value::Object(arguments.unwrap_or_default());
    let schema = input_schema(agent);
    let compiled = ArgumentSchema::compile(&schema).map_err(|e| {
        ErrorData::internal_error(
            format!(
                "the input schema of agent `{}` does not compile: {}",
                agent.name, e.0
            ),
            None,
        )
    })?;
    compiled.check(&arguments).map_err(|reason| {
        ErrorData::invalid_params(
            format!(
                "arguments for agent `{}` do not match its input schema: {reason}",
                agent.name
            ),
            Some(json!({"inputSchema": schema})),
        )
    })?;
    if agent.input_schema.is_some() {
        // A structured input reaches the agent as its JSON text.
        return Ok(CallInput {
            prompt: arguments.to_string(),
            format: None,
            attachments: Vec::new(),
        });
    }
    let prompt = arguments
        .get("prompt")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if prompt.trim().is_empty() {
        return Err(ErrorData::invalid_params(
            "`prompt` must not be empty",
            None,
        ));
    }
    let format = arguments
        .get("format")
        .and_then(Value::as_str)
        .map(str::to_string);
    let attachments = match arguments.get("attachments") {
        Some(files) => serde_json::from_value(files.clone()).map_err(|error| {
            ErrorData::invalid_params(format!("`{ATTACHMENTS_FIELD}`: {error}"), None)
        })?,
        None => Vec::new(),
    };
    Ok(CallInput {
        prompt,
        format,
        attachments,
    })
}

/// Why `tools/call` started no run: a refusal to retry later (a key limit, an overloaded or
/// stopping server) has its own code and the wait (see [`crate::http::json_rpc`]).
fn start_error(error: StartError) -> ErrorData {
    let error = match RetryLater::of_start_error(error) {
        Ok(later) => {
            return ErrorData::new(ErrorCode(later.code), later.message, Some(later.data));
        }
        Err(error) => error,
    };
    match error {
        StartError::InvalidOutput(_) => ErrorData::invalid_params(error.to_string(), None),
        StartError::Store(_) => ErrorData::internal_error("the run could not be recorded", None),
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

/// The final report as MCP content; a failed run is `isError` with its error.
pub fn call_result(result: &AgentResult) -> CallToolResult {
    if !result.success {
        let message = result
            .error
            .clone()
            .unwrap_or_else(|| format!("the run ended: {}", result.exit_reason.as_str()));
        return CallToolResult::error(vec![ContentBlock::text(message)]);
    }
    let Some(report) = &result.final_report else {
        return CallToolResult::success(Vec::new());
    };
    match &report.content_json {
        Some(json) => {
            let mut answer = CallToolResult::structured(json.clone());
            if let Some(text) = report.content.as_ref().filter(|t| !t.is_empty()) {
                answer.content = vec![ContentBlock::text(text.clone())];
            }
            answer
        }
        None => CallToolResult::success(vec![ContentBlock::text(
            report.content.clone().unwrap_or_default(),
        )]),
    }
}

/// Sends progress notifications for a call that asked for them.
struct ProgressReporter {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    sent: u32,
}

impl ProgressReporter {
    async fn report(&mut self, message: String) {
        self.sent += 1;
        let mut param = ProgressNotificationParam::new(self.token.clone(), f64::from(self.sent));
        param.message = Some(message);
        if let Err(error) = self.peer.notify_progress(param).await {
            tracing::debug!(%error, "MCP progress notification not delivered");
        }
    }
}

impl ServerHandler for AgentTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentd", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool is an agentd agent: call it with a self-contained task (`prompt`) \
                 or the arguments its input schema asks for; the answer is its final report.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller_of(&context)?;
        let tools = self
            .runtime
            .agents()
            .iter()
            .filter(|agent| caller.may_use_agent(&agent.name))
            .map(|agent| agent_tool(agent))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller_of(&context)?;
        let name = request.name.as_ref();
        let agent = self
            .runtime
            .agents()
            .get(name)
            .filter(|agent| caller.may_use_agent(&agent.name))
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("no agent named `{name}` for this key; tools/list names the agents it may use"),
                    None,
                )
            })?;
        let input = call_input(&agent, request.arguments)?;
        let attachments = input
            .stored_attachments(&self.runtime, &caller, &agent)
            .await?;
        let mut submission = caller.submission(agent, input.prompt);
        submission.format = input.format;
        submission.attachments = attachments;
        submission.on_disconnect = OnDisconnect::Cancel;
        // The client's trace (`_meta.traceparent`) is the parent of the run's spans.
        let span = crate::telemetry::genai::mcp_server_span(
            "tools/call",
            Some(name),
            None,
            Some(&context.meta.0.0),
        );
        let handle = self
            .runtime
            .start_run(submission)
            .instrument(span)
            .await
            .map_err(start_error)?;
        let _registered = self.calls.register(
            &caller,
            request_key(&serde_json::to_value(&context.id).unwrap_or(Value::Null)),
            handle.control.abort.clone(),
        );
        // A client that leaves (or cancels through rmcp) ends the run.
        let _abort_on_drop = handle.abort_on_drop();
        let mut reporter = context
            .meta
            .get_progress_token()
            .map(|token| ProgressReporter {
                peer: context.peer.clone(),
                token,
                sent: 0,
            });
        let abort = handle.control.abort.clone();
        let mut events = handle.events;
        let mut client_cancelled = false;
        loop {
            tokio::select! {
                _ = context.ct.cancelled(), if !client_cancelled => {
                    client_cancelled = true;
                    abort.cancel();
                }
                event = events.recv() => match event {
                    Some(event) => {
                        let event = event.event;
                        if let (Some(reporter), Some(message)) = (reporter.as_mut(), progress_message(&event)) {
                            reporter.report(message).await;
                        }
                        if matches!(event, AgentEvent::RunFinished(_)) {
                            break;
                        }
                    }
                    None => break,
                },
            }
        }
        let result = handle
            .result
            .await
            .map_err(|_| ErrorData::internal_error("the run ended without a result", None))?;
        Ok(call_result(&result).into())
    }
}
