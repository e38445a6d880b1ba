//! OpenAI's Conversations API over agentd's conversation store (SPEC §15): a `conv_…` is one
//! of the caller's conversations — the same object the chat API and the page list — and its
//! items are that conversation's stored messages. `POST /v1/responses` with `conversation`
//! continues it: the run reads its messages as history and stores the prompt and the answer.
//! Item ids are `item_<seq>` (a message, a tool result) and `item_<seq>_<n>` (the n-th call of
//! an assistant message).

use std::sync::Arc;

use axum::extract::{Extension, State};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::{input, user_key};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiJson, ApiPath, ApiQuery, ErrorBody, parse_json_body};
use crate::http::wire::{ListObject, string_constant};
use crate::runtime::Runtime;
use crate::store::{Conversation, NewConversation, NewMessage, StoredMessage};

/// The most items one create call adds (OpenAI's limit).
pub const MAX_ITEMS_PER_CREATE: usize = 20;
/// The most items one page lists, and how many when `limit` is left out.
const MAX_PAGE: u32 = 100;
const DEFAULT_PAGE: u32 = 20;
/// The most `metadata` pairs (OpenAI's limit), kept as the title's source only.
const MAX_METADATA_PAIRS: usize = 16;

string_constant!(ConversationKind::Conversation = "conversation");
string_constant!(DeletedConversationKind::Deleted = "conversation.deleted");

/// `POST /v1/conversations`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CreateConversation {
    /// Up to 20 items to start with, as `POST /v1/responses` takes them in `input`.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>, max_items = 20)]
    pub items: Option<Vec<Value>>,
    /// Up to 16 string pairs; `title` names the conversation in the page's list.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

/// `POST /v1/conversations/{conversation_id}/items`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateItems {
    /// 1 to 20 items.
    #[schema(value_type = Vec<Object>, min_items = 1, max_items = 20)]
    pub items: Vec<Value>,
}

/// A conversation.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationObject {
    pub id: String,
    pub object: ConversationKind,
    /// Unix seconds.
    pub created_at: i64,
    /// `{"title": …}` when the conversation has one.
    #[schema(value_type = Object)]
    pub metadata: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedConversation {
    pub id: String,
    pub object: DeletedConversationKind,
    pub deleted: bool,
}

/// A page of items.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemList {
    pub object: ListObject,
    #[schema(value_type = Vec<Object>)]
    pub data: Vec<Value>,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
    pub has_more: bool,
}

/// Listing order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    Asc,
    #[default]
    Desc,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ConversationIdPath {
    /// The conversation's id.
    pub conversation_id: String,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ItemPath {
    pub conversation_id: String,
    /// `item_<seq>` or `item_<seq>_<n>`.
    pub item_id: String,
}

/// `GET …/items` query.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ItemsQuery {
    /// 1 to 100 (default 20).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `desc` (default, newest first) or `asc`.
    #[serde(default)]
    pub order: Option<Order>,
    /// List the items after this one, in `order`.
    #[serde(default)]
    pub after: Option<String>,
}

/// The conversation `conversation` names (`"conv_…"` or `{"id": …}`), checked to be the
/// caller's; `None` without one. Refuses it beside `previous_response_id`.
pub(super) async fn named_in(
    runtime: &Runtime,
    caller: &Caller,
    conversation: Option<&Value>,
    previous_response_id: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let id = match conversation {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(id)) => id.clone(),
        Some(Value::Object(fields)) => match fields.get("id") {
            Some(Value::String(id)) => id.clone(),
            _ => {
                return Err(
                    ApiError::invalid_request("`conversation.id` must be a string")
                        .with_param("conversation.id"),
                );
            }
        },
        Some(_) => {
            return Err(ApiError::invalid_request(
                "`conversation` must be a conversation id or `{\"id\": …}`",
            )
            .with_param("conversation"));
        }
    };
    if previous_response_id.is_some() {
        return Err(ApiError::invalid_request(
            "send `conversation` or `previous_response_id`, not both",
        )
        .with_param("conversation"));
    }
    owned(runtime, caller, &id, "conversation").await?;
    Ok(Some(id))
}

/// The caller's conversation `id`, or a 404 naming `param`.
async fn owned(
    runtime: &Runtime,
    caller: &Caller,
    id: &str,
    param: &str,
) -> Result<Conversation, ApiError> {
    runtime
        .conversation(&user_key(caller), id)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| {
            ApiError::not_found(format!("No conversation with id `{id}`")).with_param(param)
        })
}

fn object_of(conversation: &Conversation) -> ConversationObject {
    let metadata = match &conversation.title {
        Some(title) => json!({"title": title}),
        None => json!({}),
    };
    ConversationObject {
        id: conversation.id.clone(),
        object: ConversationKind::Conversation,
        created_at: conversation.created_at.timestamp(),
        metadata,
    }
}

/// `metadata.title`, after checking `metadata` is at most 16 string pairs.
fn title_of(metadata: Option<&Value>) -> Result<Option<String>, ApiError> {
    let pairs = match metadata {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(pairs)) => pairs,
        Some(_) => {
            return Err(
                ApiError::invalid_request("`metadata` must be an object of strings")
                    .with_param("metadata"),
            );
        }
    };
    if pairs.len() > MAX_METADATA_PAIRS {
        return Err(ApiError::invalid_request(format!(
            "`metadata` holds at most {MAX_METADATA_PAIRS} pairs; this one has {}",
            pairs.len()
        ))
        .with_param("metadata"));
    }
    if let Some((key, _)) = pairs.iter().find(|(_, value)| !value.is_string()) {
        return Err(
            ApiError::invalid_request(format!("`metadata.{key}` must be a string"))
                .with_param(format!("metadata.{key}")),
        );
    }
    match pairs.get("title").and_then(Value::as_str) {
        Some(title) => Ok(Some(
            crate::http::shared::titles::checked_title(title, "metadata.title")?.to_string(),
        )),
        None => Ok(None),
    }
}

/// Reads 1 to 20 items of `list` into messages to store.
fn new_messages(items: &[Value], list: &str) -> Result<Vec<NewMessage>, ApiError> {
    if items.len() > MAX_ITEMS_PER_CREATE {
        return Err(ApiError::invalid_request(format!(
            "`{list}` holds at most {MAX_ITEMS_PER_CREATE} items; this one has {}",
            items.len()
        ))
        .with_param(list));
    }
    let now = Utc::now();
    Ok(input::read_history(items, list)?
        .iter()
        .map(|message| NewMessage::from_chat(message, now))
        .collect())
}

/// Appends messages and answers them as the items they became.
async fn append(
    runtime: &Runtime,
    user: &str,
    conversation_id: &str,
    messages: &[NewMessage],
) -> Result<Vec<Value>, ApiError> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let seqs = runtime
        .append_to_conversation(user, conversation_id, messages)
        .await
        .map_err(ApiError::store)?;
    let now = Utc::now();
    Ok(seqs
        .iter()
        .zip(messages)
        .flat_map(|(seq, message)| {
            items_of(&StoredMessage {
                seq: *seq,
                role: message.role.clone(),
                content: message.content.clone(),
                tool_calls: message.tool_calls.clone(),
                tool_call_id: message.tool_call_id.clone(),
                reasoning: message.reasoning.clone(),
                created_at: now,
                attachments: message.attachments.clone(),
            })
        })
        .collect())
}

/// A stored message as Responses items: its text as a `message`, each call as a
/// `function_call`, a tool result as a `function_call_output`.
fn items_of(message: &StoredMessage) -> Vec<Value> {
    let id = format!("item_{}", message.seq);
    let text = message.content.clone().unwrap_or_default();
    match message.role.as_str() {
        "tool" => vec![json!({
            "type": "function_call_output",
            "id": id,
            "call_id": message.tool_call_id,
            "output": text,
            "status": "completed",
        })],
        "assistant" => {
            let mut items = Vec::new();
            if !text.is_empty() {
                items.push(json!({
                    "type": "message",
                    "id": id,
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }));
            }
            let calls = message
                .tool_calls
                .as_ref()
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (n, call) in calls.iter().enumerate() {
                items.push(json!({
                    "type": "function_call",
                    "id": format!("{id}_{n}"),
                    "call_id": call.get("id"),
                    "name": call.get("name"),
                    "arguments": call.get("arguments"),
                    "status": "completed",
                }));
            }
            items
        }
        role => vec![json!({
            "type": "message",
            "id": id,
            "role": role,
            "status": "completed",
            "content": [{"type": "input_text", "text": text}],
        })],
    }
}

/// Every item of the caller's conversation, oldest first.
async fn all_items(
    runtime: &Runtime,
    caller: &Caller,
    conversation_id: &str,
) -> Result<Vec<Value>, ApiError> {
    owned(runtime, caller, conversation_id, "conversation_id").await?;
    let messages = runtime
        .conversation_messages(&user_key(caller), conversation_id)
        .await
        .map_err(ApiError::store)?;
    Ok(messages.iter().flat_map(items_of).collect())
}

fn item_id(item: &Value) -> Option<String> {
    item.get("id").and_then(Value::as_str).map(str::to_string)
}

/// One page of `items` in `query`'s order, after its `after`.
fn page(mut items: Vec<Value>, query: &ItemsQuery) -> Result<ItemList, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(
            ApiError::invalid_request(format!("`limit` must be 1 to {MAX_PAGE}"))
                .with_param("limit"),
        );
    }
    if query.order.unwrap_or_default() == Order::Desc {
        items.reverse();
    }
    if let Some(after) = &query.after {
        let position = items
            .iter()
            .position(|item| item_id(item).as_deref() == Some(after.as_str()))
            .ok_or_else(|| {
                ApiError::not_found(format!("No item with id `{after}` in this conversation"))
                    .with_param("after")
            })?;
        items.drain(..=position);
    }
    let has_more = items.len() > limit as usize;
    items.truncate(limit as usize);
    Ok(ItemList {
        object: ListObject::List,
        first_id: items.first().and_then(item_id),
        last_id: items.last().and_then(item_id),
        has_more,
        data: items,
    })
}

#[utoipa::path(
    operation_id = "openai_create_conversation",
    post,
    path = "/v1/conversations",
    tag = "responses",
    summary = "Start a conversation (one of the caller's, listed with the chat API's)",
    request_body = CreateConversation,
    responses(
        (status = 200, description = "The conversation", body = ConversationObject),
        ErrorBody,
    ),
)]
pub async fn create_conversation(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    body: axum::body::Bytes,
) -> Result<axum::Json<ConversationObject>, ApiError> {
    // The SDK sends no body when neither `items` nor `metadata` is given.
    let body: CreateConversation = if body.iter().all(u8::is_ascii_whitespace) {
        CreateConversation::default()
    } else {
        parse_json_body(&body)?
    };
    let title = title_of(body.metadata.as_ref())?;
    let messages = new_messages(body.items.as_deref().unwrap_or_default(), "items")?;
    let user = user_key(&caller);
    let new = NewConversation {
        id: format!("conv_{}", uuid::Uuid::now_v7().simple()),
        user_id: user.clone(),
        // The agent is the `model` of each response in it.
        agent: String::new(),
        title,
        created_at: Utc::now(),
    };
    let conversation = runtime
        .create_conversation(&new)
        .await
        .map_err(ApiError::store)?;
    append(&runtime, &user, &conversation.id, &messages).await?;
    Ok(axum::Json(object_of(&conversation)))
}

#[utoipa::path(
    operation_id = "openai_get_conversation",
    get,
    path = "/v1/conversations/{conversation_id}",
    tag = "responses",
    summary = "One of the caller's conversations",
    params(ConversationIdPath),
    responses(
        (status = 200, description = "The conversation", body = ConversationObject),
        ErrorBody,
    ),
)]
pub async fn get_conversation(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ConversationIdPath { conversation_id }): ApiPath<ConversationIdPath>,
) -> Result<axum::Json<ConversationObject>, ApiError> {
    let conversation = owned(&runtime, &caller, &conversation_id, "conversation_id").await?;
    Ok(axum::Json(object_of(&conversation)))
}

#[utoipa::path(
    operation_id = "openai_delete_conversation",
    delete,
    path = "/v1/conversations/{conversation_id}",
    tag = "responses",
    summary = "Delete one of the caller's conversations and its items",
    params(ConversationIdPath),
    responses(
        (status = 200, description = "Deleted", body = DeletedConversation),
        ErrorBody,
    ),
)]
pub async fn delete_conversation(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ConversationIdPath { conversation_id }): ApiPath<ConversationIdPath>,
) -> Result<axum::Json<DeletedConversation>, ApiError> {
    let deleted = runtime
        .delete_conversation(&user_key(&caller), &conversation_id)
        .await
        .map_err(ApiError::store)?;
    if !deleted {
        return Err(
            ApiError::not_found(format!("No conversation with id `{conversation_id}`"))
                .with_param("conversation_id"),
        );
    }
    Ok(axum::Json(DeletedConversation {
        id: conversation_id,
        object: DeletedConversationKind::Deleted,
        deleted: true,
    }))
}

#[utoipa::path(
    operation_id = "openai_conversation_items",
    get,
    path = "/v1/conversations/{conversation_id}/items",
    tag = "responses",
    summary = "A page of a conversation's items",
    params(ConversationIdPath, ItemsQuery),
    responses(
        (status = 200, description = "The items", body = ItemList),
        ErrorBody,
    ),
)]
pub async fn conversation_items(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ConversationIdPath { conversation_id }): ApiPath<ConversationIdPath>,
    ApiQuery(query): ApiQuery<ItemsQuery>,
) -> Result<axum::Json<ItemList>, ApiError> {
    let items = all_items(&runtime, &caller, &conversation_id).await?;
    Ok(axum::Json(page(items, &query)?))
}

#[utoipa::path(
    operation_id = "openai_create_conversation_items",
    post,
    path = "/v1/conversations/{conversation_id}/items",
    tag = "responses",
    summary = "Add up to 20 items to a conversation",
    params(ConversationIdPath),
    request_body = CreateItems,
    responses(
        (status = 200, description = "The added items, in order", body = ItemList),
        ErrorBody,
    ),
)]
pub async fn create_conversation_items(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ConversationIdPath { conversation_id }): ApiPath<ConversationIdPath>,
    ApiJson(body): ApiJson<CreateItems>,
) -> Result<axum::Json<ItemList>, ApiError> {
    if body.items.is_empty() {
        return Err(ApiError::invalid_request("`items` must not be empty").with_param("items"));
    }
    let messages = new_messages(&body.items, "items")?;
    owned(&runtime, &caller, &conversation_id, "conversation_id").await?;
    let items = append(&runtime, &user_key(&caller), &conversation_id, &messages).await?;
    Ok(axum::Json(ItemList {
        object: ListObject::List,
        first_id: items.first().and_then(item_id),
        last_id: items.last().and_then(item_id),
        has_more: false,
        data: items,
    }))
}

#[utoipa::path(
    operation_id = "openai_conversation_item",
    get,
    path = "/v1/conversations/{conversation_id}/items/{item_id}",
    tag = "responses",
    summary = "One item of a conversation",
    params(ItemPath),
    responses(
        (status = 200, description = "The item", body = Object),
        ErrorBody,
    ),
)]
pub async fn conversation_item(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(ItemPath {
        conversation_id,
        item_id: wanted,
    }): ApiPath<ItemPath>,
) -> Result<axum::Json<Value>, ApiError> {
    all_items(&runtime, &caller, &conversation_id)
        .await?
        .into_iter()
        .find(|item| item_id(item).as_deref() == Some(wanted.as_str()))
        .map(axum::Json)
        .ok_or_else(|| {
            ApiError::not_found(format!("No item with id `{wanted}` in this conversation"))
                .with_param("item_id")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Vec<Value> {
        (1..=n)
            .map(|seq| json!({"id": format!("item_{seq}")}))
            .collect()
    }

    #[test]
    fn pages_are_newest_first_by_default_and_continue_after_an_item() {
        let query = ItemsQuery {
            limit: Some(2),
            ..ItemsQuery::default()
        };
        let first = page(items(5), &query).expect("page");
        assert_eq!(first.first_id.as_deref(), Some("item_5"));
        assert!(first.has_more);
        let next = page(
            items(5),
            &ItemsQuery {
                after: first.last_id,
                ..query
            },
        )
        .expect("page");
        assert_eq!(next.first_id.as_deref(), Some("item_3"));
    }

    #[test]
    fn the_page_limit_is_checked_at_and_past_its_bounds() {
        let at = |limit| {
            page(
                items(3),
                &ItemsQuery {
                    limit: Some(limit),
                    ..ItemsQuery::default()
                },
            )
        };
        assert!(at(1).is_ok());
        assert!(at(MAX_PAGE).is_ok());
        assert_eq!(at(0).expect_err("0").param.as_deref(), Some("limit"));
        assert_eq!(
            at(MAX_PAGE + 1).expect_err("101").param.as_deref(),
            Some("limit")
        );
    }

    #[test]
    fn twenty_items_are_taken_and_twenty_one_refused() {
        let message = json!({"type": "message", "role": "user", "content": "hi"});
        assert_eq!(
            new_messages(&vec![message.clone(); MAX_ITEMS_PER_CREATE], "items")
                .expect("20")
                .len(),
            MAX_ITEMS_PER_CREATE
        );
        let refused =
            new_messages(&vec![message; MAX_ITEMS_PER_CREATE + 1], "items").expect_err("21");
        assert_eq!(refused.param.as_deref(), Some("items"));
    }

    #[test]
    fn a_stored_answer_with_calls_is_a_message_and_function_calls() {
        let stored = StoredMessage {
            seq: 4,
            role: "assistant".into(),
            content: Some("let me look".into()),
            tool_calls: Some(json!([{"id": "c1", "name": "search", "arguments": "{}"}])),
            tool_call_id: None,
            reasoning: None,
            created_at: Utc::now(),
            attachments: None,
        };
        let items = items_of(&stored);
        assert_eq!(items[0]["id"], "item_4");
        assert_eq!(items[1]["type"], "function_call");
        assert_eq!(items[1]["id"], "item_4_0");
    }
}
