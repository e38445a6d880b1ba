//! The layers around every route: CORS from `server.corsOrigins`, the request id
//! (`x-request-id` taken from the client when usable, else made; always returned), and the
//! request's span ([`in_request_span`]), which carries the request id, method, route template
//! and key id onto every log line and span the request causes (its sessions' too). The one log line per request is
//! written by [`super::observe_request`], which also feeds the metrics (their `method` label
//! folds methods outside HTTP's standard ones into `other`: [`method_label`]).

use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::RequestId;
use tracing::{Instrument, Span, field, info_span};

use crate::config::cors::CorsOrigin;
use crate::http::error::ApiError;

pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client-sent request id that is kept; a longer one is replaced.
const MAX_REQUEST_ID_LEN: usize = 128;

/// How long a browser may cache a preflight answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(3600);

/// Every method a route serves (`PUT` stores a secret), so a page on an allowed origin can
/// call each; the CORS tests check this against every operation of `/openapi.json`.
const CORS_METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

/// What an MCP client sends on `/mcp` (and reads back, for the session id) beside the usual
/// headers.
const MCP_PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_SESSION_ID_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");

/// `None` when no origin is configured: browsers then keep to same-origin pages.
pub fn cors(origins: &[CorsOrigin]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow_origin = if origins.iter().any(CorsOrigin::is_any) {
        AllowOrigin::any()
    } else {
        // Each origin was checked when the config loaded; header values cannot fail for them.
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o.as_str()).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods(CORS_METHODS)
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                HeaderName::from_static("x-api-key"),
                HeaderName::from_static("last-event-id"),
                HeaderName::from_static("anthropic-version"),
                HeaderName::from_static(super::auth::ACT_FOR_HEADER),
                MCP_PROTOCOL_VERSION_HEADER,
                MCP_SESSION_ID_HEADER,
                REQUEST_ID_HEADER,
            ])
            .expose_headers([
                HeaderName::from_static("x-agentd-run-id"),
                HeaderName::from_static("x-agentd-conversation-id"),
                HeaderName::from_static(super::openai::params::WARNING_HEADER),
                MCP_SESSION_ID_HEADER,
                REQUEST_ID_HEADER,
                header::RETRY_AFTER,
            ])
            .max_age(PREFLIGHT_MAX_AGE),
    )
}

/// The longest request target (path and query) agentd reads, in bytes. Hyper itself refuses
/// targets past 65,534 bytes (and heads past its buffer) before any layer runs; the
/// connections put those answers in the JSON error shape too (`connections::parse_errors`).
pub const MAX_URI_BYTES: usize = 16 * 1024;

/// Answers 414 `uri_too_long` (JSON) for a request target longer than [`MAX_URI_BYTES`].
pub async fn refuse_long_uri(request: Request, next: Next) -> Response {
    let length = request
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    if length > MAX_URI_BYTES {
        return ApiError::uri_too_long(length, MAX_URI_BYTES).into_response();
    }
    next.run(request).await
}

/// Drops a client's `x-request-id` that is too long or not printable ASCII, so one is made in
/// its place instead of a hostile value reaching every log line.
pub async fn drop_unusable_request_id(mut request: Request, next: Next) -> Response {
    let usable = request.headers().get(&REQUEST_ID_HEADER).map(|value| {
        let bytes = value.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= MAX_REQUEST_ID_LEN
            && bytes.iter().all(|b| b.is_ascii_graphic())
    });
    if usable == Some(false) {
        request.headers_mut().remove(&REQUEST_ID_HEADER);
    }
    next.run(request).await
}

/// Runs the request's handler in its span ([`request_span`]), so every log line and span it
/// causes carries the request's fields. The response body is written outside it: a streamed
/// frame costs no span entry and exit (nothing is logged while a body is written).
pub async fn in_request_span(request: Request, next: Next) -> Response {
    let span = request_span(&request);
    next.run(request).instrument(span).await
}

/// The request's span: request id, method and route template now, the key id once the key is
/// checked ([`record_key_id`]).
pub fn request_span(request: &Request) -> Span {
    let request_id = request
        .extensions()
        .get::<RequestId>()
        .and_then(|id| id.header_value().to_str().ok())
        .unwrap_or("");
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    let span = info_span!(
        "request",
        otel.name = field::Empty,
        otel.kind = field::Empty,
        request_id,
        method = request.method().as_str(),
        route,
        key_id = field::Empty,
    );
    crate::telemetry::genai::name_for_export(
        &span,
        format_args!("{} {route}", request.method()),
        "server",
    );
    // A caller's W3C trace context makes this request part of its trace.
    crate::telemetry::genai::adopt_http_parent(&span, request.headers());
    span
}

/// The `method` label of the HTTP metrics: a standard method by its name, any other `other`.
/// Hyper accepts any token as a method, so labelling by the method sent would let anyone,
/// without a key, add a metric series per invented method.
pub fn method_label(method: &Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "other",
    }
}

/// Names the key that authenticated the request on its span (never the key itself).
pub fn record_key_id(key_id: &str) {
    Span::current().record("key_id", key_id);
}
