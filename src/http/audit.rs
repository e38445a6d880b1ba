//! `GET /v1/audit` (the audit log as JSON lines or CSV, filtered by time, actor and action) and
//! `GET /v1/audit/verify` (walks the hash chain and names the first broken row): admins only.
//! Also who an audited act's actor is ([`actor_of`]), the time bounds the governance routes
//! share ([`parse_time`]), and the middleware that records admins reading other users' data
//! ([`audit_admin_reads`]). Nothing in the API writes or deletes audit rows.

use std::sync::Arc;

use axum::extract::{Extension, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

use super::auth::Caller;
use super::error::{ApiError, ApiQuery, ErrorBody};
use super::layers::REQUEST_ID_HEADER;
use crate::audit::{Actor, AuditAction, AuditEvent, AuditRecord, Verification};
use crate::runtime::Runtime;
use crate::store::AuditFilter;

/// The most rows one `GET /v1/audit` answers; the `x-agentd-next-after` header then names the
/// `after` of the next page.
pub const MAX_AUDIT_ROWS: u32 = 10_000;
/// Rows read from the store per query.
const STORE_PAGE: u32 = 1000;

/// Who acts in a request: its caller's user and key, and the request id. An admin acting for
/// a user (`x-agentd-user`) is the admin: its key, not the user.
pub fn actor_of(caller: &Caller, headers: &HeaderMap) -> Actor {
    Actor {
        user: caller.user_id.clone().filter(|_| caller.acted_by.is_none()),
        key_id: caller.key_id.clone(),
        request_id: headers
            .get(&REQUEST_ID_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string),
    }
}

/// An instant from a query parameter: RFC 3339, or a `YYYY-MM-DD` day (its start, UTC).
pub fn parse_time(value: &str, param: &str) -> Result<DateTime<Utc>, ApiError> {
    if let Ok(time) = DateTime::parse_from_rfc3339(value) {
        return Ok(time.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.and_hms_opt(0, 0, 0))
        .map(|time| time.and_utc())
        .ok_or_else(|| {
            ApiError::invalid_request(format!(
                "`{param}` must be an RFC 3339 time (2026-01-31T12:00:00Z) or a day \
                 (2026-01-31); got {value:?}"
            ))
            .with_param(param.to_string())
        })
}

/// Optional `from` and `to` bounds of a range.
pub type TimeRange = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// Parses optional `from` / `to` bounds (an empty value, as forms send, is no bound). A `to`
/// at or before `from` is an empty range: it selects nothing (the answer is empty, not an
/// error, as with any range that holds no row).
pub fn time_range(from: Option<&str>, to: Option<&str>) -> Result<TimeRange, ApiError> {
    let bound = |value: Option<&str>, param: &str| {
        value
            .filter(|value| !value.is_empty())
            .map(|value| parse_time(value, param))
            .transpose()
    };
    let from = bound(from, "from")?;
    let to = bound(to, "to")?;
    Ok((from, to))
}

fn require_admin(caller: &Caller) -> Result<(), ApiError> {
    if caller.admin && caller.acted_by.is_none() {
        Ok(())
    } else {
        Err(ApiError::forbidden("The audit log is for admin keys only"))
    }
}

/// The filters and paging of `GET /v1/audit`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Rows at or after this time (RFC 3339, or a day `YYYY-MM-DD`).
    #[serde(default)]
    #[param(format = DateTime)]
    pub from: Option<String>,
    /// Rows before this time (RFC 3339, or a day `YYYY-MM-DD`).
    #[serde(default)]
    #[param(format = DateTime)]
    pub to: Option<String>,
    /// Rows whose actor is this user id or key id.
    #[serde(default)]
    pub actor: Option<String>,
    /// Rows of this action (`secret.set`, `approval.decided`, `run.cancelled`, …).
    #[serde(default)]
    #[param(value_type = Option<AuditAction>)]
    pub action: Option<String>,
    /// Rows after this row number (the `x-agentd-next-after` of the previous page).
    #[serde(default)]
    #[param(minimum = 0)]
    pub after: Option<i64>,
    /// The most rows to answer, 1 to 10000; 10000 by default.
    #[serde(default)]
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<u32>,
}

impl AuditQuery {
    fn filter(&self) -> Result<(AuditFilter, u32), ApiError> {
        let (from, to) = time_range(self.from.as_deref(), self.to.as_deref())?;
        if let Some(action) = self.action.as_deref().filter(|action| !action.is_empty())
            && AuditAction::parse(action).is_none()
        {
            let known: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
            return Err(ApiError::invalid_request(format!(
                "Unknown `action` {action:?}: one of {}",
                known.join(", ")
            ))
            .with_param("action"));
        }
        let limit = self.limit.unwrap_or(MAX_AUDIT_ROWS);
        if !(1..=MAX_AUDIT_ROWS).contains(&limit) {
            return Err(ApiError::invalid_request(format!(
                "`limit` is {limit}; ask for 1 to {MAX_AUDIT_ROWS} rows"
            ))
            .with_param("limit"));
        }
        let after_seq = self.after.unwrap_or(0);
        if after_seq < 0 {
            return Err(ApiError::invalid_request("`after` must be 0 or more").with_param("after"));
        }
        let filter = AuditFilter {
            from,
            to,
            actor: self.actor.clone(),
            action: self.action.clone().filter(|action| !action.is_empty()),
            after_seq,
            limit: STORE_PAGE,
        };
        Ok((filter, limit))
    }
}

/// The two formats `GET /v1/audit` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AuditFormat {
    JsonLines,
    Csv,
}

impl AuditFormat {
    fn of(headers: &HeaderMap) -> Self {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        if accept.contains("text/csv") {
            Self::Csv
        } else {
            Self::JsonLines
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::JsonLines => "application/x-ndjson",
            Self::Csv => "text/csv; charset=utf-8",
        }
    }
}

const CSV_HEADER: &str =
    "seq,at,actor_user,actor_key,action,target,request_id,outcome,details,prev_hash,hash\n";

/// One CSV field, quoted when it holds a comma, quote or line break (RFC 4180); a field a
/// spreadsheet would run as a formula (`=`, `+`, `-`, `@`) is prefixed with `'`.
fn csv_field(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@']) {
        format!("'{value}")
    } else {
        value.to_string()
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

fn csv_line(row: &AuditRecord) -> String {
    let optional = |value: &Option<String>| csv_field(value.as_deref().unwrap_or_default());
    let details = row
        .details
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let fields = [
        row.seq.to_string(),
        csv_field(&row.at.to_rfc3339()),
        optional(&row.actor_user),
        optional(&row.actor_key),
        csv_field(&row.action),
        optional(&row.target),
        optional(&row.request_id),
        csv_field(&row.outcome),
        csv_field(&details),
        csv_field(&row.prev_hash),
        csv_field(&row.hash),
    ];
    let mut line = fields.join(",");
    line.push('\n');
    line
}

fn render(format: AuditFormat, rows: &[AuditRecord]) -> String {
    let mut body = String::new();
    if format == AuditFormat::Csv {
        body.push_str(CSV_HEADER);
    }
    for row in rows {
        match format {
            AuditFormat::Csv => body.push_str(&csv_line(row)),
            AuditFormat::JsonLines => {
                body.push_str(&serde_json::to_string(row).unwrap_or_default());
                body.push('\n');
            }
        }
    }
    body
}

#[utoipa::path(
    get,
    path = "/v1/audit",
    tag = "governance",
    summary = "The audit log, oldest row first, as JSON lines (or CSV with Accept: text/csv); admins",
    params(AuditQuery),
    responses(
        (status = 200, description = "One row per line; `x-agentd-next-after` names the next page when more rows match",
         content(
            (AuditRecord = "application/x-ndjson"),
            (String = "text/csv"),
         )),
        ErrorBody,
    ),
)]
pub async fn list_audit(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Response, ApiError> {
    require_admin(&caller)?;
    let (mut filter, limit) = query.filter()?;
    let mut rows: Vec<AuditRecord> = Vec::new();
    let mut more = false;
    loop {
        let page = runtime
            .audit_entries(&filter)
            .await
            .map_err(ApiError::store)?;
        let full = page.len() == STORE_PAGE as usize;
        for row in page {
            if rows.len() == limit as usize {
                more = true;
                break;
            }
            filter.after_seq = row.seq;
            rows.push(row.into());
        }
        if more || !full {
            break;
        }
    }
    let format = AuditFormat::of(&headers);
    let mut response = render(format, &rows).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    if more && let Some(last) = rows.last() {
        response
            .headers_mut()
            .insert("x-agentd-next-after", HeaderValue::from(last.seq));
    }
    Ok(response)
}

#[utoipa::path(
    get,
    path = "/v1/audit/verify",
    tag = "governance",
    summary = "Verify the audit log's hash chain and name the first broken row; admins",
    responses(
        (status = 200, description = "What the walk found (`ok`, and `broken` when it is not)", body = Verification),
        ErrorBody,
    ),
)]
pub async fn verify_audit(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    require_admin(&caller)?;
    let verification = runtime.verify_audit().await.map_err(ApiError::store)?;
    Ok(axum::Json(verification).into_response())
}

/// Records an admin's successful read of another user's data: a `GET` of a route under
/// `/api/{user_id}/` for a user not the admin's own, or any `GET` an admin makes acting for a
/// user (`x-agentd-user`).
pub async fn audit_admin_reads(
    State(runtime): State<Arc<Runtime>>,
    request: Request,
    next: Next,
) -> Response {
    let Some((caller, user, route)) = admin_read_of(&request) else {
        return next.run(request).await;
    };
    let headers = request.headers().clone();
    let response = next.run(request).await;
    if response.status().is_success() {
        let event = AuditEvent::new(
            actor_of(&caller, &headers),
            AuditAction::AdminRead,
            format!("user:{user}"),
        )
        .with_details(serde_json::json!({ "route": route }));
        runtime.audit(event).await;
    }
    response
}

/// The admin, the user whose data it reads and the route template, when `request` is such a
/// read.
fn admin_read_of(request: &Request) -> Option<(Caller, String, String)> {
    if request.method() != Method::GET {
        return None;
    }
    let caller = request.extensions().get::<Caller>()?;
    let route = request
        .extensions()
        .get::<MatchedPath>()?
        .as_str()
        .to_string();
    if !caller.admin {
        return None;
    }
    if caller.acted_by.is_some() {
        let user = caller.user_id.clone()?;
        return Some((caller.clone(), user, route));
    }
    let user = route
        .starts_with("/api/{user_id}")
        .then(|| request.uri().path().split('/').nth(2).map(str::to_string))??;
    let own = caller.user_id.as_deref() == Some(user.as_str());
    // A server without keys has one person: nobody else's data to read.
    (!own && caller.key_id.is_some()).then(|| (caller.clone(), user, route))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=SUM(A1)"), "'=SUM(A1)");
    }

    #[test]
    fn times_are_rfc3339_or_days() {
        assert!(parse_time("2026-01-31", "from").is_ok());
        assert!(parse_time("2026-01-31T12:00:00Z", "from").is_ok());
        let error = parse_time("yesterday", "to").err();
        assert_eq!(error.and_then(|e| e.param), Some("to".to_string()));
        assert!(time_range(Some("2026-02-01"), Some("2026-01-01")).is_ok());
    }
}
