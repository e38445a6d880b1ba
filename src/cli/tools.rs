//! `agentd tools [SERVER|all] [--config F] [--validate]` (SPEC §1): connects the MCP servers and
//! lists the tools each offers (the REST tools too, under `rest`); `--validate` also reports
//! every tool schema that does not compile. Exit 0, 3 when a server fails to start, 4 for a bad
//! configuration, 5 when a schema does not compile.

use std::io::Write;
use std::path::PathBuf;

use super::{EXIT_INIT_FAILED, EXIT_SCHEMA_INVALID, Failure, load_config};
use crate::config::Config;
use crate::telemetry::Metrics;
use crate::tools::ToolProvider;
use crate::tools::mcp::{ListedTool, McpServer};
use crate::tools::queue::ToolQueues;
use crate::tools::rest::{REST_NAMESPACE, RestToolError, RestTools};

#[derive(Debug, clap::Args)]
pub(super) struct ToolsArgs {
    /// One MCP server (or `rest` for the REST tools); `all` or nothing lists everything.
    server: Option<String>,
    #[arg(long)]
    config: Option<PathBuf>,
    /// Also compile every tool schema; exit 5 when one does not compile.
    #[arg(long)]
    validate: bool,
}

/// What the listing found.
#[derive(Default)]
struct Findings {
    failed_servers: usize,
    bad_schemas: usize,
    tools: usize,
}

pub(super) async fn tools(args: ToolsArgs) -> Result<u8, Failure> {
    let config = load_config(args.config.clone(), None)?;
    let selected = select_servers(&config, args.server.as_deref())?;
    let metrics = Metrics::new().map_err(Failure::init)?;
    let queues = ToolQueues::new(&config.queues, &metrics);
    let mut findings = Findings::default();
    let mut out = std::io::stdout().lock();
    for name in &selected.mcp {
        let Some(server) = config.mcp_servers.get(name) else {
            continue;
        };
        let queue = queues.get(server.queue_name()).map_err(Failure::config)?;
        let mut server = server.clone();
        server.required = Some(true);
        match McpServer::start(name, &server, queue).await {
            Ok(started) => {
                let listed = started.listed_tools();
                writeln!(
                    out,
                    "{name} ({}, queue {}): {} tool(s)",
                    server.transport().as_str(),
                    started.queue(),
                    listed.len()
                )
                .map_err(Failure::init)?;
                print_tools(&mut out, &listed, args.validate, &mut findings)?;
                started.shutdown().await;
            }
            Err(error) => {
                findings.failed_servers += 1;
                eprintln!("agentd: {error}");
            }
        }
    }
    if selected.rest {
        list_rest_tools(&mut out, &config, &queues, &mut findings).await?;
    }
    if args.validate && findings.bad_schemas == 0 && findings.failed_servers == 0 {
        writeln!(out, "ok: all {} tool schema(s) compile", findings.tools)
            .map_err(Failure::init)?;
    }
    Ok(if findings.failed_servers > 0 {
        EXIT_INIT_FAILED
    } else if findings.bad_schemas > 0 {
        EXIT_SCHEMA_INVALID
    } else {
        0
    })
}

struct Selection {
    mcp: Vec<String>,
    rest: bool,
}

fn select_servers(config: &Config, wanted: Option<&str>) -> Result<Selection, Failure> {
    let enabled = || {
        config
            .mcp_servers
            .iter()
            .filter(|(_, s)| s.is_enabled())
            .map(|(name, _)| name.clone())
    };
    match wanted {
        None | Some("all") => Ok(Selection {
            mcp: enabled().collect(),
            rest: !config.rest_tools.is_empty(),
        }),
        Some(REST_NAMESPACE) => Ok(Selection {
            mcp: Vec::new(),
            rest: true,
        }),
        Some(name) => match config.mcp_servers.get(name) {
            Some(server) if server.is_enabled() => Ok(Selection {
                mcp: vec![name.to_string()],
                rest: false,
            }),
            Some(_) => Err(Failure::config(format!(
                "MCP server {name:?} is disabled (mcpServers.{name}.enabled)"
            ))),
            None => Err(Failure::config(format!(
                "no MCP server named {name:?}; configured: {}",
                config
                    .mcp_servers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        },
    }
}

fn print_tools(
    out: &mut impl Write,
    listed: &[ListedTool],
    validate: bool,
    findings: &mut Findings,
) -> Result<(), Failure> {
    for tool in listed {
        findings.tools += 1;
        let summary = tool.description.lines().next().unwrap_or_default();
        writeln!(out, "  {}\t{summary}", tool.name).map_err(Failure::init)?;
        if validate && let Some(error) = &tool.schema_error {
            findings.bad_schemas += 1;
            eprintln!(
                "agentd: {}: the input schema does not compile: {error}",
                tool.name
            );
        }
    }
    Ok(())
}

async fn list_rest_tools(
    out: &mut impl Write,
    config: &Config,
    queues: &ToolQueues,
    findings: &mut Findings,
) -> Result<(), Failure> {
    match RestTools::build(&config.rest_tools, queues) {
        Ok(rest) => {
            let definitions = rest.list_tools().await;
            writeln!(
                out,
                "{REST_NAMESPACE} (restTools): {} tool(s)",
                definitions.len()
            )
            .map_err(Failure::init)?;
            for definition in definitions {
                findings.tools += 1;
                let summary = definition.description.lines().next().unwrap_or_default();
                writeln!(out, "  {}\t{summary}", definition.name).map_err(Failure::init)?;
            }
            Ok(())
        }
        Err(error @ RestToolError::Schema { .. }) => {
            findings.bad_schemas += 1;
            eprintln!("agentd: {error}");
            Ok(())
        }
        Err(error) => Err(Failure::config(error)),
    }
}
