//! Usage reports as the store computes them (SPEC §14, `GET /v1/usage`): runs created in a
//! time range, with their accounting's tokens, cost and tool calls summed per user, agent,
//! model, key or UTC day.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// What a report's rows are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGroup {
    User,
    Agent,
    Model,
    Key,
    Day,
}

/// Which runs a report sums.
#[derive(Debug, Clone)]
pub struct UsageQuery {
    pub group: UsageGroup,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Only this user's runs (a user's own report); `None`: everyone's (admins).
    pub user: Option<String>,
}

/// One group's sums. `group` is `None` for runs without one (no user, no key, no model call).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct UsageRow {
    pub group: Option<String>,
    pub runs: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub reasoning_tokens: i64,
    pub cost_usd: f64,
    pub tool_calls: i64,
}

/// The most groups one report returns.
pub const MAX_USAGE_GROUPS: i64 = 10_000;

#[async_trait]
pub trait UsageStore: Send + Sync {
    /// The sums of `query`'s runs per group, by group.
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, StoreError>;
}
