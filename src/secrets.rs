//! Users' tool secrets (`PUT /api/{user_id}/secrets/{name}`, read by `${caller.secret.NAME}`):
//! sealing a value with the configured `secrets.key` before the store sees it, and opening it
//! for one tool call. The AEAD is ChaCha20-Poly1305 from `ring` (already the TLS provider's
//! crypto), with a fresh random nonce per write and the user id and name as associated data, so
//! a row copied to another user or name does not open. Values live in [`SecretString`]s and are
//! never logged, returned or put in an error; this module owns no HTTP and no tool logic.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use secrecy::{ExposeSecret, SecretString};

use crate::config::secrets::{SecretsConfig, SecretsKey};
use crate::store::{SealedSecret, SecretName, Store, StoreError};
use crate::tools::caller::SecretSource;

/// The largest value a secret may hold, in bytes.
pub const MAX_VALUE_BYTES: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the secrets cipher failed (no randomness, or the key was refused)")]
    Cipher,
    #[error(
        "a stored secret does not decrypt with this server's `secrets.key` (was the key changed?)"
    )]
    DoesNotOpen,
}

/// Seals and opens values under the configured key.
pub struct SecretCipher {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for SecretCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretCipher(***)")
    }
}

/// The associated data of a row: the user id's length, the user id, the name (lengths first, so
/// no two (user, name) pairs share it).
fn associated_data(user_id: &str, name: &str) -> Vec<u8> {
    let mut data = Vec::with_capacity(8 + user_id.len() + name.len());
    data.extend_from_slice(&(user_id.len() as u64).to_be_bytes());
    data.extend_from_slice(user_id.as_bytes());
    data.extend_from_slice(name.as_bytes());
    data
}

impl SecretCipher {
    pub fn new(key: &SecretsKey) -> Result<Self, SecretsError> {
        let unbound =
            UnboundKey::new(&CHACHA20_POLY1305, &key.0).map_err(|_| SecretsError::Cipher)?;
        Ok(Self {
            key: LessSafeKey::new(unbound),
            random: SystemRandom::new(),
        })
    }

    /// `(nonce, ciphertext with its tag)` of `value` for this user and name.
    pub fn seal(
        &self,
        user_id: &str,
        name: &str,
        value: &SecretString,
    ) -> Result<(Vec<u8>, Vec<u8>), SecretsError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SecretsError::Cipher)?;
        let mut sealed = value.expose_secret().as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(associated_data(user_id, name)),
                &mut sealed,
            )
            .map_err(|_| SecretsError::Cipher)?;
        Ok((nonce.to_vec(), sealed))
    }

    /// The value sealed for this user and name; [`SecretsError::DoesNotOpen`] for another key,
    /// user or name, or altered bytes.
    pub fn open(
        &self,
        user_id: &str,
        name: &str,
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> Result<SecretString, SecretsError> {
        let nonce =
            Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretsError::DoesNotOpen)?;
        let mut buffer = ciphertext.to_vec();
        let plain = self
            .key
            .open_in_place(
                nonce,
                Aad::from(associated_data(user_id, name)),
                &mut buffer,
            )
            .map_err(|_| SecretsError::DoesNotOpen)?;
        let text = String::from_utf8(plain.to_vec()).map_err(|_| SecretsError::DoesNotOpen)?;
        Ok(SecretString::from(text))
    }
}

/// Users' secrets: sealed into the store, opened for tool calls.
pub struct UserSecrets {
    store: Arc<dyn Store>,
    cipher: SecretCipher,
}

impl UserSecrets {
    /// `None` when `secrets.key` is not set (the secrets routes then answer 503 and
    /// `${caller.secret.*}` fails calls saying secrets are not configured).
    pub fn from_config(
        config: &SecretsConfig,
        store: Arc<dyn Store>,
    ) -> Result<Option<Self>, SecretsError> {
        // The config was checked at load; a key that fails now is treated as none.
        let Ok(Some(key)) = config.key() else {
            return Ok(None);
        };
        Ok(Some(Self {
            store,
            cipher: SecretCipher::new(&key)?,
        }))
    }

    /// Seals and stores `value` as the user's secret `name` (replacing it).
    pub async fn put(
        &self,
        user_id: &str,
        name: &str,
        value: &SecretString,
    ) -> Result<(), SecretsError> {
        let (nonce, ciphertext) = self.cipher.seal(user_id, name, value)?;
        self.store
            .put_secret(&SealedSecret {
                user_id: user_id.to_string(),
                name: name.to_string(),
                nonce,
                ciphertext,
                updated_at: Utc::now(),
            })
            .await?;
        Ok(())
    }

    /// The names of the user's secrets and when each was set.
    pub async fn names(&self, user_id: &str) -> Result<Vec<SecretName>, StoreError> {
        self.store.list_secrets(user_id).await
    }

    /// Deletes the user's secret `name`; false when there was none.
    pub async fn delete(&self, user_id: &str, name: &str) -> Result<bool, StoreError> {
        self.store.delete_secret(user_id, name).await
    }

    /// The user's secret `name` in the clear, `None` when not set.
    pub async fn get(
        &self,
        user_id: &str,
        name: &str,
    ) -> Result<Option<SecretString>, SecretsError> {
        let Some(sealed) = self.store.get_secret(user_id, name).await? else {
            return Ok(None);
        };
        self.cipher
            .open(user_id, name, &sealed.nonce, &sealed.ciphertext)
            .map(Some)
    }
}

#[async_trait]
impl SecretSource for UserSecrets {
    async fn secret(&self, user_id: &str, name: &str) -> Result<Option<SecretString>, String> {
        self.get(user_id, name).await.map_err(|error| {
            tracing::warn!(%error, secret = name, "a user secret could not be read");
            match error {
                SecretsError::Store(_) => "the store is not reachable".to_string(),
                other => other.to_string(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cipher(byte: u8) -> SecretCipher {
        SecretCipher::new(&SecretsKey([byte; 32])).expect("cipher")
    }

    #[test]
    fn a_sealed_value_opens_only_for_its_user_name_and_key() {
        let cipher = cipher(1);
        let value = SecretString::from("ghp_abc");
        let (nonce, sealed) = cipher.seal("alice", "TOKEN", &value).expect("sealed");
        assert!(
            !sealed.windows(7).any(|w| w == b"ghp_abc"),
            "the value is not stored in the clear"
        );
        let opened = cipher
            .open("alice", "TOKEN", &nonce, &sealed)
            .expect("opens");
        assert_eq!(opened.expose_secret(), "ghp_abc");
        for (user, name) in [("bob", "TOKEN"), ("alice", "OTHER"), ("aliceT", "OKEN")] {
            assert!(
                matches!(
                    cipher.open(user, name, &nonce, &sealed),
                    Err(SecretsError::DoesNotOpen)
                ),
                "{user}/{name} must not open alice/TOKEN"
            );
        }
        assert!(cipher2_refuses(&nonce, &sealed));
        let mut altered = sealed.clone();
        altered[0] ^= 1;
        assert!(cipher.open("alice", "TOKEN", &nonce, &altered).is_err());
    }

    fn cipher2_refuses(nonce: &[u8], sealed: &[u8]) -> bool {
        cipher(2).open("alice", "TOKEN", nonce, sealed).is_err()
    }

    #[test]
    fn every_write_has_a_fresh_nonce() {
        let cipher = cipher(1);
        let value = SecretString::from("same");
        let (n1, c1) = cipher.seal("u", "N", &value).expect("sealed");
        let (n2, c2) = cipher.seal("u", "N", &value).expect("sealed");
        assert_ne!(n1, n2);
        assert_ne!(c1, c2);
    }
}
