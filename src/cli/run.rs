//! `agentd run AGENT PROMPT`: one session in the terminal. The final report goes to stdout;
//! thinking and progress go to stderr (a live status line when stderr is a terminal). A tool
//! call that needs approval is asked about on the terminal (approve, deny with a reason, edit the
//! arguments), or decided by `--approve-all` / `--deny-all`; with neither and no terminal it is
//! denied with a message saying so.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::{EXIT_SCHEMA_INVALID, EXIT_SESSION_FAILED, Failure, load_config};
use crate::agent::AgentEvent;
use crate::agent::ExitReason;
use crate::agent::approval::Decision;
use crate::agent::events::ApprovalRequested;
use crate::agent::final_report::FinalReportSpec;
use crate::config::{AgentRegistry, AgentSpec, Config, Target};
use crate::runtime::{ApprovalError, RunSubmission, Runtime};
use crate::vocabulary::result::AccountingEntry;

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
    /// Approve every tool call that needs approval without asking.
    #[arg(long, conflicts_with = "deny_all")]
    approve_all: bool,
    /// Deny every tool call that needs approval without asking.
    #[arg(long)]
    deny_all: bool,
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
        .is_some_and(|e| e.eq_ignore_ascii_case("ai") || e.eq_ignore_ascii_case("md"))
        || agent_path.is_file();
    let prompt_dir = is_file
        .then(|| agent_path.parent().map(Path::to_path_buf))
        .flatten();
    let config_given = config.is_some();
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
        registry
            .get(agent)
            .ok_or_else(|| Failure::config(unknown_agent(agent, &registry, config_given)))?
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
    let approver = Approver::new(&options);
    while let Some(event) = handle.events.recv().await {
        let event = event.event;
        progress.show(&event);
        if let AgentEvent::ApprovalRequested(waiting) = &event {
            progress.finish();
            approver.decide(&runtime, &handle.run_id, waiting).await;
        }
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
    telemetry.shutdown().await;
    Ok(if result.success {
        0
    } else if result.exit_reason == ExitReason::SchemaValidationFailed {
        EXIT_SCHEMA_INVALID
    } else {
        EXIT_SESSION_FAILED
    })
}

/// Why `agent` is not found, and what to do: name the loaded agents, or point at `--config`
/// when none was given (the usual first mistake).
fn unknown_agent(agent: &str, registry: &AgentRegistry, config_given: bool) -> String {
    let mut names: Vec<&str> = registry.iter().map(|spec| spec.name.as_str()).collect();
    names.sort_unstable();
    let known = if names.is_empty() {
        "no agents are loaded".to_string()
    } else {
        format!("the loaded agents are {}", names.join(", "))
    };
    if config_given {
        format!("no agent named {agent:?}: {known}")
    } else {
        format!(
            "no agent named {agent:?}: {known}. No --config was given: pass the config that \
             lists your agents (`--config config/agentd.json`), or the path of an agent file"
        )
    }
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

/// Who decides the calls that need approval (SPEC §8): the person at the terminal, or the
/// `--approve-all` / `--deny-all` flag; without a terminal or a flag every such call is denied,
/// saying why.
enum Approver {
    All(bool),
    Terminal,
    Nobody,
}

/// What the model is told when nobody could be asked.
const NO_TERMINAL_REASON: &str =
    "nobody could approve it: agentd run has no terminal (use --approve-all or --deny-all)";

impl Approver {
    fn new(options: &RunArgs) -> Self {
        if options.approve_all || options.deny_all {
            Self::All(options.approve_all)
        } else if std::io::stdin().is_terminal() && options.prompt != "-" {
            Self::Terminal
        } else {
            Self::Nobody
        }
    }

    async fn decide(&self, runtime: &Arc<Runtime>, run_id: &str, waiting: &ApprovalRequested) {
        let mut decision = match self {
            Self::All(true) => Decision::Approve {
                arguments: None,
                note: None,
            },
            Self::All(false) => Decision::Deny {
                reason: Some("denied by --deny-all".into()),
            },
            Self::Nobody => {
                eprintln!(
                    "agentd: `{}` needs approval and there is no terminal to ask: denied (use --approve-all or --deny-all)",
                    waiting.tool
                );
                Decision::Deny {
                    reason: Some(NO_TERMINAL_REASON.into()),
                }
            }
            Self::Terminal => ask(waiting, None).await,
        };
        loop {
            match runtime
                .decide_approval(run_id, &waiting.call_id, decision, "cli")
                .await
            {
                Ok(_) => return,
                Err(ApprovalError::InvalidArguments { problems, .. })
                    if matches!(self, Self::Terminal) =>
                {
                    decision = ask(waiting, Some(&problems)).await;
                }
                Err(error) => {
                    eprintln!(
                        "agentd: the decision on `{}` was not taken: {error}",
                        waiting.tool
                    );
                    return;
                }
            }
        }
    }
}

/// Asks the person at the terminal: approve, deny (with a reason) or edit the arguments.
async fn ask(waiting: &ApprovalRequested, problem: Option<&str>) -> Decision {
    let tool = waiting.tool.clone();
    let arguments = waiting.arguments.to_string();
    let problem = problem.map(str::to_string);
    let asked = tokio::task::spawn_blocking(move || {
        if let Some(problem) = problem {
            eprintln!("agentd: those arguments do not fit the tool: {problem}");
        }
        eprintln!("agentd: the agent wants to call `{tool}` with {arguments}");
        loop {
            let answer = read_answer("[a]pprove, [d]eny or [e]dit the arguments? ");
            match answer.trim().to_ascii_lowercase().as_str() {
                "a" | "approve" | "y" | "yes" => {
                    return Decision::Approve {
                        arguments: None,
                        note: None,
                    };
                }
                "d" | "deny" | "n" | "no" => {
                    let reason = read_answer("reason (empty: by the user): ");
                    let reason = Some(reason.trim().to_string()).filter(|r| !r.is_empty());
                    return Decision::Deny { reason };
                }
                "e" | "edit" => {
                    let text = read_answer("arguments as one line of JSON: ");
                    match serde_json::from_str::<Value>(text.trim()) {
                        Ok(Value::Object(edited)) => {
                            return Decision::Approve {
                                arguments: Some(edited),
                                note: None,
                            };
                        }
                        _ => eprintln!("agentd: that is not a JSON object; try again"),
                    }
                }
                // End of input: nobody is there to approve.
                "" if answer.is_empty() => {
                    return Decision::Deny {
                        reason: Some("the terminal closed before a decision".into()),
                    };
                }
                _ => eprintln!("agentd: answer a, d or e"),
            }
        }
    })
    .await;
    asked.unwrap_or(Decision::Deny {
        reason: Some("the question could not be asked".into()),
    })
}

/// One line from stdin after `question` on stderr; empty at end of input.
fn read_answer(question: &str) -> String {
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "{question}");
    let _ = stderr.flush();
    drop(stderr);
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => String::new(),
        Ok(_) if line.trim().is_empty() => " ".into(),
        Ok(_) => line,
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
