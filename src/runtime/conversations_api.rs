//! What the conversation routes read and change besides running a message (per-user chat's
//! listing, search, rename, edit and busy check, the Responses API's conversation objects and
//! stored responses): one user's conversations by id, listed, created, renamed, appended to,
//! cut back for an edit and deleted. Which
//! user a caller may act for is the route's; everything here is keyed by that user.

use std::time::Duration;

use super::Runtime;
use crate::store::{
    Conversation, ConversationCursor, NewConversation, NewMessage, RunFilter, RunOwnerFilter,
    StoreError, StoredResponse,
};
use crate::vocabulary::RunStatus;

/// How often, and how far apart, a conversation found answering is looked at again: a run
/// whose answer the client has just read may not have its end in the store yet (the recorder
/// writes in batches), so it gets up to a second to get there.
const ANSWERING_CHECKS: u32 = 10;
const ANSWERING_RECHECK: Duration = Duration::from_millis(100);

impl Runtime {
    pub async fn conversation(
        &self,
        user_id: &str,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        self.store.get_conversation(user_id, id).await
    }

    pub async fn create_conversation(
        &self,
        conversation: &NewConversation,
    ) -> Result<Conversation, StoreError> {
        self.store.create_conversation(conversation).await
    }

    /// Sets its title; `None` when the user has no such conversation.
    pub async fn rename_conversation(
        &self,
        user_id: &str,
        id: &str,
        title: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        self.store.rename_conversation(user_id, id, title).await
    }

    /// Appends messages in order; their numbers.
    pub async fn append_to_conversation(
        &self,
        user_id: &str,
        id: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<i64>, StoreError> {
        self.store.append_messages(user_id, id, messages).await
    }

    /// Removes message `from_seq` and everything after it (an edit); how many went.
    pub async fn cut_conversation_from(
        &self,
        user_id: &str,
        id: &str,
        from_seq: i64,
    ) -> Result<u64, StoreError> {
        self.store.truncate_messages(user_id, id, from_seq).await
    }

    /// The user's conversations, most recently updated first, `limit` after the cursor; only
    /// those whose title holds `query` when given.
    pub async fn conversations(
        &self,
        user_id: &str,
        query: Option<&str>,
        before: Option<&ConversationCursor>,
        limit: u32,
    ) -> Result<Vec<Conversation>, StoreError> {
        match query {
            Some(text) => {
                self.store
                    .search_conversations(user_id, text, before, limit)
                    .await
            }
            None => self.store.list_conversations(user_id, before, limit).await,
        }
    }

    /// A stored Responses API response of the caller (`user_key`).
    pub async fn stored_response(
        &self,
        user_key: &str,
        id: &str,
    ) -> Result<Option<StoredResponse>, StoreError> {
        self.store.get_response(user_key, id).await
    }

    /// Keeps a Responses API response for `previous_response_id` and retrieval.
    pub async fn store_response(&self, response: &StoredResponse) -> Result<(), StoreError> {
        self.store.put_response(response).await
    }

    /// Deletes a stored response; whether there was one.
    pub async fn delete_stored_response(
        &self,
        user_key: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        self.store.delete_response(user_key, id).await
    }

    /// Deletes it with its messages; false when the user has no such conversation.
    pub async fn delete_conversation(&self, user_id: &str, id: &str) -> Result<bool, StoreError> {
        self.store.delete_conversation(user_id, id).await
    }

    /// Whether a run of the conversation is queued, running or waiting, on any replica, after
    /// giving a run that has just ended up to a second to be stored ended.
    pub async fn conversation_is_answering(
        &self,
        user_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        for check in 1..=ANSWERING_CHECKS {
            self.flush_recorder().await;
            if !self.runs_in_progress(user_id, id).await? {
                return Ok(false);
            }
            if check < ANSWERING_CHECKS {
                tokio::time::sleep(ANSWERING_RECHECK).await;
            }
        }
        Ok(true)
    }

    /// Whether the store lists a run of the conversation as queued, running or waiting.
    async fn runs_in_progress(&self, user_id: &str, id: &str) -> Result<bool, StoreError> {
        let filter = RunFilter {
            owner: RunOwnerFilter::User(Some(user_id.to_string())),
            agent: None,
            agents_allowed: None,
            statuses: RunStatus::NOT_ENDED
                .iter()
                .map(|s| s.as_str().to_string())
                .collect(),
            conversation_id: Some(id.to_string()),
            after: None,
            limit: 1,
        };
        Ok(!self.store.list_runs(&filter).await?.is_empty())
    }
}
