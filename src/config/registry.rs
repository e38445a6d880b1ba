//! The agents a server offers: `.ai` files discovered in the configured `agents` directories,
//! each resolved against the config (models → provider targets, defaults → limits) and checked
//! so that a bad agent is a start-up error, not a failure on the first request.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::agent_file::{
    AgentFile, AgentFileError, AgentFrontmatter, Finalization, ToolOutputMode, Transport,
    read_agent_file,
};
use super::approvals::{
    ApprovalPolicy, DEFAULT_APPROVAL_TIMEOUT, configured_patterns, unmatched_pattern,
};
use super::reasoning::{ReasoningLevel, ReasoningTokens};
use super::sampling::{SamplingParams, numeric_sampling};
use super::{Config, Defaults};

/// One `provider/model` pair an agent may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub provider: String,
    pub model: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// Limits of one session, after frontmatter → config defaults → built-in resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionLimits {
    pub max_turns: u32,
    /// Total attempts per turn, the first included.
    pub max_retries: u32,
    pub max_tool_calls_per_turn: u32,
    /// Inactivity timeout of an LLM call, reset by every streamed chunk.
    pub llm_timeout: Duration,
    pub tool_timeout: Duration,
    pub tool_response_max_bytes: u64,
    /// `llmResponseMaxBytes`: the most bytes one model response may carry.
    pub llm_response_max_bytes: u64,
}

/// The agents run around an agent (reference §2.1): advisors before it, a router destination
/// it may hand over to, and the handoff agent after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Orchestration {
    pub advisors: Vec<String>,
    pub destinations: Vec<String>,
    pub handoff: Option<String>,
}

impl super::AgentSpec {
    /// Every agent this one may run: its sub-agents and the agents around it.
    pub fn linked_agents(&self) -> impl Iterator<Item = &String> {
        self.sub_agents.iter().chain(self.orchestration.agents())
    }
}

impl Orchestration {
    pub fn is_empty(&self) -> bool {
        self.advisors.is_empty() && self.destinations.is_empty() && self.handoff.is_none()
    }

    /// Every agent named, advisors first.
    pub fn agents(&self) -> impl Iterator<Item = &String> {
        self.advisors
            .iter()
            .chain(&self.destinations)
            .chain(&self.handoff)
    }
}

/// An agent ready to run.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    /// `toolName`, else the file stem; the `model` clients ask for.
    pub name: String,
    pub path: Option<PathBuf>,
    pub description: String,
    pub system_prompt: String,
    pub targets: Vec<Target>,
    pub limits: SessionLimits,
    pub sampling: SamplingParams,
    pub finalization: Finalization,
    pub transport: Transport,
    /// What happens to tool outputs past `toolResponseMaxBytes`.
    pub tool_output: ToolOutputMode,
    /// Expected output format (`markdown` unless the frontmatter says otherwise).
    pub output_format: String,
    pub output_schema: Option<Value>,
    /// `input.schema` from the frontmatter: the arguments a caller passes when it runs this
    /// agent as a tool (MCP `tools/call`, A2A data parts); they reach the agent as JSON text.
    /// `None`: the caller passes a prompt.
    pub input_schema: Option<Value>,
    pub tools: Vec<String>,
    pub user_scoped: bool,
    /// `contextWindow` from the frontmatter: overrides the model's for every target.
    pub context_window: Option<u64>,
    /// OpenAI streaming renders progress into `reasoning_content` (default on).
    pub progress_in_reasoning: bool,
    /// The `agents:` entries as written (names or `.ai` paths).
    pub agent_refs: Vec<String>,
    /// The agents this one may call as `agent__{name}` tools, after linking.
    pub sub_agents: Vec<String>,
    /// `advisors`, `router.destinations` and `handoff` as written; linked into `orchestration`.
    pub orchestration_refs: Orchestration,
    /// The agents run around this one, after linking (agent names).
    pub orchestration: Orchestration,
    /// How long a successful response is kept in the response cache; `None`: not cached.
    pub cache_ttl: Option<Duration>,
    /// Hash of prompt, frontmatter and model selection: part of response-cache keys.
    pub hash: String,
    /// The calls that wait for a person's approval, and for how long (SPEC §8).
    pub approvals: ApprovalPolicy,
    /// What one run may spend (`budget:`; SPEC §14), and what happens when it has.
    pub budget: crate::vocabulary::budget::RunBudget,
    pub on_budget: crate::vocabulary::budget::OnBudget,
    /// What a message to one of its conversations that is still answering does (SPEC §13).
    pub busy: super::BusyPolicy,
    /// What a file one of its models cannot read does (`attachments:`; SPEC §11).
    pub attachments: super::attachments::AttachmentMode,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("agents directory {dir}: {detail}")]
    Directory { dir: String, detail: String },
    #[error(transparent)]
    File(#[from] AgentFileError),
    #[error("agent name {name:?} is defined twice: {first} and {second}")]
    Duplicate {
        name: String,
        first: String,
        second: String,
    },
    #[error("{file}: models: {model:?} must be written provider/model")]
    BadModel { file: String, model: String },
    #[error(
        "{file}: models: {model:?} names provider {provider:?}, which is not in the config's providers"
    )]
    UnknownProvider {
        file: String,
        model: String,
        provider: String,
    },
    #[error(
        "{file}: no models: set `models` in the frontmatter or `defaults.models` in the config"
    )]
    NoModels { file: String },
    #[error("{file}: agents: {entry:?} is not an agent name or a readable .ai file")]
    UnknownSubAgent { file: String, entry: String },
    #[error("{file}: {key}: {entry:?} is not an agent name or a readable .ai file")]
    UnknownOrchestrationAgent {
        file: String,
        key: &'static str,
        entry: String,
    },
    #[error(
        "{file}: an agent with advisors, router or handoff cannot wait for tool approvals (approve: {patterns}); remove one or the other"
    )]
    ApprovalWithOrchestration { file: String, patterns: String },
    #[error("sub-agents call each other in a cycle: {chain}")]
    SubAgentCycle { chain: String },
    #[error(
        "agent {child} needs tool approvals ({patterns}) but is a sub-agent of {parent}: a person can approve only the calls of the agent they run; remove `approve`/`requireApproval` for it or call it directly"
    )]
    ApprovalInSubAgent {
        child: String,
        parent: String,
        patterns: String,
    },
    #[error("server.defaultAgent: {name:?} is not an agent (the agents are: {known})")]
    UnknownDefaultAgent { name: String, known: String },
    #[error("{file}: {key}: {detail}")]
    BadSetting {
        file: String,
        key: &'static str,
        detail: String,
    },
}

const DEFAULT_MAX_TURNS: u32 = 10;
const DEFAULT_MAX_RETRIES: u32 = 3;
const DEFAULT_MAX_TOOL_CALLS_PER_TURN: u32 = 10;
const DEFAULT_LLM_TIMEOUT: Duration = Duration::from_secs(120);
const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_TOOL_RESPONSE_MAX_BYTES: u64 = 12 * 1024;
/// 8 MiB: far beyond any answer a model gives (a 128k-token output is about 0.5 MiB), small
/// enough that an upstream that never stops costs little memory and store space.
const DEFAULT_LLM_RESPONSE_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// All agents by name.
#[derive(Debug, Clone, Default)]
pub struct AgentRegistry {
    agents: BTreeMap<String, Arc<AgentSpec>>,
}

impl AgentRegistry {
    /// Reads every `.ai` file in the config's `agents` directories (sorted, not recursive).
    pub fn load(config: &Config) -> Result<Self, RegistryError> {
        let mut registry = Self::default();
        for dir in &config.agents {
            for path in agent_files_in(dir)? {
                registry.insert(resolve_agent(&path, read_agent_file(&path)?, config)?)?;
            }
        }
        registry.link_sub_agents(config)?;
        registry.check_default_agent(config)?;
        Ok(registry)
    }

    /// `server.defaultAgent`, when set, must name one of these agents.
    fn check_default_agent(&self, config: &Config) -> Result<(), RegistryError> {
        match &config.server.default_agent {
            Some(name) if !self.agents.contains_key(name) => {
                let known: Vec<&str> = self.agents.keys().map(String::as_str).collect();
                Err(RegistryError::UnknownDefaultAgent {
                    name: name.clone(),
                    known: if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    },
                })
            }
            _ => Ok(()),
        }
    }

    /// The agent a client's `model` names, else `server.defaultAgent`'s (when set).
    pub fn for_model(&self, model: &str, default_agent: Option<&str>) -> Option<Arc<AgentSpec>> {
        self.get(model)
            .or_else(|| default_agent.and_then(|name| self.get(name)))
    }

    /// Adds one agent file (e.g. the one `agentd run path.ai` names).
    pub fn add_file(
        &mut self,
        path: &Path,
        config: &Config,
    ) -> Result<Arc<AgentSpec>, RegistryError> {
        let spec = resolve_agent(path, read_agent_file(path)?, config)?;
        let name = spec.name.clone();
        self.insert(spec)?;
        self.link_sub_agents(config)?;
        self.get(&name).ok_or_else(|| RegistryError::Directory {
            dir: path.display().to_string(),
            detail: "agent vanished".into(),
        })
    }

    pub fn insert(&mut self, spec: AgentSpec) -> Result<(), RegistryError> {
        if let Some(existing) = self.agents.get(&spec.name) {
            return Err(RegistryError::Duplicate {
                name: spec.name.clone(),
                first: display_path(existing.path.as_deref()),
                second: display_path(spec.path.as_deref()),
            });
        }
        self.agents.insert(spec.name.clone(), Arc::new(spec));
        Ok(())
    }

    /// Replaces an agent of the same name (used while linking sub-agents).
    pub(super) fn replace(&mut self, spec: AgentSpec) {
        self.agents.insert(spec.name.clone(), Arc::new(spec));
    }

    pub fn get(&self, name: &str) -> Option<Arc<AgentSpec>> {
        self.agents.get(name).cloned()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<AgentSpec>> {
        self.agents.values()
    }

    /// `root` and every agent it can reach as a sub-agent, at any depth: all a run of `root`
    /// may use.
    pub fn reachable_from(&self, root: &AgentSpec) -> Self {
        let mut reached = Self::default();
        let mut pending = vec![Arc::new(root.clone())];
        while let Some(agent) = pending.pop() {
            if reached.agents.contains_key(&agent.name) {
                continue;
            }
            pending.extend(agent.linked_agents().filter_map(|name| self.get(name)));
            reached.agents.insert(agent.name.clone(), agent);
        }
        reached
    }

    pub fn len(&self) -> usize {
        self.agents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }
}

fn display_path(path: Option<&Path>) -> String {
    path.map_or_else(|| "(built in)".to_string(), |p| p.display().to_string())
}

/// The agent files in `dir`, sorted: every `*.ai` file, and every `*.md` file that opens with
/// a `---` frontmatter block (a Markdown file without one, such as a README, is not an agent and
/// is skipped with a log line saying so).
fn agent_files_in(dir: &Path) -> Result<Vec<PathBuf>, RegistryError> {
    let unreadable = |e: std::io::Error| RegistryError::Directory {
        dir: dir.display().to_string(),
        detail: e.to_string(),
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        if !path.is_file() {
            continue;
        }
        match AgentFileKind::of(&path) {
            Some(AgentFileKind::Ai) => files.push(path),
            Some(AgentFileKind::Markdown) if opens_with_frontmatter(&path) => files.push(path),
            Some(AgentFileKind::Markdown) => tracing::info!(
                file = %path.display(),
                "skipped: a Markdown file without `---` frontmatter is not an agent"
            ),
            None => {}
        }
    }
    files.sort();
    Ok(files)
}

/// The file extensions an agent file may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgentFileKind {
    /// `*.ai`: always an agent file.
    Ai,
    /// `*.md`: an agent file when it opens with frontmatter.
    Markdown,
}

impl AgentFileKind {
    pub(crate) fn of(path: &Path) -> Option<Self> {
        let extension = path.extension()?;
        if extension.eq_ignore_ascii_case("ai") {
            Some(Self::Ai)
        } else if extension.eq_ignore_ascii_case("md") {
            Some(Self::Markdown)
        } else {
            None
        }
    }
}

/// Whether the file's first line is `---` (after an optional byte-order mark).
fn opens_with_frontmatter(path: &Path) -> bool {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open(path) else {
        return true; // Loading it reports why it cannot be read.
    };
    let mut first = String::new();
    if std::io::BufReader::new(file).read_line(&mut first).is_err() {
        return true;
    }
    first.trim_start_matches('\u{feff}').trim_end() == "---"
}

/// Resolves an agent file against the config: frontmatter, then `defaults`, then built-ins.
pub fn resolve_agent(
    path: &Path,
    file: AgentFile,
    config: &Config,
) -> Result<AgentSpec, RegistryError> {
    let file_label = path.display().to_string();
    let fm = &file.frontmatter;
    let defaults = &config.defaults;
    let name = fm
        .tool_name
        .clone()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let model_names = fm
        .models
        .as_ref()
        .map(|m| m.to_vec())
        .or_else(|| defaults.models.clone())
        .unwrap_or_default();
    if model_names.is_empty() {
        return Err(RegistryError::NoModels { file: file_label });
    }
    let targets = model_names
        .iter()
        .map(|m| parse_target(m, &file_label, config))
        .collect::<Result<Vec<_>, _>>()?;
    let limits = SessionLimits {
        max_turns: fm
            .max_turns
            .or(defaults.max_turns)
            .unwrap_or(DEFAULT_MAX_TURNS)
            .max(1),
        max_retries: fm
            .max_retries
            .or(defaults.max_retries)
            .unwrap_or(DEFAULT_MAX_RETRIES)
            .max(1),
        max_tool_calls_per_turn: fm
            .max_tool_calls_per_turn
            .or(defaults.max_tool_calls_per_turn)
            .unwrap_or(DEFAULT_MAX_TOOL_CALLS_PER_TURN),
        llm_timeout: fm
            .llm_timeout
            .or(defaults.llm_timeout)
            .map_or(DEFAULT_LLM_TIMEOUT, |d| d.0),
        tool_timeout: fm
            .tool_timeout
            .or(defaults.tool_timeout)
            .map_or(DEFAULT_TOOL_TIMEOUT, |d| d.0),
        tool_response_max_bytes: fm
            .tool_response_max_bytes
            .or(defaults.tool_response_max_bytes)
            .unwrap_or(DEFAULT_TOOL_RESPONSE_MAX_BYTES),
        llm_response_max_bytes: llm_response_max_bytes(fm, defaults)
            .map_err(|detail| bad_setting(&file_label, "llmResponseMaxBytes", detail))?,
    };
    let sampling = numeric_sampling!(defaults).overridden_by(&SamplingParams {
        reasoning: reasoning_level(fm.reasoning.as_ref(), defaults.reasoning.as_ref())
            .map_err(|detail| bad_setting(&file_label, "reasoning", detail))?,
        reasoning_tokens: fm
            .reasoning_tokens
            .as_ref()
            .map(ReasoningTokens::parse)
            .transpose()
            .map_err(|detail| bad_setting(&file_label, "reasoningTokens", detail))?,
        ..numeric_sampling!(fm)
    });
    let output = fm.output.as_ref();
    let hash = agent_hash(&file, &targets);
    let tools = fm.tools.as_ref().map(|t| t.to_vec()).unwrap_or_default();
    let agent_refs = fm.agents.as_ref().map(|a| a.to_vec()).unwrap_or_default();
    let approvals = approval_policy(fm, &tools, &agent_refs, config)
        .map_err(|detail| bad_setting(&file_label, "approve", detail))?;
    let budget = fm.budget.unwrap_or_default();
    budget
        .check()
        .map_err(|(_, detail)| bad_setting(&file_label, "budget", detail))?;
    Ok(AgentSpec {
        name,
        path: Some(path.to_path_buf()),
        description: fm.description.clone().unwrap_or_default(),
        system_prompt: file.prompt.clone(),
        targets,
        limits,
        sampling,
        finalization: fm.finalization.unwrap_or_default(),
        transport: fm.transport.unwrap_or_default(),
        tool_output: fm.tool_output.unwrap_or_default(),
        output_format: output
            .and_then(|o| o.format.clone())
            .unwrap_or_else(|| "markdown".into()),
        output_schema: output.and_then(|o| o.schema.clone()),
        input_schema: fm.input.as_ref().and_then(|i| i.schema.clone()),
        tools,
        user_scoped: fm.user_scoped.unwrap_or(false),
        context_window: fm.context_window,
        progress_in_reasoning: fm.progress_in_reasoning.unwrap_or(true),
        agent_refs,
        sub_agents: Vec::new(),
        orchestration_refs: Orchestration {
            advisors: fm.advisors.as_ref().map(|a| a.to_vec()).unwrap_or_default(),
            destinations: fm
                .router
                .as_ref()
                .map(|r| r.destinations.to_vec())
                .unwrap_or_default(),
            handoff: fm.handoff.clone(),
        },
        orchestration: Orchestration::default(),
        cache_ttl: fm.cache.and_then(|c| c.0),
        hash,
        approvals,
        budget,
        on_budget: fm.on_budget.unwrap_or_default(),
        busy: fm.busy.unwrap_or_default(),
        attachments: fm.attachments.unwrap_or_default(),
    })
}

/// The agent's `approve:` patterns (each must be able to match one of its tools) plus what
/// `requireApproval` adds for the tools it uses, and `approvalTimeout`.
fn approval_policy(
    fm: &AgentFrontmatter,
    tools: &[String],
    agent_refs: &[String],
    config: &Config,
) -> Result<ApprovalPolicy, String> {
    let written = fm.approve.as_ref().map(|a| a.to_vec()).unwrap_or_default();
    // MCP servers and OpenAPI specs (`openapi__NAME`): their tools are `entry__tool`.
    let servers: Vec<&str> = tools
        .iter()
        .filter(|entry| config.mcp_servers.contains_key(*entry) || entry.starts_with("openapi__"))
        .map(String::as_str)
        .collect();
    let mut known: Vec<String> = tools
        .iter()
        .filter(|entry| entry.starts_with("rest__"))
        .cloned()
        .collect();
    known.extend(
        agent_refs
            .iter()
            .filter(|r| AgentFileKind::of(Path::new(r)).is_none())
            .map(|name| format!("agent__{name}")),
    );
    for pattern in &written {
        if let Some(problem) = unmatched_pattern(pattern, &servers, &known) {
            return Err(problem);
        }
    }
    let mut patterns = written;
    patterns.extend(configured_patterns(config, tools));
    let timeout = fm
        .approval_timeout
        .or(config.defaults.approval_timeout)
        .map_or(DEFAULT_APPROVAL_TIMEOUT, |d| d.0);
    if timeout.is_zero() {
        return Err("approvalTimeout must be longer than 0".into());
    }
    Ok(ApprovalPolicy { patterns, timeout })
}

/// The frontmatter level, else the config default; "inherit" in the frontmatter falls through.
fn reasoning_level(
    frontmatter: Option<&Value>,
    default: Option<&Value>,
) -> Result<Option<ReasoningLevel>, String> {
    let own = frontmatter
        .map(ReasoningLevel::parse_setting)
        .transpose()?
        .flatten();
    match own {
        Some(level) => Ok(Some(level)),
        None => Ok(default
            .map(ReasoningLevel::parse_setting)
            .transpose()
            .map_err(|e| format!("defaults.reasoning: {e}"))?
            .flatten()),
    }
}

/// `llmResponseMaxBytes` from the frontmatter, else the defaults, else 8 MiB; at least 1.
fn llm_response_max_bytes(fm: &AgentFrontmatter, defaults: &Defaults) -> Result<u64, String> {
    match fm
        .llm_response_max_bytes
        .or(defaults.llm_response_max_bytes)
    {
        Some(0) => Err("must be at least 1 (bytes one model response may carry)".into()),
        Some(bytes) => Ok(bytes),
        None => Ok(DEFAULT_LLM_RESPONSE_MAX_BYTES),
    }
}

fn bad_setting(file: &str, key: &'static str, detail: String) -> RegistryError {
    RegistryError::BadSetting {
        file: file.to_string(),
        key,
        detail,
    }
}

fn parse_target(model: &str, file: &str, config: &Config) -> Result<Target, RegistryError> {
    let (provider, model_id) = model
        .split_once('/')
        .filter(|(p, m)| !p.is_empty() && !m.is_empty())
        .ok_or_else(|| RegistryError::BadModel {
            file: file.to_string(),
            model: model.to_string(),
        })?;
    if !config.providers.contains_key(provider) {
        return Err(RegistryError::UnknownProvider {
            file: file.to_string(),
            model: model.to_string(),
            provider: provider.to_string(),
        });
    }
    Ok(Target {
        provider: provider.to_string(),
        model: model_id.to_string(),
    })
}

fn agent_hash(file: &AgentFile, targets: &[Target]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(file.prompt.as_bytes());
    hasher.update([0]);
    hasher.update(file.frontmatter_text.as_bytes());
    for target in targets {
        hasher.update([0]);
        hasher.update(target.to_string().as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::agent_file::parse_agent_file;
    use crate::config::parse_config;
    use serde_json::json;

    fn config() -> Config {
        parse_config(
            json!({"providers": {"llm": {"type": "openai-compatible"}}, "defaults": {"models": ["llm/base"], "maxTurns": 7}}),
            "test",
        )
        .expect("config")
    }

    fn resolve(text: &str) -> Result<AgentSpec, RegistryError> {
        resolve_agent(
            Path::new("/agents/helper.ai"),
            parse_agent_file(text).expect("file"),
            &config(),
        )
    }

    #[test]
    fn frontmatter_beats_defaults_beats_builtins() {
        let spec = resolve("---\nmaxRetries: 5\n---\nprompt").expect("spec");
        assert_eq!(spec.name, "helper");
        assert_eq!(
            spec.targets,
            vec![Target {
                provider: "llm".into(),
                model: "base".into()
            }]
        );
        assert_eq!(spec.limits.max_retries, 5);
        assert_eq!(spec.limits.max_turns, 7);
        assert_eq!(
            spec.limits.max_tool_calls_per_turn,
            DEFAULT_MAX_TOOL_CALLS_PER_TURN
        );
    }

    #[test]
    fn tool_name_names_the_agent() {
        assert_eq!(
            resolve("---\ntoolName: chat\n---\np").expect("spec").name,
            "chat"
        );
    }

    #[test]
    fn unknown_provider_and_bad_model_are_named() {
        let err = resolve("---\nmodels: [nope/m]\n---\np")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"nope\"") && err.contains("/agents/helper.ai"),
            "{err}"
        );
        assert!(
            resolve("---\nmodels: [justamodel]\n---\np")
                .unwrap_err()
                .to_string()
                .contains("provider/model")
        );
    }

    #[test]
    fn markdown_agent_files_load_beside_ai_files_and_plain_markdown_is_skipped() {
        let dir = tempfile::tempdir().expect("dir");
        let write =
            |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
        write("chat.ai", "---\ndescription: a\n---\nYou chat.");
        write("notes.md", "---\ndescription: b\n---\nYou take notes.");
        write("UPPER.MD", "\u{feff}---\ndescription: c\n---\nYou shout.");
        write("README.md", "# The agents here\n\nNot an agent.");
        write("other.txt", "---\n---\nnot an agent either");
        let mut config = config();
        config.agents = vec![dir.path().to_path_buf()];
        let registry = AgentRegistry::load(&config).expect("registry");
        let mut names: Vec<&str> = registry.agents.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["UPPER", "chat", "notes"]);
        // The same name from two files is the usual duplicate error.
        write("chat.md", "---\ndescription: d\n---\nAgain.");
        assert!(matches!(
            AgentRegistry::load(&config),
            Err(RegistryError::Duplicate { .. })
        ));
    }

    #[test]
    fn duplicate_names_are_rejected() {
        let mut registry = AgentRegistry::default();
        registry.insert(resolve("p").expect("spec")).expect("first");
        assert!(matches!(
            registry.insert(resolve("p").expect("spec")),
            Err(RegistryError::Duplicate { .. })
        ));
    }

    #[test]
    fn reasoning_settings_resolve_and_bad_values_are_named() {
        let spec = resolve("---\nreasoning: high\nreasoningTokens: 3000\n---\np").expect("spec");
        assert_eq!(spec.sampling.reasoning, Some(ReasoningLevel::High));
        assert_eq!(
            spec.sampling.reasoning_tokens,
            Some(ReasoningTokens::Budget(3000))
        );
        let off = resolve("---\nreasoning: none\n---\np").expect("spec");
        assert_eq!(off.sampling.reasoning, Some(ReasoningLevel::Off));
        let err = resolve("---\nreasoning: maximum\n---\np")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reasoning") && err.contains("maximum") && err.contains("helper.ai"),
            "{err}"
        );
        let err = resolve("---\nreasoningTokens: lots\n---\np")
            .unwrap_err()
            .to_string();
        assert!(err.contains("reasoningTokens"), "{err}");
    }

    #[test]
    fn hash_changes_with_prompt_and_models() {
        let a = resolve("---\nmodels: llm/a\n---\np").expect("spec").hash;
        let b = resolve("---\nmodels: llm/b\n---\np").expect("spec").hash;
        let c = resolve("---\nmodels: llm/a\n---\nq").expect("spec").hash;
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, resolve("---\nmodels: llm/a\n---\np").expect("spec").hash);
    }

    #[test]
    fn the_default_agent_must_be_an_agent_and_answers_other_models() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("chat.ai"), "---\n---\nprompt").expect("agent");
        let with_default = |name: &str| {
            parse_config(
                json!({"providers": {"llm": {"type": "openai-compatible"}},
                    "defaults": {"models": ["llm/base"]},
                    "agents": [dir.path()], "server": {"defaultAgent": name}}),
                "test",
            )
            .expect("config")
        };
        let err = AgentRegistry::load(&with_default("chta"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "server.defaultAgent: \"chta\" is not an agent (the agents are: chat)"
        );
        let registry = AgentRegistry::load(&with_default("chat")).expect("loads");
        let named = |model: &str, default: Option<&str>| {
            registry.for_model(model, default).map(|a| a.name.clone())
        };
        assert_eq!(named("claude-opus", Some("chat")).as_deref(), Some("chat"));
        assert_eq!(named("chat", None).as_deref(), Some("chat"));
        assert_eq!(named("claude-opus", None), None);
    }
}
