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
string_constant!(ReadyStatus::Ready = "ready");

/// The process is up.
#[derive(Debug, Serialize, ToSchema)]
pub struct Liveness {
    pub status: OkStatus,
}

/// The process can serve: its store answers.
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
        (status = 503, description = "The store is not reachable (`overloaded`), or the server is draining (`shutting_down`)", body = ErrorBody),
    ),
)]
pub async fn ready(State(runtime): State<Arc<Runtime>>) -> Result<axum::Json<Readiness>, ApiError> {
    // Draining: a load balancer must stop sending new clients here at once.
    if runtime.is_draining() {
        return Err(ApiError::shutting_down());
    }
    runtime.store().ping().await.map_err(|error| {
        warn!(%error, "readiness check: store unreachable");
        let mut unavailable = ApiError::upstream("The store is not reachable");
        unavailable.status = axum::http::StatusCode::SERVICE_UNAVAILABLE;
        unavailable.code = "overloaded";
        unavailable
    })?;
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
