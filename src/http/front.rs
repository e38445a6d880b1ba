//! The routes two headends share, dispatched here so that neither imports the other:
//! `GET /v1/models[/{model}]` answers in OpenAI's shape or, with `anthropic-version`,
//! Anthropic's; `POST /api/{user_id}/chat` is the native per-user chat or, asked for by its
//! header, query or `useChat`'s body, the AI SDK UI message stream.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::Response;

use super::anthropic::wire::{AnthropicModel, AnthropicModelList};
use super::auth::Caller;
use super::chat::wire::{ChatForm, ChatRequest, ChatResponse, UserPath};
use super::error::{ApiError, ApiPath, ErrorBody, read_body};
use super::openai::wire::{Model, ModelList};
use super::wire::ListObject;
use super::{ai_sdk, anthropic, chat, openai};
use crate::config::AgentSpec;
use crate::runtime::Runtime;
use serde::Serialize;
use utoipa::ToSchema;

/// `GET /v1/models`: OpenAI's list shape, or Anthropic's when the request has `anthropic-version`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ModelsResponse {
    OpenAi(ModelList),
    Anthropic(AnthropicModelList),
}

/// `GET /v1/models/{model}`: OpenAI's model shape, or Anthropic's with `anthropic-version`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum OneModel {
    OpenAi(Model),
    Anthropic(AnthropicModel),
}

/// Agents as models: OpenAI's list shape, or Anthropic's when the client sends `anthropic-version`.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "openai",
    summary = "The agents this key may use, as models (Anthropic's shape with `anthropic-version`)",
    params(("anthropic-version" = Option<String>, Header, description = "Any value selects Anthropic's list shape")),
    responses(
        (status = 200, description = "The agents as models", body = ModelsResponse),
        ErrorBody,
    ),
)]
pub async fn list_models(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
) -> axum::Json<ModelsResponse> {
    let agents: Vec<Arc<AgentSpec>> = runtime
        .agents()
        .iter()
        .filter(|agent| caller.may_use_agent(&agent.name))
        .cloned()
        .collect();
    if headers.contains_key("anthropic-version") {
        return axum::Json(ModelsResponse::Anthropic(anthropic::model_list(
            &runtime, &agents,
        )));
    }
    let data = agents
        .iter()
        .map(|agent| openai::model_of(&runtime, agent))
        .collect();
    axum::Json(ModelsResponse::OpenAi(ModelList {
        object: ListObject::List,
        data,
    }))
}

/// One agent as a model (`models.retrieve`): OpenAI's shape, or Anthropic's with
/// `anthropic-version`.
#[utoipa::path(
    get,
    path = "/v1/models/{model}",
    tag = "openai",
    summary = "One agent as a model (Anthropic's shape with `anthropic-version`)",
    params(
        ("model" = String, Path, description = "The agent's name"),
        ("anthropic-version" = Option<String>, Header, description = "Any value selects Anthropic's shape"),
    ),
    responses(
        (status = 200, description = "The agent as a model", body = OneModel),
        ErrorBody,
    ),
)]
pub async fn get_model(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(model): ApiPath<String>,
    headers: axum::http::HeaderMap,
) -> Result<axum::Json<OneModel>, ApiError> {
    let agent = runtime
        .agents()
        .get(&model)
        .filter(|agent| caller.may_use_agent(&agent.name))
        .ok_or_else(|| ApiError::unknown_model(&model))?;
    if headers.contains_key("anthropic-version") {
        return Ok(axum::Json(OneModel::Anthropic(anthropic::model_of(
            &runtime, &agent,
        ))));
    }
    Ok(axum::Json(OneModel::OpenAi(openai::model_of(
        &runtime, &agent,
    ))))
}

#[utoipa::path(
    post,
    path = "/api/{user_id}/chat",
    tag = "chat",
    summary = "Send a message in one of the user's conversations",
    params(UserPath),
    request_body(description = "The message as JSON, or as `multipart/form-data` with files (`file` parts)", content(
        (ChatRequest = "application/json"),
        (ChatForm = "multipart/form-data"),
    )),
    responses(
        (status = 200, description = "The answer; with `stream: true` the run's events (`id: 1, 2, 3…`, `event: run.started` … `run.finished`); with `Accept: text/x-ai-sdk-ui` or `?protocol=ai-sdk` the AI SDK UI message stream (which also takes `useChat`'s body `{id, messages, trigger}`)",
            content(
                (ChatResponse = "application/json"),
                (crate::http::wire::ServerSentEvent = "text/event-stream"),
            )),
        ErrorBody,
    ),
)]
pub async fn chat(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(UserPath { user_id }): ApiPath<UserPath>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    let by_header = ai_sdk::requested(request.headers(), request.uri().query());
    if chat::multipart::is_multipart(request.headers()) {
        if by_header {
            return Err(ApiError::invalid_request(
                "The AI SDK stream takes useChat's JSON body; send files as its `file` parts",
            ));
        }
        return chat::answer_form(runtime, caller, user_id, request).await;
    }
    let bytes = read_body(request, &()).await?;
    if by_header || ai_sdk::is_use_chat_body(&bytes) {
        return ai_sdk::chat(runtime, caller, user_id, &bytes).await;
    }
    chat::answer(runtime, caller, user_id, &bytes).await
}
