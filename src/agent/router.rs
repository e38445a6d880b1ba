//! `router__handoff-to` (reference §4.5): an agent with `router.destinations` may hand the
//! conversation to one of them. The call ends this agent's session; the choice is kept in a
//! [`Router`] the runtime reads afterwards to run the destination (`runtime::orchestration`).

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::config::AgentSpec;
use crate::llm::ToolDefinition;

pub const ROUTER_TOOL: &str = "router__handoff-to";

/// Where the router handed the conversation, and what it said to the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub agent: String,
    pub message: Option<String>,
}

/// The destinations a session may hand over to, and the choice once made.
#[derive(Debug, Clone)]
pub struct Router {
    destinations: Vec<Arc<AgentSpec>>,
    chosen: Arc<Mutex<Option<Route>>>,
}

impl Router {
    pub fn new(destinations: Vec<Arc<AgentSpec>>) -> Self {
        Self {
            destinations,
            chosen: Arc::default(),
        }
    }

    /// The tool the model sees: the destinations by name, with their descriptions.
    pub fn definition(&self) -> ToolDefinition {
        let names: Vec<&str> = self.destinations.iter().map(|a| a.name.as_str()).collect();
        let described: Vec<String> = self
            .destinations
            .iter()
            .map(|a| format!("- {}: {}", a.name, a.description))
            .collect();
        ToolDefinition {
            name: ROUTER_TOOL.into(),
            description: format!(
                "Hand the conversation to the agent best placed to answer it; it answers the \
                 user instead of you. Agents:\n{}",
                described.join("\n")
            ),
            parameters: json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["agent"],
                "properties": {
                    "agent": {"type": "string", "enum": names},
                    "message": {"type": "string", "description": "Anything the agent should know beyond the user's request."}
                }
            }),
        }
    }

    /// Records the choice the call's arguments make; `Err` is what the model is told.
    pub fn choose(&self, arguments: &Map<String, Value>) -> Result<Route, String> {
        let agent = arguments
            .get("agent")
            .and_then(Value::as_str)
            .ok_or("`agent` is required")?;
        if !self.destinations.iter().any(|a| a.name == agent) {
            let names: Vec<&str> = self.destinations.iter().map(|a| a.name.as_str()).collect();
            return Err(format!(
                "unknown agent {agent:?}: choose one of {}",
                names.join(", ")
            ));
        }
        let route = Route {
            agent: agent.to_string(),
            message: arguments
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .map(String::from),
        };
        if let Ok(mut chosen) = self.chosen.lock() {
            *chosen = Some(route.clone());
        }
        Ok(route)
    }

    /// The destination chosen, if the session handed over.
    pub fn chosen(&self) -> Option<Route> {
        self.chosen.lock().ok().and_then(|chosen| chosen.clone())
    }
}
