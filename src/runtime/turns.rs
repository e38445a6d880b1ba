//! Conversations that take turns (SPEC §13): a message to a conversation takes a ticket in the
//! store's queue before its run starts ([`Runtime::ask_for_turn`]); the run waits for the
//! messages before it to be answered ([`Runtime::await_turn`]), and only then is its message
//! stored and its history loaded, so the history alternates as it was answered. The queue and
//! the lock are rows in the store, so they hold across replicas; a run that ended without giving
//! its turn back (its replica died) is found ended in the store and its turn passed on.
//! `busy` decides what a message to a busy conversation does: wait (`enqueue`), be refused
//! (`reject`), stop the answer in progress (`interrupt`, which keeps its partial answer) or
//! join it (`steer`: the running session takes the message at its next turn, see
//! [`super::steering`], and the message's own run follows that answer as its own).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use super::Runtime;
use super::follow::CancelMode;
use super::pipeline::StartError;
use crate::agent::{AgentResult, EventSink, RunControl};
use crate::config::BusyPolicy;
use crate::store::{NewTurn, StoreError, Turn, TurnState};
use crate::vocabulary::events::{AgentEvent, Progress};
use crate::vocabulary::{Attachment, ExitReason};

/// How often a queued run looks at its conversation's queue in the store.
const TURN_POLL: Duration = Duration::from_millis(50);

/// A message's conversation, for the run that answers it.
#[derive(Debug, Clone)]
pub(super) struct ConversationSeat {
    pub user_id: String,
    pub conversation_id: String,
}

/// How a run's message came to be answered.
#[derive(Debug)]
pub(super) enum TurnTaken {
    /// The message holds the conversation's turn: it is stored, and this run answers it.
    Holding,
    /// The message joined the answer of run `head` (`busy: steer`), which stored it.
    Joined { head: String },
}

/// Why a queued message was never answered.
#[derive(Debug)]
pub(super) enum TurnLost {
    /// Its sender withdrew it.
    Withdrawn,
    /// Its run was cancelled while it waited.
    Cancelled,
    Store(StoreError),
}

impl From<StoreError> for TurnLost {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl TurnLost {
    /// The result of a run that ended before its turn came.
    pub(super) fn result(&self, run_id: &str) -> AgentResult {
        let (reason, error) = match self {
            Self::Withdrawn => (
                ExitReason::Cancelled,
                "withdrawn before its turn".to_string(),
            ),
            Self::Cancelled => (ExitReason::Cancelled, "cancelled while queued".to_string()),
            Self::Store(error) => (
                ExitReason::InternalError,
                format!("could not take the conversation's turn: {error}"),
            ),
        };
        AgentResult::ended_without_session(run_id, reason, error, 0)
    }
}

impl Runtime {
    /// Queues the run's message for its conversation's turn. `reject` refuses it (409
    /// `conversation_busy`) when the conversation has a message answering or queued;
    /// `interrupt` cancels the answer in progress; `steer` waits for it to join the message.
    pub(super) async fn ask_for_turn(
        self: &Arc<Self>,
        seat: &ConversationSeat,
        run_id: &str,
        agent: &str,
        (message, attachments): (&str, &[Attachment]),
        policy: BusyPolicy,
    ) -> Result<(), StartError> {
        let turn = NewTurn {
            user_id: seat.user_id.clone(),
            conversation_id: seat.conversation_id.clone(),
            run_id: run_id.to_string(),
            agent: agent.to_string(),
            message: message.to_string(),
            busy: policy.as_str().to_string(),
            attachments: (!attachments.is_empty())
                .then(|| serde_json::to_value(attachments).ok())
                .flatten(),
            created_at: Utc::now(),
        };
        let only_when_free = policy == BusyPolicy::Reject;
        if self.store.take_turn(&turn, only_when_free).await?.is_none() {
            return Err(StartError::ConversationBusy);
        }
        if policy.stops_the_answer() {
            self.stop_answer_in_progress(seat, run_id).await?;
        }
        Ok(())
    }

    /// Cancels the run holding the conversation's turn (wherever it runs), unless it is `run_id`.
    async fn stop_answer_in_progress(
        self: &Arc<Self>,
        seat: &ConversationSeat,
        run_id: &str,
    ) -> Result<(), StoreError> {
        let turns = self
            .store
            .conversation_turns(&seat.user_id, &seat.conversation_id)
            .await?;
        let head = turns
            .iter()
            .find(|turn| turn.state == TurnState::Answering && turn.run_id != run_id);
        if let Some(head) = head {
            self.cancel_run(&head.run_id, CancelMode::Abort).await?;
        }
        Ok(())
    }

    /// Waits until the run's message holds its conversation's turn, or joined the answer in
    /// progress. A run that must wait says so once with a `progress` event of kind `queued`.
    pub(super) async fn await_turn(
        &self,
        seat: &ConversationSeat,
        run_id: &str,
        agent: &str,
        sink: &EventSink,
        control: &RunControl,
    ) -> Result<TurnTaken, TurnLost> {
        let mut announced = false;
        loop {
            if control.abort.is_cancelled() {
                return Err(TurnLost::Cancelled);
            }
            let turns = self
                .store
                .conversation_turns(&seat.user_id, &seat.conversation_id)
                .await?;
            let Some(place) = turns.iter().position(|turn| turn.run_id == run_id) else {
                return Err(TurnLost::Withdrawn);
            };
            if let Some(head) = turns[place].joined_to.clone() {
                return Ok(TurnTaken::Joined { head });
            }
            if place == 0 {
                let mine = &turns[0];
                let held =
                    mine.state == TurnState::Answering || self.store.start_turn(run_id).await?;
                return if held {
                    Ok(TurnTaken::Holding)
                } else {
                    Err(TurnLost::Withdrawn)
                };
            }
            if self.turn_is_over(&turns[0]).await? {
                self.store.end_turn(&turns[0].run_id).await?;
                continue;
            }
            if !announced {
                sink.emit(queued_event(agent, place)).await;
                announced = true;
            }
            tokio::select! {
                () = tokio::time::sleep(TURN_POLL) => {}
                () = control.abort.cancelled() => {}
            }
        }
    }

    /// Whether the run holding a turn has ended without giving it back (its replica died and
    /// another ended the run `owner_lost`), or never got recorded by a replica long gone.
    async fn turn_is_over(&self, turn: &Turn) -> Result<bool, StoreError> {
        if let Some(run) = self.recorded_run(&turn.run_id).await? {
            return Ok(run.status.is_terminal());
        }
        let unrecorded_for = (Utc::now() - turn.created_at).num_seconds();
        let owner_timeout = self.config.server.owner_timeout_seconds.saturating_mul(2);
        Ok(unrecorded_for > i64::try_from(owner_timeout).unwrap_or(i64::MAX))
    }

    /// Gives the conversation's turn back once the run's answer is stored (or it ended).
    pub(super) async fn release_turn(&self, run_id: &str) {
        if let Err(error) = self.store.end_turn(run_id).await {
            tracing::error!(%error, %run_id, "could not give the conversation's turn back");
        }
    }

    /// The policy of the newest message that stopped this run's answer, if one did.
    pub(super) async fn stopped_by(
        &self,
        seat: &ConversationSeat,
        run_id: &str,
    ) -> Option<BusyPolicy> {
        let turns = self
            .store
            .conversation_turns(&seat.user_id, &seat.conversation_id)
            .await
            .ok()?;
        let mine = turns.iter().position(|turn| turn.run_id == run_id)?;
        turns[mine + 1..]
            .iter()
            .map(|turn| BusyPolicy::parse(&turn.busy))
            .rfind(|policy| policy.stops_the_answer())
    }

    /// The user's messages still waiting for their turn in the conversation, in order.
    pub async fn queued_messages(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<Vec<Turn>, StoreError> {
        let turns = self
            .store
            .conversation_turns(user_id, conversation_id)
            .await?;
        Ok(turns
            .into_iter()
            .filter(|turn| turn.state == TurnState::Queued)
            .collect())
    }

    /// Withdraws a queued message before its turn: its run ends `cancelled` and the message is
    /// never stored. False when no such message waits (answered, answering, or unknown).
    pub async fn withdraw_message(
        self: &Arc<Self>,
        user_id: &str,
        conversation_id: &str,
        run_id: &str,
    ) -> Result<bool, StoreError> {
        if !self
            .store
            .withdraw_turn(user_id, conversation_id, run_id)
            .await?
        {
            return Ok(false);
        }
        // Its run, wherever it waits, sees its ticket gone; here it hears at once.
        self.cancel_run(run_id, CancelMode::Abort).await?;
        Ok(true)
    }
}

/// The `progress` event of a message waiting behind `ahead` others.
fn queued_event(agent: &str, ahead: usize) -> AgentEvent {
    AgentEvent::Progress(Box::new(Progress {
        kind: crate::vocabulary::events::ProgressKind::Queued,
        agent: agent.to_string(),
        call_path: agent.to_string(),
        message: Some(format!(
            "Queued: {ahead} message(s) of this conversation are answered first"
        )),
        done: None,
        pending: Some(ahead.to_string()),
        now: None,
        call_id: None,
        joined_run_id: None,
        attachments: Vec::new(),
    }))
}

/// Why a run's conversation could not be continued (a Responses `previous_response_id`).
#[derive(Debug)]
pub enum ContinueError {
    /// The run is still answering and `busy` is `reject`.
    Busy,
    /// `steer` joins a conversation's running session; a run continued by id has none to join.
    SteerUnsupported,
    Store(StoreError),
    /// The run's end could not be followed.
    Follow(String),
}

impl From<StoreError> for ContinueError {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl Runtime {
    /// The conversation run `run_id` ended with, to continue it (SPEC §13 for a Responses
    /// `previous_response_id`). While the run is still answering, `busy` decides: `enqueue`
    /// waits for its end, `reject` is [`ContinueError::Busy`], `interrupt` ends it now (its
    /// partial answer kept) and continues after it. `None`: no such run, or one that waits for
    /// a person and has no answer yet.
    pub async fn conversation_after(
        self: &Arc<Self>,
        run_id: &str,
        busy: BusyPolicy,
    ) -> Result<Option<Vec<crate::llm::ChatMessage>>, ContinueError> {
        let Some(run) = self.find_run(run_id).await? else {
            return Ok(None);
        };
        if matches!(
            run.status,
            crate::vocabulary::RunStatus::Queued | crate::vocabulary::RunStatus::Running
        ) {
            match busy {
                BusyPolicy::Reject => return Err(ContinueError::Busy),
                BusyPolicy::Steer => return Err(ContinueError::SteerUnsupported),
                BusyPolicy::Interrupt => {
                    self.cancel_run(run_id, CancelMode::Abort).await?;
                }
                BusyPolicy::Enqueue => {}
            }
            self.until_ended(run_id).await?;
        }
        Ok(self.finished_conversation(run_id).await?)
    }

    /// Follows the run's events until it ends.
    async fn until_ended(self: &Arc<Self>, run_id: &str) -> Result<(), ContinueError> {
        use futures_util::StreamExt;
        let events = self.follow_run_events(run_id.to_string(), 0);
        futures_util::pin_mut!(events);
        while let Some(event) = events.next().await {
            let event = event.map_err(|error| ContinueError::Follow(error.to_string()))?;
            if event.is_run_finished() {
                break;
            }
        }
        Ok(())
    }
}
