//! API keys created at run time (SPEC §12) as the store keeps them: a digest of the secret,
//! never the secret, with the key's owner, scopes, limits and lifetime. Revoking keeps the row.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// One run-time key.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredApiKey {
    pub id: String,
    pub name: String,
    /// The user it acts for; `None`: it owns what it starts as `key:ID`.
    pub user_id: Option<String>,
    /// The owner id of who created it.
    pub created_by: String,
    /// SHA-256 of the key, hex.
    pub secret_hash: String,
    /// The key's first characters, to recognise it by.
    pub prefix: String,
    /// Space-separated scopes.
    pub scopes: String,
    /// `auth.keys[].limits` as JSON.
    pub limits: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub rotated_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A new secret for a key.
pub struct Rotation<'a> {
    pub id: &'a str,
    pub secret_hash: &'a str,
    pub prefix: &'a str,
    pub at: DateTime<Utc>,
}

#[async_trait]
pub trait ApiKeyStore: Send + Sync {
    /// Stores a new key; a taken id or digest is a conflict.
    async fn insert_api_key(&self, key: &StoredApiKey) -> Result<(), StoreError>;
    /// The key with this digest, revoked or not.
    async fn api_key_by_hash(&self, secret_hash: &str) -> Result<Option<StoredApiKey>, StoreError>;
    /// The key with this id, revoked or not.
    async fn api_key(&self, id: &str) -> Result<Option<StoredApiKey>, StoreError>;
    /// The keys not revoked, newest first: one user's (`Some`), or everyone's.
    async fn list_api_keys(&self, user_id: Option<&str>) -> Result<Vec<StoredApiKey>, StoreError>;
    /// Replaces a key's secret; false when there is no such key or it is revoked.
    async fn rotate_api_key(&self, rotation: &Rotation<'_>) -> Result<bool, StoreError>;
    /// Revokes a key; false when there is no such key or it was revoked already.
    async fn revoke_api_key(&self, id: &str, at: DateTime<Utc>) -> Result<bool, StoreError>;
}
