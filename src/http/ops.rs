//! Operational routes: liveness, readiness (the store answers) and the Prometheus scrape, with
//! the two small bodies they answer with. They are public: the auth layer lets them through.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Serialize;
use tracing::warn;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::wire::string_constant;
use crate::runtime::Runtime;

string_constant!(OkStatus::Ok = "ok");

/// How long `/ready` waits for the store before answering 503.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(800);
string_constant!(ReadyStatus::Ready = "ready");

/// The process is up.
#[derive(Debug, Serialize, ToSchema)]
pub struct Liveness {
    pub status: OkStatus,
}

/// The process can serve: its store answers and the run recorder can write.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    pub status: ReadyStatus,
}

#[utoipa::path(
    get,
    path = "/health",
    tag = "operations",
    summary = "Liveness",
    responses((status = 200, description = "The process is up", body = Liveness)),
)]
pub async fn health() -> axum::Json<Liveness> {
    axum::Json(Liveness {
        status: OkStatus::Ok,
    })
}

#[utoipa::path(
    get,
    path = "/ready",
    tag = "operations",
    summary = "Readiness: the store answers",
    responses(
        (status = 200, description = "The store answers", body = Readiness),
        (status = 503, description = "The store is not reachable or runs cannot be recorded (`store_unavailable`), or the server is draining (`shutting_down`)", body = ErrorBody),
    ),
)]
pub async fn ready(State(runtime): State<Arc<Runtime>>) -> Result<axum::Json<Readiness>, ApiError> {
    // Draining: a load balancer must stop sending new clients here at once.
    if runtime.is_draining() {
        return Err(ApiError::shutting_down());
    }
    // Answered within READY_TIMEOUT whatever the store does: a load balancer waits no longer.
    match tokio::time::timeout(READY_TIMEOUT, runtime.store_answers()).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            warn!(%error, "readiness check: store unreachable");
            return Err(ApiError::store_unavailable());
        }
        Err(_) => {
            warn!("readiness check: the store did not answer in time");
            return Err(ApiError::store_unavailable());
        }
    }
    if !runtime.is_storing() {
        warn!("readiness check: runs cannot be recorded");
        return Err(ApiError::store_unavailable());
    }
    Ok(axum::Json(Readiness {
        status: ReadyStatus::Ready,
    }))
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics (text format)",
    responses((status = 200, description = "Every metric in Prometheus' text format", content_type = "text/plain; version=0.0.4", body = String)),
)]
pub async fn metrics(State(runtime): State<Arc<Runtime>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        runtime.metrics().render(),
    )
}
