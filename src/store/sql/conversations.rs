//! Statements and rows of `conversations` and `messages`. Every statement matches `user_id` (the
//! owner): a conversation id is unique per owner only (migration 0012), and messages belong to
//! their owner's conversation.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use crate::store::{Conversation, StoredMessage};

pub const INSERT_CONVERSATION: &str = "INSERT INTO conversations (id, user_id, agent, title, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $5)";

pub const SELECT_CONVERSATION: &str = "SELECT id, user_id, agent, title, created_at, updated_at FROM conversations \
     WHERE user_id = $1 AND id = $2";

pub const LIST_CONVERSATIONS: &str = "SELECT id, user_id, agent, title, created_at, updated_at FROM conversations \
     WHERE user_id = $1 ORDER BY updated_at DESC, id DESC LIMIT $2";

pub const LIST_CONVERSATIONS_BEFORE: &str = "SELECT id, user_id, agent, title, created_at, updated_at FROM conversations \
     WHERE user_id = $1 AND (updated_at < $2 OR (updated_at = $2 AND id < $3)) \
     ORDER BY updated_at DESC, id DESC LIMIT $4";

/// `$2` is a `LIKE` pattern whose `%`, `_` and `\\` are escaped with `\\` ([`title_pattern`]).
pub const SEARCH_CONVERSATIONS: &str = "SELECT id, user_id, agent, title, created_at, updated_at FROM conversations \
     WHERE user_id = $1 AND lower(title) LIKE $2 ESCAPE '\\' ORDER BY updated_at DESC, id DESC LIMIT $3";

pub const SEARCH_CONVERSATIONS_BEFORE: &str = "SELECT id, user_id, agent, title, created_at, updated_at FROM conversations \
     WHERE user_id = $1 AND lower(title) LIKE $2 ESCAPE '\\' \
     AND (updated_at < $3 OR (updated_at = $3 AND id < $4)) \
     ORDER BY updated_at DESC, id DESC LIMIT $5";

pub const RENAME_CONVERSATION: &str = "UPDATE conversations SET title = $3 WHERE user_id = $1 AND id = $2 \
     RETURNING id, user_id, agent, title, created_at, updated_at";

/// Numbers the next message `$3` (the first removed one) and bumps `updated_at`; a `$3` past
/// the last message changes nothing.
pub const REWIND_MESSAGE_SEQ: &str = "UPDATE conversations SET next_seq = $3 - 1, updated_at = $4 \
     WHERE user_id = $1 AND id = $2 AND next_seq >= $3 - 1";

pub const SELECT_CONVERSATION_ID: &str =
    "SELECT id FROM conversations WHERE user_id = $1 AND id = $2";

pub const DELETE_MESSAGES_FROM: &str =
    "DELETE FROM messages WHERE user_id = $1 AND conversation_id = $2 AND seq >= $3";

/// A `LIKE` pattern matching titles that contain `query`, lower-cased, its wildcards escaped.
pub fn title_pattern(query: &str) -> String {
    let mut pattern = String::from("%");
    for c in query.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

pub const DELETE_CONVERSATION: &str = "DELETE FROM conversations WHERE user_id = $1 AND id = $2";

/// Reserves `$3` seq numbers and bumps `updated_at`; the row lock (PostgreSQL) or the write lock
/// (SQLite) serializes concurrent appenders until commit. Returns the last reserved number.
pub const RESERVE_MESSAGE_SEQS: &str = "UPDATE conversations SET next_seq = next_seq + $3, updated_at = $4 \
     WHERE user_id = $1 AND id = $2 RETURNING next_seq";

pub const INSERT_MESSAGES: &str = "INSERT INTO messages (user_id, conversation_id, seq, role, content, tool_calls, tool_call_id, reasoning, created_at, attachments) ";

pub const LIST_MESSAGES: &str = "SELECT m.seq, m.role, m.content, m.tool_calls, m.tool_call_id, m.reasoning, m.created_at, m.attachments \
     FROM messages m WHERE m.user_id = $1 AND m.conversation_id = $2 AND m.seq > $3 \
     ORDER BY m.seq LIMIT $4";

#[derive(sqlx::FromRow)]
pub struct ConversationRow {
    id: String,
    user_id: String,
    agent: String,
    title: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<ConversationRow> for Conversation {
    fn from(row: ConversationRow) -> Self {
        Self {
            id: row.id,
            user_id: row.user_id,
            agent: row.agent,
            title: row.title,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct MessageRow {
    seq: i64,
    role: String,
    content: Option<String>,
    tool_calls: Option<Json<Value>>,
    tool_call_id: Option<String>,
    reasoning: Option<String>,
    created_at: DateTime<Utc>,
    attachments: Option<Json<Value>>,
}

impl From<MessageRow> for StoredMessage {
    fn from(row: MessageRow) -> Self {
        Self {
            seq: row.seq,
            role: row.role,
            content: row.content,
            tool_calls: row.tool_calls.map(|j| j.0),
            tool_call_id: row.tool_call_id,
            reasoning: row.reasoning,
            created_at: row.created_at,
            attachments: row.attachments.map(|j| j.0),
        }
    }
}

/// Implements [`ConversationStore`](crate::store::ConversationStore) for a backend.
macro_rules! impl_conversation_store {
    ($store:ty, $db:ty) => {
        impl $store {
            /// Appends `messages` to the user's conversation inside `tx`, numbered after its
            /// last one; returns their numbers.
            pub(crate) async fn append_messages_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                user_id: &str,
                conversation_id: &str,
                messages: &[$crate::store::NewMessage],
            ) -> Result<Vec<i64>, $crate::store::StoreError> {
                use $crate::store::sql::{ROWS_PER_INSERT, at, conversations as sql};
                let Some(last) = messages.last() else {
                    return Ok(Vec::new());
                };
                let count = i64::try_from(messages.len()).unwrap_or(i64::MAX);
                let reserved: Option<i64> = sqlx::query_scalar(sql::RESERVE_MESSAGE_SEQS)
                    .bind(user_id)
                    .bind(conversation_id)
                    .bind(count)
                    .bind(at(last.created_at))
                    .fetch_optional(&mut **tx)
                    .await?;
                let Some(last_seq) = reserved else {
                    return Err($crate::store::StoreError::NotFound {
                        what: "conversation",
                        id: conversation_id.to_string(),
                    });
                };
                let seqs: Vec<i64> = (last_seq - count + 1..=last_seq).collect();
                let numbered: Vec<_> = seqs.iter().zip(messages).collect();
                for chunk in numbered.chunks(ROWS_PER_INSERT) {
                    let mut insert = sqlx::QueryBuilder::<$db>::new(sql::INSERT_MESSAGES);
                    insert.push_values(chunk, |mut row, (seq, message)| {
                        row.push_bind(user_id)
                            .push_bind(conversation_id)
                            .push_bind(**seq)
                            .push_bind(&message.role)
                            .push_bind(&message.content)
                            .push_bind(message.tool_calls.as_ref().map(sqlx::types::Json))
                            .push_bind(&message.tool_call_id)
                            .push_bind(&message.reasoning)
                            .push_bind(at(message.created_at))
                            .push_bind(message.attachments.as_ref().map(sqlx::types::Json));
                    });
                    insert.build().execute(&mut **tx).await?;
                }
                Ok(seqs)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::ConversationStore for $store {
            async fn create_conversation(
                &self,
                new: &$crate::store::NewConversation,
            ) -> Result<$crate::store::Conversation, $crate::store::StoreError> {
                use $crate::store::sql::{at, conflict_or_query, conversations as sql};
                sqlx::query(sql::INSERT_CONVERSATION)
                    .bind(&new.id)
                    .bind(&new.user_id)
                    .bind(&new.agent)
                    .bind(&new.title)
                    .bind(at(new.created_at))
                    .execute(&self.writer)
                    .await
                    .map_err(|e| conflict_or_query(e, "conversation", &new.id))?;
                Ok($crate::store::Conversation {
                    id: new.id.clone(),
                    user_id: new.user_id.clone(),
                    agent: new.agent.clone(),
                    title: new.title.clone(),
                    created_at: at(new.created_at),
                    updated_at: at(new.created_at),
                })
            }

            async fn get_conversation(
                &self,
                user_id: &str,
                id: &str,
            ) -> Result<Option<$crate::store::Conversation>, $crate::store::StoreError> {
                use $crate::store::sql::conversations as sql;
                let row = sqlx::query_as::<_, sql::ConversationRow>(sql::SELECT_CONVERSATION)
                    .bind(user_id)
                    .bind(id)
                    .fetch_optional(&self.reader)
                    .await?;
                Ok(row.map(Into::into))
            }

            async fn list_conversations(
                &self,
                user_id: &str,
                before: Option<&$crate::store::ConversationCursor>,
                limit: u32,
            ) -> Result<Vec<$crate::store::Conversation>, $crate::store::StoreError> {
                use $crate::store::sql::{at, conversations as sql};
                let limit = $crate::store::check_page_size(limit)?;
                let query = match before {
                    None => sqlx::query_as::<_, sql::ConversationRow>(sql::LIST_CONVERSATIONS)
                        .bind(user_id)
                        .bind(limit),
                    Some(cursor) => {
                        sqlx::query_as::<_, sql::ConversationRow>(sql::LIST_CONVERSATIONS_BEFORE)
                            .bind(user_id)
                            .bind(at(cursor.updated_at))
                            .bind(&cursor.id)
                            .bind(limit)
                    }
                };
                let rows = query.fetch_all(&self.reader).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn search_conversations(
                &self,
                user_id: &str,
                query: &str,
                before: Option<&$crate::store::ConversationCursor>,
                limit: u32,
            ) -> Result<Vec<$crate::store::Conversation>, $crate::store::StoreError> {
                use $crate::store::sql::{at, conversations as sql};
                let limit = $crate::store::check_page_size(limit)?;
                let pattern = sql::title_pattern(query);
                let query = match before {
                    None => sqlx::query_as::<_, sql::ConversationRow>(sql::SEARCH_CONVERSATIONS)
                        .bind(user_id)
                        .bind(pattern)
                        .bind(limit),
                    Some(cursor) => {
                        sqlx::query_as::<_, sql::ConversationRow>(sql::SEARCH_CONVERSATIONS_BEFORE)
                            .bind(user_id)
                            .bind(pattern)
                            .bind(at(cursor.updated_at))
                            .bind(&cursor.id)
                            .bind(limit)
                    }
                };
                let rows = query.fetch_all(&self.reader).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn rename_conversation(
                &self,
                user_id: &str,
                id: &str,
                title: &str,
            ) -> Result<Option<$crate::store::Conversation>, $crate::store::StoreError> {
                use $crate::store::sql::conversations as sql;
                let row = sqlx::query_as::<_, sql::ConversationRow>(sql::RENAME_CONVERSATION)
                    .bind(user_id)
                    .bind(id)
                    .bind(title)
                    .fetch_optional(&self.writer)
                    .await?;
                Ok(row.map(Into::into))
            }

            async fn truncate_messages(
                &self,
                user_id: &str,
                conversation_id: &str,
                from_seq: i64,
            ) -> Result<u64, $crate::store::StoreError> {
                use $crate::store::sql::{at, conversations as sql};
                let not_found = || $crate::store::StoreError::NotFound {
                    what: "conversation",
                    id: conversation_id.to_string(),
                };
                let mut tx = self.begin_write().await?;
                let exists: Option<String> = sqlx::query_scalar(sql::SELECT_CONVERSATION_ID)
                    .bind(user_id)
                    .bind(conversation_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                exists.ok_or_else(not_found)?;
                let removed = sqlx::query(sql::DELETE_MESSAGES_FROM)
                    .bind(user_id)
                    .bind(conversation_id)
                    .bind(from_seq)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                // Past the last message nothing is removed and the numbering stays.
                sqlx::query(sql::REWIND_MESSAGE_SEQ)
                    .bind(user_id)
                    .bind(conversation_id)
                    .bind(from_seq.max(1))
                    .bind(at(chrono::Utc::now()))
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(removed)
            }

            async fn delete_conversation(
                &self,
                user_id: &str,
                id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                let done = sqlx::query($crate::store::sql::conversations::DELETE_CONVERSATION)
                    .bind(user_id)
                    .bind(id)
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn append_messages(
                &self,
                user_id: &str,
                conversation_id: &str,
                messages: &[$crate::store::NewMessage],
            ) -> Result<Vec<i64>, $crate::store::StoreError> {
                if messages.is_empty() {
                    return Ok(Vec::new());
                }
                let mut tx = self.begin_write().await?;
                let seqs =
                    Self::append_messages_in(&mut tx, user_id, conversation_id, messages).await?;
                tx.commit().await?;
                Ok(seqs)
            }

            async fn list_messages(
                &self,
                user_id: &str,
                conversation_id: &str,
                after_seq: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::StoredMessage>, $crate::store::StoreError> {
                use $crate::store::sql::conversations as sql;
                let limit = $crate::store::check_page_size(limit)?;
                let rows = sqlx::query_as::<_, sql::MessageRow>(sql::LIST_MESSAGES)
                    .bind(user_id)
                    .bind(conversation_id)
                    .bind(after_seq)
                    .bind(limit)
                    .fetch_all(&self.reader)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }
        }
    };
}
pub(crate) use impl_conversation_store;
