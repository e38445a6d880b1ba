//! The agent session: one run of one agent, turn by turn, against the provider targets.
//!
//! A session performs no I/O of its own (seeds/004): events go out through an [`EventSink`] and
//! everything is also returned in the [`AgentResult`]. Every headend (HTTP APIs, CLI) builds a
//! [`SessionRequest`], runs [`Session::run`] in a task, and translates the events.

pub mod approval;
mod call_routes;
pub mod client_tools;
pub mod context_guard;
mod ending;
pub mod events;
pub mod final_report;
mod guard_phase;
pub mod inbox;
mod internal_phase;
pub mod internal_tools;
mod llm_call;
pub mod observer;
pub mod output_handles;
mod output_questions;
pub mod router;
mod run;
mod session;
pub mod sub_agents;
pub mod tool_args;
mod tool_execution;
pub mod tool_files;
mod tool_phase;
mod turn_output;
pub mod xml;
mod xml_phase;

use std::collections::HashMap;
use std::sync::Arc;

pub use crate::vocabulary::result::{
    AgentResult, ExitReason, FinalReport, ReportStatus, RunStatus,
};
pub use events::{AgentEvent, EventSink};
pub use run::{opening_conversation, tokenizer_of};
pub use session::{EMPTY_RESPONSE_NOTICE, RunControl, Session};

use crate::config::AgentSpec;
pub use crate::llm::SamplingParams;
use crate::llm::{ChatMessage, Provider};

/// Everything needed to run one session.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    pub run_id: String,
    pub agent: Arc<AgentSpec>,
    /// The user's task for this run.
    pub prompt: String,
    /// Earlier messages of the conversation (no system prompt: the agent supplies it).
    pub history: Vec<ChatMessage>,
    /// Per-request sampling (OpenAI `temperature`, …), put over the agent's field by field.
    pub overrides: SamplingParams,
    pub conversation_id: Option<String>,
    /// Output format for this run (`markdown`, `text`, `json`, …); the agent's when `None`.
    pub format: Option<String>,
    /// JSON schema of the `json` output for this run; the agent's when `None`.
    pub schema: Option<serde_json::Value>,
    /// The run's owner (`config::owner`): a user, or `key:ID` for a key bound to no user. Its
    /// user ([`SessionRequest::user`]) is what tools and `userScoped` agents act for.
    pub user_id: Option<String>,
    /// The session that called this one as a sub-agent (`None` for a root session).
    pub parent: Option<sub_agents::ParentRun>,
    /// Tool transport for this run; the agent's `transport` when `None`.
    pub transport: Option<crate::config::agent_file::Transport>,
    /// Tools the client brought (SPEC §9.2); none for most runs.
    pub client_tools: client_tools::ClientTools,
    /// The budget of the key and the request (the lower of each limit); the agent's own is
    /// applied over it by the session.
    pub budget: crate::vocabulary::budget::RunBudget,
    /// Limits raised while the run waited for its budget; each replaces the lowest of the
    /// agent's, the key's and the request's.
    pub budget_raise: crate::vocabulary::budget::RunBudget,
    /// Files sent with the prompt (SPEC §11), their content loaded for the model.
    pub attachments: Vec<crate::vocabulary::Attachment>,
}

impl SessionRequest {
    /// The budget the run is held to: the lowest of the agent's, the key's and the request's,
    /// with what was raised while it waited in place.
    pub fn effective_budget(&self) -> crate::vocabulary::budget::RunBudget {
        self.budget
            .lowest(self.agent.budget)
            .raised_by(self.budget_raise)
    }
}

impl SessionRequest {
    /// A root run of `agent` on `prompt` with nothing else set: no history, no caller, the
    /// agent's own format and transport.
    pub fn for_prompt(run_id: String, agent: Arc<AgentSpec>, prompt: String) -> Self {
        Self {
            run_id,
            agent,
            prompt,
            history: Vec::new(),
            overrides: SamplingParams::default(),
            conversation_id: None,
            format: None,
            schema: None,
            user_id: None,
            parent: None,
            transport: None,
            client_tools: client_tools::ClientTools::default(),
            budget: Default::default(),
            budget_raise: Default::default(),
            attachments: Vec::new(),
        }
    }

    /// The user this run acts for: its owner when that is a user, `None` for a key's run.
    pub fn user(&self) -> Option<&str> {
        crate::config::owner::user_of(self.user_id.as_deref())
    }

    /// The request of a child session of this run (a sub-agent, an advisor, …): a new run id,
    /// no history, this run's user, linked to this run whose call path is `call_path`.
    pub fn child(&self, call_path: &str, agent: Arc<AgentSpec>, prompt: String) -> Self {
        Self {
            run_id: uuid::Uuid::now_v7().to_string(),
            agent,
            prompt,
            history: Vec::new(),
            overrides: SamplingParams::default(),
            conversation_id: None,
            format: None,
            schema: None,
            user_id: self.user_id.clone(),
            transport: None,
            client_tools: Default::default(),
            budget: Default::default(),
            budget_raise: Default::default(),
            attachments: Vec::new(),
            parent: Some(sub_agents::ParentRun {
                call_path: call_path.to_string(),
                txn_id: self.run_id.clone(),
                origin_txn_id: self
                    .parent
                    .as_ref()
                    .map_or_else(|| self.run_id.clone(), |p| p.origin_txn_id.clone()),
                depth: self.parent.as_ref().map_or(0, |p| p.depth) + 1,
            }),
        }
    }

    /// Whether this run answers client tool calls (its history ends with their results) rather
    /// than a new prompt.
    pub fn continues_tool_calls(&self) -> bool {
        self.prompt.trim().is_empty()
            && self.attachments.is_empty()
            && client_tools::continues_tool_calls(&self.history)
    }

    /// Whether the run has something to answer: a prompt with text or files (an image sent
    /// alone is a question too), or client tool results to continue from.
    pub fn has_input(&self) -> bool {
        !self.prompt.trim().is_empty()
            || !self.attachments.is_empty()
            || self.continues_tool_calls()
    }
}

/// The providers a session may call, by configured provider name.
#[derive(Clone, Default)]
pub struct ProviderSet {
    providers: HashMap<String, Arc<dyn Provider>>,
}

impl ProviderSet {
    pub fn insert(&mut self, name: impl Into<String>, provider: Arc<dyn Provider>) {
        self.providers.insert(name.into(), provider);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.providers.get(name).cloned()
    }
}

impl std::fmt::Debug for ProviderSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.providers.keys()).finish()
    }
}
