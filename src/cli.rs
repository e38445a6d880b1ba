//! The `agentd` command line (SPEC §1): parses arguments, loads configuration and calls into
//! the library. Exit codes follow the contract: 0 success, 1 session failure, 3 store or
//! initialisation failure, 4 bad arguments or configuration.

use std::io::{IsTerminal, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::agent::{AgentEvent, SamplingOverrides, SessionRequest};
use crate::config::{self, AgentRegistry, AgentSpec, Config, LoadOptions, Target};
use crate::runtime::Runtime;
use crate::telemetry::{LogFormat, init_logging};

const EXIT_SESSION_FAILED: u8 = 1;
const EXIT_INIT_FAILED: u8 = 3;
const EXIT_BAD_CONFIG: u8 = 4;

#[derive(Debug, Parser)]
#[command(
    name = "agentd",
    version,
    about = "Runs LLM agents and serves them over HTTP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server until SIGINT/SIGTERM.
    Serve {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Extra directories of `.ai` agent files.
        #[arg(long = "agents")]
        agents: Vec<PathBuf>,
        /// Address to listen on (overrides server.listen).
        #[arg(long)]
        listen: Option<String>,
        /// Store URL (overrides store.url).
        #[arg(long)]
        database: Option<String>,
    },
    /// Run one session in the terminal: the answer on stdout, progress on stderr.
    Run {
        /// A path to an `.ai` file or the name of a configured agent.
        agent: String,
        /// The task; `-` reads stdin, `@file` reads a file.
        prompt: String,
        #[arg(long)]
        config: Option<PathBuf>,
        /// Comma-separated provider/model targets replacing the agent's.
        #[arg(long, value_delimiter = ',')]
        models: Vec<String>,
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
    },
    /// List the configured agents.
    Agents {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Validate the configuration and every agent file without calling any LLM.
    Check {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Apply store migrations.
    Migrate {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        database: Option<String>,
    },
}

/// A failure with the exit code it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn config(error: impl std::fmt::Display) -> Self {
        Self {
            code: EXIT_BAD_CONFIG,
            message: error.to_string(),
        }
    }
    fn init(error: impl std::fmt::Display) -> Self {
        Self {
            code: EXIT_INIT_FAILED,
            message: error.to_string(),
        }
    }
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() {
                EXIT_BAD_CONFIG
            } else {
                0
            };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    init_logging(LogFormat::Text);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("agentd: cannot start the async runtime: {error}");
            return ExitCode::from(EXIT_INIT_FAILED);
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("agentd: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

async fn dispatch(command: Command) -> Result<u8, Failure> {
    match command {
        Command::Serve {
            config,
            agents,
            listen,
            database,
        } => serve(config, agents, listen, database).await,
        Command::Run {
            agent,
            prompt,
            config,
            models,
            max_turns,
            max_retries,
            json,
            database,
        } => {
            let options = RunOptions {
                models,
                max_turns,
                max_retries,
                json,
                database,
            };
            run(&agent, &prompt, config, options).await
        }
        Command::Agents { config } => list_agents(config),
        Command::Check { config } => check(config),
        Command::Migrate { config, database } => migrate(config, database).await,
    }
}

fn load_config(explicit: Option<PathBuf>, prompt_dir: Option<PathBuf>) -> Result<Config, Failure> {
    config::load(&LoadOptions {
        explicit,
        prompt_dir,
    })
    .map(|loaded| loaded.config)
    .map_err(Failure::config)
}

async fn serve(
    config: Option<PathBuf>,
    agents: Vec<PathBuf>,
    listen: Option<String>,
    database: Option<String>,
) -> Result<u8, Failure> {
    let mut config = load_config(config, None)?;
    config.agents.extend(agents);
    if let Some(listen) = listen {
        config.server.listen = listen;
    }
    if let Some(database) = database {
        config.store.url = database;
    }
    let address = config.server.listen_addr().map_err(Failure::config)?;
    check_exposure(&config, address)?;
    let registry = AgentRegistry::load(&config).map_err(Failure::config)?;
    let runtime = Runtime::start(config, registry)
        .await
        .map_err(|e| match e {
            crate::runtime::RuntimeError::Provider { .. } => Failure::config(e),
            other => Failure::init(other),
        })?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| Failure::init(format!("cannot listen on {address}: {e}")))?;
    let bound = listener.local_addr().map_err(Failure::init)?;
    tracing::info!(address = %bound, agents = runtime.agents.len(), store = %runtime.config.store.url, "agentd listening");
    crate::http::serve(listener, runtime, shutdown_signal())
        .await
        .map_err(Failure::init)?;
    tracing::info!("agentd stopped");
    Ok(0)
}

/// Without API keys agentd only listens on loopback, unless auth is explicitly disabled.
fn check_exposure(config: &Config, address: SocketAddr) -> Result<(), Failure> {
    if address.ip().is_loopback() || !config.auth.keys.is_empty() || config.auth.disabled {
        return Ok(());
    }
    Err(Failure::config(format!(
        "server.listen {address} is not a loopback address and auth.keys is empty: add keys or set auth.disabled: true"
    )))
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

struct RunOptions {
    models: Vec<String>,
    max_turns: Option<u32>,
    max_retries: Option<u32>,
    json: bool,
    database: Option<String>,
}

async fn run(
    agent: &str,
    prompt: &str,
    config: Option<PathBuf>,
    options: RunOptions,
) -> Result<u8, Failure> {
    let agent_path = Path::new(agent);
    let is_file = agent_path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ai"))
        || agent_path.is_file();
    let prompt_dir = is_file
        .then(|| agent_path.parent().map(Path::to_path_buf))
        .flatten();
    let mut config = load_config(config, prompt_dir)?;
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
    let spec = Arc::new(apply_run_overrides(&spec, &options, &config)?);
    let prompt = read_prompt(prompt)?;
    let runtime = Runtime::start(config, registry)
        .await
        .map_err(Failure::init)?;
    let request = SessionRequest {
        run_id: uuid::Uuid::now_v7().to_string(),
        agent: spec,
        prompt,
        history: Vec::new(),
        overrides: SamplingOverrides::default(),
        conversation_id: None,
    };
    let mut handle = runtime.spawn_run(request, None);
    let show_progress = !options.json;
    let stderr_is_tty = std::io::stderr().is_terminal();
    while let Some(event) = handle.events.recv().await {
        if show_progress {
            print_progress(&event, stderr_is_tty);
        }
    }
    let result = handle
        .result
        .await
        .map_err(|_| Failure::init("the session task ended unexpectedly"))?;
    let mut stdout = std::io::stdout().lock();
    let written = if options.json {
        serde_json::to_string_pretty(&result)
            .map_err(Failure::init)
            .and_then(|text| writeln!(stdout, "{text}").map_err(Failure::init))
    } else {
        writeln!(stdout, "{}", result.answer_text()).map_err(Failure::init)
    };
    written?;
    if !result.success && !options.json {
        eprintln!(
            "agentd: run failed ({}): {}",
            result.exit_reason.as_str(),
            result.error.as_deref().unwrap_or("no details")
        );
    }
    Ok(if result.success {
        0
    } else {
        EXIT_SESSION_FAILED
    })
}

fn apply_run_overrides(
    spec: &AgentSpec,
    options: &RunOptions,
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
            .map(|m| {
                let (provider, model) = m.split_once('/').ok_or_else(|| {
                    Failure::config(format!("--models {m:?}: write provider/model"))
                })?;
                if !config.providers.contains_key(provider) {
                    return Err(Failure::config(format!(
                        "--models {m:?}: no provider {provider:?} in the config"
                    )));
                }
                Ok(Target {
                    provider: provider.into(),
                    model: model.into(),
                })
            })
            .collect::<Result<_, _>>()?;
    }
    Ok(spec)
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

fn print_progress(event: &AgentEvent, tty: bool) {
    let mut stderr = std::io::stderr().lock();
    let _ = match event {
        AgentEvent::Thinking(delta) if tty => write!(stderr, "\x1b[90m{}\x1b[0m", delta.text),
        AgentEvent::Thinking(delta) => write!(stderr, "{}", delta.text),
        AgentEvent::TurnStarted(turn) if turn.is_retry => {
            writeln!(stderr, "[turn {} attempt {}]", turn.turn, turn.attempt)
        }
        AgentEvent::Error(error) => writeln!(stderr, "[error {}] {}", error.code, error.message),
        _ => Ok(()),
    };
}

fn list_agents(config: Option<PathBuf>) -> Result<u8, Failure> {
    let config = load_config(config, None)?;
    let registry = AgentRegistry::load(&config).map_err(Failure::config)?;
    let mut stdout = std::io::stdout().lock();
    for agent in registry.iter() {
        let models: Vec<String> = agent.targets.iter().map(ToString::to_string).collect();
        let tools = if agent.tools.is_empty() {
            "-".to_string()
        } else {
            agent.tools.join(",")
        };
        writeln!(
            stdout,
            "{}\t{}\tmodels={}\ttools={}",
            agent.name,
            agent.description,
            models.join(","),
            tools
        )
        .map_err(Failure::init)?;
    }
    Ok(0)
}

fn check(config: Option<PathBuf>) -> Result<u8, Failure> {
    let loaded = config::load(&LoadOptions {
        explicit: config,
        prompt_dir: None,
    })
    .map_err(Failure::config)?;
    loaded
        .config
        .server
        .listen_addr()
        .map_err(Failure::config)?;
    let registry = AgentRegistry::load(&loaded.config).map_err(Failure::config)?;
    crate::runtime::build_providers(&loaded.config).map_err(Failure::config)?;
    let files: Vec<String> = loaded
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    println!(
        "ok: {} config file(s) [{}], {} agent(s)",
        files.len(),
        files.join(", "),
        registry.len()
    );
    Ok(0)
}

async fn migrate(config: Option<PathBuf>, database: Option<String>) -> Result<u8, Failure> {
    let url = match database {
        Some(url) => url,
        None => load_config(config, None)?.store.url,
    };
    crate::store::migrate(&url).await.map_err(|e| Failure {
        code: EXIT_SESSION_FAILED,
        message: e.to_string(),
    })?;
    println!("migrations applied to {url}");
    Ok(0)
}
