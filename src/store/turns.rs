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
    /// Sent with `busy: steer`, its message joined the answer in progress (`joined_to`): it
    /// is stored, and that run's answer is its answer.
    Joined,
}

impl TurnState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Answering => "answering",
            Self::Joined => "joined",
        }
    }

    /// The state a row's text names; an unknown text reads as `answering` (never withdrawn).
    pub fn parse(text: &str) -> Self {
        [Self::Queued, Self::Joined]
            .into_iter()
            .find(|state| state.as_str() == text)
            .unwrap_or(Self::Answering)
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
    /// Its attachments' metadata (a JSON array), for a run that answers it by joining it.
    pub attachments: Option<serde_json::Value>,
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
    /// Its attachments' metadata (a JSON array), if any.
    pub attachments: Option<serde_json::Value>,
    /// For a `joined` row: the run whose answer covers its message.
    pub joined_to: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl Turn {
    /// Whether its message waits with `busy: steer`, to join the answer in progress.
    pub fn steers(&self) -> bool {
        self.state == TurnState::Queued
            && self.busy == crate::vocabulary::BusyPolicy::Steer.as_str()
    }

    /// Its message as the conversation stores it.
    pub fn as_user_message(&self, created_at: DateTime<Utc>) -> super::NewMessage {
        super::NewMessage {
            role: super::conversations::role_name(crate::llm::Role::User).to_string(),
            content: Some(self.message.clone()),
            tool_calls: None,
            tool_call_id: None,
            reasoning: None,
            created_at,
            attachments: self.attachments.clone(),
        }
    }

    /// The `steer` messages that join `head`'s answer: those queued right behind it, up to the
    /// first that is not `steer` (rows already joined are passed over). `turns` in ticket order.
    pub fn steering_behind<'a>(turns: &'a [Turn], head: &str) -> Vec<&'a Turn> {
        turns
            .iter()
            .skip_while(|turn| turn.run_id != head)
            .skip(1)
            .filter(|turn| turn.state != TurnState::Joined)
            .take_while(|turn| turn.steers())
            .collect()
    }
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
    /// While `head` holds the conversation's turn, joins the `steer` messages queued right
    /// behind it (up to the first that is not `steer`; rows already joined are passed over):
    /// in one transaction their rows turn `joined` to `head` and their messages are appended
    /// to the conversation (as of `joined_at`). Returns the joined rows, in ticket order; none
    /// when `head` no longer holds the turn.
    async fn join_steering_turns(
        &self,
        user_id: &str,
        conversation_id: &str,
        head: &str,
        joined_at: DateTime<Utc>,
    ) -> Result<Vec<Turn>, StoreError>;
    /// Removes the run's row while it is still `queued` in the user's conversation; whether it was.
    async fn withdraw_turn(
        &self,
        user_id: &str,
        conversation_id: &str,
        run_id: &str,
    ) -> Result<bool, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(run_id: &str, busy: &str, state: TurnState) -> Turn {
        Turn {
            ticket: 0,
            run_id: run_id.to_string(),
            agent: "chat".to_string(),
            message: run_id.to_string(),
            busy: busy.to_string(),
            state,
            attachments: None,
            joined_to: None,
            created_at: Utc::now(),
        }
    }

    fn ids(turns: &[&Turn]) -> Vec<String> {
        turns.iter().map(|turn| turn.run_id.clone()).collect()
    }

    #[test]
    fn steering_messages_right_behind_the_head_join_it_and_no_others() {
        let turns = [
            turn("head", "enqueue", TurnState::Answering),
            turn("joined", "steer", TurnState::Joined),
            turn("s1", "steer", TurnState::Queued),
            turn("s2", "steer", TurnState::Queued),
            turn("waits", "enqueue", TurnState::Queued),
            turn("s3", "steer", TurnState::Queued),
        ];
        assert_eq!(ids(&Turn::steering_behind(&turns, "head")), ["s1", "s2"]);
        assert!(Turn::steering_behind(&turns, "s3").is_empty());
        assert!(Turn::steering_behind(&turns, "unknown").is_empty());
        let behind_a_waiting_one = [
            turn("head", "enqueue", TurnState::Answering),
            turn("waits", "enqueue", TurnState::Queued),
            turn("s1", "steer", TurnState::Queued),
        ];
        assert!(Turn::steering_behind(&behind_a_waiting_one, "head").is_empty());
    }

    #[test]
    fn states_round_trip_and_an_unknown_one_reads_as_answering() {
        for state in [TurnState::Queued, TurnState::Answering, TurnState::Joined] {
            assert_eq!(TurnState::parse(state.as_str()), state);
        }
        assert_eq!(TurnState::parse("later"), TurnState::Answering);
    }
}
