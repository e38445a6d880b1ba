//! The layers around every route: CORS from `server.corsOrigins`, the request id
//! (`x-request-id` taken from the client when usable, else made; always returned), and the
//! front door ([`front_door`]): the request's span, which carries the request id, method, route
//! template and key id onto every log line and span the request causes (its sessions' too), the
//! body and target limits, and the one log line per request, which also feeds the metrics
//! (their `method` label folds methods outside HTTP's standard ones into `other`:
//! [`method_label`]); and the edge ([`edge`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::RequestId;
use tracing::{Instrument, Span, field, info_span};

use crate::config::cors::CorsOrigin;
use crate::http::error::ApiError;
use crate::runtime::Runtime;

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

/// 414 `uri_too_long` (JSON) for a request target longer than [`MAX_URI_BYTES`].
fn refuse_long_uri(request: &Request) -> Option<Response> {
    let length = request
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    (length > MAX_URI_BYTES).then(|| ApiError::uri_too_long(length, MAX_URI_BYTES).into_response())
}

/// Drops a client's `x-request-id` that is too long or not printable ASCII, so one is made in
/// its place instead of a hostile value reaching every log line.
fn drop_unusable_request_id(request: &mut Request) {
    let usable = request.headers().get(&REQUEST_ID_HEADER).map(|value| {
        let bytes = value.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= MAX_REQUEST_ID_LEN
            && bytes.iter().all(|b| b.is_ascii_graphic())
    });
    if usable == Some(false) {
        request.headers_mut().remove(&REQUEST_ID_HEADER);
    }
}

/// The outermost layer inside CORS: drops an unusable client request id (so the request id
/// layer makes one) and puts the errors of Anthropic's routes in Anthropic's shape.
pub async fn edge(mut request: Request, next: Next) -> Response {
    drop_unusable_request_id(&mut request);
    crate::http::anthropic::errors_in_anthropic_shape(request, next).await
}

/// What the front door needs: the runtime (metrics) and the body limit.
#[derive(Clone)]
pub struct FrontDoor {
    pub runtime: Arc<Runtime>,
    pub body_limit: usize,
}

/// One layer for the checks and records every request passes once its id is known: runs the
/// rest in the request's span ([`request_span`]), so every log line and span it causes carries
/// the request's fields (the response body is written outside it: a streamed frame costs no
/// span entry and exit); refuses a declared body over the limit (413); counts and times the
/// request by route template and writes its one log line; refuses a request target over
/// [`MAX_URI_BYTES`] (414, counted).
pub async fn front_door(State(door): State<FrontDoor>, request: Request, next: Next) -> Response {
    let span = request_span(&request);
    async move {
        if let Some(refused) = refuse_oversized_body(&request, door.body_limit) {
            return refused;
        }
        observe_request(&door.runtime, request, next).await
    }
    .instrument(span)
    .await
}

/// 413 for a declared `Content-Length` over `limit`, before the body is read. Uploads (and chat
/// messages sent as a form with files) stream into the store under `limits.attachments`
/// instead.
fn refuse_oversized_body(request: &Request, limit: usize) -> Option<Response> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    (declared.is_some_and(|length| length > limit) && !streams_into_the_store(request))
        .then(|| ApiError::payload_too_large(Some(limit)).into_response())
}

/// A request whose body is read as a stream under the attachment limits: `POST /v1/files`, and
/// `POST /api/{user_id}/chat` as `multipart/form-data`.
fn streams_into_the_store(request: &Request) -> bool {
    if request.method() != Method::POST {
        return false;
    }
    let path = request.uri().path();
    if path == crate::http::files::UPLOAD_PATH {
        return true;
    }
    let user_chat = path
        .strip_prefix("/api/")
        .and_then(|rest| rest.strip_suffix("/chat"))
        .is_some_and(|user| !user.is_empty() && !user.contains('/'));
    user_chat && crate::http::chat::multipart::is_multipart(request.headers())
}

/// Counts and times the request by route template (never the raw path), and writes its one log
/// line: status and latency here, method, route, request id and key id from the request's span.
async fn observe_request(runtime: &Runtime, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let method = method_label(request.method());
    let response = match refuse_long_uri(&request) {
        Some(refused) => refused,
        None => next.run(request).await,
    };
    let elapsed = started.elapsed();
    let metrics = runtime.metrics();
    metrics
        .http_requests_total
        .with_label_values(&[&route, method, response.status().as_str()])
        .inc();
    metrics
        .http_request_duration_seconds
        .with_label_values(&[&route, method])
        .observe(elapsed.as_secs_f64());
    tracing::info!(
        status = response.status().as_u16(),
        latency_ms = elapsed.as_micros() as f64 / 1000.0,
        "request"
    );
    response
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
