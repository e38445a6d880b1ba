//! The MCP headend at `/mcp` (SPEC §9.3): every agent the caller's key may use is an MCP tool,
//! served over streamable HTTP by rmcp's server side. Requests are served statelessly (no
//! session is kept between POSTs, whatever protocol version the client speaks), so a plain load
//! balancer in front of several replicas works.
//!
//! This module owns the translation only: `tools/list` from the agent registry, `tools/call`
//! through [`Runtime::start_run`] with the run's events turned into `notifications/progress`,
//! and `notifications/cancelled` turned into aborting the run. Auth is the router's: the
//! [`Caller`] the auth layer put on the HTTP request reaches the handler through rmcp's request
//! extensions.

mod calls;
mod modern;
mod param_headers;
mod progress;
mod subscriptions;
mod tasks_2025;
mod tools;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Extension, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tower::ServiceExt;

use super::auth::Caller;
use super::error::ApiError;
use crate::runtime::Runtime;
use calls::InFlightCalls;
use tools::AgentTools;

/// The `/mcp` service of one app: rmcp's streamable HTTP service and the calls in flight.
pub struct McpEndpoint {
    service: StreamableHttpService<AgentTools, LocalSessionManager>,
    calls: Arc<InFlightCalls>,
    body_limit: usize,
    runtime: Arc<Runtime>,
}

impl McpEndpoint {
    /// `loopback_hosts_only`: answer only requests whose `Host` is a loopback name (a keyless
    /// server, which listens on loopback); otherwise the keys guard the route and any host the
    /// operator's proxy sends is served.
    pub fn new(runtime: Arc<Runtime>, loopback_hosts_only: bool) -> Arc<Self> {
        let calls = Arc::new(InFlightCalls::default());
        let body_limit = runtime.config().server.request_body_limit_bytes;
        let keep_alive = runtime.config().server.keep_alive_seconds;
        let shared_calls = Arc::clone(&calls);
        let shared_runtime = Arc::clone(&runtime);
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_max_request_body_bytes(body_limit)
            .with_sse_keep_alive(Some(std::time::Duration::from_secs(keep_alive.max(1))));
        // rmcp's default allows loopback hosts only.
        let config = if loopback_hosts_only {
            config
        } else {
            config.disable_allowed_hosts()
        };
        let service = StreamableHttpService::new(
            move || {
                Ok(AgentTools::new(
                    Arc::clone(&shared_runtime),
                    Arc::clone(&shared_calls),
                ))
            },
            Arc::new(LocalSessionManager::default()),
            config,
        );
        Arc::new(Self {
            service,
            calls,
            body_limit,
            runtime,
        })
    }

    async fn serve(&self, mut request: Request) -> Response {
        accept_json_and_sse(&mut request);
        let request = match self.modern_or_rmcp(request).await {
            Ok(request) => request,
            Err(answered) => return answered,
        };
        let request = match self
            .calls
            .cancel_if_cancellation(request, self.body_limit)
            .await
        {
            Ok(request) => request,
            Err(response) => return response,
        };
        let response = match self.service.clone().oneshot(request).await {
            Ok(response) => response.map(Body::new),
            Err(never) => match never {},
        };
        in_agentd_error_shape(response).await
    }
}

impl McpEndpoint {
    /// Answers a 2026-07-28 message ([`modern`]) or a 2025-11-25 task message ([`tasks_2025`])
    /// here; hands any other on (rebuilt) to rmcp.
    async fn modern_or_rmcp(&self, request: Request) -> Result<Request, Response> {
        if request.method() != axum::http::Method::POST {
            return Ok(request);
        }
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, self.body_limit)
            .await
            .map_err(|_| ApiError::payload_too_large(Some(self.body_limit)).into_response())?;
        let message = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .filter(serde_json::Value::is_object);
        if let Some(message) = &message
            && !modern::is_modern(&parts.headers, message)
            && let Some(kind) = tasks_2025::TaskMessage::of(message)
        {
            let Some(caller) = parts.extensions.get::<Caller>() else {
                return Err(ApiError::internal().into_response());
            };
            return Err(tasks_2025::answer(&self.runtime, caller, kind, message.clone()).await);
        }
        if let Some(message) = message
            && modern::is_modern(&parts.headers, &message)
        {
            let Some(caller) = parts.extensions.get::<Caller>() else {
                return Err(ApiError::internal().into_response());
            };
            if message.get("method").and_then(|m| m.as_str()) == Some("notifications/cancelled") {
                return Ok(Request::from_parts(parts, Body::from(bytes)));
            }
            return Err(modern::answer(&self.runtime, caller, &parts.headers, message).await);
        }
        Ok(Request::from_parts(parts, Body::from(bytes)))
    }
}

/// A client that names neither JSON nor SSE (curl, a plain HTTP library) accepts what any MCP
/// client must: this server answers JSON, or SSE when progress comes first.
fn accept_json_and_sse(request: &mut Request) {
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let names_both = accept.contains("application/json") && accept.contains("text/event-stream");
    if !names_both {
        request.headers_mut().insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
    }
}

/// Most of an error's text kept when rmcp answers with plain text.
const ERROR_TEXT_BYTES: usize = 4096;

/// rmcp answers HTTP-level errors (a body that is no JSON-RPC message, a wrong content type) as
/// plain text; agentd's clients get its usual JSON error with the same status.
async fn in_agentd_error_shape(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), ERROR_TEXT_BYTES)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
        .unwrap_or_default();
    if status == StatusCode::UNSUPPORTED_MEDIA_TYPE && text.starts_with("fail to deserialize") {
        // JSON that is no MCP message: a JSON-RPC `Invalid Request`, as JSON-RPC answers it.
        let message = format!("Invalid Request: not an MCP message this server knows ({text})");
        return axum::Json(serde_json::json!({
            "jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}
        }))
        .into_response();
    }
    let mut error = if status.is_server_error() {
        ApiError::internal()
    } else {
        ApiError::invalid_request(format!("MCP: {text}"))
    };
    error.status = status;
    error.into_response()
}

#[utoipa::path(
    post,
    path = "/mcp",
    tag = "mcp",
    summary = "MCP streamable HTTP: tools/list and tools/call over the agents this key may use",
    request_body(content = Object, description = "One JSON-RPC message: initialize, tools/list, tools/call, notifications/cancelled (2025-06-18, 2025-11-25), tools/call with params.task, tasks/get, tasks/result, tasks/cancel (2025-11-25 Tasks); server/discover, tools/list, tools/call, tasks/get, tasks/update, tasks/cancel with the version in _meta and Mcp-Method / Mcp-Name headers (2026-07-28)", content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC answer, as JSON or as an SSE stream carrying progress notifications first", content(
            (Object = "application/json"),
            (crate::http::wire::ServerSentEvent = "text/event-stream"),
        )),
        (status = 202, description = "A notification was accepted"),
        (status = "default", description = "An error", body = crate::http::error::ErrorBody),
    ),
)]
/// Only POST is served: a stateless server keeps no session to end (DELETE) and opens no
/// standalone stream (GET); both answer 405, which MCP clients expect from such a server.
pub async fn post_mcp(
    Extension(endpoint): Extension<Arc<McpEndpoint>>,
    request: Request,
) -> Response {
    endpoint.serve(request).await
}
