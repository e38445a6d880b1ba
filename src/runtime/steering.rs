//! `busy: steer` (SPEC §13): a message sent while its conversation is answering joins that
//! answer instead of waiting behind it. Its row waits in the store's queue (state `queued`,
//! policy `steer`); the running session looks at its [`ConversationInbox`] before each turn
//! (and when the model answers with turns left) and takes such messages in one transaction
//! that stores them in the conversation, so the history reads both messages, then the one
//! answer. Whichever replica runs that answer, the message's own run follows it
//! ([`Runtime::answer_as_joined`]) and ends with its answer.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use chrono::Utc;
use futures_util::StreamExt;

use super::Runtime;
use super::turns::ConversationSeat;
use crate::agent::events::{AgentEvent, EventSink};
use crate::agent::inbox::{Inbox, JoinedMessage};
use crate::agent::{AgentResult, ExitReason, RunControl};
use crate::config::AgentSpec;
use crate::llm::ChatMessage;
use crate::store::Turn;
use crate::vocabulary::Attachment;
use crate::vocabulary::events::ProgressKind;
use crate::vocabulary::result::{FinalReport, RunSummary};

/// The store's queue of one conversation, as the inbox of the run holding its turn.
pub(super) struct ConversationInbox {
    pub runtime: Arc<Runtime>,
    pub seat: ConversationSeat,
    /// The run holding the turn: only its session takes the conversation's messages.
    pub run_id: String,
    pub agent: Arc<AgentSpec>,
}

#[async_trait]
impl Inbox for ConversationInbox {
    async fn take(&self) -> Vec<JoinedMessage> {
        match self.join().await {
            Ok(joined) => joined,
            Err(error) => {
                tracing::warn!(%error, run_id = %self.run_id, "could not look for messages joining the answer");
                Vec::new()
            }
        }
    }
}

impl ConversationInbox {
    /// Reads the queue (one query, the common case ends here) and joins what steers.
    async fn join(&self) -> Result<Vec<JoinedMessage>, crate::store::StoreError> {
        let ConversationSeat {
            user_id,
            conversation_id,
        } = &self.seat;
        let store = &self.runtime.store;
        let turns = store.conversation_turns(user_id, conversation_id).await?;
        if Turn::steering_behind(&turns, &self.run_id).is_empty() {
            return Ok(Vec::new());
        }
        let joined = store
            .join_steering_turns(user_id, conversation_id, &self.run_id, Utc::now())
            .await?;
        let mut messages: Vec<ChatMessage> = joined.iter().map(user_message).collect();
        self.runtime
            .load_attachments(&self.agent, &mut messages, &mut [])
            .await;
        Ok(joined
            .into_iter()
            .zip(messages)
            .map(|(turn, message)| JoinedMessage {
                sender: turn.run_id,
                message,
            })
            .collect())
    }
}

/// A queued message as the model reads it (its attachments named; their content is loaded
/// next).
fn user_message(turn: &Turn) -> ChatMessage {
    let mut message = ChatMessage::user(turn.message.clone());
    message.attachments = turn
        .attachments
        .clone()
        .and_then(|json| serde_json::from_value::<Vec<Attachment>>(json).ok())
        .unwrap_or_default();
    message
}

impl Runtime {
    /// The run of a message that joined `head`'s answer: passes on what `head` streams from
    /// the moment the message joined (its `message_joined` progress naming this run), and
    /// ends as `head` ended, with its answer. Usage and cost stay `head`'s.
    pub(super) async fn answer_as_joined(
        self: &Arc<Self>,
        head: &str,
        run_id: &str,
        sink: &EventSink,
        control: &RunControl,
    ) -> AgentResult {
        let started = Instant::now();
        let events = self.follow_run_events(head.to_string(), 0);
        futures_util::pin_mut!(events);
        let mut joined = false;
        let mut report: Option<FinalReport> = None;
        let summary: RunSummary = loop {
            let next = tokio::select! {
                next = events.next() => next,
                () = control.abort.cancelled() => {
                    let error = "cancelled while following the answer it joined";
                    return unfollowed_result(run_id, ExitReason::Cancelled, error, started);
                }
            };
            let event = match next {
                Some(Ok(event)) => event.event,
                Some(Err(error)) => {
                    let error = format!("could not follow the answer it joined: {error}");
                    return unfollowed_result(run_id, ExitReason::InternalError, &error, started);
                }
                None => {
                    let error = "the answer it joined ended without a result";
                    return unfollowed_result(run_id, ExitReason::InternalError, error, started);
                }
            };
            match event {
                AgentEvent::Progress(progress)
                    if progress.kind == ProgressKind::MessageJoined
                        && progress.joined_run_id.as_deref() == Some(run_id) =>
                {
                    joined = true;
                    sink.emit(AgentEvent::Progress(progress)).await;
                }
                AgentEvent::RunFinished(summary) => break *summary,
                AgentEvent::FinalReport(final_report) => report = Some(*final_report),
                event @ (AgentEvent::TurnStarted(_)
                | AgentEvent::Output(_)
                | AgentEvent::Thinking(_))
                    if joined =>
                {
                    sink.emit(event).await;
                }
                _ => {}
            }
        };
        let result = followed_result(run_id, &summary, report, started);
        if let Some(report) = &result.final_report {
            sink.emit(AgentEvent::FinalReport(Box::new(report.clone())))
                .await;
        }
        sink.emit(AgentEvent::RunFinished(Box::new(result.summary())))
            .await;
        result
    }
}

/// The result of a run whose message joined another's answer: that answer's outcome (its
/// summary and report). Usage and cost are the answering run's.
fn followed_result(
    run_id: &str,
    summary: &RunSummary,
    report: Option<FinalReport>,
    started: Instant,
) -> AgentResult {
    let mut result =
        AgentResult::ended_without_session(run_id, summary.exit_reason, String::new(), 0);
    result.success = summary.success;
    result.error = summary.error.clone();
    result.final_report = report;
    result.retry_after_secs = summary.retry_after_secs;
    result.duration_ms = elapsed_ms(started);
    result
}

/// The result of a run that stopped following the answer its message joined.
fn unfollowed_result(
    run_id: &str,
    reason: ExitReason,
    error: &str,
    started: Instant,
) -> AgentResult {
    AgentResult::ended_without_session(run_id, reason, error.to_string(), elapsed_ms(started))
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
