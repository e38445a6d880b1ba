//! Server-sent-event responses shared by every streaming route: keep-alive comments every
//! `server.keepAliveSeconds` (`: ping`), `X-Accel-Buffering: no` so proxies do not buffer, the
//! stream counted in `sse_streams_active` while it is open, and never an `Err` item (errors
//! travel as events, so a connection is never dropped mid-stream).

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};

use crate::runtime::Runtime;
use crate::telemetry::GaugeGuard;

pub fn sse_response(
    runtime: &Runtime,
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> Response {
    let open = GaugeGuard::new(runtime.metrics().sse_streams_active.clone());
    // The guard lives as long as the stream: axum drops the stream when the client leaves.
    let events = events.map(move |event| {
        let _open = &open;
        event
    });
    let keep_alive = Duration::from_secs(runtime.config().server.keep_alive_seconds.max(1));
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("ping"))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Adds the `x-agentd-run-id` (and, for a conversation's run, `x-agentd-conversation-id`)
/// headers every run-starting route answers with.
pub fn with_run_headers(
    mut response: Response,
    run_id: &str,
    conversation_id: Option<&str>,
) -> Response {
    let headers = [
        ("x-agentd-run-id", Some(run_id)),
        ("x-agentd-conversation-id", conversation_id),
    ];
    for (name, value) in headers {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
