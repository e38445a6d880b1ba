//! API keys created at run time (SPEC §12): minted here (`agd_` and 256 random bits, shown
//! once), stored only as their SHA-256 digest, and looked up through a small cache. A cached
//! answer lives [`CACHE_TTL`], so a key revoked on any replica is refused by every replica
//! within that time (well under the 5 s SPEC §12 asks) while a busy key costs one store read
//! every [`CACHE_TTL`], not one per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

use crate::store::{Store, StoreError, StoredApiKey};

/// Every run-time key starts so, which also tells it from a config key or a JWT.
pub const KEY_PREFIX: &str = "agd_";
/// How long a looked-up key (or its absence) is trusted before the store is asked again.
pub const CACHE_TTL: Duration = Duration::from_secs(2);
/// How many presented keys the cache remembers before it starts over.
const CACHE_CAPACITY: usize = 10_000;
/// How many characters of a key are kept to recognise it by (`agd_` and four more).
const SHOWN_PREFIX: usize = 8;

/// A new key: the secret (shown once) and what the store keeps of it.
pub struct MintedKey {
    pub secret: String,
    pub secret_hash: String,
    pub prefix: String,
}

/// Makes a new key from the system's secure random source.
pub fn mint() -> Result<MintedKey, ring::error::Unspecified> {
    let mut bytes = [0u8; 32];
    SystemRandom::new().fill(&mut bytes)?;
    let secret = format!("{KEY_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
    Ok(MintedKey {
        secret_hash: hash(&secret),
        prefix: secret.chars().take(SHOWN_PREFIX).collect(),
        secret,
    })
}

/// The hex SHA-256 digest a key is stored and found by.
pub fn hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A new key id: `key_` and 16 random hex digits.
pub fn new_id() -> String {
    format!("key_{}", &uuid::Uuid::new_v4().simple().to_string()[..16])
}

/// Why a presented run-time key is not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRefusal {
    Unknown,
    Revoked,
    Expired,
}

/// Finds presented run-time keys, caching each answer for [`CACHE_TTL`].
pub struct KeyCache {
    store: Arc<dyn Store>,
    entries: Mutex<HashMap<String, (Instant, Option<StoredApiKey>)>>,
}

impl KeyCache {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The live key `presented` is, or why it is refused.
    pub async fn find(
        &self,
        presented: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<StoredApiKey, KeyRefusal>, StoreError> {
        let digest = hash(presented);
        let key = match self.cached(&digest) {
            Some(key) => key,
            None => {
                let key = self.store.api_key_by_hash(&digest).await?;
                self.remember(digest, key.clone());
                key
            }
        };
        Ok(match key {
            None => Err(KeyRefusal::Unknown),
            Some(key) if key.revoked_at.is_some() => Err(KeyRefusal::Revoked),
            Some(key) if key.expires_at.is_some_and(|at| at <= now) => Err(KeyRefusal::Expired),
            Some(key) => Ok(key),
        })
    }

    /// Forgets every cached answer (this replica changed a key: it knows at once).
    pub fn forget_all(&self) {
        self.lock().clear();
    }

    fn cached(&self, digest: &str) -> Option<Option<StoredApiKey>> {
        self.lock()
            .get(digest)
            .filter(|(at, _)| at.elapsed() < CACHE_TTL)
            .map(|(_, key)| key.clone())
    }

    fn remember(&self, digest: String, key: Option<StoredApiKey>) {
        let mut entries = self.lock();
        if entries.len() >= CACHE_CAPACITY {
            entries.clear();
        }
        entries.insert(digest, (Instant::now(), key));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Option<StoredApiKey>)>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_are_long_random_and_stored_as_digests() {
        let one = mint().expect("mint");
        let two = mint().expect("mint");
        assert!(one.secret.starts_with(KEY_PREFIX) && one.secret.len() == 4 + 43);
        assert_ne!(one.secret, two.secret);
        assert_eq!(one.secret_hash, hash(&one.secret));
        assert_eq!(one.secret_hash.len(), 64);
        assert!(!one.secret_hash.contains(&one.secret[4..]));
        assert_eq!(one.prefix, one.secret[..8]);
        assert!(new_id().starts_with("key_") && new_id().len() == 20);
    }
}
