//! Sub-agents and the agents around an agent: `agents:` names other agents it may call as
//! tools, `advisors`, `router.destinations` and `handoff` the agents run before, instead of and
//! after it. Entries are agent names, or `.ai` paths relative to the agent's file (loaded if not
//! already registered). Linking happens once at load time and rejects unknown entries and
//! cycles.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Config;
use super::agent_file::read_agent_file;
use super::registry::{AgentRegistry, RegistryError, resolve_agent};

impl AgentRegistry {
    /// Resolves every agent's `agents:` entries into agent names, then checks for cycles.
    pub fn link_sub_agents(&mut self, config: &Config) -> Result<(), RegistryError> {
        let mut linked = BTreeSet::new();
        loop {
            let pending: Vec<String> = self
                .iter()
                .map(|a| a.name.clone())
                .filter(|name| !linked.contains(name))
                .collect();
            if pending.is_empty() {
                break;
            }
            for name in pending {
                self.link_one(&name, config)?;
                linked.insert(name);
            }
        }
        self.reject_cycles()?;
        self.reject_approvals_in_sub_agents()
    }

    /// A sub-agent's session (or an advisor's, a router destination's, a handoff's) reports only
    /// to its parent, so nobody could approve its calls; an orchestrating agent's own wait is
    /// not supported either.
    fn reject_approvals_in_sub_agents(&self) -> Result<(), RegistryError> {
        for parent in self.iter() {
            if !parent.orchestration.is_empty() && !parent.approvals.is_empty() {
                return Err(RegistryError::ApprovalWithOrchestration {
                    file: display(parent.path.as_deref()),
                    patterns: parent.approvals.patterns.join(", "),
                });
            }
            for child in parent.linked_agents().filter_map(|name| self.get(name)) {
                if !child.approvals.is_empty() {
                    return Err(RegistryError::ApprovalInSubAgent {
                        child: child.name.clone(),
                        parent: parent.name.clone(),
                        patterns: child.approvals.patterns.join(", "),
                    });
                }
            }
        }
        Ok(())
    }

    fn link_one(&mut self, name: &str, config: &Config) -> Result<(), RegistryError> {
        let Some(agent) = self.get(name) else {
            return Ok(());
        };
        let mut children = Vec::new();
        for entry in &agent.agent_refs {
            let child = self.resolve_entry(&agent, entry, config, |file| {
                RegistryError::UnknownSubAgent {
                    file,
                    entry: entry.clone(),
                }
            })?;
            children.push(child);
        }
        let refs = &agent.orchestration_refs;
        let mut orchestration = super::registry::Orchestration::default();
        for entry in &refs.advisors {
            let unknown = |file| unknown_orchestration(file, "advisors", entry);
            orchestration
                .advisors
                .push(self.resolve_entry(&agent, entry, config, unknown)?);
        }
        for entry in &refs.destinations {
            let unknown = |file| unknown_orchestration(file, "router.destinations", entry);
            orchestration
                .destinations
                .push(self.resolve_entry(&agent, entry, config, unknown)?);
        }
        if let Some(entry) = &refs.handoff {
            let unknown = |file| unknown_orchestration(file, "handoff", entry);
            orchestration.handoff = Some(self.resolve_entry(&agent, entry, config, unknown)?);
        }
        self.update(name, |spec| {
            spec.sub_agents = children;
            spec.orchestration = orchestration;
        });
        Ok(())
    }

    /// The name of the agent an entry refers to: a registered name, or a `.ai` path relative
    /// to `agent`'s file (loaded when needed).
    fn resolve_entry(
        &mut self,
        agent: &super::AgentSpec,
        entry: &str,
        config: &Config,
        unknown: impl FnOnce(String) -> RegistryError,
    ) -> Result<String, RegistryError> {
        if is_path(entry) {
            let base = agent
                .path
                .as_deref()
                .and_then(Path::parent)
                .unwrap_or_else(|| Path::new("."));
            return self.agent_at(&base.join(entry), config, &agent.name);
        }
        self.get(entry)
            .map(|a| a.name.clone())
            .ok_or_else(|| unknown(display(agent.path.as_deref())))
    }

    /// The name of the agent defined by the file at `path`, loading it when needed.
    fn agent_at(
        &mut self,
        path: &Path,
        config: &Config,
        parent: &str,
    ) -> Result<String, RegistryError> {
        let wanted = canonical(path);
        if let Some(existing) = self
            .iter()
            .find(|a| a.path.as_deref().map(canonical).as_ref() == Some(&wanted))
        {
            return Ok(existing.name.clone());
        }
        let file = read_agent_file(path).map_err(|e| RegistryError::UnknownSubAgent {
            file: format!("agent {parent}"),
            entry: e.to_string(),
        })?;
        let spec = resolve_agent(path, file, config)?;
        let name = spec.name.clone();
        self.insert(spec)?;
        Ok(name)
    }

    fn reject_cycles(&self) -> Result<(), RegistryError> {
        for agent in self.iter() {
            let mut chain = vec![agent.name.clone()];
            self.walk(&mut chain)?;
        }
        Ok(())
    }

    fn walk(&self, chain: &mut Vec<String>) -> Result<(), RegistryError> {
        let Some(current) = chain.last().and_then(|name| self.get(name)) else {
            return Ok(());
        };
        for child in current.linked_agents() {
            if chain.contains(child) {
                let mut cycle = chain.clone();
                cycle.push(child.clone());
                return Err(RegistryError::SubAgentCycle {
                    chain: cycle.join(" -> "),
                });
            }
            chain.push(child.clone());
            self.walk(chain)?;
            chain.pop();
        }
        Ok(())
    }

    fn update(&mut self, name: &str, change: impl FnOnce(&mut super::AgentSpec)) {
        if let Some(spec) = self.get(name) {
            let mut spec = Arc::unwrap_or_clone(spec);
            change(&mut spec);
            self.replace(spec);
        }
    }
}

fn unknown_orchestration(file: String, key: &'static str, entry: &str) -> RegistryError {
    RegistryError::UnknownOrchestrationAgent {
        file,
        key,
        entry: entry.to_string(),
    }
}

fn is_path(entry: &str) -> bool {
    super::registry::AgentFileKind::of(std::path::Path::new(entry)).is_some() || entry.contains('/')
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

fn display(path: Option<&Path>) -> String {
    path.map_or_else(|| "(built in)".to_string(), |p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use crate::config::{AgentRegistry, parse_config};
    use serde_json::json;

    fn write(dir: &std::path::Path, name: &str, frontmatter: &str) {
        std::fs::write(
            dir.join(name),
            format!("---\nmodels: llm/m\n{frontmatter}\n---\nprompt"),
        )
        .expect("write");
    }

    fn load(dir: &std::path::Path) -> Result<AgentRegistry, String> {
        let config = parse_config(json!({"providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://x"}}, "agents": [dir]}), "t").expect("config");
        AgentRegistry::load(&config).map_err(|e| e.to_string())
    }

    #[test]
    fn names_and_relative_paths_link_and_outside_files_load() {
        let root = tempfile::tempdir().expect("dir");
        let agents = root.path().join("agents");
        std::fs::create_dir(&agents).expect("mkdir");
        write(
            &agents,
            "lead.ai",
            "agents: [researcher, ../helpers/writer.ai]",
        );
        write(&agents, "researcher.ai", "");
        let helpers = root.path().join("helpers");
        std::fs::create_dir(&helpers).expect("mkdir");
        write(&helpers, "writer.ai", "");
        let registry = load(&agents).expect("loads");
        assert_eq!(
            registry.get("lead").expect("lead").sub_agents,
            vec!["researcher", "writer"]
        );
        assert!(
            registry.get("writer").is_some(),
            "the path entry was loaded"
        );
    }

    #[test]
    fn unknown_entries_and_cycles_are_rejected_with_their_names() {
        let dir = tempfile::tempdir().expect("dir");
        write(dir.path(), "a.ai", "agents: [ghost]");
        assert!(load(dir.path()).unwrap_err().contains("ghost"));
        write(dir.path(), "a.ai", "agents: [b]");
        write(dir.path(), "b.ai", "agents: [c]");
        write(dir.path(), "c.ai", "agents: [a]");
        let err = load(dir.path()).unwrap_err();
        assert!(err.contains("a -> b -> c -> a"), "{err}");
    }

    #[test]
    fn advisors_router_and_handoff_link_and_are_checked() {
        let dir = tempfile::tempdir().expect("dir");
        write(
            dir.path(),
            "lead.ai",
            "advisors: [a1, a2]\nrouter:\n  destinations: [billing]\nhandoff: editor",
        );
        for name in ["a1.ai", "a2.ai", "billing.ai", "editor.ai"] {
            write(dir.path(), name, "");
        }
        let registry = load(dir.path()).expect("loads");
        let lead = registry.get("lead").expect("lead");
        assert_eq!(lead.orchestration.advisors, ["a1", "a2"]);
        assert_eq!(lead.orchestration.destinations, ["billing"]);
        assert_eq!(lead.orchestration.handoff.as_deref(), Some("editor"));
        let reachable = registry.reachable_from(&lead);
        assert_eq!(reachable.len(), 5, "agentd run loads them all");

        write(dir.path(), "lead.ai", "handoff: nobody");
        let error = load(dir.path()).expect_err("unknown");
        assert!(error.contains("handoff: \"nobody\""), "{error}");
        write(dir.path(), "lead.ai", "router:\n  destinations: [ghost]");
        let error = load(dir.path()).expect_err("unknown");
        assert!(error.contains("router.destinations: \"ghost\""), "{error}");
        write(dir.path(), "lead.ai", "handoff: editor");
        write(dir.path(), "editor.ai", "handoff: lead");
        let error = load(dir.path()).expect_err("cycle");
        assert!(error.contains("cycle"), "{error}");
        write(dir.path(), "editor.ai", "");
        write(
            dir.path(),
            "lead.ai",
            "handoff: editor\nagents: [a1]\napprove: [agent__a1]",
        );
        let error = load(dir.path()).expect_err("approvals");
        assert!(error.contains("advisors, router or handoff"), "{error}");
    }
}
