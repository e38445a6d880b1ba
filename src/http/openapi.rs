//! `GET /openapi.json`: the OpenAPI 3.1 document, generated from the wire types and the
//! `#[utoipa::path]` of every handler that [`super::routes()`] registers, so what is served is what
//! is documented. This module adds what no handler knows: the title, the tags, the security
//! schemes (public paths from the auth layer's list) and the streamed frames' schemas.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa::openapi::InfoBuilder;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi as Document, SecurityRequirement};

use super::anthropic::wire::{AnthropicErrorBody, StreamEvent};
use super::error::ErrorBody;
use super::identity::PUBLIC_PATHS;
use super::openai::wire::ChatCompletionChunk;
use super::responses::wire::ResponseStreamFrame;

/// What the handlers cannot say about themselves: tags, the schemas of streamed frames (no
/// handler returns them as a type) and of the error bodies (handlers name them by reference).
#[derive(OpenApi)]
#[openapi(
    tags(
        (name = "operations", description = "Liveness, readiness, metrics and this document; public"),
        (name = "openai", description = "OpenAI compatibility: agents as models, Chat Completions, legacy Completions"),
        (name = "anthropic", description = "Anthropic Messages compatibility"),
        (name = "runs", description = "Agents and their runs, with resumable SSE events"),
        (name = "chat", description = "Per-user chat: conversations kept by the server"),
        (name = "schedules", description = "Schedules: runs on a cron in a named time zone (SPEC §13)"),
        (name = "webhooks", description = "Webhooks: the outbox of signed messages to receivers (SPEC §13)"),
        (name = "files", description = "The Files API in OpenAI's shape: per-user uploads (stored once by SHA-256) that messages attach by `file_id`"),
        (name = "secrets", description = "Per-user tool credentials: write-only secrets that tool headers read as `${caller.secret.NAME}`"),
        (name = "ag-ui", description = "AG-UI: agents for CopilotKit and other AG-UI frontends"),
        (name = "web", description = "The web page at `/` (public) and the calls it needs"),
        (name = "responses", description = "OpenAI Responses: stored, resumable responses with client tools"),
        (name = "governance", description = "Usage reports, the hash-chained audit log, run budgets and users' data rights"),
    ),
    components(schemas(ChatCompletionChunk, StreamEvent, ResponseStreamFrame, ErrorBody, AnthropicErrorBody, crate::audit::AuditAction, crate::http::responses::conversations::Order))
)]
pub struct ApiDoc;

const DESCRIPTION: &str = "Runs LLM agents over HTTP: OpenAI and Anthropic compatible, agent runs with resumable SSE events, per-user chat. No string of a request may contain U+0000 (NUL): such a request is refused with 400 naming the field. An admin key acts for a user with the header `x-agentd-user: USER` on any route (the request is then that user's; its runs record the admin as `acted_by`); another key may name only its own user there.";

/// The whole document: the router's operations, then info, security and public paths.
pub fn document() -> Document {
    let mut document = super::routes().into_openapi();
    document.info = InfoBuilder::new()
        .title("agentd")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(DESCRIPTION))
        .build();
    let components = document.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    components.add_security_scheme(
        "apiKey",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))),
    );
    let no_scopes = Vec::<String>::new;
    document.security = Some(vec![
        SecurityRequirement::new("bearer", no_scopes()),
        SecurityRequirement::new("apiKey", no_scopes()),
    ]);
    for path in PUBLIC_PATHS {
        let Some(item) = document.paths.paths.get_mut(path) else {
            continue;
        };
        for operation in [&mut item.get, &mut item.post].into_iter().flatten() {
            // An empty list overrides the document's requirement: no key needed.
            operation.security = Some(Vec::new());
        }
    }
    document
}

#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    summary = "This document",
    responses((status = 200, description = "The OpenAPI 3.1 document of every route", body = Object)),
)]
pub async fn openapi() -> Response {
    static DOCUMENT: LazyLock<Option<String>> =
        LazyLock::new(|| serde_json::to_string(&document()).ok());
    match DOCUMENT.as_deref() {
        Some(text) => ([(header::CONTENT_TYPE, "application/json")], text).into_response(),
        None => super::error::ApiError::internal().into_response(),
    }
}
