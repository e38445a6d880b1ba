//! What the governance and protocol routes read of the store, as runtime calls: usage, the
//! audit log and its verification, webhook deliveries, a run's accounting, A2A push-notification
//! configs and whether the store answers. Each is the store's own query; who may read what is
//! the route's (its caller), so a headend never holds the store.

use super::Runtime;
use crate::audit::Verification;
use crate::store::{
    AccountingRecord, AuditEntry, AuditFilter, Delivery, PushConfig, StoreError, UsageQuery,
    UsageRow,
};

impl Runtime {
    /// Usage by the query's grouping, runs this replica ended a moment ago included.
    pub async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, StoreError> {
        self.flush_recorder().await;
        self.store.usage(query).await
    }

    /// One page of the audit log.
    pub async fn audit_entries(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
        self.store.list_audit(filter).await
    }

    /// Walks the audit log's hash chain.
    pub async fn verify_audit(&self) -> Result<Verification, StoreError> {
        crate::audit::verify(self.store.as_ref()).await
    }

    /// Webhook deliveries newest first, `limit` at a time; only `user_id`'s when given.
    pub async fn webhook_deliveries(
        &self,
        user_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.store.list_deliveries(user_id, limit).await
    }

    /// The run's accounting entries (model and tool calls), in order.
    pub async fn run_accounting(&self, run_id: &str) -> Result<Vec<AccountingRecord>, StoreError> {
        self.store.list_accounting(run_id).await
    }

    /// Whether the store answers (readiness).
    pub async fn store_answers(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }

    /// Sets a task's push-notification config (replacing the owner's of that id).
    pub async fn save_push_config(&self, config: &PushConfig) -> Result<(), StoreError> {
        self.store.put_push_config(config).await
    }

    /// The owner's config `id` of the task.
    pub async fn push_config(
        &self,
        task_id: &str,
        owner: &str,
        id: &str,
    ) -> Result<Option<PushConfig>, StoreError> {
        self.store.push_config(task_id, owner, id).await
    }

    /// The owner's configs of the task, oldest first.
    pub async fn push_configs(
        &self,
        task_id: &str,
        owner: &str,
    ) -> Result<Vec<PushConfig>, StoreError> {
        self.store.list_push_configs(task_id, Some(owner)).await
    }

    /// Deletes the owner's config; whether there was one.
    pub async fn delete_push_config(
        &self,
        task_id: &str,
        owner: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        self.store.delete_push_config(task_id, owner, id).await
    }
}
