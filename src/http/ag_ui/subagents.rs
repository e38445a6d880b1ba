//! AG-UI 1.0 sub-agent lifecycle events: `SUBAGENT_STARTED`, `SUBAGENT_FINISHED` and
//! `SUBAGENT_ERROR` (SPEC §15). A client older than them fails on the event types, so they are
//! sent only to one that asks with `forwardedProps.subagentEvents: true`. They come from the
//! run's `progress` events `agent_started` / `agent_finished`, which sub-agent calls, advisors,
//! router destinations and handoffs emit; a sub-agent still open when the run ends is closed
//! before `RUN_FINISHED` (suspended when the run waits for approvals). Each invocation gets its
//! own `subagentRunId`; two calls of one agent in one turn are told apart by their tool call.

use serde_json::{Value, json};

use crate::http::shared::ui::RunEnd;
use crate::vocabulary::RunStatus;
use crate::vocabulary::events::{Progress, ProgressKind};

/// The `forwardedProps` field that asks for the events.
pub const REQUEST_FIELD: &str = "subagentEvents";

/// The `progress` kinds that open and close a sub-agent.
/// The `message` of an `agent_finished` that ended well.
const COMPLETED: &str = "completed";

/// One sub-agent invocation that started and has not finished.
#[derive(Debug)]
struct OpenSubagent {
    /// The progress event's `call_path`.
    call_path: String,
    /// The `agent__{name}` call that started it; `None` for advisors, routes and handoffs.
    call_id: Option<String>,
    /// Its `subagentRunId`.
    id: String,
}

/// The sub-agents of one stream: which are open, and how many were started.
#[derive(Debug)]
pub struct Subagents {
    run_id: String,
    started: u64,
    open: Vec<OpenSubagent>,
}

impl Subagents {
    /// The sub-agents of the client's run `run_id` (their ids start with it).
    pub fn new(run_id: &str) -> Self {
        Self {
            run_id: run_id.to_string(),
            started: 0,
            open: Vec::new(),
        }
    }

    /// The lifecycle events one `progress` event stands for: none for progress of another kind.
    pub fn progress(&mut self, progress: &Progress) -> Vec<Value> {
        let (agent, call_path) = (progress.agent.as_str(), progress.call_path.as_str());
        let call_id = progress.call_id.clone();
        match progress.kind {
            ProgressKind::AgentStarted => vec![self.started(agent, call_path, call_id)],
            ProgressKind::AgentFinished => self
                .finished(call_path, call_id.as_deref())
                .map(|id| finished_event(&id, agent, progress.message.as_deref()))
                .into_iter()
                .collect(),
            ProgressKind::TaskStatus
            | ProgressKind::AgentUpdate
            | ProgressKind::MessageJoined
            | ProgressKind::Queued => Vec::new(),
        }
    }

    /// The events that close every open sub-agent before the run's last event.
    pub fn close_all(&mut self, end: &RunEnd) -> Vec<Value> {
        self.open
            .drain(..)
            .map(|open| match end.status {
                RunStatus::WaitingApproval => json!({
                    "type": "SUBAGENT_FINISHED", "subagentRunId": open.id,
                    "outcome": {"type": "suspended"},
                }),
                RunStatus::Completed => json!({
                    "type": "SUBAGENT_FINISHED", "subagentRunId": open.id,
                    "outcome": {"type": "success"},
                }),
                _ => json!({
                    "type": "SUBAGENT_ERROR", "subagentRunId": open.id,
                    "message": format!("The run ended ({}) before this agent finished", end.reason_name()),
                    "code": end.reason_name(),
                }),
            })
            .collect()
    }

    fn started(&mut self, agent: &str, call_path: &str, call_id: Option<String>) -> Value {
        self.started += 1;
        let id = format!("{}-subagent-{}", self.run_id, self.started);
        let mut event = json!({
            "type": "SUBAGENT_STARTED", "subagentRunId": id, "name": agent,
            "metadata": {"callPath": call_path},
        });
        if let Some(call_id) = &call_id {
            event["metadata"]["agentdToolCallId"] = json!(call_id);
        }
        self.open.push(OpenSubagent {
            call_path: call_path.to_string(),
            call_id,
            id,
        });
        event
    }

    /// The id of the open sub-agent an `agent_finished` closes (the earliest match), removed.
    fn finished(&mut self, call_path: &str, call_id: Option<&str>) -> Option<String> {
        let index = self
            .open
            .iter()
            .position(|o| o.call_path == call_path && o.call_id.as_deref() == call_id)?;
        Some(self.open.remove(index).id)
    }
}

/// `SUBAGENT_FINISHED` for a child that completed; `SUBAGENT_ERROR` naming how any other ended.
fn finished_event(id: &str, agent: &str, status: Option<&str>) -> Value {
    match status {
        Some(COMPLETED) | None => json!({
            "type": "SUBAGENT_FINISHED", "subagentRunId": id, "outcome": {"type": "success"},
        }),
        Some(status) => json!({
            "type": "SUBAGENT_ERROR", "subagentRunId": id,
            "message": format!("The {agent} agent ended: {status}"), "code": status,
        }),
    }
}

/// Whether `forwardedProps` asks for the events: `Err` names what is wrong with the field.
pub fn requested(forwarded_props: Option<&Value>) -> Result<bool, String> {
    match forwarded_props.and_then(|props| props.get(REQUEST_FIELD)) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(asked)) => Ok(*asked),
        Some(_) => Err(format!(
            "`forwardedProps.{REQUEST_FIELD}` must be true or false"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::ExitReason;

    const STARTED: ProgressKind = ProgressKind::AgentStarted;
    const FINISHED: ProgressKind = ProgressKind::AgentFinished;

    fn progress(kind: ProgressKind, call_id: Option<&str>, message: Option<&str>) -> Progress {
        Progress {
            kind,
            agent: "helper".into(),
            call_path: "lead:helper".into(),
            message: message.map(str::to_string),
            done: None,
            pending: None,
            now: None,
            call_id: call_id.map(str::to_string),
            joined_run_id: None,
            attachments: Vec::new(),
        }
    }

    #[test]
    fn two_calls_of_one_agent_are_two_invocations_closed_by_their_own_call() {
        let mut subagents = Subagents::new("run-1");
        let first = subagents.progress(&progress(STARTED, Some("c1"), None));
        let second = subagents.progress(&progress(STARTED, Some("c2"), None));
        assert_eq!(first[0]["type"], "SUBAGENT_STARTED");
        assert_eq!(first[0]["name"], "helper");
        assert_eq!(first[0]["metadata"]["agentdToolCallId"], "c1");
        assert_ne!(first[0]["subagentRunId"], second[0]["subagentRunId"]);
        let closed = subagents.progress(&progress(FINISHED, Some("c2"), Some(COMPLETED)));
        assert_eq!(closed[0]["type"], "SUBAGENT_FINISHED");
        assert_eq!(closed[0]["subagentRunId"], second[0]["subagentRunId"]);
        assert_eq!(closed[0]["outcome"]["type"], "success");
        let failed = subagents.progress(&progress(FINISHED, Some("c1"), Some("max_turns")));
        assert_eq!(failed[0]["type"], "SUBAGENT_ERROR");
        assert_eq!(failed[0]["code"], "max_turns");
        assert_eq!(failed[0]["subagentRunId"], first[0]["subagentRunId"]);
    }

    #[test]
    fn a_finish_no_start_announced_and_other_progress_send_nothing() {
        let mut subagents = Subagents::new("run-1");
        assert!(
            subagents
                .progress(&progress(FINISHED, None, Some(COMPLETED)))
                .is_empty()
        );
        assert!(
            subagents
                .progress(&progress(ProgressKind::TaskStatus, None, None))
                .is_empty()
        );
    }

    #[test]
    fn open_sub_agents_close_before_the_run_ends_suspended_while_it_waits() {
        let mut subagents = Subagents::new("run-1");
        subagents.progress(&progress(STARTED, None, None));
        let waiting = RunEnd::new(RunStatus::WaitingApproval, None);
        let closed = subagents.close_all(&waiting);
        assert_eq!(closed[0]["outcome"]["type"], "suspended");
        assert!(subagents.close_all(&waiting).is_empty(), "closed once");
        subagents.progress(&progress(STARTED, None, None));
        let cancelled = RunEnd::new(RunStatus::Cancelled, Some(ExitReason::Cancelled));
        let closed = subagents.close_all(&cancelled);
        assert_eq!(closed[0]["type"], "SUBAGENT_ERROR");
        assert_eq!(closed[0]["code"], "cancelled");
    }

    #[test]
    fn the_request_field_is_a_boolean() {
        assert_eq!(requested(None), Ok(false));
        assert_eq!(requested(Some(&json!({"subagentEvents": true}))), Ok(true));
        assert_eq!(requested(Some(&json!({"subagentEvents": null}))), Ok(false));
        assert!(requested(Some(&json!({"subagentEvents": "yes"}))).is_err());
    }
}
