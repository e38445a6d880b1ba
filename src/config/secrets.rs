//! `secrets`: the key that encrypts the secrets users store for their tool calls
//! (`PUT /api/{user_id}/secrets/{name}`). Only its shape is checked here: 32 bytes written as 64
//! hex characters or as base64. The cipher itself is [`crate::secrets`]'s. An empty key (such as
//! `${AGENTD_SECRETS_KEY:-}` with the variable unset) means secrets are not configured.

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::ConfigError;

/// The length of the key in bytes (an AEAD-256 key).
pub const KEY_BYTES: usize = 32;

/// The longest secret name.
pub const MAX_NAME_CHARS: usize = 64;

/// A secret name is 1 to 64 ASCII letters, digits, `_` or `-` (it stands in a URL path and in
/// `${caller.secret.NAME}`).
pub fn is_valid_name(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `secrets`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretsConfig {
    /// 32 random bytes as 64 hex characters or base64 (`openssl rand -hex 32`).
    pub key: Option<SecretString>,
}

/// The key's bytes; never printed.
pub struct SecretsKey(pub(crate) [u8; KEY_BYTES]);

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretsKey(***)")
    }
}

impl SecretsConfig {
    /// The key, `None` when none is set (or it is empty); an error that never quotes the key.
    pub fn key(&self) -> Result<Option<SecretsKey>, String> {
        let Some(text) = self.key.as_ref().map(|k| k.expose_secret().trim()) else {
            return Ok(None);
        };
        if text.is_empty() {
            return Ok(None);
        }
        decode_key(text).map(Some)
    }

    /// The check `parse_config` runs: a set key must decode, the error naming `secrets.key`.
    pub(super) fn check(&self, file: &str) -> Result<(), ConfigError> {
        self.key()
            .map(|_| ())
            .map_err(|message| ConfigError::Invalid {
                file: file.to_string(),
                path: "secrets.key".into(),
                message,
            })
    }
}

fn decode_key(text: &str) -> Result<SecretsKey, String> {
    let is_hex = text.len() == 2 * KEY_BYTES && text.bytes().all(|b| b.is_ascii_hexdigit());
    let bytes = if is_hex {
        (0..KEY_BYTES)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| "is not valid hex".to_string())?
    } else {
        let engines = [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::URL_SAFE,
        ];
        engines
            .iter()
            .find_map(|engine| engine.decode(text).ok())
            .ok_or_else(|| {
                format!(
                    "must be {KEY_BYTES} bytes written as {} hex characters or as base64 \
                     (e.g. `openssl rand -hex 32`); this value is neither",
                    2 * KEY_BYTES
                )
            })?
    };
    let length = bytes.len();
    <[u8; KEY_BYTES]>::try_from(bytes)
        .map(SecretsKey)
        .map_err(|_| format!("must be {KEY_BYTES} bytes; this one decodes to {length} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(key: &str) -> SecretsConfig {
        SecretsConfig {
            key: Some(SecretString::from(key.to_string())),
        }
    }

    #[test]
    fn hex_and_base64_keys_of_32_bytes_are_accepted() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let key = config(hex).key().expect("hex").expect("set");
        assert_eq!(key.0[1], 0x11);
        assert_eq!(key.0[31], 0xff);
        let base64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(
            config(&base64).key().expect("base64").expect("set").0,
            [7u8; 32]
        );
    }

    #[test]
    fn an_empty_or_absent_key_is_no_key() {
        assert!(config("").key().expect("empty").is_none());
        assert!(SecretsConfig::default().key().expect("absent").is_none());
    }

    #[test]
    fn wrong_lengths_and_text_are_refused_without_quoting_the_key() {
        let short = base64::engine::general_purpose::STANDARD.encode([7u8; 31]);
        let error = config(&short).key().expect_err("31 bytes");
        assert!(error.contains("31 bytes"), "{error}");
        let error = config("not a key at all!").key().expect_err("neither");
        assert!(
            error.contains("hex") && !error.contains("not a key"),
            "{error}"
        );
        // 63 hex characters: not hex of the right length, and not base64 either.
        let error = config(&"a".repeat(63)).key().expect_err("63 hex chars");
        assert!(error.contains("bytes"), "{error}");
        assert!(format!("{:?}", config(&"a".repeat(64)).key()).contains("***"));
    }
}
