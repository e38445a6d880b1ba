//! Messages that join a running session (SPEC §13 `busy: steer`): the session looks at its
//! [`Inbox`] before each turn and when the model answers with turns left, and what it finds
//! joins the conversation as user messages, so one answer covers them all. The session knows
//! only the trait; where the messages wait (the server's store, an embedder's channel) is the
//! inbox's.

use async_trait::async_trait;

use super::events::{AgentEvent, Progress};
use crate::llm::ChatMessage;

/// A message sent to a running session.
#[derive(Debug, Clone)]
pub struct JoinedMessage {
    /// Who sent it: on the server, the run the message was sent with (it follows this run's
    /// answer as its own).
    pub sender: String,
    /// The user message, its attachments' content loaded.
    pub message: ChatMessage,
}

/// Where messages for a running session wait until its next turn.
#[async_trait]
pub trait Inbox: Send + Sync {
    /// The messages that arrived since the session last looked, oldest first. Taking them is
    /// final: they are the session's to answer.
    async fn take(&self) -> Vec<JoinedMessage>;
}

/// The `progress` event telling a message's sender (and everyone following the run) that it
/// joined the answer in progress.
pub(super) fn joined_event(agent: &str, joined: &JoinedMessage) -> AgentEvent {
    AgentEvent::Progress(Box::new(Progress {
        kind: crate::vocabulary::events::ProgressKind::MessageJoined,
        agent: agent.to_string(),
        call_path: agent.to_string(),
        message: Some("A message sent while this answer was running joined it".to_string()),
        done: None,
        pending: None,
        now: None,
        call_id: None,
        joined_run_id: Some(joined.sender.clone()),
        attachments: Vec::new(),
    }))
}
