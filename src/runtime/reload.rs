//! Hot reload of the agents. A freshly loaded configuration's agent files are checked against
//! what this process runs — its providers, its connected tool servers and REST tools — and, if
//! they fit, replace the agent registry at once. A run in flight keeps the `AgentSpec` it
//! started with (every run holds its own `Arc`); a broken file or an agent needing something only
//! a restart brings is reported and the previous agents stay. What else changed in the
//! configuration is named so the operator knows it waits for a restart.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::Runtime;
use crate::config::{AgentRegistry, AgentSpec, Config, RegistryError};
use crate::tools::hub::{ToolHub, ToolSetupError};

/// Why a reload kept the previous agents.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Agents(#[from] RegistryError),
    #[error(transparent)]
    Tools(#[from] ToolSetupError),
    #[error(
        "agent {agent:?} uses provider {provider:?}, which this process does not have: \
         restart agentd to add providers"
    )]
    NewProvider { agent: String, provider: String },
    #[error(
        "agent {agent:?} uses tool {tool:?}, which this process did not start: restart agentd \
         to add tool servers or REST tools"
    )]
    NewTool { agent: String, tool: String },
}

/// What a reload changed.
#[derive(Debug, Default, PartialEq)]
pub struct ReloadReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    /// Top-level configuration keys that differ from the running ones and are applied only at
    /// the next start (`providers`, `mcpServers`, `server`, `store`, …).
    pub needs_restart: Vec<String>,
}

/// The configuration keys a reload applies: they shape the agents.
const RELOADED_KEYS: [&str; 2] = ["agents", "defaults"];

impl Runtime {
    /// Loads the agents `config` names and, if this process can run every one of them, makes
    /// them the agents new runs use. `running_config` and `new_config` are the merged
    /// configuration JSON before and after, compared key by key for the report.
    pub fn reload_agents(
        &self,
        config: &Config,
        running_config: &Value,
        new_config: &Value,
    ) -> Result<ReloadReport, ReloadError> {
        let registry = AgentRegistry::load(config)?;
        ToolHub::check(config, &registry)?;
        for agent in registry.iter() {
            self.check_runnable(agent)?;
        }
        let previous = self.agents();
        let report = ReloadReport {
            needs_restart: changed_keys(running_config, new_config),
            ..compare(&previous, &registry)
        };
        self.replace_agents(registry);
        Ok(report)
    }

    /// Every target's provider exists here, and every tool the agent names was started.
    fn check_runnable(&self, agent: &AgentSpec) -> Result<(), ReloadError> {
        if let Some(target) = agent
            .targets
            .iter()
            .find(|t| self.providers.get(&t.provider).is_none())
        {
            return Err(ReloadError::NewProvider {
                agent: agent.name.clone(),
                provider: target.provider.clone(),
            });
        }
        let started = |entry: &String| {
            self.tools.servers().any(|server| server.name() == entry)
                || entry
                    .strip_prefix("rest__")
                    .is_some_and(|name| self.tools.rest_tools().contains(name))
                || crate::tools::hub::openapi_spec_name(entry)
                    .is_some_and(|spec| self.tools.openapi_tools().has_spec(spec))
                || crate::tools::hub::remote_agent_name(entry)
                    .is_some_and(|name| self.tools.remote_agents().contains(name))
                || self
                    .config
                    .mcp_servers
                    .get(entry)
                    .is_some_and(|server| !server.is_enabled())
        };
        match agent.tools.iter().find(|entry| !started(entry)) {
            Some(tool) => Err(ReloadError::NewTool {
                agent: agent.name.clone(),
                tool: tool.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// Agents added, removed and changed between two registries, by name.
fn compare(before: &AgentRegistry, after: &AgentRegistry) -> ReloadReport {
    let names = |registry: &AgentRegistry| -> BTreeSet<String> {
        registry.iter().map(|agent| agent.name.clone()).collect()
    };
    let (old, new) = (names(before), names(after));
    let changed = old
        .intersection(&new)
        .filter(|name| {
            let same = before
                .get(name)
                .zip(after.get(name))
                .is_some_and(|(a, b)| same_definition(&a, &b));
            !same
        })
        .cloned()
        .collect();
    ReloadReport {
        added: new.difference(&old).cloned().collect(),
        removed: old.difference(&new).cloned().collect(),
        changed,
        needs_restart: Vec::new(),
    }
}

fn same_definition(a: &Arc<AgentSpec>, b: &Arc<AgentSpec>) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

/// Top-level keys whose values differ, apart from the ones a reload applies.
fn changed_keys(before: &Value, after: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let before = before.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|key| !RELOADED_KEYS.contains(&key.as_str()))
        .filter(|key| before.get(*key) != after.get(*key))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_keys_a_reload_does_not_apply_are_named() {
        let before = json!({"agents": ["a"], "defaults": {"maxTurns": 3}, "server": {"listen": "x"}, "store": {}});
        let after = json!({"agents": ["b"], "defaults": {"maxTurns": 4}, "server": {"listen": "y"}, "providers": {}});
        assert_eq!(
            changed_keys(&before, &after),
            ["providers", "server", "store"]
        );
    }
}
