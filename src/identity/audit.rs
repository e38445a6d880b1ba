//! The audit hook of identity changes (SPEC §12, §14): every change to who may call agentd
//! (a key created, rotated or revoked) is appended to the hash-chained audit log
//! ([`crate::audit`]) through this one call, with who acted and which key. Never a secret: only
//! ids. A failed write is logged, not turned into an error: the change already happened.

use crate::audit::{Actor, AuditAction, AuditEvent};
use crate::store::AuditStore;

/// What was done to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyChange {
    Created,
    Rotated,
    Revoked,
}

impl KeyChange {
    fn action(self) -> AuditAction {
        match self {
            Self::Created => AuditAction::KeyCreated,
            Self::Rotated => AuditAction::KeyRotated,
            Self::Revoked => AuditAction::KeyRevoked,
        }
    }
}

/// Appends "`actor` did `change` to key `key_id`" to the audit log.
pub async fn record(store: &dyn AuditStore, actor: Actor, change: KeyChange, key_id: &str) {
    let event = AuditEvent::new(actor, change.action(), format!("key:{key_id}"));
    crate::audit::record_or_log(store, event).await;
}
