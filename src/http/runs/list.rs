//! `GET /v1/runs`: the runs a key may see (its user's; admins every user's), newest first, by
//! status, agent, user or conversation, a page at a time. The runs console of the web page and
//! the approvals queue (`?status=waiting_approval`) read it.

use crate::http::shared::cursor::PageCursor;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiQuery, ErrorBody};
use crate::http::wire::ListObject;
use crate::runtime::Runtime;
use crate::store::{RunCursor, RunFilter, RunOwnerFilter, RunRecord};
use crate::vocabulary::RunStatus;

/// The page size when `limit` is not given, and the largest one may ask for.
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 1000;

/// The filters and paging of `GET /v1/runs`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunListQuery {
    /// Only runs with one of these statuses, comma-separated (`running,waiting_approval`).
    #[serde(default)]
    #[param(
        pattern = r"^(queued|running|waiting_approval|waiting_budget|completed|failed|cancelled)(,(queued|running|waiting_approval|waiting_budget|completed|failed|cancelled))*$"
    )]
    pub status: Option<String>,
    /// Only runs of this agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only runs of this user (admin keys; a user key sees its own user's runs only).
    #[serde(default)]
    pub user: Option<String>,
    /// Only runs of this conversation.
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// Page size, 1 to 1000; 50 by default.
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page: runs listed after that point.
    #[serde(default)]
    #[param(pattern = r"^[0-9]{1,19}\|.+$")]
    pub after: Option<String>,
}

/// A page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList<'a> {
    pub object: ListObject,
    pub data: Vec<RunListItem<'a>>,
    /// The `after` of the next page; null on the last page.
    #[schema(required)]
    pub next: Option<String>,
}

/// One run of a listing: what it is and what it used; `GET /v1/runs/{id}` has its result.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunListItem<'a> {
    pub run_id: &'a str,
    pub agent: &'a str,
    #[schema(required)]
    pub user_id: Option<&'a str>,
    #[schema(required)]
    pub conversation_id: Option<&'a str>,
    /// `queued`, `running`, `waiting_approval`, `completed`, `failed` or `cancelled`.
    pub status: &'a str,
    #[schema(required)]
    pub exit_reason: Option<&'a str>,
    #[schema(required)]
    pub success: Option<bool>,
    #[schema(required)]
    pub error: Option<&'a str>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub cost_usd: f64,
    pub turns: i64,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339; null until the run finishes.
    #[schema(required)]
    pub finished_at: Option<String>,
    #[schema(required)]
    pub duration_ms: Option<i64>,
    /// The admin that started the run acting for its user (`key:ID`, or `admin` on a server
    /// without keys); absent when the run's owner started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub acted_by: Option<&'a str>,
}

impl<'a> From<&'a RunRecord> for RunListItem<'a> {
    fn from(run: &'a RunRecord) -> Self {
        Self {
            run_id: &run.id,
            agent: &run.agent,
            user_id: run.user_id.as_deref(),
            conversation_id: run.conversation_id.as_deref(),
            status: run.status.as_str(),
            exit_reason: run.exit_reason.as_deref(),
            success: run.success,
            error: run.error.as_deref(),
            input_tokens: run.input_tokens,
            output_tokens: run.output_tokens,
            cached_tokens: run.cached_tokens,
            cost_usd: run.cost_usd,
            turns: run.turns,
            created_at: run.created_at.to_rfc3339(),
            finished_at: run.finished_at.map(|t| t.to_rfc3339()),
            duration_ms: run.duration_ms,
            acted_by: run.acted_by.as_deref(),
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/runs",
    tag = "runs",
    summary = "The runs this key may see, newest first",
    params(RunListQuery),
    responses(
        (status = 200, description = "A page of runs", body = RunList),
        ErrorBody,
    ),
)]
pub async fn list_runs(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiQuery(query): ApiQuery<RunListQuery>,
) -> Result<Response, ApiError> {
    let filter = run_filter(&caller, query, &runtime)?;
    let page = runtime.list_runs(&filter).await.map_err(ApiError::store)?;
    let full_page = page.len() == filter.limit as usize;
    let next = full_page
        .then(|| {
            page.last()
                .map(|run| PageCursor::encode(run.created_at, &run.id))
        })
        .flatten();
    Ok(axum::Json(RunList {
        object: ListObject::List,
        data: page.iter().map(RunListItem::from).collect(),
        next,
    })
    .into_response())
}

/// The store filter for `query` as `caller` may ask it, or a 400/403 naming what is wrong.
fn run_filter(
    caller: &Caller,
    query: RunListQuery,
    runtime: &Runtime,
) -> Result<RunFilter, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid_request(format!(
            "`limit` must be between 1 and {MAX_LIMIT}"
        ))
        .with_param("limit"));
    }
    Ok(RunFilter {
        owner: owner_filter(caller, query.user)?,
        agent: query.agent,
        agents_allowed: caller.visible_agents(runtime),
        statuses: statuses(query.status.as_deref())?,
        conversation_id: query.conversation_id,
        after: query.after.as_deref().map(cursor).transpose()?,
        limit,
    })
}

/// A `next` value this API returned: `<created_at in µs>|<run id>`.
fn cursor(text: &str) -> Result<RunCursor, ApiError> {
    let cursor = PageCursor::parse(text).ok_or_else(|| {
        ApiError::invalid_request("`after` is not a `next` value this API returned")
            .with_param("after")
    })?;
    Ok(RunCursor {
        created_at: cursor.at,
        id: cursor.id,
    })
}

/// Admins see everyone's runs (or one user's); any other key its own user's runs only.
fn owner_filter(caller: &Caller, user: Option<String>) -> Result<RunOwnerFilter, ApiError> {
    match user {
        None => Ok(caller.own_runs()),
        Some(user) if caller.may_reach(Some(user.as_str())) => Ok(RunOwnerFilter::User(Some(user))),
        Some(_) => Err(ApiError::forbidden(
            "This API key may list only its own user's runs",
        )),
    }
}

/// The comma-separated `status` filter, each one a status a run can have.
fn statuses(text: Option<&str>) -> Result<Vec<String>, ApiError> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(str::trim)
        .map(|status| match RunStatus::parse(status) {
            Some(known) => Ok(known.as_str().to_string()),
            None => Err(ApiError::invalid_request(format!(
                "`status` `{status}` is not one of {}",
                RunStatus::ALL.map(|s| s.as_str()).join(", ")
            ))
            .with_param("status")),
        })
        .collect()
}
