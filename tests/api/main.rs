//! The one integration-test binary: every test drives the real app (or the real `agentd`
//! binary) against the scripted mock LLM upstream.

#[path = "../support/mod.rs"]
mod support;

mod chat_completions;
mod cli;
mod operations;
mod providers;
mod session;
mod store;
