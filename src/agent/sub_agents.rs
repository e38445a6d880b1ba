//! Sub-agent calls: an agent's `agents:` become `agent__{name}` tools. A call runs a child
//! session with its own limits through a [`ChildRunner`] (the runtime), below a depth limit; the
//! child's lineage continues the parent's (`callPath`, `parentTxnId`, `originTxnId`) and its
//! accounting is rolled into the parent's. The files the child's tools gave it (SPEC §11) reach
//! the parent's model with the child's reply, and its `agent_finished` progress as metadata.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::ending::Transcript;
use super::events::EventSink;
use super::events::{AgentEvent, Progress, ProgressKind};
use super::run::RunFacts;
use super::session::RunControl;
use super::tool_phase::{ToolRunner, agent_tool_entry, failed};
use super::{AgentResult, SessionRequest};
use crate::config::AgentSpec;
use crate::llm::{Role, ToolCall, ToolDefinition};
use crate::vocabulary::Attachment;
use crate::vocabulary::result::AccountingEntry;

/// Sessions nested deeper than this are refused.
pub const MAX_SUB_AGENT_DEPTH: u32 = 4;

/// How many sub-agent calls of one turn run at once; the others wait for a free place.
pub const SUB_AGENT_CONCURRENCY: usize = 4;

/// What one sub-agent call came to, for the parent to record in call order.
pub(super) struct SubAgentReply {
    /// What the model is told.
    pub reply: String,
    /// The files the child's tools gave it (kept already), which the parent's model gets with
    /// the reply.
    pub files: Vec<Attachment>,
    /// The child's own accounting, rolled into the parent's totals.
    pub child_accounting: Vec<AccountingEntry>,
    /// The parent's entry for the call itself.
    pub entry: AccountingEntry,
}

/// Where a child session sits in its tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRun {
    /// The parent's call path; the child's is this plus `:child`.
    pub call_path: String,
    pub txn_id: String,
    pub origin_txn_id: String,
    /// 1 for a child of the root session.
    pub depth: u32,
}

/// Runs child sessions (the runtime gives them their own tools and providers).
#[async_trait]
pub trait ChildRunner: Send + Sync {
    async fn run_child(&self, request: SessionRequest, control: RunControl) -> AgentResult;
}

/// The agents a session may call, and how to run them.
#[derive(Clone)]
pub struct SubAgents {
    pub runner: Arc<dyn ChildRunner>,
    pub agents: Vec<Arc<AgentSpec>>,
}

pub fn tool_name(agent: &AgentSpec) -> String {
    format!("agent__{}", agent.name)
}

pub fn definition(agent: &AgentSpec) -> ToolDefinition {
    let mut description = agent.description.clone();
    if description.is_empty() {
        description = format!("Ask the {} agent.", agent.name);
    }
    ToolDefinition {
        name: tool_name(agent),
        description,
        parameters: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["prompt"],
            "properties": {"prompt": {"type": "string", "description": "The task for this agent, self-contained."}}
        }),
    }
}

impl SubAgents {
    /// The sub-agent a tool name refers to, if any.
    pub(super) fn find(&self, name: &str) -> Option<Arc<AgentSpec>> {
        self.agents.iter().find(|a| tool_name(a) == name).cloned()
    }
}

/// Runs one sub-agent call; several may run at once (the caller records their replies in
/// call order).
pub(super) async fn call_sub_agent(
    runner: &ToolRunner<'_>,
    facts: &RunFacts,
    call: &ToolCall,
    child: Arc<AgentSpec>,
    arguments: Map<String, Value>,
) -> SubAgentReply {
    let started = Instant::now();
    let depth = facts.request.parent.as_ref().map_or(0, |p| p.depth) + 1;
    let prompt = arguments
        .get("prompt")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let outcome = match (
        runner.sub_agents,
        depth > MAX_SUB_AGENT_DEPTH,
        prompt.trim().is_empty(),
    ) {
        (_, true, _) => Err(format!(
            "sub-agents may nest at most {MAX_SUB_AGENT_DEPTH} deep"
        )),
        (_, _, true) => Err("`prompt` must be a non-empty string".to_string()),
        (None, _, _) => Err(format!("unknown tool {:?}", call.name)),
        (Some(sub_agents), false, false) => {
            Ok(run_child(runner, sub_agents, facts, call, child.clone(), prompt).await)
        }
    };
    let (outcome, files) = match outcome {
        Ok((result, files)) => (Ok(result), files),
        Err(reason) => (Err(reason), Vec::new()),
    };
    let child_accounting = match &outcome {
        Ok(result) => result.accounting.clone(),
        Err(_) => Vec::new(),
    };
    let (reply, error) = match outcome {
        Ok(result) if result.success => (result.answer_text(), None),
        Ok(result) => {
            let reason = format!(
                "sub-agent {} failed: {}",
                child.name,
                result
                    .error
                    .as_deref()
                    .unwrap_or(result.exit_reason.as_str())
            );
            (failed(&reason), Some(reason))
        }
        Err(reason) => (failed(&reason), Some(reason)),
    };
    let entry = agent_tool_entry(
        &call.name,
        call,
        started,
        &reply,
        error,
        facts.lineage.clone(),
    );
    SubAgentReply {
        reply,
        files,
        child_accounting,
        entry,
    }
}

/// The files a child that succeeded got from its tools: the attachments of its `tool`
/// messages (none for a child that failed).
fn files_of(result: &AgentResult) -> Vec<Attachment> {
    if !result.success {
        return Vec::new();
    }
    result
        .conversation
        .iter()
        .filter(|message| message.role == Role::Tool)
        .flat_map(|message| message.attachments.iter().cloned())
        .collect()
}

/// Records a sub-agent call in the parent: the child's work, then the call's own entry; gives
/// back what the parent's model is told and the files that go with it.
pub(super) async fn record_sub_agent(
    events: &EventSink,
    transcript: &mut Transcript,
    reply: SubAgentReply,
) -> (String, Vec<Attachment>) {
    // The child's own work counts toward the parent's totals.
    transcript.accounting.extend(reply.child_accounting);
    transcript.record(events, reply.entry).await;
    (reply.reply, reply.files)
}

/// Runs the child session; gives back its result and the files its tools gave it.
async fn run_child(
    runner: &ToolRunner<'_>,
    sub_agents: &SubAgents,
    facts: &RunFacts,
    call: &ToolCall,
    child: Arc<AgentSpec>,
    prompt: String,
) -> (AgentResult, Vec<Attachment>) {
    let call_path = format!("{}:{}", facts.call_path, child.name);
    let request = facts.request.child(&facts.call_path, child.clone(), prompt);
    let progress = |kind: ProgressKind, message: Option<String>, attachments: Vec<Attachment>| {
        let mut progress = agent_progress(&child.name, &call_path, kind, message);
        progress.call_id = Some(call.id.clone());
        progress.attachments = attachments;
        AgentEvent::Progress(Box::new(progress))
    };
    runner
        .events
        .emit(progress(ProgressKind::AgentStarted, None, Vec::new()))
        .await;
    let control = runner.control.for_child();
    let result = sub_agents.runner.run_child(request, control).await;
    let status = if result.success {
        crate::vocabulary::RunStatus::Completed.as_str()
    } else {
        result.exit_reason.as_str()
    };
    let files = files_of(&result);
    runner
        .events
        .emit(progress(
            ProgressKind::AgentFinished,
            Some(status.to_string()),
            files.clone(),
        ))
        .await;
    (result, files)
}

/// Emits the `progress` event `kind` (`agent_started`, `agent_finished`) of a child agent.
pub async fn emit_agent_progress(
    events: &EventSink,
    agent: &str,
    call_path: &str,
    kind: ProgressKind,
    message: Option<String>,
) {
    events
        .emit(AgentEvent::Progress(Box::new(agent_progress(
            agent, call_path, kind, message,
        ))))
        .await;
}

/// The `progress` event `kind` of a child agent at `call_path`.
fn agent_progress(
    agent: &str,
    call_path: &str,
    kind: ProgressKind,
    message: Option<String>,
) -> Progress {
    Progress {
        kind,
        agent: agent.into(),
        call_path: call_path.into(),
        message,
        done: None,
        pending: None,
        now: None,
        call_id: None,
        joined_run_id: None,
        attachments: Vec::new(),
    }
}
