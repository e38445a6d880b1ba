//! The per-user chat's request body (seeds/001), which both of the chat route's protocols take:
//! the native chat and, with its header, the AI SDK UI message stream.

use serde::Deserialize;
use utoipa::ToSchema;

/// `POST /api/{user_id}/chat`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    /// The user's message; not empty or only white space.
    #[schema(pattern = "\\S")]
    pub message: String,
    /// Continue this conversation of the user's, or start one under this id when the user
    /// has none; a new one with a server-chosen id starts without it.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128, pattern = "^[A-Za-z0-9._:-]+$")]
    pub conversation_id: Option<String>,
    /// The agent that answers; `chat` by default.
    #[serde(default)]
    pub agent: Option<String>,
    /// Answer with the run's events as SSE.
    #[serde(default)]
    pub stream: Option<bool>,
    /// What a client that leaves a streamed answer does to the run: `cancel` it, or let it
    /// `continue` (to resume with `GET /v1/runs/{id}/events` and `Last-Event-ID`); the server's
    /// `onDisconnect` by default.
    #[serde(default, alias = "onDisconnect")]
    pub on_disconnect: Option<crate::config::OnDisconnect>,
    /// Edit or regenerate: the `seq` of one of the conversation's user messages. That message
    /// and every message after it are removed from the stored history, and `message` is
    /// answered in its place (send the same text to regenerate the answer). Needs
    /// `conversation_id` (404 without); 404 for no such message, 409 for an answer's number,
    /// 409 `conversation_busy` while a run of the conversation is in progress.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub replace_from: Option<i64>,
    /// What this message does when the conversation is still answering another (SPEC §13):
    /// `enqueue` (answered after it), `reject` (409 `conversation_busy`), `interrupt` (the
    /// answer in progress ends with its partial answer stored) or `steer` (the answer in
    /// progress stops and one answer covers both); the agent's `busy` by default.
    #[serde(default)]
    pub busy: Option<crate::config::BusyPolicy>,
    /// This message's own webhook receiver, told when its run ends, fails or waits for
    /// approval (SPEC §13), signed with the server's `webhookDelivery.secret` (400 naming
    /// `webhook` on a server without one, `webhook.url` for an address the guard refuses).
    #[serde(default)]
    pub webhook: Option<crate::http::webhooks::RunWebhook>,
    /// Files sent with the message (SPEC §11), kept with it in the conversation.
    #[serde(default)]
    pub attachments: Vec<crate::http::shared::attachments::ChatAttachment>,
}
