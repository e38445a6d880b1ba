//! A user's data as one thing (SPEC §14, data rights): whether any of the user's runs is still
//! in progress, and erasing everything the store keeps of the user in one transaction —
//! conversations and messages, runs with their accounting, events, approvals, checkpoints,
//! cancels and request ids, stored responses, secrets, files (with their content unless another
//! user's file has the same), queued messages, webhook deliveries, schedules with their fires,
//! and the response-cache entries of the user's runs. (Exports are read through the other stores' queries.)

use async_trait::async_trait;

use super::StoreError;

/// What an erasure removed, by kind (counts only: the audit tombstone records these).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Erased {
    pub conversations: u64,
    pub messages: u64,
    pub runs: u64,
    pub run_events: u64,
    pub approvals: u64,
    pub responses: u64,
    pub secrets: u64,
    pub cache_entries: u64,
    /// File records (SPEC §11); their content too where no other user's file names it.
    pub files: u64,
    /// Messages waiting for their conversation's turn (SPEC §13).
    pub queued_turns: u64,
    /// Webhook messages for the user or their runs, delivered or not.
    pub webhook_deliveries: u64,
    /// The user's schedules, with the record of their fires.
    pub schedules: u64,
    /// Response-cache entries of the user's runs in Redis (`cache.backend: "redis"`); the
    /// store's own cache table is counted in `cache_entries`.
    pub redis_cache_entries: u64,
}

/// What came of an erasure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Erasure {
    /// Everything of the user is gone.
    Erased(Erased),
    /// Nothing was erased: these runs of the user had not ended (checked inside the erasing
    /// transaction, so a run started meanwhile on another replica is never erased under it).
    RunsInProgress(Vec<String>),
}

#[async_trait]
pub trait UserDataStore: Send + Sync {
    /// The ids of the user's runs not yet ended (running, queued or waiting).
    async fn unfinished_runs(&self, user_id: &str) -> Result<Vec<String>, StoreError>;
    /// The ids of all the user's runs, ended or not.
    async fn run_ids(&self, user_id: &str) -> Result<Vec<String>, StoreError>;
    /// Deletes everything of `user_id` (see the module) in one transaction, unless one of the
    /// user's runs has not ended: then nothing.
    async fn erase_user(&self, user_id: &str) -> Result<Erasure, StoreError>;
}
