//! [`AgentBuilder`]: an agent defined in code (models, tools, limits, output) instead of a file.
//! It fills the same frontmatter an agent file would, so a built agent gets exactly the
//! defaults and checks a file gets.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Agent, Embedded, LibraryError};
use crate::config::agent_file::{AgentFile, AgentFrontmatter, Finalization, IoSpec, OneOrMany};
use crate::config::duration::HumanDuration;
use crate::config::registry::resolve_agent;
use crate::llm::Provider;
use crate::llm::scripted::ScriptedProvider;
use crate::tools::ToolProvider;

/// The provider name [`AgentBuilder::scripted_model`] registers the bundled model under.
pub const SCRIPTED_PROVIDER: &str = "scripted";

/// Builds an [`Agent`] in code; [`Agent::builder`] starts one.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// use agentd::library::Agent;
///
/// let agent = Agent::builder("careful")
///     .description("Answers briefly.")
///     .system_prompt("Answer in one sentence.")
///     .scripted_model("echo")
///     .max_turns(3)
///     .llm_timeout(Duration::from_secs(30))
///     .build()
///     .await?;
/// assert_eq!(agent.name(), "careful");
/// # Ok::<(), agentd::library::LibraryError>(())
/// # }).unwrap();
/// ```
pub struct AgentBuilder {
    name: String,
    system_prompt: String,
    frontmatter: AgentFrontmatter,
    config: Map<String, Value>,
    embedded: Embedded,
}

impl AgentBuilder {
    pub(super) fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            system_prompt: String::new(),
            frontmatter: AgentFrontmatter::default(),
            config: Map::new(),
            embedded: Embedded::default(),
        }
    }

    /// The server configuration the agent's models and tools come from (SPEC §2:
    /// `providers`, `mcpServers`, `restTools`, `openapiSpecs`, `defaults`, `pricing`).
    pub fn config(mut self, config: Value) -> Self {
        if let Value::Object(config) = config {
            self.config = config;
        }
        self
    }

    /// The agent's system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// What the agent does, as clients are told.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.frontmatter.description = Some(description.into());
        self
    }

    /// A `provider/model` target; called again, the next target tried when one fails.
    pub fn model(mut self, target: impl Into<String>) -> Self {
        let mut models = self
            .frontmatter
            .models
            .take()
            .map(|models| models.to_vec())
            .unwrap_or_default();
        models.push(target.into());
        self.frontmatter.models = Some(OneOrMany::Many(models));
        self
    }

    /// A provider the embedder built (any [`Provider`]), callable as `name/…` in
    /// [`AgentBuilder::model`].
    pub fn provider(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.embedded.providers.push((name.into(), provider));
        self
    }

    /// The bundled scripted model (`echo`, `think`, `tools` or `json`): no network, no key.
    pub fn scripted_model(self, model: &str) -> Self {
        let provider: Arc<dyn Provider> = Arc::new(ScriptedProvider::new(SCRIPTED_PROVIDER));
        self.provider(SCRIPTED_PROVIDER, provider)
            .model(format!("{SCRIPTED_PROVIDER}/{model}"))
    }

    /// Tools from the configuration: MCP server names, `rest__NAME`, `openapi__NAME`.
    pub fn tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut all = self
            .frontmatter
            .tools
            .take()
            .map(|tools| tools.to_vec())
            .unwrap_or_default();
        all.extend(tools.into_iter().map(Into::into));
        self.frontmatter.tools = Some(OneOrMany::Many(all));
        self
    }

    /// Tools the embedder implemented (any [`ToolProvider`]), offered under its namespace.
    pub fn tool_provider(mut self, provider: Arc<dyn ToolProvider>) -> Self {
        self.embedded.tools.push(provider);
        self
    }

    /// The most turns (model calls) a run may take.
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.frontmatter.max_turns = Some(turns);
        self
    }

    /// The most tool calls the model may make in one turn.
    pub fn max_tool_calls_per_turn(mut self, calls: u32) -> Self {
        self.frontmatter.max_tool_calls_per_turn = Some(calls);
        self
    }

    /// How long one model call may take.
    pub fn llm_timeout(mut self, timeout: Duration) -> Self {
        self.frontmatter.llm_timeout = Some(HumanDuration(timeout));
        self
    }

    /// How long one tool call may take.
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.frontmatter.tool_timeout = Some(HumanDuration(timeout));
        self
    }

    /// Sampling temperature.
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.frontmatter.temperature = Some(temperature);
        self
    }

    /// The most tokens one answer may have.
    pub fn max_output_tokens(mut self, tokens: u32) -> Self {
        self.frontmatter.max_output_tokens = Some(tokens);
        self
    }

    /// The answer must be JSON matching `schema` (its final report carries `content_json`).
    pub fn json_output(mut self, schema: Value) -> Self {
        self.frontmatter.output = Some(IoSpec {
            format: Some("json".into()),
            schema: Some(schema),
        });
        self
    }

    /// The first answer without tool calls ends the run, instead of a final report.
    pub fn plain_text_answers(mut self) -> Self {
        self.frontmatter.finalization = Some(Finalization::Text);
        self
    }

    /// Checks everything a file would be checked for, then connects the agent's tools.
    pub async fn build(mut self) -> Result<Agent, LibraryError> {
        if self.frontmatter.models.is_none() {
            return Err(LibraryError::NoModel);
        }
        self.declare_embedded_providers();
        let config = crate::config::parse_config(Value::Object(self.config), "<library config>")?;
        let frontmatter_text = format!("{:?}", self.frontmatter);
        let file = AgentFile {
            frontmatter: self.frontmatter,
            prompt: self.system_prompt,
            frontmatter_text,
        };
        let path = std::path::Path::new(&self.name).with_extension("ai");
        let spec = resolve_agent(&path, file, &config)?;
        Agent::assemble(spec, &config, self.embedded).await
    }

    /// Names the embedder's providers in the configuration, so `name/model` targets resolve
    /// as for any configured provider; the objects the embedder built serve the calls.
    fn declare_embedded_providers(&mut self) {
        let providers = self
            .config
            .entry("providers")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(providers) = providers {
            for (name, _) in &self.embedded.providers {
                providers
                    .entry(name.clone())
                    .or_insert_with(|| json!({"type": "scripted"}));
            }
        }
    }
}
