//! Runs seen as A2A tasks: a task is a run, its `contextId` the run's conversation; its status
//! comes from the run's status, its history from the stored conversation of the result, its
//! artifact from the final report; a stream's frames are the run's stored events translated.

use serde_json::{Map, Value, json};

use super::wire::{self, Dialect, StreamFrame, TaskState, TaskView};
use crate::runtime::FollowedEvent;
use crate::store::RunRecord;
use crate::vocabulary::RunStatus;

/// Now, as A2A timestamps are written.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The task a run is, as it is now; `history_length` keeps the newest messages (0: none).
pub fn task_of_run(run: &RunRecord, history_length: Option<u32>, dialect: Dialect) -> TaskView {
    let context_id = run
        .conversation_id
        .clone()
        .unwrap_or_else(|| run.id.clone());
    let state = TaskState::from_run_status(run.status);
    let note = run.error.as_deref().map(|error| {
        wire::message(
            &format!("{}-status", run.id),
            &run.id,
            &context_id,
            true,
            vec![wire::text_part(error, dialect)],
            dialect,
        )
    });
    let timestamp = run
        .finished_at
        .unwrap_or(run.created_at)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let artifacts = run
        .final_report
        .as_ref()
        .filter(|_| state == TaskState::Completed)
        .map(|report| {
            wire::report_artifact(
                report.get("content").and_then(Value::as_str),
                report.get("content_json"),
                dialect,
            )
        })
        .into_iter()
        .collect();
    let mut history = run
        .result
        .as_ref()
        .map(|result| conversation_messages(result, &run.id, &context_id, dialect))
        .unwrap_or_default();
    if let Some(keep) = history_length {
        let keep = keep as usize;
        if history.len() > keep {
            history.drain(..history.len() - keep);
        }
    }
    let mut metadata = Map::new();
    metadata.insert("agent".into(), json!(run.agent));
    if let Some(reason) = &run.exit_reason {
        metadata.insert("exitReason".into(), json!(reason));
        metadata.insert("costUsd".into(), json!(run.cost_usd));
        metadata.insert(
            "usage".into(),
            json!({"input_tokens": run.input_tokens, "output_tokens": run.output_tokens,
                   "cached_tokens": run.cached_tokens, "total_tokens": run.total_tokens}),
        );
    }
    TaskView {
        id: run.id.clone(),
        context_id,
        status: wire::status(state, note, &timestamp, dialect),
        artifacts,
        history,
        metadata,
    }
}

/// The user's and the agent's text messages of a stored result's conversation.
fn conversation_messages(
    result: &Value,
    task_id: &str,
    context_id: &str,
    dialect: Dialect,
) -> Vec<Value> {
    let Some(messages) = result.get("conversation").and_then(Value::as_array) else {
        return Vec::new();
    };
    messages
        .iter()
        .enumerate()
        .filter_map(|(index, message)| {
            let agent = match message.get("role").and_then(Value::as_str) {
                Some("user") => false,
                Some("assistant") => true,
                _ => return None,
            };
            let text = message
                .get("content")
                .and_then(Value::as_str)
                .filter(|t| !t.trim().is_empty())?;
            Some(wire::message(
                &format!("{task_id}-{index}"),
                task_id,
                context_id,
                agent,
                vec![wire::text_part(text, dialect)],
                dialect,
            ))
        })
        .collect()
}

/// What a followed run event says to an A2A client, if anything. `tool.approval_requested`
/// (SPEC §8) makes the task `INPUT_REQUIRED` with a note naming the call and how to decide it.
pub fn frame_of_event(
    event: &FollowedEvent,
    task_id: &str,
    context_id: &str,
    dialect: Dialect,
) -> Option<StreamFrame> {
    let data = event.data.to_value();
    let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or_default();
    let status = |state: TaskState, note: String, terminal: bool| {
        let message = wire::message(
            &format!("{task_id}-event-{}", event.seq),
            task_id,
            context_id,
            true,
            vec![wire::text_part(&note, dialect)],
            dialect,
        );
        Some(StreamFrame::Status {
            task_id: task_id.to_string(),
            context_id: context_id.to_string(),
            status: wire::status(state, Some(message), &now(), dialect),
            terminal,
            metadata: terminal.then(|| {
                json!({"costUsd": data.get("cost_usd"), "usage": data.get("usage"),
                       "exitReason": data.get("exit_reason")})
            }),
        })
    };
    match event.kind.as_ref() {
        "turn.started" => status(
            TaskState::Working,
            format!(
                "turn {}",
                data.get("turn").and_then(Value::as_u64).unwrap_or(0)
            ),
            false,
        ),
        "tool.started" => status(
            TaskState::Working,
            format!("calling {}", text("tool")),
            false,
        ),
        "progress" => {
            let what = text("kind").replace('_', " ");
            let note = match data.get("message").and_then(Value::as_str) {
                Some(message) => format!("{} {what}: {message}", text("agent")),
                None => format!("{} {what}", text("agent")),
            };
            status(TaskState::Working, note, false)
        }
        "tool.approval_requested" => status(
            TaskState::InputRequired,
            format!(
                "the tool {} waits for approval: POST /v1/runs/{task_id}/approvals/{}",
                text("tool"),
                text("call_id")
            ),
            false,
        ),
        "tool.approval_decided" => status(
            TaskState::Working,
            format!("tool call {} {}", text("call_id"), text("decision")),
            false,
        ),
        "final_report" => Some(StreamFrame::Artifact {
            task_id: task_id.to_string(),
            context_id: context_id.to_string(),
            artifact: wire::report_artifact(
                data.get("content").and_then(Value::as_str),
                data.get("content_json"),
                dialect,
            ),
        }),
        "run.finished" => {
            let state = RunStatus::parse(text("status"))
                .map_or(TaskState::Working, TaskState::from_run_status);
            let note = match data.get("error").and_then(Value::as_str) {
                Some(error) => error.to_string(),
                None => format!("run {}", text("exit_reason")),
            };
            status(state, note, true)
        }
        _ => None,
    }
}
