//! The audit hook (SPEC §12, §14): every change to who may call agentd is reported here, by one
//! call of [`record`] with who acted, what they did and to what. Today it writes a `tracing`
//! event with target `agentd::audit` (so a log pipeline can route it); the governance audit log
//! takes its entries from this one function. Never pass a secret: only ids and names.

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    KeyCreated,
    KeyRotated,
    KeyRevoked,
}

impl AuditAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KeyCreated => "key.created",
            Self::KeyRotated => "key.rotated",
            Self::KeyRevoked => "key.revoked",
        }
    }
}

/// One change: `actor` (an owner id: a user, `key:ID`, or `admin` on a server without keys)
/// did `action` to `target` (a key id).
pub fn record(actor: &str, action: AuditAction, target: &str) {
    tracing::info!(
        target: "agentd::audit",
        actor,
        action = action.as_str(),
        target,
        "audit"
    );
}
