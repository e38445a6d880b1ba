//! The webhook outbox (SPEC §13): messages to receivers, kept until delivered or given up, each
//! with the id it keeps on every attempt. Any replica takes due rows under a lease, so one
//! attempt is made by one replica; the store only keeps rows, the runtime sends them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Not delivered yet: due at `next_attempt_at`.
    Pending,
    /// A receiver answered 2xx.
    Delivered,
    /// Retried for the whole retry window without a 2xx.
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "delivered" => Self::Delivered,
            "failed" => Self::Failed,
            _ => Self::Pending,
        }
    }
}

/// Which configured secret signs a message, looked up each time it is sent: the outbox keeps
/// no secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// Sent unsigned (an A2A push-notification config on a server without
    /// `webhookDelivery.secret`, authenticated by its token).
    Unsigned,
    /// `webhookDelivery.secret`: per-run, response and schedule webhooks, A2A push.
    Server,
    /// The secret of the `webhooks[]` entry for the message's URL.
    Receiver,
}

impl Signer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unsigned => "none",
            Self::Server => "server",
            Self::Receiver => "receiver",
        }
    }

    /// `None` for a row written before signers (it carries its own secret) or an unknown name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(Self::Unsigned),
            "server" => Some(Self::Server),
            "receiver" => Some(Self::Receiver),
            _ => None,
        }
    }
}

/// A message to put in the outbox.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    /// The `webhook-id` (`msg_…`), the same on every attempt.
    pub id: String,
    pub url: String,
    /// Which secret signs it when it is sent.
    pub signer: Signer,
    /// `run.finished`, `run.failed`, …
    pub event: String,
    /// The JSON body, exactly as signed and sent.
    pub payload: String,
    pub user_id: Option<String>,
    pub run_id: Option<String>,
    /// Extra headers sent with it (an A2A config's token), as a JSON object of strings.
    pub headers: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub id: String,
    pub url: String,
    /// Which configured secret signs it; `None` for a row written before signers were kept,
    /// signed with its own `secret`.
    pub signer: Option<Signer>,
    /// The `whsec_…` secret of a row written before signers were kept; empty otherwise.
    pub legacy_secret: String,
    pub event: String,
    pub payload: String,
    pub user_id: Option<String>,
    pub run_id: Option<String>,
    pub headers: Option<String>,
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub next_attempt_at: DateTime<Utc>,
    /// The HTTP status of the last attempt, if it got one.
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// How one attempt went.
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    pub status: DeliveryStatus,
    /// When to try again (`Pending`); ignored otherwise.
    pub next_attempt_at: DateTime<Utc>,
    pub http_status: Option<i64>,
    pub error: Option<String>,
    pub at: DateTime<Utc>,
}

#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Puts messages in the outbox, due now.
    async fn enqueue_deliveries(&self, deliveries: &[NewDelivery]) -> Result<(), StoreError>;
    /// Leases up to `limit` pending deliveries due at `now` to `holder` until `until` (none
    /// another holder's lease still covers) and returns them.
    async fn lease_due_deliveries(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError>;
    /// When the next pending message is due (its attempt, or the end of another holder's
    /// lease on it); `None`: nothing is pending.
    async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// Notified (one permit kept) whenever this store commits new messages, so this replica's
    /// delivery loop sends them at once rather than at its next look.
    fn delivery_wakeup(&self) -> &tokio::sync::Notify;
    /// Records an attempt made under `holder`'s lease and lets the lease go.
    async fn record_attempt(
        &self,
        id: &str,
        holder: &str,
        outcome: &AttemptOutcome,
    ) -> Result<(), StoreError>;
    /// Deliveries newest first, `limit` (1..=1000) at a time; only `user_id`'s when given.
    async fn list_deliveries(
        &self,
        user_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError>;
}
