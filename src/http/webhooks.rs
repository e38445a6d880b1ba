//! Webhooks over HTTP (SPEC §13): `GET /v1/webhooks/deliveries` lists the outbox (admins see
//! every message, a user's key that user's), and the `webhook: {url}` a run takes, checked by
//! the address guard before the run starts.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Caller;
use super::error::{ApiError, ApiQuery, ErrorBody};
use super::wire::ListObject;
use crate::outbound::{GuardedClient, OutboundPolicy};
use crate::runtime::Runtime;
use crate::store::Delivery;

/// A run's own webhook receiver.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunWebhook {
    /// An http(s) URL the server may reach (not a loopback, private or link-local address
    /// unless `webhookDelivery.allowPrivateAddresses`).
    pub url: String,
}

/// The URL of a run's webhook, once the address guard takes it and the server can sign it.
pub fn checked_webhook(
    runtime: &Runtime,
    webhook: Option<RunWebhook>,
) -> Result<Option<String>, ApiError> {
    let Some(webhook) = webhook else {
        return Ok(None);
    };
    let delivery = &runtime.config().webhook_delivery;
    if delivery.secret.is_none() {
        return Err(ApiError::invalid_request(
            "This server signs no per-run webhooks: set `webhookDelivery.secret` in its config",
        )
        .with_param("webhook"));
    }
    let policy = OutboundPolicy {
        allow_private: delivery.allow_private_addresses,
        timeout: std::time::Duration::from_secs(delivery.timeout_seconds),
        max_bytes: 0,
    };
    let guard = GuardedClient::new(policy).map_err(|_| ApiError::internal())?;
    guard.check_url(&webhook.url).map_err(|error| {
        ApiError::invalid_request(format!("`webhook.url`: {error}")).with_param("webhook.url")
    })?;
    Ok(Some(webhook.url))
}

/// Paging of `GET /v1/webhooks/deliveries`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// How many, newest first: 1 to 1000; 100 by default.
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// One message of the outbox.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryView {
    /// The `webhook-id`, the same on every attempt.
    pub id: String,
    pub url: String,
    pub event: String,
    /// `pending`, `delivered` or `failed` (retried for 24 h without a 2xx).
    pub status: &'static str,
    pub attempts: i64,
    #[schema(required)]
    pub run_id: Option<String>,
    /// The receiver's HTTP status on the last attempt.
    #[schema(required)]
    pub last_status: Option<i64>,
    #[schema(required)]
    pub last_error: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339: the next attempt of a pending message.
    pub next_attempt_at: String,
    #[schema(required)]
    pub delivered_at: Option<String>,
}

impl From<Delivery> for DeliveryView {
    fn from(delivery: Delivery) -> Self {
        Self {
            id: delivery.id,
            url: delivery.url,
            event: delivery.event,
            status: delivery.status.as_str(),
            attempts: delivery.attempts,
            run_id: delivery.run_id,
            last_status: delivery.last_status,
            last_error: delivery.last_error,
            created_at: delivery.created_at.to_rfc3339(),
            next_attempt_at: delivery.next_attempt_at.to_rfc3339(),
            delivered_at: delivery.delivered_at.map(|at| at.to_rfc3339()),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    pub object: ListObject,
    pub data: Vec<DeliveryView>,
}

#[utoipa::path(
    get,
    path = "/v1/webhooks/deliveries",
    tag = "webhooks",
    summary = "Webhook messages and how their delivery went, newest first",
    params(DeliveriesQuery),
    responses(
        (status = 200, description = "The messages (an admin's: all; a user's key: that user's)", body = DeliveryList),
        ErrorBody,
    ),
)]
pub async fn list_deliveries(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiQuery(query): ApiQuery<DeliveriesQuery>,
) -> Result<Response, ApiError> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(
            ApiError::invalid_request("`limit` must be between 1 and 1000").with_param("limit"),
        );
    }
    let user = match (&caller.user_id, caller.admin && caller.acted_by.is_none()) {
        (_, true) => None,
        (Some(user), false) => Some(user.as_str()),
        (None, false) => {
            return Err(ApiError::forbidden(
                "Only admins and user keys may list webhook deliveries",
            ));
        }
    };
    let deliveries = runtime
        .webhook_deliveries(user, limit)
        .await
        .map_err(ApiError::store)?;
    Ok(axum::Json(DeliveryList {
        object: ListObject::List,
        data: deliveries.into_iter().map(DeliveryView::from).collect(),
    })
    .into_response())
}
