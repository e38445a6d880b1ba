//! Erasing a user (SPEC §14, data rights): refused while one of the user's runs is in progress
//! (checked before, and again inside the erasing transaction, which on PostgreSQL first holds
//! off new runs until it commits); otherwise every row the store keeps of the user goes in one
//! transaction, then the response cache entries of the user's runs kept outside the store
//! (Redis).

use super::Runtime;
use crate::store::{Erased, Erasure, StoreError};

/// Why a user was not erased.
#[derive(Debug, thiserror::Error)]
pub enum EraseError {
    #[error(
        "This user has runs in progress ({}): cancel them (POST /v1/runs/{{run_id}}/cancel), then erase",
        .0.join(", ")
    )]
    RunsInProgress(Vec<String>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Runtime {
    /// Erases everything agentd keeps of `user_id` and says what, by kind.
    pub async fn erase_user(&self, user_id: &str) -> Result<Erased, EraseError> {
        self.flush_recorder().await;
        let store = self.store();
        let unfinished = store.unfinished_runs(user_id).await?;
        if !unfinished.is_empty() {
            return Err(EraseError::RunsInProgress(unfinished));
        }
        let run_ids = store.run_ids(user_id).await?;
        // Checked again inside the erasing transaction: a run started meanwhile (on another
        // replica) is never erased under it.
        let mut erased = match store.erase_user(user_id).await? {
            Erasure::Erased(erased) => erased,
            Erasure::RunsInProgress(runs) => return Err(EraseError::RunsInProgress(runs)),
        };
        // The store's rows are gone; a cache the erasure could not reach is logged, and its
        // entries expire with their TTL (none is ever served to anyone else: keys hold the user).
        match self.cache.erase_runs(&run_ids).await {
            Ok(count) => erased.redis_cache_entries = count,
            Err(error) => {
                tracing::warn!(user_id, %error, "erasing the user's cache entries failed")
            }
        }
        Ok(erased)
    }
}
