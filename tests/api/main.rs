//! The one integration-test binary: every test drives the real app (or the real `agentd`
//! binary) against the scripted mock LLM upstream.

#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on what it did not expect"
)]

#[path = "../support/mod.rs"]
mod support;

mod a2a;
mod a2a_remote;
mod ag_ui;
mod ag_ui_discovery;
mod ai_sdk;
mod anthropic;
mod approvals;
mod attachments;
mod attachments_image_only;
mod attachments_refused_forms;
mod attachments_remote;
mod attachments_replays;
mod attachments_text;
mod auth;
mod authorization_matrix;
mod budgets;
mod chat;
mod chat_completions;
mod claude_code;
mod cli;
mod connections;
mod context;
mod conversation_edits;
mod data_rights;
mod edge_hardening;
mod edge_layers;
mod faults;
mod first_hour;
mod governance;
mod identity;
mod internal_tools;
mod isolation;
mod key_limits;
mod library;
mod limits;
mod mcp;
mod mcp_2026;
mod mcp_2026_calls;
mod mcp_headend;
mod mcp_subscriptions;
mod mcp_tasks;
mod metrics_scrape;
mod openai_clients;
mod openapi_tools;
mod operations;
mod orchestration;
mod output_handles;
mod properties;
mod providers;
mod public_api;
mod races;
mod reload;
mod replicas;
mod responses;
mod responses_approvals;
mod responses_clients;
mod responses_conversations;
mod responses_websocket;
mod rest_tools;
mod retention;
mod retried_streams;
mod run_list;
mod run_pipeline;
mod runs;
mod schedules;
mod schemathesis;
mod scripted_model;
mod sdk_clients;
mod secrets;
mod session;
mod shutdown;
mod store;
mod store_faults;
mod sub_agents;
mod telemetry;
mod tool_files;
mod tool_policy;
mod tool_runs;
mod tools_cli;
mod turns;
mod upstream_faults;
mod web;
mod webhooks;
mod xml;
