//! AG-UI 1.0 capability discovery (SPEC §15): `GET /ag-ui/{agent}/capabilities`, where
//! `HttpAgent.getCapabilities()` looks (its run URL plus `/capabilities`). It declares what this
//! agent supports now: its identity, SSE streaming, its tools (their schemas as the model sees
//! them) and client tools, the sub-agents it may call and the events that report them, thinking,
//! the files it takes, its turn limit, and tool approvals as interrupts. Only what is supported
//! is declared; an absent field means "not declared", as the protocol reads it.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, State};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::subagents::REQUEST_FIELD;
use super::wire::AgUiPath;
use crate::agent::sub_agents;
use crate::config::AgentSpec;
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiPath, ErrorBody};
use crate::llm::ToolDefinition;
use crate::runtime::Runtime;

/// AG-UI's `AgentCapabilities`, as far as agentd declares it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub identity: Identity,
    pub transport: Transport,
    pub tools: Tools,
    pub output: Output,
    pub state: ThreadState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multi_agent: Option<MultiAgent>,
    pub reasoning: Reasoning,
    pub multimodal: Multimodal,
    pub execution: Execution,
    pub human_in_the_loop: HumanInTheLoop,
    /// agentd's own: how to ask for what AG-UI leaves to the producer.
    #[schema(value_type = Object)]
    pub custom: Value,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub name: String,
    /// `agentd`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub description: String,
    /// agentd's version.
    pub version: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Transport {
    /// Events stream as SSE.
    pub streaming: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tools {
    pub supported: bool,
    /// The agent's own tools (MCP, REST, OpenAPI, remote agents, sub-agents) with their schemas.
    pub items: Vec<CapabilityTool>,
    /// Calls of one turn run concurrently.
    pub parallel_calls: bool,
    /// `RunAgentInput.tools` are offered beside the agent's own.
    pub client_provided: bool,
}

/// An AG-UI `Tool`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CapabilityTool {
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub parameters: Value,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// The agent's frontmatter declares an output schema.
    pub structured_output: bool,
    pub supported_mime_types: Vec<&'static str>,
}

/// `state`: agentd keeps none of the client's, but gives it back before an interrupt.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadState {
    /// A `STATE_SNAPSHOT` precedes an interrupting `RUN_FINISHED`.
    pub snapshots: bool,
    /// A thread is a stored conversation: its earlier turns are the next run's history.
    pub persistent_state: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultiAgent {
    pub supported: bool,
    /// Sub-agents answer the agent, which keeps control.
    pub delegation: bool,
    /// A router destination or handoff answers for it.
    pub handoffs: bool,
    pub sub_agents: Vec<SubAgentInfo>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SubAgentInfo {
    pub name: String,
    pub description: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Reasoning {
    /// Thinking the model streams is sent as `REASONING_*` events.
    pub supported: bool,
    pub streaming: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Multimodal {
    pub input: MultimodalInput,
}

/// `binary` parts of a user message (SPEC §11).
#[derive(Debug, Serialize, ToSchema)]
pub struct MultimodalInput {
    pub image: bool,
    pub pdf: bool,
    pub file: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Execution {
    /// The agent's `maxTurns`.
    pub max_iterations: u32,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanInTheLoop {
    /// The agent asks a person before some tool calls.
    pub supported: bool,
    pub approvals: bool,
    /// A waiting call ends the run with an interrupt; `resume` answers it.
    pub interrupts: bool,
    /// `editedArgs` in a resume payload replaces the call's arguments.
    pub approve_with_edits: bool,
}

#[utoipa::path(
    get,
    path = "/ag-ui/{agent}/capabilities",
    tag = "ag-ui",
    summary = "AG-UI capability discovery: what this agent supports (HttpAgent.getCapabilities)",
    params(AgUiPath),
    responses(
        (status = 200, description = "AG-UI `AgentCapabilities`", body = AgentCapabilities),
        ErrorBody,
    ),
)]
pub async fn capabilities(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(AgUiPath { agent }): ApiPath<AgUiPath>,
) -> Result<Json<AgentCapabilities>, ApiError> {
    let agent = caller.named_agent(&runtime, &agent)?;
    let mut tools = runtime.tools().registry_for(&agent).definitions().await;
    let children: Vec<Arc<AgentSpec>> = agent
        .sub_agents
        .iter()
        .filter_map(|name| runtime.agents().get(name))
        .collect();
    tools.extend(children.iter().map(|child| sub_agents::definition(child)));
    let routed =
        !agent.orchestration.destinations.is_empty() || agent.orchestration.handoff.is_some();
    Ok(Json(of_agent(&agent, tools, &children, routed)))
}

/// The capabilities of `agent`, whose tools are `tools` and sub-agents `children`; `routed`
/// when a router destination or handoff may answer for it.
fn of_agent(
    agent: &AgentSpec,
    tools: Vec<ToolDefinition>,
    children: &[Arc<AgentSpec>],
    routed: bool,
) -> AgentCapabilities {
    let mut items: Vec<CapabilityTool> = tools
        .into_iter()
        .map(|tool| CapabilityTool {
            name: tool.name,
            description: tool.description,
            parameters: tool.parameters,
        })
        .collect();
    items.sort_by(|a, b| a.name.cmp(&b.name));
    let multi_agent = (!children.is_empty() || routed).then(|| MultiAgent {
        supported: true,
        delegation: !children.is_empty(),
        handoffs: routed,
        sub_agents: children
            .iter()
            .map(|child| SubAgentInfo {
                name: child.name.clone(),
                description: child.description.clone(),
            })
            .collect(),
    });
    let approvals = !agent.approvals.is_empty();
    AgentCapabilities {
        identity: Identity {
            name: agent.name.clone(),
            kind: "agentd",
            description: agent.description.clone(),
            version: env!("CARGO_PKG_VERSION"),
        },
        transport: Transport { streaming: true },
        tools: Tools {
            supported: true,
            items,
            parallel_calls: true,
            client_provided: true,
        },
        output: Output {
            structured_output: agent.output_schema.is_some(),
            supported_mime_types: if agent.output_schema.is_some() {
                vec!["text/plain", "application/json"]
            } else {
                vec!["text/plain"]
            },
        },
        state: ThreadState {
            snapshots: true,
            persistent_state: true,
        },
        multi_agent,
        reasoning: Reasoning {
            supported: true,
            streaming: true,
        },
        multimodal: Multimodal {
            input: MultimodalInput {
                image: true,
                pdf: true,
                file: true,
            },
        },
        execution: Execution {
            max_iterations: agent.limits.max_turns,
        },
        human_in_the_loop: HumanInTheLoop {
            supported: approvals,
            approvals,
            interrupts: approvals,
            approve_with_edits: approvals,
        },
        custom: serde_json::json!({
            "agentd": {
                "subagentEvents": format!("send forwardedProps.{REQUEST_FIELD}: true for SUBAGENT_STARTED / SUBAGENT_FINISHED / SUBAGENT_ERROR"),
                "approvalResume": "resume payload {approved, editedArgs?, reason?} or {decision: approve|deny, arguments?, reason?}",
            }
        }),
    }
}
