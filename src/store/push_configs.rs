//! A2A push-notification configs (SPEC §13): the receivers callers set for their tasks. A
//! config belongs to the task and to the caller that set it (`owner`): reads, lists and deletes
//! are always by owner, and the runtime reads every owner's configs of a task to notify them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// One push-notification config.
#[derive(Debug, Clone, PartialEq)]
pub struct PushConfig {
    pub task_id: String,
    /// Who set it (`Caller::owner`).
    pub owner: String,
    /// The config's id within the task and owner.
    pub id: String,
    pub url: String,
    /// Sent back as `X-A2A-Notification-Token`.
    pub token: Option<String>,
    /// `Authorization: {scheme} {credentials}` on every notification, when both are set.
    pub auth_scheme: Option<String>,
    pub auth_credentials: Option<String>,
    /// The A2A revision the config was set in (`1.0` or `0.3`): notifications are spelled so.
    pub dialect: String,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait PushConfigStore: Send + Sync {
    /// Sets a config (replacing the owner's config of that id on that task).
    async fn put_push_config(&self, config: &PushConfig) -> Result<(), StoreError>;
    /// The owner's config `id` of the task.
    async fn push_config(
        &self,
        task_id: &str,
        owner: &str,
        id: &str,
    ) -> Result<Option<PushConfig>, StoreError>;
    /// The owner's configs of the task, oldest first; every owner's when `owner` is `None`.
    async fn list_push_configs(
        &self,
        task_id: &str,
        owner: Option<&str>,
    ) -> Result<Vec<PushConfig>, StoreError>;
    /// Deletes the owner's config; whether there was one.
    async fn delete_push_config(
        &self,
        task_id: &str,
        owner: &str,
        id: &str,
    ) -> Result<bool, StoreError>;
}
