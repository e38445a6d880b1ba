//! Conversations that take turns (SPEC §13): the queue of messages sent to one conversation and
//! the lock on it, both as rows in the store so they hold across replicas. A message takes a
//! ticket; the lowest ticket of a conversation holds its turn, the others wait in ticket order.
//! The store only keeps the rows: who may take a turn, and when, is the runtime's.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// Where a message stands in its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnState {
    /// Waiting for the messages before it to be answered; may be withdrawn.
    Queued,
    /// Holds the conversation: its message is stored and being answered.
    Answering,
}

impl TurnState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Answering => "answering",
        }
    }

    /// The state a row's text names; an unknown text reads as `answering` (never withdrawn).
    pub fn parse(text: &str) -> Self {
        if text == Self::Queued.as_str() {
            Self::Queued
        } else {
            Self::Answering
        }
    }
}

/// A message asking for its conversation's turn.
#[derive(Debug, Clone)]
pub struct NewTurn {
    pub user_id: String,
    pub conversation_id: String,
    pub run_id: String,
    pub agent: String,
    pub message: String,
    /// The `busy` policy it came with (`enqueue`, `interrupt`, …).
    pub busy: String,
    pub created_at: DateTime<Utc>,
}

/// A message in a conversation's queue (or holding its turn).
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Its place: lower tickets are answered first.
    pub ticket: i64,
    pub run_id: String,
    pub agent: String,
    pub message: String,
    pub busy: String,
    pub state: TurnState,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait TurnStore: Send + Sync {
    /// Gives the message the conversation's next ticket (state `queued`) and returns it; with
    /// `only_when_free`, takes none and returns `None` when the conversation has any row.
    async fn take_turn(
        &self,
        turn: &NewTurn,
        only_when_free: bool,
    ) -> Result<Option<i64>, StoreError>;
    /// The conversation's rows, lowest ticket first.
    async fn conversation_turns(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<Vec<Turn>, StoreError>;
    /// Marks the run's queued row `answering`; false when it has no queued row (withdrawn).
    async fn start_turn(&self, run_id: &str) -> Result<bool, StoreError>;
    /// Removes the run's row (its answer is stored, or it ended); whether there was one.
    async fn end_turn(&self, run_id: &str) -> Result<bool, StoreError>;
    /// Appends the run's answer to its conversation only while the run holds the conversation's
    /// turn (its row `answering`), in one transaction: an answer whose turn was passed on (its
    /// replica was taken for dead) is never stored after the next message. Whether it was.
    async fn append_answer_holding_turn(
        &self,
        user_id: &str,
        conversation_id: &str,
        run_id: &str,
        messages: &[super::NewMessage],
    ) -> Result<bool, StoreError>;
    /// Removes the run's row while it is still `queued` in the user's conversation; whether it was.
    async fn withdraw_turn(
        &self,
        user_id: &str,
        conversation_id: &str,
        run_id: &str,
    ) -> Result<bool, StoreError>;
}
