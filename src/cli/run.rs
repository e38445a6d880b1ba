//! `agentd run AGENT PROMPT`: one session in the terminal. The final report goes to stdout;
//! thinking and progress go to stderr (a live status line when stderr is a terminal).

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::{EXIT_SESSION_FAILED, Failure, load_config};
use crate::agent::AgentEvent;
use crate::agent::final_report::FinalReportSpec;
use crate::agent::result::AccountingEntry;
use crate::config::{AgentRegistry, AgentSpec, Config, Target};
use crate::runtime::{RunSubmission, Runtime};

#[derive(Debug, clap::Args)]
pub(super) struct RunArgs {
    /// A path to an `.ai` file or the name of a configured agent.
    agent: String,
    /// The task; `-` reads stdin, `@file` reads a file.
    prompt: String,
    #[arg(long)]
    config: Option<PathBuf>,
    /// Comma-separated provider/model targets replacing the agent's.
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// Output format of the final report: markdown, text, json, …
    #[arg(long)]
    format: Option<String>,
    /// JSON schema of a json report, inline or `@file`.
    #[arg(long)]
    schema: Option<String>,
    #[arg(long)]
    max_turns: Option<u32>,
    #[arg(long)]
    max_retries: Option<u32>,
    /// Print the whole AgentResult as JSON.
    #[arg(long)]
    json: bool,
    /// Store URL to record the run in (default: nothing is kept).
    #[arg(long)]
    database: Option<String>,
}

pub(super) async fn run(options: RunArgs) -> Result<u8, Failure> {
    let (agent, prompt, config) = (
        options.agent.as_str(),
        options.prompt.as_str(),
        options.config.clone(),
    );
    let agent_path = Path::new(agent);
    let is_file = agent_path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ai"))
        || agent_path.is_file();
    let prompt_dir = is_file
        .then(|| agent_path.parent().map(Path::to_path_buf))
        .flatten();
    let mut config = load_config(config, prompt_dir)?;
    let telemetry = super::start_telemetry(&config.telemetry)?;
    // A CLI run keeps nothing unless asked to.
    config.store.url = options
        .database
        .clone()
        .unwrap_or_else(|| "sqlite::memory:".into());
    let mut registry = if is_file {
        AgentRegistry::default()
    } else {
        AgentRegistry::load(&config).map_err(Failure::config)?
    };
    let spec = if is_file {
        registry
            .add_file(agent_path, &config)
            .map_err(Failure::config)?
    } else {
        registry.get(agent).ok_or_else(|| {
            Failure::config(format!(
                "no agent named {agent:?}; `agentd agents` lists them"
            ))
        })?
    };
    let spec = Arc::new(apply_overrides(&spec, &options, &config)?);
    let schema = options.schema.as_deref().map(read_schema).transpose()?;
    let format = options
        .format
        .clone()
        .unwrap_or_else(|| spec.output_format.clone());
    FinalReportSpec::new(&format, schema.as_ref().or(spec.output_schema.as_ref()))
        .map_err(Failure::schema)?;
    let prompt = read_prompt(prompt)?;
    // Only the agent and its sub-agents are loaded, so only the tool servers they use start.
    let registry = registry.reachable_from(&spec);
    let runtime = Runtime::start(config, registry)
        .await
        .map_err(Failure::runtime)?;
    let mut submission = RunSubmission::new(spec, prompt);
    submission.format = Some(format);
    submission.schema = schema;
    // A terminal paused for a while (Ctrl-S) only stops the progress display, never the run.
    submission.on_disconnect = crate::config::OnDisconnect::Continue;
    let mut handle = runtime
        .start_run(submission)
        .await
        .map_err(|e| Failure::init(format!("the run could not start: {e}")))?;
    let mut progress = Progress::new(!options.json);
    while let Some(event) = handle.events.recv().await {
        progress.show(&event);
    }
    progress.finish();
    let result = handle.result.await;
    runtime.close().await;
    let result = result.map_err(|_| Failure::init("the session task ended unexpectedly"))?;
    let mut stdout = std::io::stdout().lock();
    let text = if options.json {
        serde_json::to_string_pretty(&result).map_err(Failure::init)?
    } else {
        result.answer_text()
    };
    writeln!(stdout, "{text}").map_err(Failure::init)?;
    if !result.success && !options.json {
        eprintln!(
            "agentd: run failed ({}): {}",
            result.exit_reason.as_str(),
            result.error.as_deref().unwrap_or("no details")
        );
    }
    telemetry.shutdown();
    Ok(if result.success {
        0
    } else {
        EXIT_SESSION_FAILED
    })
}

fn apply_overrides(
    spec: &AgentSpec,
    options: &RunArgs,
    config: &Config,
) -> Result<AgentSpec, Failure> {
    let mut spec = spec.clone();
    if let Some(turns) = options.max_turns {
        spec.limits.max_turns = turns.max(1);
    }
    if let Some(retries) = options.max_retries {
        spec.limits.max_retries = retries.max(1);
    }
    if !options.models.is_empty() {
        spec.targets = options
            .models
            .iter()
            .map(|m| parse_target(m, config))
            .collect::<Result<_, _>>()?;
    }
    Ok(spec)
}

fn parse_target(model: &str, config: &Config) -> Result<Target, Failure> {
    let (provider, model_id) = model
        .split_once('/')
        .filter(|(p, m)| !p.is_empty() && !m.is_empty())
        .ok_or_else(|| Failure::config(format!("--models {model:?}: write provider/model")))?;
    if !config.providers.contains_key(provider) {
        return Err(Failure::config(format!(
            "--models {model:?}: no provider {provider:?} in the config"
        )));
    }
    Ok(Target {
        provider: provider.into(),
        model: model_id.into(),
    })
}

/// `--schema` is inline JSON or `@file`; unreadable or non-JSON text is exit 4.
fn read_schema(text: &str) -> Result<Value, Failure> {
    let raw = match text.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Failure::config(format!("cannot read the schema file {path}: {e}")))?,
        None => text.to_string(),
    };
    serde_json::from_str(&raw)
        .map_err(|e| Failure::config(format!("--schema is not valid JSON: {e}")))
}

fn read_prompt(prompt: &str) -> Result<String, Failure> {
    if prompt == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::config(format!("cannot read the prompt from stdin: {e}")))?;
        return Ok(text);
    }
    match prompt.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Failure::config(format!("cannot read the prompt file {path}: {e}"))),
        None => Ok(prompt.to_string()),
    }
}

/// What the terminal shows while a run goes on.
struct Progress {
    enabled: bool,
    tty: bool,
    started: Instant,
    turn: u32,
    tokens: u64,
    /// A status line is on screen and must be cleared before other output.
    line_shown: bool,
}

impl Progress {
    fn new(enabled: bool) -> Self {
        Self {
            enabled,
            tty: std::io::stderr().is_terminal(),
            started: Instant::now(),
            turn: 0,
            tokens: 0,
            line_shown: false,
        }
    }

    fn show(&mut self, event: &AgentEvent) {
        if !self.enabled {
            return;
        }
        match event {
            AgentEvent::TurnStarted(turn) => {
                self.turn = turn.turn;
                if !self.tty && turn.is_retry {
                    eprintln!("[turn {} attempt {}]", turn.turn, turn.attempt);
                }
            }
            AgentEvent::Accounting(entry) => {
                if let AccountingEntry::Llm(llm) = &**entry {
                    self.tokens += llm.tokens.total_tokens;
                }
            }
            AgentEvent::Thinking(delta) => self.write(&delta.text, true),
            AgentEvent::ToolStarted(tool) if !self.tty => eprintln!("[tool {}]", tool.tool),
            AgentEvent::Error(error) => self.write(
                &format!("[error {}] {}\n", error.code, error.message),
                false,
            ),
            _ => {}
        }
        self.status_line();
    }

    /// Writes text to stderr, clearing the status line first; thinking is grey on a terminal.
    fn write(&mut self, text: &str, thinking: bool) {
        let mut stderr = std::io::stderr().lock();
        if self.line_shown {
            let _ = write!(stderr, "\r\x1b[2K");
            self.line_shown = false;
        }
        let _ = if thinking && self.tty {
            write!(stderr, "\x1b[90m{text}\x1b[0m")
        } else {
            write!(stderr, "{text}")
        };
    }

    fn status_line(&mut self) {
        if !self.tty {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        let elapsed = self.started.elapsed().as_secs_f64();
        let _ = write!(
            stderr,
            "\r\x1b[2K[turn {} · {} tokens · {elapsed:.1}s]",
            self.turn, self.tokens
        );
        let _ = stderr.flush();
        self.line_shown = true;
    }

    fn finish(&mut self) {
        if self.line_shown {
            let _ = writeln!(std::io::stderr());
            self.line_shown = false;
        }
    }
}
