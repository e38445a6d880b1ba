//! What the headends share, so that no headend imports another: the driver of a run's events
//! ([`drive`]), the runs API's own event frames ([`run_events`], which the per-user chat streams
//! too), the UI parts AG-UI and the AI SDK render ([`ui`]), the client tools of SPEC §9.2
//! ([`client_tools`]), the answers to tool approvals ([`approvals`]), who a caller acts for
//! ([`callers`]), list cursors ([`cursor`]) and conversation titles ([`titles`]). A headend (OpenAI chat, Responses, Anthropic,
//! AG-UI, the AI SDK, A2A, the runs API, MCP) is its wire types, its handlers and its
//! translator, and imports only from here and from the server-wide modules (errors, auth, SSE).

pub mod approvals;
pub mod attachments;
pub mod callers;
pub mod chat_request;
pub mod client_tools;
pub mod cursor;
pub mod drive;
#[cfg(test)]
pub mod goldens;
pub mod run_events;
pub mod titles;
pub mod ui;
