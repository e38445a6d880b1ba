//! Users' tool secrets as the store keeps them: sealed rows (nonce and ciphertext) per user and
//! name. The store never sees a value in the clear and never decrypts: sealing and opening are
//! [`crate::secrets`]'s. Every query is scoped by the user id.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// One sealed secret.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret {
    pub user_id: String,
    pub name: String,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for SealedSecret {
    /// Names only: even sealed bytes stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedSecret")
            .field("user_id", &self.user_id)
            .field("name", &self.name)
            .field("updated_at", &self.updated_at)
            .finish_non_exhaustive()
    }
}

/// What a listing shows of a secret: never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretName {
    pub name: String,
    pub updated_at: DateTime<Utc>,
}

#[async_trait]
pub trait SecretStore: Send + Sync {
    /// Stores the secret, replacing one of the same user and name.
    async fn put_secret(&self, secret: &SealedSecret) -> Result<(), StoreError>;
    /// The user's secret `name`, if set.
    async fn get_secret(
        &self,
        user_id: &str,
        name: &str,
    ) -> Result<Option<SealedSecret>, StoreError>;
    /// The names of the user's secrets, by name.
    async fn list_secrets(&self, user_id: &str) -> Result<Vec<SecretName>, StoreError>;
    /// Deletes the user's secret `name`; false when there was none.
    async fn delete_secret(&self, user_id: &str, name: &str) -> Result<bool, StoreError>;
}
