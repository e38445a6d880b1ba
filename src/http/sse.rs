//! Server-sent-event responses shared by every streaming route: keep-alive comments every
//! `server.keepAliveSeconds` (`: ping`), `X-Accel-Buffering: no` so proxies do not buffer, and
//! never an `Err` item (errors travel as events, so a connection is never dropped mid-stream).

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;

use crate::config::ServerConfig;

pub fn sse_response(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    server: &ServerConfig,
) -> Response {
    let keep_alive = Duration::from_secs(server.keep_alive_seconds.max(1));
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("ping"))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
