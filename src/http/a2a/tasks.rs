//! Runs seen as A2A tasks: a task is a run, its `contextId` the run's conversation; its status
//! comes from the run's status, its history from the stored conversation of the result, its
//! artifact from the final report; a stream's frames are the run's stored events translated.

use serde_json::{Map, Value, json};

use super::wire::{self, Dialect, StreamFrame, TaskState, TaskView};
use crate::agent::AgentEvent;
use crate::http::shared::drive::{Frame, StreamEnd, Translator};
use crate::store::RunRecord;
use crate::vocabulary::RunEvent;

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
    event: &RunEvent,
    task_id: &str,
    context_id: &str,
    dialect: Dialect,
) -> Option<StreamFrame> {
    let status = |state: TaskState, note: String, metadata: Option<Value>| {
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
            terminal: metadata.is_some(),
            metadata,
        })
    };
    let working = |note: String| status(TaskState::Working, note, None);
    match &event.event {
        AgentEvent::TurnStarted(turn) => working(format!("turn {}", turn.turn)),
        AgentEvent::ToolStarted(tool) => working(format!("calling {}", tool.tool)),
        AgentEvent::Progress(progress) => {
            let what = progress.kind.in_words();
            working(match &progress.message {
                Some(message) => format!("{} {what}: {message}", progress.agent),
                None => format!("{} {what}", progress.agent),
            })
        }
        AgentEvent::ApprovalRequested(waiting) => status(
            TaskState::InputRequired,
            format!(
                "the tool {} waits for approval: POST /v1/runs/{task_id}/approvals/{}",
                waiting.tool, waiting.call_id
            ),
            None,
        ),
        AgentEvent::ApprovalDecided(decided) => working(format!(
            "tool call {} {}",
            decided.call_id, decided.decision
        )),
        AgentEvent::FinalReport(report) => Some(StreamFrame::Artifact {
            task_id: task_id.to_string(),
            context_id: context_id.to_string(),
            artifact: wire::report_artifact(
                report.content.as_deref(),
                report.content_json.as_ref(),
                dialect,
            ),
        }),
        AgentEvent::RunFinished(summary) => {
            let note = match &summary.error {
                Some(error) => error.clone(),
                None => format!("run {}", summary.exit_reason.as_str()),
            };
            let metadata = json!({"costUsd": summary.cost_usd, "usage": summary.usage,
                "exitReason": summary.exit_reason});
            status(
                TaskState::from_run_status(summary.status),
                note,
                Some(metadata),
            )
        }
        _ => None,
    }
}

/// A2A's translator: the task as it is, then its events as status and artifact updates, each
/// the JSON-RPC result of the request that opened the stream; a follow that fails ends the
/// task `FAILED` with why.
pub struct TaskTranslator {
    task_id: String,
    context_id: String,
    dialect: Dialect,
    /// The task as it was when the stream opened.
    first: Option<StreamFrame>,
    finished: bool,
    /// JSON-RPC wraps each frame in a result; the HTTP+JSON binding sends it bare.
    envelope: bool,
}

impl TaskTranslator {
    pub fn new(run: &RunRecord, dialect: Dialect) -> Self {
        let task = task_of_run(run, Some(0), dialect);
        Self {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            dialect,
            first: Some(StreamFrame::Task(task.to_json(dialect))),
            finished: false,
            envelope: true,
        }
    }

    /// The same frames without the JSON-RPC envelope (the HTTP+JSON binding).
    pub fn without_envelope(run: &RunRecord, dialect: Dialect) -> Self {
        Self {
            envelope: false,
            ..Self::new(run, dialect)
        }
    }

    fn frame(&self, frame: &StreamFrame) -> Frame {
        let frame = frame.to_json(self.dialect);
        if !self.envelope {
            return Frame::data(frame.to_string());
        }
        let request_id = Value::String(self.task_id.clone());
        Frame::data(super::rpc_result(&request_id, frame).to_string())
    }
}

impl Translator for TaskTranslator {
    fn open(&mut self, out: &mut Vec<Frame>) {
        if let Some(first) = self.first.take() {
            out.push(self.frame(&first));
        }
    }

    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        self.finished = event.is_run_finished();
        let frame = frame_of_event(event, &self.task_id, &self.context_id, self.dialect);
        out.extend(frame.map(|frame| self.frame(&frame)));
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn end(&mut self, end: StreamEnd, out: &mut Vec<Frame>) {
        self.finished = true;
        let StreamEnd::Failed(error) = end else {
            return;
        };
        let (task_id, dialect) = (self.task_id.clone(), self.dialect);
        let note = json!({"messageId": format!("{task_id}-error"), "role": "ROLE_AGENT",
            "parts": [wire::text_part(&error.to_string(), dialect)]});
        let failed = StreamFrame::Status {
            task_id,
            context_id: self.context_id.clone(),
            status: wire::status(TaskState::Failed, Some(note), &now(), dialect),
            terminal: true,
            metadata: None,
        };
        out.push(self.frame(&failed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::shared::goldens::{self, RUN_ID};
    use crate::vocabulary::RunStatus;

    fn running() -> RunRecord {
        RunRecord {
            user_id: Some("ada".into()),
            conversation_id: Some("conv-1".into()),
            created_at: chrono::DateTime::UNIX_EPOCH,
            ..RunRecord::new(RUN_ID, "helper", RunStatus::Running)
        }
    }

    #[test]
    fn every_stored_run_streams_as_golden_a2a_task_updates() {
        goldens::each("a2a", || TaskTranslator::new(&running(), Dialect::V1));
        goldens::each("a2a_v03", || TaskTranslator::new(&running(), Dialect::V03));
    }
}
