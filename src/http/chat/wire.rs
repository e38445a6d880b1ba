//! The wire format of per-user chat: the chat request and its answer, and a user's
//! conversations as a list and one with its messages. Types only; the handlers live in the
//! parent module.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::wire::ListObject;
use crate::store::{Conversation, StoredMessage, Turn};
use crate::vocabulary::result::UsageTotals;

/// The chat body, which the AI SDK mode takes too.
pub use crate::http::shared::chat_request::ChatRequest;

/// The `{user_id}` of a route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct UserPath {
    /// The user whose conversations these are: 1 to 128 letters, digits or `. _ @ + : -`, not
    /// `.` or `..` (letters and digits of any script are accepted; the pattern shows ASCII).
    #[param(pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._@+:-]{1,128}$")]
    pub user_id: String,
}

/// The `{user_id}` and `{id}` of a conversation's route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ConversationPath {
    /// The user whose conversation it is (the same rule as in `UserPath`).
    #[param(pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._@+:-]{1,128}$")]
    pub user_id: String,
    /// The conversation's id.
    pub id: String,
}

/// `POST /api/{user_id}/chat` as `multipart/form-data`: the JSON body's fields as text parts,
/// and the files as `file` parts (repeat the part for several). Each file is stored as an
/// inline attachment is, under the same limits: 413 past `limits.attachments.maxFileBytes` or
/// `maxRequestBytes`, 415 for a media type not allowed, naming the part (`file[0]`, `file[1]`…).
#[derive(ToSchema)]
#[expect(
    dead_code,
    reason = "a schema only: the body is read as a multipart stream"
)]
pub struct ChatForm {
    /// The user's message; not empty or only white space.
    #[schema(pattern = "\\S")]
    pub message: String,
    /// As in the JSON body.
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 128,
        pattern = "^[A-Za-z0-9._:-]+$"
    )]
    pub conversation_id: Option<String>,
    /// As in the JSON body: the agent that answers; `chat` by default.
    #[schema(nullable = false)]
    pub agent: Option<String>,
    /// `true` for the run's events as SSE.
    #[schema(nullable = false)]
    pub stream: Option<bool>,
    /// As in the JSON body.
    #[schema(nullable = false)]
    pub on_disconnect: Option<crate::config::OnDisconnect>,
    /// As in the JSON body.
    #[schema(nullable = false, minimum = 1)]
    pub replace_from: Option<i64>,
    /// As in the JSON body.
    #[schema(nullable = false)]
    pub busy: Option<crate::config::BusyPolicy>,
    /// The files, each with its file name and declared content type (the bytes decide the type).
    #[schema(value_type = Option<Vec<String>>, format = Binary, nullable = false)]
    pub file: Option<Vec<Vec<u8>>>,
}

/// How the chat run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChatStatus {
    Completed,
    MaxIterationsReached,
    Error,
}

/// The answer to a chat message.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatResponse<'a> {
    pub conversation_id: &'a str,
    pub run_id: &'a str,
    /// The answer, or a message for the user when the run failed.
    pub response: String,
    pub status: ChatStatus,
    /// The turns the agent took.
    pub iterations: u32,
    /// The run's exit reason, e.g. `final_answer`.
    pub finish_reason: &'static str,
    /// A message for the user when the run failed, else null.
    #[schema(required)]
    pub error: Option<&'static str>,
    pub usage: ChatUsage,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChatUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

impl From<&UsageTotals> for ChatUsage {
    fn from(usage: &UsageTotals) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens,
        }
    }
}

/// Paging of `GET /api/{user_id}/conversations`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Page size, 1 to 1000; 50 by default.
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    #[serde(default)]
    #[param(pattern = "^[0-9]{1,15}\\|.+$")]
    pub before: Option<String>,
    /// Only conversations whose title contains this text (case-insensitive), 1 to 200
    /// characters.
    #[serde(default)]
    #[param(min_length = 1, max_length = 200)]
    pub q: Option<String>,
}

/// `PATCH /api/{user_id}/conversations/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationPatch {
    /// The new title: 1 to 200 characters, not only white space (trimmed).
    #[schema(min_length = 1, max_length = 200, pattern = "\\S")]
    pub title: String,
}

/// A page of the user's conversations, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationList<'a> {
    pub object: ListObject,
    pub data: Vec<ConversationSummary<'a>>,
    /// The `before` of the next page; null on the last page.
    #[schema(required)]
    pub next: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationSummary<'a> {
    pub id: &'a str,
    pub agent: &'a str,
    #[schema(required)]
    pub title: Option<&'a str>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339: when the last message was added.
    pub updated_at: String,
}

impl<'a> From<&'a Conversation> for ConversationSummary<'a> {
    fn from(conversation: &'a Conversation) -> Self {
        Self {
            id: &conversation.id,
            agent: &conversation.agent,
            title: conversation.title.as_deref(),
            created_at: conversation.created_at.to_rfc3339(),
            updated_at: conversation.updated_at.to_rfc3339(),
        }
    }
}

/// A conversation and its messages, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationDetail<'a> {
    #[serde(flatten)]
    pub conversation: ConversationSummary<'a>,
    pub messages: Vec<ConversationMessage<'a>>,
    /// Messages sent while the conversation was answering another, waiting for their turn in
    /// the order they are answered; not yet part of `messages`.
    pub queued: Vec<QueuedMessage<'a>>,
}

/// A message waiting for its conversation's turn (SPEC §13).
#[derive(Debug, Serialize, ToSchema)]
pub struct QueuedMessage<'a> {
    /// The run that answers it: withdraw the message with
    /// `DELETE /api/{user_id}/conversations/{id}/queue/{run_id}`.
    pub run_id: &'a str,
    pub content: &'a str,
    /// 1 for the next message answered, then 2, 3…
    pub position: usize,
    /// RFC 3339: when it was sent.
    pub created_at: String,
}

impl<'a> QueuedMessage<'a> {
    pub fn listed(turns: &'a [Turn]) -> Vec<Self> {
        turns
            .iter()
            .enumerate()
            .map(|(index, turn)| Self {
                run_id: &turn.run_id,
                content: &turn.message,
                position: index + 1,
                created_at: turn.created_at.to_rfc3339(),
            })
            .collect()
    }
}

/// The `{user_id}`, `{id}` and `{run_id}` of a queued message's route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct QueuedMessagePath {
    /// The user whose conversation it is (the same rule as in `UserPath`).
    #[param(pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._@+:-]{1,128}$")]
    pub user_id: String,
    /// The conversation's id.
    pub id: String,
    /// The run that would answer the queued message.
    pub run_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationMessage<'a> {
    /// 1, 2, 3… in the conversation: what `replace_from` of the chat request names.
    pub seq: i64,
    /// `system`, `user`, `assistant` or `tool`.
    pub role: &'a str,
    #[schema(required)]
    pub content: Option<&'a str>,
    /// RFC 3339.
    pub created_at: String,
    /// The message's files (SPEC §11): `name`, `media_type`, `bytes`, `sha256`, `file_id` each;
    /// their content is at `GET /v1/files/{file_id}/content`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub attachments: Option<&'a serde_json::Value>,
}

impl<'a> From<&'a StoredMessage> for ConversationMessage<'a> {
    fn from(message: &'a StoredMessage) -> Self {
        Self {
            seq: message.seq,
            role: &message.role,
            content: message.content.as_deref(),
            created_at: message.created_at.to_rfc3339(),
            attachments: message.attachments.as_ref(),
        }
    }
}
