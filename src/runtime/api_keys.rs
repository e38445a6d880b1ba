//! Run-time API keys as the runtime keeps them (SPEC §12): created, listed, read, rotated and
//! revoked in the store, each change written to the audit log in the same call. The HTTP
//! handlers decide who may do what and shape the answers; they reach keys only through
//! [`Runtime::api_keys`].

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Runtime;
use crate::audit::Actor;
use crate::identity::audit::{self, KeyChange};
use crate::identity::keys::KeyCache;
use crate::store::{Rotation, Store, StoreError, StoredApiKey};

/// The runtime's keys: a view over the store that audits every change.
pub struct ApiKeys<'a> {
    store: &'a Arc<dyn Store>,
}

impl Runtime {
    /// The run-time API keys.
    pub fn api_keys(&self) -> ApiKeys<'_> {
        ApiKeys { store: &self.store }
    }
}

impl ApiKeys<'_> {
    /// A cache of the stored keys, for the authenticator to look keys up through.
    pub fn cache(&self) -> KeyCache {
        KeyCache::new(Arc::clone(self.store))
    }

    /// Stores a new key and audits its creation by `actor`.
    pub async fn create(&self, key: &StoredApiKey, actor: Actor) -> Result<(), StoreError> {
        self.store.insert_api_key(key).await?;
        audit::record(self.store.as_ref(), actor, KeyChange::Created, &key.id).await;
        Ok(())
    }

    /// The stored keys, only `user`'s when given (never a secret: digests only).
    pub async fn list(&self, user: Option<&str>) -> Result<Vec<StoredApiKey>, StoreError> {
        self.store.list_api_keys(user).await
    }

    /// Key `key_id` while it is not revoked, and only when it is `owner`'s if one is given.
    pub async fn live(
        &self,
        key_id: &str,
        owner: Option<&str>,
    ) -> Result<Option<StoredApiKey>, StoreError> {
        let key = self.store.api_key(key_id).await?;
        Ok(key
            .filter(|key| key.revoked_at.is_none())
            .filter(|key| owner.is_none() || key.user_id.as_deref() == owner))
    }

    /// Gives a key a new secret; `false`: no such live key (nothing is audited then).
    pub async fn rotate(&self, rotation: &Rotation<'_>, actor: Actor) -> Result<bool, StoreError> {
        let rotated = self.store.rotate_api_key(rotation).await?;
        if rotated {
            audit::record(self.store.as_ref(), actor, KeyChange::Rotated, rotation.id).await;
        }
        Ok(rotated)
    }

    /// Revokes a key at `at`; `false`: no such live key (nothing is audited then).
    pub async fn revoke(
        &self,
        key_id: &str,
        at: DateTime<Utc>,
        actor: Actor,
    ) -> Result<bool, StoreError> {
        let revoked = self.store.revoke_api_key(key_id, at).await?;
        if revoked {
            audit::record(self.store.as_ref(), actor, KeyChange::Revoked, key_id).await;
        }
        Ok(revoked)
    }
}
