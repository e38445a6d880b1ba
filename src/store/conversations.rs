//! Chat history (seeds/001): conversations belong to one user, messages to one conversation.
//! Every method takes the user id and matches it in SQL, so no call can read, change or delete
//! another user's rows, whatever ids it is given.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::StoreError;
use crate::llm::{ChatMessage, Role};

#[derive(Debug, Clone)]
pub struct NewConversation {
    pub id: String,
    pub user_id: String,
    pub agent: String,
    pub title: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub id: String,
    pub user_id: String,
    pub agent: String,
    pub title: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Time of the last appended message (or creation): listings are newest first by this.
    pub updated_at: DateTime<Utc>,
}

/// Where the previous page of [`ConversationStore::list_conversations`] ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationCursor {
    pub updated_at: DateTime<Utc>,
    pub id: String,
}

impl Conversation {
    /// The cursor that continues a listing after this conversation.
    pub fn cursor(&self) -> ConversationCursor {
        ConversationCursor {
            updated_at: self.updated_at,
            id: self.id.clone(),
        }
    }
}

/// A message to append, in the OpenAI message shape.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub role: String,
    pub content: Option<String>,
    /// The assistant's tool calls as a JSON array, if any.
    pub tool_calls: Option<Value>,
    pub tool_call_id: Option<String>,
    pub reasoning: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The message's attachments as a JSON array of their metadata, if any.
    pub attachments: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// 1, 2, 3… within the conversation, in append order.
    pub seq: i64,
    pub role: String,
    pub content: Option<String>,
    pub tool_calls: Option<Value>,
    pub tool_call_id: Option<String>,
    pub reasoning: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The message's attachments as a JSON array of their metadata, if any.
    pub attachments: Option<Value>,
}

#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// Fails with [`StoreError::Conflict`] when the id is taken.
    async fn create_conversation(
        &self,
        conversation: &NewConversation,
    ) -> Result<Conversation, StoreError>;
    async fn get_conversation(
        &self,
        user_id: &str,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError>;
    /// The user's conversations, most recently updated first, `limit` (1..=1000) at a time;
    /// pass the last row's [`Conversation::cursor`] to get the next page.
    async fn list_conversations(
        &self,
        user_id: &str,
        before: Option<&ConversationCursor>,
        limit: u32,
    ) -> Result<Vec<Conversation>, StoreError>;
    /// The user's conversations whose title contains `query` (case-insensitive for ASCII
    /// letters), in the order and paging of [`ConversationStore::list_conversations`].
    async fn search_conversations(
        &self,
        user_id: &str,
        query: &str,
        before: Option<&ConversationCursor>,
        limit: u32,
    ) -> Result<Vec<Conversation>, StoreError>;
    /// Deletes the conversation and its messages; false when the user has no such conversation.
    async fn delete_conversation(&self, user_id: &str, id: &str) -> Result<bool, StoreError>;
    /// Sets the conversation's title (its place in listings stays); `None` when the user has no
    /// such conversation.
    async fn rename_conversation(
        &self,
        user_id: &str,
        id: &str,
        title: &str,
    ) -> Result<Option<Conversation>, StoreError>;
    /// Removes the messages numbered `from_seq` and after (an edited message and what answered
    /// it) and numbers the next appended message `from_seq`; returns how many were removed.
    /// [`StoreError::NotFound`] when the user has no such conversation.
    async fn truncate_messages(
        &self,
        user_id: &str,
        conversation_id: &str,
        from_seq: i64,
    ) -> Result<u64, StoreError>;
    /// Appends messages in order and returns their seq numbers. Concurrent appenders never get
    /// the same seq. [`StoreError::NotFound`] when the user has no such conversation.
    async fn append_messages(
        &self,
        user_id: &str,
        conversation_id: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<i64>, StoreError>;
    /// Messages with seq greater than `after_seq`, oldest first, `limit` (1..=1000) at a time;
    /// empty when the user has no such conversation.
    async fn list_messages(
        &self,
        user_id: &str,
        conversation_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<StoredMessage>, StoreError>;
}

impl NewMessage {
    /// A session's message as a row to append.
    pub fn from_chat(message: &ChatMessage, created_at: DateTime<Utc>) -> Self {
        let tool_calls = (!message.tool_calls.is_empty())
            .then(|| serde_json::to_value(&message.tool_calls).ok())
            .flatten();
        let attachments = (!message.attachments.is_empty())
            .then(|| serde_json::to_value(&message.attachments).ok())
            .flatten();
        Self {
            role: role_name(message.role).to_string(),
            content: message.content.clone(),
            tool_calls,
            tool_call_id: message.tool_call_id.clone(),
            reasoning: message.reasoning.clone(),
            created_at,
            attachments,
        }
    }
}

impl StoredMessage {
    /// The row as a session message (history for the next run); `None` for an unknown role.
    pub fn to_chat(&self) -> Option<ChatMessage> {
        let role = serde_json::from_value::<Role>(Value::String(self.role.clone())).ok()?;
        let tool_calls = self
            .tool_calls
            .clone()
            .and_then(|calls| serde_json::from_value(calls).ok())
            .unwrap_or_default();
        Some(ChatMessage {
            role,
            content: self.content.clone(),
            tool_calls,
            tool_call_id: self.tool_call_id.clone(),
            reasoning: self.reasoning.clone(),
            // Signatures prove reasoning to the vendor within one run; history is replayed as text.
            reasoning_signature: None,
            redacted_reasoning: Vec::new(),
            attachments: self
                .attachments
                .clone()
                .and_then(|attachments| serde_json::from_value(attachments).ok())
                .unwrap_or_default(),
        })
    }
}

/// A role as the `messages.role` column names it.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    #[test]
    fn chat_messages_round_trip_through_rows() {
        let mut message = ChatMessage::assistant("checking");
        message.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "time__now".into(),
            arguments: "{}".into(),
        }];
        message.reasoning = Some("think".into());
        let row = NewMessage::from_chat(&message, Utc::now());
        assert_eq!(row.role, "assistant");
        let stored = StoredMessage {
            seq: 1,
            role: row.role,
            content: row.content,
            tool_calls: row.tool_calls,
            tool_call_id: row.tool_call_id,
            reasoning: row.reasoning,
            created_at: row.created_at,
            attachments: row.attachments,
        };
        assert_eq!(stored.to_chat(), Some(message));
    }

    #[test]
    fn unknown_roles_do_not_become_messages() {
        let stored = StoredMessage {
            seq: 1,
            role: "robot".into(),
            content: None,
            tool_calls: None,
            tool_call_id: None,
            reasoning: None,
            created_at: Utc::now(),
            attachments: None,
        };
        assert_eq!(stored.to_chat(), None);
    }
}
