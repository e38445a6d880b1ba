//! `GET /v1/usage?group_by=user|agent|model|key|day&from&to`: tokens in, out, cached and
//! reasoning, cost, runs and tool calls of the runs created in a range, summed per group. A
//! user's key sees its own runs only; admins everyone's (or one user's with `user`).

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::audit::time_range;
use super::auth::Caller;
use super::error::{ApiError, ApiQuery, ErrorBody};
use super::wire::ListObject;
use crate::runtime::Runtime;
use crate::store::{UsageGroup, UsageQuery, UsageRow};

/// The range when `from` is not given: the 30 days before `to`.
const DEFAULT_DAYS: i64 = 30;

/// What `group_by` names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    User,
    Agent,
    Model,
    Key,
    #[default]
    Day,
}

impl From<GroupBy> for UsageGroup {
    fn from(group: GroupBy) -> Self {
        match group {
            GroupBy::User => Self::User,
            GroupBy::Agent => Self::Agent,
            GroupBy::Model => Self::Model,
            GroupBy::Key => Self::Key,
            GroupBy::Day => Self::Day,
        }
    }
}

/// The grouping and range of `GET /v1/usage`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageParams {
    /// `user`, `agent`, `model`, `key` or `day` (UTC; the default).
    #[serde(default)]
    pub group_by: Option<GroupBy>,
    /// Runs created at or after this time (RFC 3339 or `YYYY-MM-DD`); 30 days before `to` by
    /// default.
    #[serde(default)]
    #[param(format = DateTime)]
    pub from: Option<String>,
    /// Runs created before this time (RFC 3339 or `YYYY-MM-DD`); now by default.
    #[serde(default)]
    #[param(format = DateTime)]
    pub to: Option<String>,
    /// Admins: only this user's runs.
    #[serde(default)]
    pub user: Option<String>,
}

/// The usage report.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageReport {
    pub object: ListObject,
    pub group_by: GroupBy,
    /// RFC 3339.
    pub from: DateTime<Utc>,
    /// RFC 3339.
    pub to: DateTime<Utc>,
    pub data: Vec<UsageGroupRow>,
}

/// One group's sums.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageGroupRow {
    /// The user, agent, model, key id or day (`YYYY-MM-DD`); null for runs with none (runs of
    /// no user, of no key, that called no model).
    #[schema(required)]
    pub group: Option<String>,
    pub runs: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub reasoning_tokens: i64,
    pub total_tokens: i64,
    pub cost_usd: f64,
    pub tool_calls: i64,
}

impl From<UsageRow> for UsageGroupRow {
    fn from(row: UsageRow) -> Self {
        Self {
            total_tokens: row.input_tokens + row.output_tokens,
            group: row.group,
            runs: row.runs,
            input_tokens: row.input_tokens,
            output_tokens: row.output_tokens,
            cached_tokens: row.cached_tokens,
            reasoning_tokens: row.reasoning_tokens,
            cost_usd: row.cost_usd,
            tool_calls: row.tool_calls,
        }
    }
}

/// Whose runs the caller's report sums: an admin's everyone's (or `user`'s), anyone else's its
/// own, and asking for another user's is 403.
fn whose(caller: &Caller, user: Option<String>) -> Result<Option<String>, ApiError> {
    if caller.admin {
        return Ok(user);
    }
    let own = caller.owner();
    match user {
        Some(user) if own.as_deref() != Some(user.as_str()) => Err(ApiError::forbidden(
            "This key may only see its own usage: leave out `user` or name its own user",
        )
        .with_param("user")),
        _ => Ok(own),
    }
}

#[utoipa::path(
    get,
    path = "/v1/usage",
    tag = "governance",
    summary = "Tokens, cost, runs and tool calls per user, agent, model, key or day",
    params(UsageParams),
    responses(
        (status = 200, description = "One row per group, by group", body = UsageReport),
        ErrorBody,
    ),
)]
pub async fn usage(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiQuery(params): ApiQuery<UsageParams>,
) -> Result<Response, ApiError> {
    let (from, to) = time_range(params.from.as_deref(), params.to.as_deref())?;
    let to = to.unwrap_or_else(Utc::now);
    let from = from.unwrap_or(to - Duration::days(DEFAULT_DAYS));
    let group_by = params.group_by.unwrap_or_default();
    let query = UsageQuery {
        group: group_by.into(),
        from,
        to,
        user: whose(&caller, params.user)?,
    };
    let rows = runtime.usage(&query).await.map_err(ApiError::store)?;
    Ok(axum::Json(UsageReport {
        object: ListObject::List,
        group_by,
        from,
        to,
        data: rows.into_iter().map(Into::into).collect(),
    })
    .into_response())
}
