//! Operational routes: liveness, readiness (the store answers) and the Prometheus scrape.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::json;
use tracing::warn;

use super::error::ApiError;
use crate::runtime::Runtime;

pub async fn health() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

pub async fn ready(State(runtime): State<Arc<Runtime>>) -> Result<impl IntoResponse, ApiError> {
    runtime.store().ping().await.map_err(|error| {
        warn!(%error, "readiness check: store unreachable");
        let mut unavailable = ApiError::upstream("The store is not reachable");
        unavailable.status = axum::http::StatusCode::SERVICE_UNAVAILABLE;
        unavailable.code = "overloaded";
        unavailable
    })?;
    Ok(axum::Json(json!({"status": "ready"})))
}

pub async fn metrics(State(runtime): State<Arc<Runtime>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        runtime.metrics().render(),
    )
}
