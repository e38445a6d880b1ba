//! The audit log as the store keeps it (SPEC §14): append-only rows, each chained to the one
//! before by a SHA-256 hash. Appends are serialised by the one-row `audit_head` lock in the same
//! transaction as the insert, so two replicas never give two rows the same place in the chain.
//! The hash is computed here, over exactly what is stored, so [`chain_hash`] recomputes it from
//! a row read back.

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use sha2::{Digest, Sha256};

use super::StoreError;

/// The `prev_hash` of the first row of a chain.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A row to append: everything but its place in the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEntry {
    pub at: DateTime<Utc>,
    pub actor_user: Option<String>,
    pub actor_key: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub request_id: Option<String>,
    pub outcome: String,
    /// A JSON object of facts about the act (never content: no values, no messages).
    pub details: Option<String>,
}

/// A stored row.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub seq: i64,
    pub entry: NewAuditEntry,
    pub prev_hash: String,
    pub hash: String,
}

impl AuditEntry {
    /// Whether the row's hash is the hash of its fields and `prev_hash`.
    pub fn hash_matches(&self) -> bool {
        chain_hash(self.seq, &self.entry, &self.prev_hash) == self.hash
    }
}

/// Which rows a listing returns: oldest first, at most `limit`, after `after_seq`.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// A user id or key id: rows whose actor is it.
    pub actor: Option<String>,
    pub action: Option<String>,
    pub after_seq: i64,
    pub limit: u32,
}

/// The canonical time text hashed for a row: RFC 3339, UTC, microseconds.
pub fn hashed_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// SHA-256 (hex) of a row: a JSON array of its place, fields and the previous row's hash, so no
/// two different rows hash the same text.
pub fn chain_hash(seq: i64, entry: &NewAuditEntry, prev_hash: &str) -> String {
    let canonical = serde_json::json!([
        seq,
        hashed_time(entry.at),
        entry.actor_user,
        entry.actor_key,
        entry.action,
        entry.target,
        entry.request_id,
        entry.outcome,
        entry.details,
        prev_hash,
    ]);
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends `entry` as the next row of the chain and returns it.
    async fn append_audit(&self, entry: &NewAuditEntry) -> Result<AuditEntry, StoreError>;
    /// Rows matching `filter`, oldest first.
    async fn list_audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError>;
    /// The last row's number and hash as the lock row keeps them (`0` and [`GENESIS_HASH`]
    /// before the first append).
    async fn audit_head(&self) -> Result<(i64, String), StoreError>;
    /// Deletes up to `limit` of the oldest rows written before `before` (retention); how many.
    async fn delete_audit_before(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> NewAuditEntry {
        NewAuditEntry {
            at: DateTime::from_timestamp(1_700_000_000, 123_456_000).unwrap_or_default(),
            actor_user: Some("alice".into()),
            actor_key: None,
            action: "secret.set".into(),
            target: Some("alice/github".into()),
            request_id: None,
            outcome: "success".into(),
            details: None,
        }
    }

    #[test]
    fn a_changed_field_changes_the_hash() {
        let original = chain_hash(1, &entry(), GENESIS_HASH);
        let mut edited = entry();
        edited.actor_user = Some("mallory".into());
        assert_ne!(chain_hash(1, &edited, GENESIS_HASH), original);
        assert_ne!(chain_hash(2, &entry(), GENESIS_HASH), original);
        assert_eq!(chain_hash(1, &entry(), GENESIS_HASH), original);
        assert_eq!(original.len(), 64);
    }
}
