//! Runs that continue a user's conversation (seeds/001): the conversation is opened (or created,
//! titled after the first message), its newest messages become the run's history, the user's
//! message is stored once the run holds the conversation's turn (`turns`) and the assistant's
//! answer once it succeeds (an interrupted one's partial answer too). Only the run pipeline
//! calls the writing half, so every answer is saved inside a tracked task.

use chrono::Utc;

use super::Runtime;
use super::pipeline::StartError;
use crate::agent::{AgentResult, ExitReason};
use crate::config::model_input::wants_text_form;
use crate::config::{AgentSpec, BusyPolicy};
use crate::llm::ChatMessage;
use crate::store::{NewConversation, NewMessage, StoreError, StoredMessage};
use crate::vocabulary::{AgentEvent, AttachmentKind};

/// Messages of history loaded for a run (the newest ones).
const HISTORY_LIMIT: u32 = 1000;
/// Pages of a run's events read for an interrupted run's partial answer.
const PARTIAL_EVENT_PAGES: usize = 20;
/// Characters of the first message that title a new conversation.
const TITLE_CHARS: usize = 60;

/// The longest conversation id a client may choose (an AG-UI thread, an AI SDK chat, a
/// `conversation_id` on the chat API).
pub const MAX_CLIENT_CONVERSATION_ID_CHARS: usize = 128;

/// The rule for a client-chosen conversation id, in words for the error that names the field.
pub const CLIENT_CONVERSATION_ID_RULE: &str = "1 to 128 ASCII letters, digits or `- _ . :`";

/// Whether `id` may name a conversation a client chose: see [`CLIENT_CONVERSATION_ID_RULE`].
pub fn is_client_conversation_id(id: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    (1..=MAX_CLIENT_CONVERSATION_ID_CHARS).contains(&id.chars().count()) && id.chars().all(allowed)
}

/// A new conversation's title: its first message's start; none for a message of files alone.
fn title_of(message: &str) -> Option<String> {
    Some(message.trim().chars().take(TITLE_CHARS).collect()).filter(|t: &String| !t.is_empty())
}

/// Which of the user's conversations a run belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConversationTurn {
    /// A new conversation, titled after the prompt.
    Start,
    /// An existing conversation of the run's user, by id.
    Continue(String),
    /// The conversation a client named (an AG-UI thread, an AI SDK chat): continued when the
    /// user has it, created under this id otherwise.
    Named(String),
}

impl Runtime {
    /// Loads the content of the history's attachments from the store, so a conversation
    /// continued later, on any replica, still carries its files (SPEC §11).
    /// Under `attachments: text`, their PDFs' text forms too, for models that cannot read them.
    pub(super) async fn load_attachments(
        &self,
        agent: &AgentSpec,
        history: &mut [ChatMessage],
        prompt: &mut [crate::vocabulary::Attachment],
    ) {
        let store = self.store.as_ref();
        let loaded = match crate::attachments::load_contents(store, history).await {
            Ok(()) => crate::attachments::load_attachments(store, prompt).await,
            Err(error) => Err(error),
        };
        if let Err(error) = loaded {
            tracing::warn!(%error, "attachments could not be loaded");
        }
        let config = self.config();
        if wants_text_form(config, agent, AttachmentKind::Pdf) {
            let max = config.limits.attachments.max_text_bytes();
            crate::attachments::fill_text_forms(history, prompt, max).await;
        }
    }

    /// The id of the conversation a run continues: an existing one of the user's, the one a
    /// client named (created when the user has none), or a new one titled after `message`.
    pub(super) async fn resolve_conversation(
        &self,
        user_id: &str,
        agent: &AgentSpec,
        turn: &ConversationTurn,
        message: &str,
    ) -> Result<String, StartError> {
        Ok(match turn {
            ConversationTurn::Continue(id) => {
                self.store
                    .get_conversation(user_id, id)
                    .await?
                    .ok_or_else(|| StartError::ConversationNotFound(id.clone()))?
                    .id
            }
            ConversationTurn::Named(id) => {
                self.named_conversation(user_id, agent, id, message).await?
            }
            ConversationTurn::Start => {
                let new = NewConversation {
                    id: uuid::Uuid::now_v7().to_string(),
                    user_id: user_id.to_string(),
                    agent: agent.name.clone(),
                    title: title_of(message),
                    created_at: Utc::now(),
                };
                self.store.create_conversation(&new).await?.id
            }
        })
    }

    /// Once the run holds the conversation's turn: loads its history (its files' content
    /// with it) and stores the user's message, with the files sent with it, after it.
    pub(super) async fn take_the_floor(
        &self,
        agent: &AgentSpec,
        user_id: &str,
        conversation_id: &str,
        message: &str,
        attachments: &[crate::vocabulary::Attachment],
    ) -> Result<Vec<ChatMessage>, StoreError> {
        let mut history = self.conversation_history(user_id, conversation_id).await?;
        self.load_attachments(agent, &mut history, &mut []).await;
        let mut user_message = ChatMessage::user(message);
        user_message.attachments = attachments.to_vec();
        let user_message = NewMessage::from_chat(&user_message, Utc::now());
        self.store
            .append_messages(user_id, conversation_id, &[user_message])
            .await?;
        Ok(history)
    }

    /// The owner's conversation a client named, created under that id when the owner has none
    /// (ids are per owner: another owner's `t1` is not this one's). Two first messages at once
    /// both land in the one conversation the first of them created.
    async fn named_conversation(
        &self,
        user_id: &str,
        agent: &AgentSpec,
        id: &str,
        message: &str,
    ) -> Result<String, StoreError> {
        if let Some(existing) = self.store.get_conversation(user_id, id).await? {
            return Ok(existing.id);
        }
        let new = NewConversation {
            id: id.to_string(),
            user_id: user_id.to_string(),
            agent: agent.name.clone(),
            title: title_of(message),
            created_at: Utc::now(),
        };
        match self.store.create_conversation(&new).await {
            Ok(created) => Ok(created.id),
            Err(StoreError::Conflict { .. }) => Ok(id.to_string()),
            Err(error) => Err(error),
        }
    }

    /// The newest messages of one of the user's conversations, oldest first.
    pub async fn conversation_history(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<Vec<ChatMessage>, StoreError> {
        let stored = self.conversation_messages(user_id, conversation_id).await?;
        Ok(stored.iter().filter_map(StoredMessage::to_chat).collect())
    }

    /// The newest stored messages of one of the user's conversations (with their numbers),
    /// oldest first.
    pub async fn conversation_messages(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let mut stored: Vec<StoredMessage> = Vec::new();
        loop {
            let after = stored.last().map_or(0, |m| m.seq);
            let page = self
                .store
                .list_messages(user_id, conversation_id, after, HISTORY_LIMIT)
                .await?;
            let done = (page.len() as u32) < HISTORY_LIMIT;
            stored.extend(page);
            if done {
                break;
            }
        }
        let skip = stored.len().saturating_sub(HISTORY_LIMIT as usize);
        stored.drain(..skip);
        Ok(stored)
    }

    /// Stores a successful run's answer in its conversation. A failed run adds nothing; a run
    /// cancelled by a message with `busy: interrupt` keeps its partial answer.
    pub(super) async fn save_answer(
        &self,
        seat: &super::turns::ConversationSeat,
        result: &AgentResult,
    ) {
        let text = if result.success {
            result.answer_text()
        } else if result.exit_reason == ExitReason::Cancelled
            && self.stopped_by(seat, &result.run_id).await == Some(BusyPolicy::Interrupt)
        {
            self.partial_answer(result).await
        } else {
            return;
        };
        if text.is_empty() && !result.success {
            return;
        }
        let answer = NewMessage::from_chat(&ChatMessage::assistant(text), Utc::now());
        let (conversation_id, run_id) = (&seat.conversation_id, &result.run_id);
        match self
            .store
            .append_answer_holding_turn(&seat.user_id, conversation_id, run_id, &[answer])
            .await
        {
            Ok(true) => {}
            // Its replica was taken for dead and the next message has the turn: an answer
            // stored now would follow that message.
            Ok(false) => tracing::warn!(
                %conversation_id, %run_id,
                "the answer is not stored: the conversation's turn had passed on"
            ),
            Err(error) => {
                tracing::error!(%error, %conversation_id, "could not store the assistant's answer")
            }
        }
    }
}

impl Runtime {
    /// What an interrupted run had answered: its report's text, else the text its last turn
    /// streamed (read back from its stored events).
    async fn partial_answer(&self, result: &AgentResult) -> String {
        let report = result.answer_text();
        if !report.is_empty() {
            return report;
        }
        self.recorder.flush().await;
        self.streamed_answer(&result.run_id).await
    }

    /// The text the run's last turn streamed, read back from its stored events.
    pub(super) async fn streamed_answer(&self, run_id: &str) -> String {
        let mut text = String::new();
        let mut after = 0;
        for _ in 0..PARTIAL_EVENT_PAGES {
            let page = match self
                .store
                .list_run_events(run_id, after, HISTORY_LIMIT)
                .await
            {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(%error, %run_id, "could not read a cut-off run's events");
                    break;
                }
            };
            for event in &page {
                streamed_text(&mut text, &event.event_type, event.data.as_str());
            }
            match page.last() {
                Some(last) if page.len() == HISTORY_LIMIT as usize => after = last.seq,
                _ => break,
            }
        }
        text
    }
}

/// Adds one stored event to the text the run's last turn streamed: a new turn or a replacing
/// delta starts it over.
fn streamed_text(text: &mut String, kind: &str, data: &str) {
    match AgentEvent::from_stored(kind, data) {
        Some(AgentEvent::TurnStarted(_)) => text.clear(),
        Some(AgentEvent::Output(delta)) => {
            if delta.replace {
                text.clear();
            }
            text.push_str(&delta.text);
        }
        _ => {}
    }
}
