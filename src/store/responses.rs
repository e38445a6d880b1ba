//! Stored Responses API objects (SPEC §9.1): what a response keeps beside its run — the request
//! fields it echoes, its input items, the response it continues — scoped by the caller's user
//! key. The run itself (status, events, result, conversation) stays in the runs tables.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::StoreError;

/// A response as stored; `request` and `input_items` are the headend's JSON, opaque here.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    pub id: String,
    pub run_id: String,
    /// The owner's user id, `""` for a keyless caller.
    pub user_key: String,
    pub previous_response_id: Option<String>,
    pub request: Value,
    pub input_items: Value,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait ResponseStore: Send + Sync {
    /// Stores a new response; an existing id is a [`StoreError::Conflict`].
    async fn put_response(&self, response: &StoredResponse) -> Result<(), StoreError>;
    /// The user's response `id`, if it exists and is theirs.
    async fn get_response(
        &self,
        user_key: &str,
        id: &str,
    ) -> Result<Option<StoredResponse>, StoreError>;
    /// Deletes the user's response `id`; false when there was none.
    async fn delete_response(&self, user_key: &str, id: &str) -> Result<bool, StoreError>;
}
