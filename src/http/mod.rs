//! The HTTP server: one router for every API family (SPEC §4), documented by `/openapi.json` as
//! it is built ([`routes()`]), the middleware that measures each request by route template, and
//! `serve` with graceful shutdown (the connections themselves are `connections`'s). Handlers only translate between wire formats and
//! [`SessionRequest`](crate::agent::SessionRequest)s.

mod a2a;
mod ag_ui;
mod ai_sdk;
mod anthropic;
pub(crate) mod audit;
pub mod auth;
mod chat;
mod connections;
mod data_rights;
pub mod error;
mod files;
mod front;
pub mod identity;
mod json_rpc;
mod layers;
mod mcp_server;
mod openai;
pub mod openapi;
mod ops;
mod responses;
mod runs;
mod schedules;
mod secrets;
mod shared;
mod sse;
mod usage;
mod web;
pub(crate) mod webhooks;
mod wire;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use tokio::net::TcpListener;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::runtime::Runtime;
use error::ApiError;

/// The whole application; tests serve it on port 0.
pub fn app(runtime: Arc<Runtime>) -> Router {
    runtime.set_task_renderer(a2a::push::notification_body);
    let router = Router::from(routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    with_layers(router, runtime)
}

/// The layers every route passes, innermost first: audit, authentication, the front door (the
/// request's span, body limit, metrics and log line, the request target's length), the request
/// id, the edge (an unusable client request id dropped, Anthropic's error shape), CORS
/// (outermost, so a browser's preflight is answered before authentication and every answer
/// carries its headers).
///
/// The layers that read the matched route (audit, authentication, the front door) are applied
/// to each route; the others wrap the routed router once. `Router::layer` wraps every route's
/// boxed service in another box, and axum clones a route's whole stack of boxes for each
/// request, and each `from_fn` clones the stack inside it again: with every layer on every
/// route that was ~76 allocations per request.
fn with_layers(router: Router<Arc<Runtime>>, runtime: Arc<Runtime>) -> Router {
    let server = &runtime.config().server;
    let body_limit = server.request_body_limit_bytes;
    let cors = layers::cors(&server.cors_origins);
    let authenticator = Arc::new(identity::Authenticator::new(&runtime));
    // Without keys (and not explicitly disabled) agentd serves loopback only, where a browser
    // page could reach `/mcp` through DNS rebinding: there its Host must be a loopback name.
    let loopback_hosts_only = !authenticator.is_enforced() && !runtime.config().auth.disabled;
    let mcp = mcp_server::McpEndpoint::new(runtime.clone(), loopback_hosts_only);
    let front_door = layers::FrontDoor {
        runtime: runtime.clone(),
        body_limit,
    };
    // Each `from_fn` clones the stack inside it for every request: the checks that need no
    // state of their own share one (`front_door`, `edge`).
    let routed = router
        .layer(axum::Extension(mcp))
        .layer(middleware::from_fn_with_state(
            runtime.clone(),
            audit::audit_admin_reads,
        ))
        .layer(middleware::from_fn_with_state(
            authenticator.clone(),
            identity::authenticate,
        ))
        .layer(axum::Extension(authenticator))
        .layer(middleware::from_fn_with_state(
            front_door,
            layers::front_door,
        ))
        .with_state(runtime);
    let outside_routing = tower::ServiceBuilder::new()
        .layer(middleware::from_fn(layers::edge))
        .layer(SetRequestIdLayer::new(
            layers::REQUEST_ID_HEADER,
            MakeRequestUuid,
        ))
        .layer(PropagateRequestIdLayer::new(layers::REQUEST_ID_HEADER))
        .layer(DefaultBodyLimit::max(body_limit))
        .service(routed);
    match cors {
        Some(cors) => Router::new().fallback_service(tower::Layer::layer(&cors, outside_routing)),
        None => Router::new().fallback_service(outside_routing),
    }
}

/// Every route, each registered with `routes!` from its `#[utoipa::path]` handler, so a route
/// is documented in `/openapi.json` as it is served. Add routes only here and only with
/// `routes!`: a plain `.route()` would serve an undocumented route, which the operations tests
/// find by comparing this router's paths with the document's.
pub fn routes() -> OpenApiRouter<Arc<Runtime>> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(ops::health))
        .routes(routes!(ops::ready))
        .routes(routes!(ops::metrics))
        .routes(routes!(openapi::openapi))
        .routes(routes!(front::list_models))
        .routes(routes!(front::get_model))
        .routes(routes!(openai::chat_completions))
        .routes(routes!(openai::completions::completions))
        .routes(routes!(anthropic::messages))
        .routes(routes!(anthropic::count_tokens))
        .routes(routes!(runs::list_agents))
        .routes(routes!(runs::get_agent))
        .routes(routes!(runs::create_run))
        .routes(routes!(runs::list::list_runs))
        .routes(routes!(runs::get_run))
        .routes(routes!(runs::run_events))
        .routes(routes!(runs::cancel_run))
        .routes(routes!(runs::budget::raise_budget))
        .routes(routes!(
            responses::create_response,
            responses::websocket::refuse_websocket
        ))
        .routes(routes!(responses::get_response, responses::delete_response))
        .routes(routes!(responses::cancel_response))
        .routes(routes!(responses::input_items))
        .routes(routes!(responses::compaction::count_input_tokens))
        .routes(routes!(responses::compaction::compact_response))
        .routes(routes!(responses::conversations::create_conversation))
        .routes(routes!(
            responses::conversations::get_conversation,
            responses::conversations::delete_conversation
        ))
        .routes(routes!(
            responses::conversations::conversation_items,
            responses::conversations::create_conversation_items
        ))
        .routes(routes!(responses::conversations::conversation_item))
        .routes(routes!(runs::approvals::decide_approval))
        .routes(routes!(runs::approvals::list_run_approvals))
        .routes(routes!(front::chat))
        .routes(routes!(chat::list_conversations))
        .routes(routes!(chat::list_approvals))
        .routes(routes!(chat::manage::withdraw_queued))
        .routes(routes!(webhooks::list_deliveries))
        .routes(routes!(
            schedules::create_schedule,
            schedules::list_schedules
        ))
        .routes(routes!(
            schedules::get_schedule,
            schedules::update_schedule,
            schedules::delete_schedule
        ))
        .routes(routes!(schedules::run_schedule_now))
        .routes(routes!(schedules::schedule_runs))
        .routes(routes!(
            chat::get_conversation,
            chat::delete_conversation,
            chat::manage::rename_conversation
        ))
        .routes(routes!(files::upload_file, files::list_files))
        .routes(routes!(files::get_file, files::delete_file))
        .routes(routes!(files::file_content))
        .routes(routes!(secrets::list_secrets))
        .routes(routes!(secrets::put_secret, secrets::delete_secret))
        .routes(routes!(ai_sdk::resume_stream))
        .routes(routes!(ag_ui::run))
        .routes(routes!(ag_ui::capabilities::capabilities))
        .routes(routes!(web::page))
        .routes(routes!(web::asset))
        .routes(routes!(web::markdown))
        .routes(routes!(identity::me::whoami))
        .routes(routes!(
            identity::keys::create_key,
            identity::keys::list_keys
        ))
        .routes(routes!(identity::keys::rotate_key))
        .routes(routes!(identity::keys::revoke_key))
        .routes(routes!(identity::well_known::protected_resource))
        .routes(routes!(identity::well_known::signin))
        .routes(routes!(mcp_server::post_mcp))
        .routes(routes!(a2a::server_card))
        .routes(routes!(a2a::agent_card))
        .routes(routes!(a2a::rpc))
        .routes(routes!(a2a::rest::message_send))
        .routes(routes!(a2a::rest::message_stream))
        .routes(routes!(a2a::rest::list_tasks))
        .routes(routes!(a2a::rest::read_task, a2a::rest::act_on_task))
        .routes(routes!(a2a::rest::extended_card))
        .routes(routes!(
            a2a::rest::create_push_config,
            a2a::rest::list_push_configs
        ))
        .routes(routes!(
            a2a::rest::get_push_config,
            a2a::rest::delete_push_config
        ))
        .routes(routes!(audit::list_audit))
        .routes(routes!(audit::verify_audit))
        .routes(routes!(usage::usage))
        .routes(routes!(data_rights::export_user))
        .routes(routes!(data_rights::erase_user))
}

/// Serves until `shutdown` resolves and the runs have drained (answering meanwhile), then stops
/// accepting, closes idle connections and gives busy ones a short grace before closing them.
pub async fn serve(
    listener: TcpListener,
    runtime: Arc<Runtime>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open_files = connections::raise_open_file_limit();
    let limits = connections::ConnectionLimits::from_config(&runtime.config().server, open_files);
    tracing::debug!(?limits, open_files, "connection limits");
    let draining = runtime.clone();
    // Keep answering while the runs drain: `/ready` and new runs get 503 with Retry-After, so a
    // load balancer moves clients on; then stop accepting. Open streams have ended with their
    // runs, and followers are told the server stops.
    let drained = async move {
        shutdown.await;
        draining.drain().await;
        draining.stop_followers();
    };
    connections::serve(listener, app(runtime), limits, drained).await;
    Ok(())
}

async fn not_found() -> ApiError {
    ApiError::not_found("No such route; GET /openapi.json and the README describe the API")
}

async fn method_not_allowed() -> ApiError {
    let mut error = ApiError::invalid_request("Method not allowed on this route");
    error.status = axum::http::StatusCode::METHOD_NOT_ALLOWED;
    error
}
