//! The experimental Tasks of MCP 2025-11-25 (SEP-1686), as the MCP Python SDK's
//! `session.experimental` client speaks them: a `tools/call` carrying `params.task` is answered
//! with a task that IS the durable run (its id the run id), `tasks/get` reads it, `tasks/cancel`
//! cancels it and `tasks/result` waits for its tool result. A run waiting for tool approvals is
//! `input_required`; `tasks/result` then asks the client with one `elicitation/create` per
//! waiting call on its stream, the request id naming the run and the call
//! ([`WaitingCallRef`], prefix `mcpt`), so the client's answer, posted as a JSON-RPC response,
//! decides the call on whatever replica it reaches; a `tasks/result` carrying a progress token
//! gets the run's `notifications/progress` on that stream too. This module owns that revision's task
//! shapes; the runs, approvals and 2026-07-28 tasks are [`super::modern`]'s.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::modern::{
    McpError, approval_request, call_result_of_run, decision_of_response, rfc3339, start_task,
    task_id, task_run, task_status,
};
use super::progress::{Progress, progress_token};
use crate::http::auth::Caller;
use crate::http::shared::drive::{self, Events, Frame, OnLeave, StreamEnd, Translator};
use crate::http::sse::sse_response;
use crate::runtime::{CancelMode, Runtime, WaitingCallRef};
use crate::store::RunRecord;
use crate::vocabulary::{AgentEvent, RunEvent};

/// The `_meta` key tying a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The prefix of the elicitation ids `tasks/result` sends.
const ELICITATION_PREFIX: &str = "mcpt";
/// The polling interval suggested to clients, in milliseconds.
const POLL_INTERVAL_MS: u64 = 1_000;

/// The messages of this revision's Tasks that this module answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskMessage {
    /// `tools/call` with `params.task`.
    CallAsTask,
    GetTask,
    TaskResult,
    CancelTask,
    /// The client's answer to an approval's `elicitation/create`.
    ElicitationAnswer(WaitingCallRef),
}

impl TaskMessage {
    /// What `message` is, when it is one of this module's.
    pub fn of(message: &Value) -> Option<Self> {
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            let id = message.get("id").and_then(Value::as_str)?;
            return WaitingCallRef::parse(id, ELICITATION_PREFIX).map(Self::ElicitationAnswer);
        };
        Some(match method {
            "tools/call"
                if message
                    .pointer("/params/task")
                    .is_some_and(Value::is_object) =>
            {
                Self::CallAsTask
            }
            "tasks/get" => Self::GetTask,
            "tasks/result" => Self::TaskResult,
            "tasks/cancel" => Self::CancelTask,
            _ => return None,
        })
    }
}

/// Answers one message [`TaskMessage::of`] recognised.
pub async fn answer(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    kind: TaskMessage,
    message: Value,
) -> Response {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let result = match kind {
        TaskMessage::ElicitationAnswer(call) => {
            decide(runtime, caller, &call, &message).await;
            return StatusCode::ACCEPTED.into_response();
        }
        TaskMessage::TaskResult => return task_result(runtime, caller, id, &params).await,
        TaskMessage::CallAsTask => start_task(runtime, caller, &params)
            .await
            .map(|run| json!({"task": task(&run)})),
        TaskMessage::GetTask => get(runtime, caller, &params).await,
        TaskMessage::CancelTask => cancel(runtime, caller, &params).await,
    };
    match result {
        Ok(result) => {
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
        }
        Err(error) => error.answer(id),
    }
}

/// A run as this revision's `Task`.
fn task(run: &RunRecord) -> Value {
    let mut task = json!({
        "taskId": run.id,
        "status": task_status(run.status),
        "createdAt": rfc3339(run.created_at),
        "lastUpdatedAt": rfc3339(run.finished_at.unwrap_or(run.created_at)),
        // Kept as long as the run is (the retention policy's business, not the client's).
        "ttl": Value::Null,
        "pollInterval": POLL_INTERVAL_MS,
    });
    if let Some(error) = &run.error {
        task["statusMessage"] = json!(error);
    } else if task["status"] == "input_required" {
        task["statusMessage"] = json!("a tool call waits for approval: call tasks/result");
    }
    task
}

fn related(run_id: &str) -> Value {
    json!({RELATED_TASK: {"taskId": run_id}})
}

async fn get(runtime: &Runtime, caller: &Caller, params: &Value) -> Result<Value, McpError> {
    let run = task_run(runtime, caller, &task_id(params)?).await?;
    Ok(task(&run))
}

async fn cancel(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Value,
) -> Result<Value, McpError> {
    let run = task_run(runtime, caller, &task_id(params)?).await?;
    if run.status.is_terminal() {
        return Err(McpError::invalid_params(format!(
            "params.taskId: task `{}` is already {}",
            run.id,
            task_status(run.status)
        )));
    }
    runtime
        .cancel_run(&run.id, CancelMode::Abort)
        .await
        .map_err(|_| McpError::internal("the task could not be cancelled"))?;
    let run = task_run(runtime, caller, &run.id).await?;
    Ok(task(&run))
}

/// The client's answer to an approval's elicitation, as the call's decision; an answer that is
/// no longer wanted (decided already, a run the key may not see) is let go, as a response to a
/// request no one waits for is.
async fn decide(runtime: &Arc<Runtime>, caller: &Caller, call: &WaitingCallRef, message: &Value) {
    if task_run(runtime, caller, &call.run_id).await.is_err() {
        return;
    }
    let response = message.get("result").cloned().unwrap_or(Value::Null);
    let decision = decision_of_response(&response);
    if let Err(error) = runtime
        .decide_approval(&call.run_id, &call.call_id, decision, &caller.decider())
        .await
    {
        tracing::debug!(%error, call_id = %call.call_id, "MCP task elicitation answer not taken");
    }
}

/// `tasks/result`: the tool result of a finished run at once; of a running one, an SSE stream
/// asking the client about each approval the run waits for, then the result when it ends.
async fn task_result(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    id: Value,
    params: &Value,
) -> Response {
    let run = match task_id(params) {
        Ok(task_id) => task_run(runtime, caller, &task_id).await,
        Err(error) => Err(error),
    };
    let run = match run {
        Ok(run) => run,
        Err(error) => return error.answer(id),
    };
    if run.status.is_terminal() {
        return axum::Json(result_message(&id, &run)).into_response();
    }
    // The request's own progress token follows the run (the task's), as progress goes.
    let progress = progress_token(params).map(|token| Progress::new(token, Some(related(&run.id))));
    let translator = Elicitations {
        run_id: run.id.clone(),
        finished: false,
        progress,
    };
    let events = Events::followed(runtime, run.id.clone(), 0);
    let (runtime_end, caller) = (Arc::clone(runtime), caller.clone());
    let last = futures_util::stream::once(async move {
        let answer = match task_run(&runtime_end, &caller, &run.id).await {
            Ok(run) if run.status.is_terminal() => result_message(&id, &run),
            Ok(_) | Err(_) => error_message(
                &id,
                "the task's run could not be followed to its end: call tasks/result again",
            ),
        };
        Frame::data(answer.to_string())
    });
    let frames = drive::frames(events, translator, OnLeave::Continue).chain(last);
    sse_response(runtime, frames.map(|frame| Ok(frame.into_sse())))
}

fn result_message(id: &Value, run: &RunRecord) -> Value {
    let mut result = call_result_of_run(run);
    result["_meta"] = related(&run.id);
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error_message(id: &Value, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})
}

/// The frames of `tasks/result` while the run goes on: an `elicitation/create` for each call
/// that asks for approval, and `notifications/progress` when the request asked for progress.
/// (A stream opened after calls were decided asks about them again; the answers are let go.)
struct Elicitations {
    run_id: String,
    finished: bool,
    progress: Option<Progress>,
}

impl Translator for Elicitations {
    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        if let Some(progress) = self.progress.as_mut() {
            out.extend(progress.notification(&event.event));
        }
        match &event.event {
            AgentEvent::ApprovalRequested(requested) => {
                let mut request =
                    approval_request(&requested.tool, &requested.server, &requested.arguments);
                request["jsonrpc"] = json!("2.0");
                request["id"] = json!(
                    WaitingCallRef::new(&self.run_id, &requested.call_id)
                        .encode(ELICITATION_PREFIX)
                );
                request["params"]["_meta"] = related(&self.run_id);
                out.push(Frame::data(request.to_string()));
            }
            AgentEvent::RunFinished(_) => self.finished = true,
            _ => {}
        }
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn end(&mut self, _end: StreamEnd, _out: &mut Vec<Frame>) {}
}
