//! The WebSocket mode of `/v1/responses` (SPEC §15), refused the way Codex expects: Codex,
//! pointed at an OpenAI base URL, first opens a WebSocket on `GET /v1/responses`. Any refusal
//! but `426 Upgrade Required` makes it retry the socket six times (about 6.5 s) before it falls
//! back to HTTP; a 426 makes it fall back at once, to `POST /v1/responses`.

use axum::http::StatusCode;

use crate::http::error::{ApiError, ErrorBody};

/// The refusal's error code.
const WEBSOCKET_UNSUPPORTED: &str = "websocket_unsupported";

#[utoipa::path(
    get,
    path = "/v1/responses",
    tag = "responses",
    summary = "The Responses WebSocket mode: refused with 426, so clients use POST at once",
    responses(
        (status = 426, description = "No WebSocket mode: send the request with POST /v1/responses", body = ErrorBody),
    ),
)]
pub async fn refuse_websocket() -> ApiError {
    ApiError {
        status: StatusCode::UPGRADE_REQUIRED,
        code: WEBSOCKET_UNSUPPORTED,
        message: "agentd serves Responses over HTTP only: send POST /v1/responses".into(),
        param: None,
        retry_after_secs: None,
    }
}
