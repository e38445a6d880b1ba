//! The `agentd` command line (SPEC §1): parses arguments, loads configuration and calls into
//! the library. Exit codes follow the contract: 0 success, 1 session failure, 3 store or
//! initialisation failure, 4 bad arguments or configuration, 5 schema validation failure.

mod reload;
mod run;
mod signals;
mod tools;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::TelemetryConfig;
use crate::config::{self, AgentRegistry, Config, LoadOptions};
use crate::runtime::Runtime;
use crate::telemetry::{TelemetryGuard, init_telemetry};

const EXIT_SESSION_FAILED: u8 = 1;
const EXIT_INIT_FAILED: u8 = 3;
const EXIT_BAD_CONFIG: u8 = 4;
const EXIT_SCHEMA_INVALID: u8 = 5;

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
    Run(run::RunArgs),
    /// List the configured agents.
    Agents {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Connect MCP servers and list their tools (SERVER or `all`).
    Tools(tools::ToolsArgs),
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
    /// The audit log: `agentd audit verify` walks its hash chain (exit 0 intact, 1 broken).
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Verify the hash chain and name the first broken row.
    Verify {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        database: Option<String>,
    },
}

/// A failure with the exit code it maps to.
pub(crate) struct Failure {
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
    /// A runtime that did not start: bad configuration (4) or a failing service (3).
    fn runtime(error: crate::runtime::RuntimeError) -> Self {
        if error.is_config_error() {
            Self::config(error)
        } else {
            Self::init(error)
        }
    }
    fn schema(error: impl std::fmt::Display) -> Self {
        Self {
            code: EXIT_SCHEMA_INVALID,
            message: error.to_string(),
        }
    }
}

pub fn main() -> ExitCode {
    crate::tls::install_crypto_provider();
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
        Command::Run(args) => run::run(args).await,
        other => {
            let _quiet = start_telemetry(&TelemetryConfig::default())?;
            dispatch_plain(other).await
        }
    }
}

/// Commands that log with the default settings.
async fn dispatch_plain(command: Command) -> Result<u8, Failure> {
    match command {
        Command::Serve { .. } | Command::Run(_) => Ok(0),
        Command::Agents { config } => list_agents(config),
        Command::Tools(args) => tools::tools(args).await,
        Command::Check { config } => check(config),
        Command::Migrate { config, database } => migrate(config, database).await,
        Command::Audit {
            command: AuditCommand::Verify { config, database },
        } => verify_audit(config, database).await,
    }
}

/// Starts logs (and traces, when configured) for a command.
pub(crate) fn start_telemetry(config: &TelemetryConfig) -> Result<TelemetryGuard, Failure> {
    init_telemetry(config).map_err(Failure::config)
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
    // Before anything slow: a signal during start-up then stops the server cleanly.
    let first_signal = signals::install()
        .map_err(|e| Failure::init(format!("cannot install signal handlers: {e}")))?;
    let hangups = signals::hangups()
        .map_err(|e| Failure::init(format!("cannot install signal handlers: {e}")))?;
    let overrides = reload::ServeOverrides {
        config,
        agents,
        listen,
        database,
    };
    let loaded = overrides.load().map_err(Failure::config)?;
    let config = loaded.config.clone();
    let telemetry = start_telemetry(&config.telemetry)?;
    let address = config.server.listen_addr().map_err(Failure::config)?;
    check_exposure(&config, address)?;
    let registry = AgentRegistry::load(&config).map_err(Failure::config)?;
    let runtime = Runtime::start(config, registry)
        .await
        .map_err(Failure::runtime)?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| Failure::init(format!("cannot listen on {address}: {e}")))?;
    let bound = listener.local_addr().map_err(Failure::init)?;
    tracing::info!(address = %bound, agents = runtime.agents().len(), store = %runtime.config().store.url, "agentd listening");
    let reloader = reload::Reloader::start(runtime.clone(), overrides, &loaded, hangups);
    let served = crate::http::serve(listener, runtime.clone(), first_signal).await;
    drop(reloader);
    // Sessions end and every queued run event is written even when serving failed.
    runtime.drain().await;
    runtime.close().await;
    served.map_err(Failure::init)?;
    tracing::info!("agentd stopped");
    telemetry.shutdown().await;
    Ok(0)
}

/// Without API keys agentd only listens on loopback, unless auth is explicitly disabled.
fn check_exposure(config: &Config, address: SocketAddr) -> Result<(), Failure> {
    if address.ip().is_loopback()
        || config.auth.effective_keys().next().is_some()
        || !config.auth.oidc.is_empty()
        || config.auth.disabled
    {
        return Ok(());
    }
    Err(Failure::config(format!(
        "server.listen {address} is not a loopback address and no API key or issuer is configured: set \
         AGENTD_ADMIN_KEY (the example config's admin key), add keys to auth.keys or issuers to auth.oidc, or set \
         auth.disabled: true to serve without keys"
    )))
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
    crate::tools::hub::ToolHub::check(&loaded.config, &registry).map_err(Failure::config)?;
    crate::cache::check_config(&loaded.config.cache).map_err(Failure::config)?;
    check_commands(&loaded.config)?;
    if loaded.files.is_empty() {
        eprintln!(
            "warning: no config file found: pass --config FILE or create ./.ai-agent.json \
             (the defaults alone define no provider)"
        );
    }
    if registry.is_empty() {
        eprintln!("warning: no agents: list directories of .ai files under `agents` in the config");
    }
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

/// Every enabled stdio MCP server's command must be one agentd can start: on `PATH`, or a path
/// to an executable file.
fn check_commands(config: &Config) -> Result<(), Failure> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let servers = config.mcp_servers.iter().filter(|(_, s)| s.is_enabled());
    for (name, server) in servers {
        let Some(command) = server.command.as_deref() else {
            continue;
        };
        if server.transport() == crate::config::McpTransport::Stdio
            && find_executable(command, &path).is_none()
        {
            return Err(Failure::config(format!(
                "mcpServers.{name}.command: `{command}` is not an executable on PATH; \
                 install it or give its full path"
            )));
        }
    }
    Ok(())
}

/// Where `command` would be started from: itself when it names a path, else the first
/// directory of `path` holding an executable file of that name.
fn find_executable(command: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    let command = Path::new(command);
    if command.components().count() > 1 {
        return is_executable(command).then(|| command.to_path_buf());
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `agentd audit verify`: prints what the walk found as JSON; exit 1 when a row is broken.
async fn verify_audit(config: Option<PathBuf>, database: Option<String>) -> Result<u8, Failure> {
    let url = match database {
        Some(url) => url,
        None => load_config(config, None)?.store.url,
    };
    let failed = |e: crate::store::StoreError| Failure {
        code: EXIT_SESSION_FAILED,
        message: e.to_string(),
    };
    let store = crate::store::open(&url).await.map_err(failed)?;
    let verification = crate::audit::verify(store.as_ref()).await.map_err(failed)?;
    store.close().await;
    println!(
        "{}",
        serde_json::to_string_pretty(&verification).unwrap_or_default()
    );
    Ok(if verification.ok {
        0
    } else {
        EXIT_SESSION_FAILED
    })
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
