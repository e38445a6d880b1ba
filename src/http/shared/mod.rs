//! What the headends share, so that no headend imports another: the driver of a run's events
//! ([`drive`]). A headend (OpenAI chat, Responses, Anthropic, AG-UI, the AI SDK, A2A, the runs
//! API, MCP) is its wire types, its handlers and its translator, and imports only from here
//! and from the modules of the whole server (errors, auth, SSE).

pub mod drive;
#[cfg(test)]
pub mod goldens;
