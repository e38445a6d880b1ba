//! AG-UI (SPEC §9.4): `POST /ag-ui/{agent}` runs the agent on the thread's last user message
//! and streams the run as AG-UI events (SSE `data:` frames). A `threadId` is one of the
//! caller's conversations (created under that id when new); a key bound to no user names one
//! with `forwardedProps.userId`, or runs without a stored conversation, the posted messages
//! being the history. Client `tools` (SPEC §9.2) are offered beside the agent's own; a call to
//! one ends the run with the call for the client, whose next run sends the result as a `tool`
//! message (that run goes on from the posted messages). A run waiting for tool approvals ends
//! with an interrupt per call; `resume` answers them (the runtime decides, as the runs route
//! does) and the stream follows the resumed run. This module checks the input and starts or
//! resumes the run; [`wire`] renders the frames from the shared [`ui`](super::shared::ui)
//! parts.

pub mod capabilities;
mod subagents;
pub mod wire;

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::Response;
use axum::response::sse::Event;

use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use super::shared::approvals::{MAX_REASON_CHARS, WaitAnswerParams, decider, wait_answer_error};
use super::shared::attachments::AttachmentIntake;
use super::shared::callers::check_user;
use super::shared::client_tools::{self, ToolFields};
use super::shared::drive::{self, Events, Frame, OnLeave};
use super::shared::ui::{UiFrames, UiPart, UiRender};
use super::sse::{sse_response, with_run_headers};
use crate::agent::approval::Decision;
use crate::agent::client_tools::{ClientToolChoice, ClientTools};
use crate::config::{AgentSpec, OnDisconnect};
use crate::llm::{ChatMessage, Role, ToolCall};
use crate::runtime::{
    CLIENT_CONVERSATION_ID_RULE, ConversationTurn, Runtime, WaitingCallRef,
    is_client_conversation_id,
};
use subagents::Subagents;
use wire::{
    AgUiMessage, AgUiPath, FrameIds, INTERRUPT_PREFIX, RunAgentInput, frames, interrupt_snapshots,
    snapshot_message,
};

/// Where AG-UI keeps a client tool's parts, for error `param`s.
const AG_UI_TOOL_FIELDS: ToolFields = ToolFields {
    list: "tools",
    name: "name",
    schema: "parameters",
};

#[utoipa::path(
    post,
    path = "/ag-ui/{agent}",
    tag = "ag-ui",
    summary = "Run an agent with AG-UI's RunAgentInput; AG-UI events as SSE",
    params(AgUiPath),
    request_body = RunAgentInput,
    responses(
        (status = 200, description = "AG-UI events (`data: {\"type\": \"RUN_STARTED\", …}`) until `RUN_FINISHED` or `RUN_ERROR`", content_type = "text/event-stream", body = crate::http::wire::ServerSentEvent),
        ErrorBody,
    ),
)]
pub async fn run(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(AgUiPath { agent }): ApiPath<AgUiPath>,
    ApiJson(input): ApiJson<RunAgentInput>,
) -> Result<Response, ApiError> {
    check_input(&input)?;
    let agent = runtime.agents().get(&agent).ok_or_else(|| {
        ApiError::not_found(format!(
            "No agent named `{agent}`; GET /v1/agents lists them"
        ))
    })?;
    caller.check_agent(&agent.name)?;
    let user_id = thread_user(&caller, &input)?;
    if input.resume.as_ref().is_some_and(|r| !r.is_empty()) {
        return resume(runtime, caller, &agent, input, user_id).await;
    }
    let client_tools = client_tools_of(input.tools.as_deref().unwrap_or_default())?;
    let Some(turn) = read_messages(&input.messages)? else {
        return Ok(nothing_to_answer(&runtime, input.thread_id, input.run_id));
    };
    // A run going on from tool results has no prompt: the files were sent with an earlier one.
    let attachments = if turn.continues_tool_calls {
        Vec::new()
    } else {
        prompt_files(&runtime, &caller, &agent, &input.messages).await?
    };
    let mut submission = caller.submission(agent, turn.prompt);
    submission.attachments = attachments;
    submission.on_disconnect = runtime.config().server.on_disconnect;
    submission.client_tools = client_tools;
    // A thread without a user sends its messages as history; its run is still the key's own.
    if let Some(user) = &user_id {
        submission.user_id = Some(user.clone());
    }
    match user_id {
        // A stored conversation keeps text only: a run going on from tool results takes the
        // posted messages, which hold the calls and their results.
        Some(_) if !turn.continues_tool_calls => {
            submission.conversation = Some(ConversationTurn::Named(input.thread_id.clone()));
            submission.busy = thread_busy(&input)?;
        }
        _ => submission.history = turn.history,
    }
    let on_disconnect = submission.on_disconnect;
    let handle = runtime.start_run(submission).await.map_err(|error| {
        client_tools::start_error(error, &AG_UI_TOOL_FIELDS, |call_id| {
            tool_message_param(&input.messages, call_id)
        })
    })?;
    let run_id = handle.run_id.clone();
    let conversation_id = handle.conversation_id.clone();
    let guard = (on_disconnect == OnDisconnect::Cancel).then(|| handle.abort_on_drop());
    // The stream follows the run's recorded events up to its end or its wait for approvals.
    drop(handle.into_result());
    let translator = UiFrames::new(run_id.clone(), AgUi::new(&input));
    let events = Events::stretch(&runtime, run_id.clone(), 0);
    let response = drive::stream(&runtime, events, translator, OnLeave::cancel_with(guard));
    Ok(with_run_headers(
        response,
        &run_id,
        conversation_id.as_deref(),
    ))
}

/// `resume`: decides the waiting calls the entries answer (all of one wait of one run of this
/// thread's user) and streams the resumed run from after the wait: `RUN_STARTED`, its events,
/// then `RUN_FINISHED` (or the next wait's interrupts) or `RUN_ERROR`.
async fn resume(
    runtime: Arc<Runtime>,
    caller: Caller,
    agent: &AgentSpec,
    input: RunAgentInput,
    user_id: Option<String>,
) -> Result<Response, ApiError> {
    let entries = input.resume.as_deref().unwrap_or_default();
    let mut run_id: Option<String> = None;
    let mut answers = Vec::with_capacity(entries.len());
    let mut proposed = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let named = entry
            .get("interruptId")
            .and_then(Value::as_str)
            .and_then(|id| WaitingCallRef::parse(id, INTERRUPT_PREFIX))
            .filter(|named| run_id.as_ref().is_none_or(|run| *run == named.run_id))
            .ok_or_else(|| no_interrupt(entry, index))?;
        answers.push((named.call_id, resume_decision(entry, index)?));
        proposed.push(
            answers
                .last()
                .map(|(call, _)| call.clone())
                .unwrap_or_default(),
        );
        run_id = Some(named.run_id);
    }
    let run_id = run_id.unwrap_or_default();
    let run = runtime
        .find_run(&run_id)
        .await
        .map_err(ApiError::store)?
        .filter(|run| run.agent == agent.name)
        .filter(|run| caller.may_see_run(run) && (user_id.is_none() || run.user_id == user_id))
        .ok_or_else(|| no_interrupt(&entries[0], 0))?;
    let wait = runtime
        .answer_wait(&run.id, answers, &decider(&caller))
        .await
        .map_err(|error| {
            wait_answer_error(
                error,
                &WaitAnswerParams {
                    answer: &|index| format!("resume[{index}].interruptId"),
                    arguments: &|index| {
                        let field = if entries
                            .get(index)
                            .and_then(|e| e.get("payload"))
                            .and_then(|p| p.get("approved"))
                            .is_some()
                        {
                            "editedArgs"
                        } else {
                            "arguments"
                        };
                        format!("resume[{index}].payload.{field}")
                    },
                    unanswered: "resume",
                    client_id: &|call_id| {
                        WaitingCallRef::new(&run.id, call_id).encode(INTERRUPT_PREFIX)
                    },
                },
            )
        })?;
    let started = UiPart::RunStarted {
        run_id: run.id.clone(),
        conversation_id: run.conversation_id.clone(),
    };
    let translator =
        UiFrames::new(run.id.clone(), AgUi::resuming(&input, proposed)).starting_with(started);
    let events = Events::stretch(&runtime, run.id.clone(), wait.last_seq);
    let response = drive::stream(&runtime, events, translator, OnLeave::Continue);
    Ok(with_run_headers(
        response,
        &run.id,
        run.conversation_id.as_deref(),
    ))
}

fn no_interrupt(entry: &Value, index: usize) -> ApiError {
    let id = entry.get("interruptId").unwrap_or(&Value::Null);
    ApiError::invalid_request(format!(
        "`resume[{index}].interruptId` {id} matches no interrupt of a run of this thread waiting for approval"
    ))
    .with_param(format!("resume[{index}].interruptId"))
}

/// A `resume` entry's decision: `status: "cancelled"` denies; else `payload` is the runs
/// decision body `{decision: "approve"|"deny", arguments?, reason?}`.
fn resume_decision(entry: &Value, index: usize) -> Result<Decision, ApiError> {
    let param = |field: &str| format!("resume[{index}].{field}");
    let payload = entry.get("payload").filter(|p| !p.is_null());
    let reason = match payload.and_then(|p| p.get("reason")) {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) if reason.chars().count() <= MAX_REASON_CHARS => {
            Some(reason.clone())
        }
        Some(_) => {
            return Err(ApiError::invalid_request(format!(
                "`reason` is a string of at most {MAX_REASON_CHARS} characters"
            ))
            .with_param(param("payload.reason")));
        }
    };
    if entry.get("status").and_then(Value::as_str) == Some("cancelled") {
        return Ok(Decision::Deny {
            reason: reason.or_else(|| Some("the user cancelled the approval".into())),
        });
    }
    // AG-UI 1.0: `{approved, editedArgs?}`; agentd's earlier `{decision, arguments?}` too.
    let (approved, arguments_field) = match payload.and_then(|p| p.get("approved")) {
        Some(Value::Bool(approved)) => (Some(*approved), "editedArgs"),
        Some(_) => {
            return Err(
                ApiError::invalid_request("`approved` must be true or false")
                    .with_param(param("payload.approved")),
            );
        }
        None => match payload
            .and_then(|p| p.get("decision"))
            .and_then(Value::as_str)
        {
            Some("approve") => (Some(true), "arguments"),
            Some("deny") => (Some(false), "arguments"),
            _ => (None, "arguments"),
        },
    };
    match approved {
        Some(true) => {
            let arguments = match payload.and_then(|p| p.get(arguments_field)) {
                None | Some(Value::Null) => None,
                Some(Value::Object(arguments)) => Some(arguments.clone()),
                Some(_) => {
                    return Err(ApiError::invalid_request(format!(
                        "`{arguments_field}` must be an object"
                    ))
                    .with_param(param(&format!("payload.{arguments_field}"))));
                }
            };
            Ok(Decision::Approve {
                arguments,
                note: reason,
            })
        }
        Some(false) => Ok(Decision::Deny { reason }),
        None => Err(ApiError::invalid_request(
            "`payload.approved` must be true or false (payload: {approved, editedArgs?, reason?}; or {decision: \"approve\"|\"deny\", arguments?, reason?})",
        )
        .with_param(param("payload.approved"))),
    }
}

/// `tools` as client tools; names, schemas and clashes are the runtime's to check.
fn client_tools_of(tools: &[Value]) -> Result<ClientTools, ApiError> {
    let mut definitions = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        definitions.push(client_tools::flat_definition(tool, index)?);
    }
    Ok(ClientTools {
        definitions,
        choice: ClientToolChoice::Auto,
        ..ClientTools::default()
    })
}

/// The `messages[N].toolCallId` of the tool message answering `call_id`.
fn tool_message_param(messages: &[AgUiMessage], call_id: &str) -> String {
    messages
        .iter()
        .position(|m| m.role == "tool" && m.tool_call_id.as_deref() == Some(call_id))
        .map_or_else(
            || "messages".into(),
            |index| format!("messages[{index}].toolCallId"),
        )
}

fn check_input(input: &RunAgentInput) -> Result<(), ApiError> {
    if !is_client_conversation_id(&input.thread_id) {
        return Err(ApiError::invalid_request(format!(
            "`threadId` must be {CLIENT_CONVERSATION_ID_RULE}"
        ))
        .with_param("threadId"));
    }
    if input.run_id.is_empty() {
        return Err(ApiError::invalid_request("`runId` must not be empty").with_param("runId"));
    }
    subagents::requested(input.forwarded_props.as_ref()).map_err(|message| {
        ApiError::invalid_request(message)
            .with_param(format!("forwardedProps.{}", subagents::REQUEST_FIELD))
    })?;
    Ok(())
}

/// The files of the last user message (SPEC §11), stored.
async fn prompt_files(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    messages: &[AgUiMessage],
) -> Result<Vec<crate::vocabulary::Attachment>, ApiError> {
    let Some(last_user) = messages.iter().rposition(|m| m.role == "user") else {
        return Ok(Vec::new());
    };
    let mut intake = AttachmentIntake::new(runtime, caller, agent);
    let mut stored = Vec::new();
    for (part, file) in messages[last_user].files(&format!("messages[{last_user}].content")) {
        stored.push(intake.chat_attachment(&file, &part).await?);
    }
    Ok(stored)
}

/// What a thread's messages ask for.
struct ThreadTurn {
    /// The last user message's text; empty when the run goes on from tool results.
    prompt: String,
    /// The messages before the prompt, or all of them when they end with tool results.
    history: Vec<ChatMessage>,
    /// Whether tool messages follow the last user message: the run answers those calls.
    continues_tool_calls: bool,
}

/// Reads the thread: the last user message is the prompt, unless tool results follow it (the
/// run then goes on from them); `None` when the last user message has neither text nor files.
fn read_messages(messages: &[AgUiMessage]) -> Result<Option<ThreadTurn>, ApiError> {
    let Some(last_user) = messages.iter().rposition(|m| m.role == "user") else {
        return Ok(None);
    };
    let prompt = messages[last_user].text();
    let carries_files = !messages[last_user].files("content").is_empty();
    if prompt.trim().is_empty() && !carries_files {
        return Ok(None);
    }
    let continues_tool_calls = messages[last_user..].iter().any(|m| m.role == "tool");
    let mut history = Vec::with_capacity(messages.len());
    let upto = if continues_tool_calls {
        messages.len()
    } else {
        last_user
    };
    for (index, message) in messages[..upto].iter().enumerate() {
        if let Some(message) = chat_message(message, index)? {
            history.push(message);
        }
    }
    Ok(Some(ThreadTurn {
        prompt: if continues_tool_calls {
            String::new()
        } else {
            prompt
        },
        history,
        continues_tool_calls,
    }))
}

/// One AG-UI message as history: user and assistant text, an assistant's tool calls, a tool
/// message's result; other roles are left out.
fn chat_message(message: &AgUiMessage, index: usize) -> Result<Option<ChatMessage>, ApiError> {
    let text = message.text();
    Ok(match message.role.as_str() {
        "user" => Some(ChatMessage::user(text)),
        "assistant" => {
            let calls = assistant_calls(message, index)?;
            if text.is_empty() && calls.is_empty() {
                return Ok(None);
            }
            let mut chat = ChatMessage::assistant(text);
            if chat.content.as_deref() == Some("") {
                chat.content = None;
            }
            chat.tool_calls = calls;
            Some(chat)
        }
        "tool" => {
            let call_id = message
                .tool_call_id
                .clone()
                .filter(|id| !id.is_empty())
                .ok_or_else(|| {
                    ApiError::invalid_request("a tool message needs `toolCallId`")
                        .with_param(format!("messages[{index}].toolCallId"))
                })?;
            let mut chat = ChatMessage::new(Role::Tool, text);
            chat.tool_call_id = Some(call_id);
            Some(chat)
        }
        _ => None,
    })
}

fn assistant_calls(message: &AgUiMessage, index: usize) -> Result<Vec<ToolCall>, ApiError> {
    let mut calls = Vec::new();
    for (position, call) in message.tool_calls.iter().flatten().enumerate() {
        let field = |pointer: &str| call.pointer(pointer).and_then(Value::as_str);
        let (Some(id), Some(name)) = (field("/id"), field("/function/name")) else {
            return Err(
                ApiError::invalid_request("a tool call needs `id` and `function.name`")
                    .with_param(format!("messages[{index}].toolCalls[{position}]")),
            );
        };
        calls.push(ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: field("/function/arguments").unwrap_or("{}").to_string(),
        });
    }
    Ok(calls)
}

/// A thread with no user message to answer: AG-UI clients are told in the stream, as
/// `RUN_ERROR` (code `invalid_request`), which they surface as a failed run; no run starts.
fn nothing_to_answer(runtime: &Runtime, thread_id: String, run_id: String) -> Response {
    let frames = [
        serde_json::json!({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}),
        serde_json::json!({
            "type": "RUN_ERROR", "code": "invalid_request",
            "message": "`messages` has no user message with text to answer",
        }),
    ];
    let events: Vec<Result<Event, Infallible>> = frames
        .iter()
        .map(|frame| Ok(Event::default().data(frame.to_string())))
        .collect();
    sse_response(runtime, futures_util::stream::iter(events))
}

/// `forwardedProps.busy`: what a message to a thread still answering another does (SPEC §13).
fn thread_busy(input: &RunAgentInput) -> Result<Option<crate::config::BusyPolicy>, ApiError> {
    let Some(busy) = input
        .forwarded_props
        .as_ref()
        .and_then(|props| props.get("busy"))
    else {
        return Ok(None);
    };
    serde_json::from_value(busy.clone()).map(Some).map_err(|_| {
        ApiError::invalid_request(
            "`forwardedProps.busy` must be `enqueue`, `reject`, `interrupt` or `steer`",
        )
        .with_param("forwardedProps.busy")
    })
}

/// The user whose conversation the thread is: the key's, else `forwardedProps.userId` (which
/// the key must be allowed to act for), else none.
fn thread_user(caller: &Caller, input: &RunAgentInput) -> Result<Option<String>, ApiError> {
    let named = input
        .forwarded_props
        .as_ref()
        .and_then(|props| props.get("userId"))
        .and_then(serde_json::Value::as_str);
    match (caller.user_id.as_deref(), named) {
        (Some(own), Some(named)) if own != named => Err(ApiError::forbidden(
            "This API key may not act for the user named in `forwardedProps.userId`",
        )
        .with_param("forwardedProps.userId")),
        (Some(own), _) => Ok(Some(own.to_string())),
        (None, Some(named)) => {
            check_user(caller, named).map_err(|e| e.with_param("forwardedProps.userId"))?;
            Ok(Some(named.to_string()))
        }
        (None, None) => Ok(None),
    }
}

/// AG-UI's rendering of the UI parts: `data:` frames naming the client's thread and run.
/// It keeps what the run said so far, for the snapshots an interrupt is preceded by.
struct AgUi {
    thread_id: String,
    run_id: String,
    /// The client's state, given back as it came.
    state: Value,
    /// The thread's messages as the client sent them.
    inputs: Vec<Value>,
    /// This run's messages so far: the answer's text and calls, then the calls' results.
    said: std::cell::RefCell<RunMessages>,
    /// Calls the interrupted run proposed and this resumed one answers: AG-UI 1.0 has their
    /// `TOOL_CALL_START`/`_ARGS`/`_END` sent once, by the run that proposed them.
    proposed_before: Vec<String>,
    /// The sub-agents' lifecycle events, for a client that asked for them.
    subagents: Option<std::cell::RefCell<Subagents>>,
}

/// A run's messages as AG-UI messages: one assistant message (its text and tool calls) and a
/// tool message per result.
#[derive(Default)]
struct RunMessages {
    text: String,
    calls: Vec<Value>,
    results: Vec<Value>,
}

impl RunMessages {
    fn note(&mut self, part: &UiPart, run_id: &str) {
        match part {
            UiPart::TextDelta { delta, .. } => self.text.push_str(delta),
            UiPart::ToolCall {
                call_id,
                tool,
                arguments,
                ..
            }
            | UiPart::ApprovalRequested {
                call_id,
                tool,
                arguments,
                ..
            } => self.calls.push(json!({"id": call_id, "type": "function",
                "function": {"name": tool, "arguments": arguments.to_string()}})),
            UiPart::ToolResult {
                call_id, output, ..
            } => self
                .results
                .push(json!({"id": format!("{run_id}-tool-{call_id}"),
                "role": "tool", "toolCallId": call_id, "content": output})),
            _ => {}
        }
    }

    /// Calls of this run no result answered: the client's own tools, left for it to run.
    fn unanswered_calls(&self) -> Vec<Value> {
        self.calls
            .iter()
            .map(|call| &call["id"])
            .filter(|id| !self.results.iter().any(|r| &r["toolCallId"] == *id))
            .cloned()
            .collect()
    }

    fn messages(&self, run_id: &str) -> Vec<Value> {
        let mut answer = json!({"id": format!("{run_id}-answer"), "role": "assistant"});
        if !self.text.is_empty() {
            answer["content"] = Value::String(self.text.clone());
        }
        if !self.calls.is_empty() {
            answer["toolCalls"] = Value::Array(self.calls.clone());
        }
        std::iter::once(answer)
            .chain(self.results.iter().cloned())
            .collect()
    }
}

impl AgUi {
    fn new(input: &RunAgentInput) -> Self {
        Self {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            state: input.state.clone().unwrap_or_else(|| json!({})),
            inputs: input
                .messages
                .iter()
                .enumerate()
                .map(|(index, message)| snapshot_message(index, message))
                .collect(),
            said: std::cell::RefCell::new(RunMessages::default()),
            proposed_before: Vec::new(),
            // Checked by `check_input`: anything but `true` sends none.
            subagents: subagents::requested(input.forwarded_props.as_ref())
                .unwrap_or(false)
                .then(|| std::cell::RefCell::new(Subagents::new(&input.run_id))),
        }
    }

    /// The renderer of a resumed run, which answers the calls `proposed_before`.
    fn resuming(input: &RunAgentInput, proposed_before: Vec<String>) -> Self {
        Self {
            proposed_before,
            ..Self::new(input)
        }
    }

    /// A call the interrupted run already proposed: its result follows, not the call again.
    fn was_proposed(&self, part: &UiPart) -> bool {
        matches!(part, UiPart::ToolCall { call_id, .. } if self.proposed_before.contains(call_id))
    }

    /// The sub-agent events a part brings, when the client asked for them: those that close the
    /// open sub-agents before the run's end, and those after a `progress` part.
    fn subagent_events(&self, part: &UiPart) -> (Vec<Value>, Vec<Value>) {
        let Some(subagents) = &self.subagents else {
            return (Vec::new(), Vec::new());
        };
        let mut subagents = subagents.borrow_mut();
        match part {
            UiPart::Finished(end) => (subagents.close_all(end), Vec::new()),
            UiPart::Progress(progress) => (Vec::new(), subagents.progress(progress)),
            _ => (Vec::new(), Vec::new()),
        }
    }

    /// The snapshots before an interrupting `RUN_FINISHED`: none for any other part.
    fn snapshots_before(&self, part: &UiPart) -> Vec<Value> {
        let UiPart::Finished(end) = part else {
            return Vec::new();
        };
        if end.pending_approvals.is_empty() || end.is_failure() {
            return Vec::new();
        }
        let mut messages = self.inputs.clone();
        messages.extend(self.said.borrow().messages(&self.run_id));
        interrupt_snapshots(&self.state, messages).to_vec()
    }
}

impl UiRender for AgUi {
    fn render(&self, part: UiPart, out: &mut Vec<Frame>) {
        if self.was_proposed(&part) {
            return;
        }
        self.said.borrow_mut().note(&part, &self.run_id);
        let ids = FrameIds {
            thread_id: &self.thread_id,
            run_id: &self.run_id,
        };
        let (closing, lifecycle) = self.subagent_events(&part);
        let snapshots = self.snapshots_before(&part);
        let mut rendered = frames(part, &ids);
        rendered.extend(lifecycle);
        // AG-UI 1.0: a run that stopped at calls of the client's tools finished as success,
        // naming the calls the client is to answer.
        for frame in &mut rendered {
            if frame["type"] == "RUN_FINISHED" && frame["outcome"]["type"] == "success" {
                let pending = self.said.borrow().unanswered_calls();
                if !pending.is_empty() {
                    frame["outcome"]["pendingToolCallIds"] = Value::Array(pending);
                }
            }
        }
        out.extend(
            closing
                .into_iter()
                .chain(snapshots)
                .chain(rendered)
                .map(|frame| Frame::data(frame.to_string())),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::shared::goldens::{self, RUN_ID};

    #[test]
    fn every_stored_run_streams_as_golden_ag_ui_events() {
        goldens::each("ag_ui", || {
            let input: RunAgentInput = serde_json::from_value(json!({
                "threadId": "thread-1", "runId": "run-1",
                "messages": [{"id": "m1", "role": "user", "content": "Hello"}],
            }))
            .expect("input");
            UiFrames::new(RUN_ID, AgUi::new(&input))
        });
    }
}
