//! agentd's end-to-end benchmark (see bench/README.md). `agentd-bench run` starts the mock
//! upstream and agentd (release builds) on 127.0.0.1, runs every scenario through agentd and
//! directly against the mock in the same run, and prints the table; `agentd-bench mock` is the
//! mock upstream process itself.

mod load;
mod mcp_probe;
mod mock;
mod procs;
mod relay;
mod report;
mod scenarios;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use mock::Shape;

/// Idle connections the driver's shared client keeps to each of agentd and the mock.
const CLIENT_IDLE: usize = 512;
/// Descriptors left to agentd for everything but scenario 3's streams.
const AGENTD_OTHER_FDS: usize = 512;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The mock upstream (shape chosen per request by the model name).
    Mock {
        #[arg(long, default_value = "127.0.0.1:19090")]
        listen: String,
    },
    /// The do-nothing relay: forwards every request unchanged to the upstream.
    Relay {
        #[arg(long, default_value = "127.0.0.1:19070")]
        listen: String,
        #[arg(long, default_value = "127.0.0.1:19090")]
        upstream: String,
    },
    /// Every scenario; prints the markdown table.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// agentd's target dir (holds release/agentd and release/examples/mcp_test_server).
    #[arg(long, default_value = "target")]
    target: PathBuf,
    #[arg(long, default_value = "127.0.0.1:19090")]
    mock_listen: String,
    #[arg(long, default_value = "127.0.0.1:19080")]
    agentd_listen: String,
    #[arg(long, default_value = "127.0.0.1:19070")]
    relay_listen: String,
    /// Another server measured in scenario 1 beside agentd, as NAME=HOST:PORT (repeatable). It
    /// must serve the model `single` as the mock's `fb0-c1-g0` (bench/peers.sh sets LiteLLM up).
    #[arg(long, value_parser = parse_peer)]
    peer: Vec<(String, String)>,
    /// Seconds per rate step of scenario 1.
    #[arg(long, default_value_t = 3.0)]
    step_seconds: f64,
    /// Rates of scenario 1, requests per second.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "100,500,1000,2000,3000,4000,5000,6000,7000,8000,10000,12000,16000,20000,24000,32000,40000,48000"
    )]
    rates: Vec<f64>,
    /// Streams held open at once in scenario 3 (capped by the open-file limit).
    #[arg(long, default_value_t = 10_000)]
    open_streams: usize,
    /// Runs of the multi-turn agent in scenario 4.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Scenarios to run (1-4; 5 is store_events, run by bench/run.sh).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4")]
    only: Vec<u8>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Cmd::Mock { listen } => runtime
            .block_on(mock::serve(&listen))
            .map_err(|e| format!("mock: {e}")),
        Cmd::Relay { listen, upstream } => runtime
            .block_on(relay::serve(&listen, &upstream))
            .map_err(|e| format!("relay: {e}")),
        Cmd::Run(args) => runtime.block_on(run(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("agentd-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

fn parse_peer(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, host)) if !name.is_empty() && !host.is_empty() => {
            Ok((name.to_string(), host.to_string()))
        }
        _ => Err(format!("expected NAME=HOST:PORT, got {text:?}")),
    }
}

/// Open files the soft limit allows: each open stream costs agentd two (client and upstream).
fn open_file_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(1024)
}

async fn run(args: RunArgs) -> Result<(), String> {
    let agentd_bin = procs::release_binary(&args.target, "release/agentd")?;
    let mcp_server = procs::release_binary(&args.target, "release/examples/mcp_test_server")?;
    let dir = std::env::temp_dir().join(format!("agentd-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let shapes = procs::Agents {
        single: Shape {
            first_byte_ms: 0,
            chunks: 1,
            gap_ms: 0,
            script_turns: None,
        },
        streamed: Shape {
            first_byte_ms: 5,
            chunks: 64,
            gap_ms: 1,
            script_turns: None,
        },
        slow: Shape {
            first_byte_ms: 0,
            chunks: 4,
            gap_ms: 0,
            script_turns: None,
        },
        turns: Shape {
            first_byte_ms: 0,
            chunks: 1,
            gap_ms: 0,
            script_turns: Some(5),
        },
    };
    let limit = open_file_limit();
    // Descriptors agentd holds besides the streams: its store, MCP server and listener, and
    // idle upstream connections (≤ 256 per host). Scenario 3 runs on a fresh agentd, so no
    // idle client connections of the earlier scenarios count.
    let open_streams = args
        .open_streams
        .min(limit.saturating_sub(AGENTD_OTHER_FDS) / 2);
    // The slow upstream holds every stream until all are open, plus a margin to sample RSS.
    let hold_ms = (open_streams as u64 * 1000 / 1000) + 8000;
    let slow = Shape {
        first_byte_ms: hold_ms,
        ..shapes.slow
    };
    let shapes = procs::Agents { slow, ..shapes };

    let mut mock = procs::start_mock(&args.mock_listen)?;
    let mut relay = procs::start_relay(&args.relay_listen, &args.mock_listen)?;
    let mut agentd = procs::start_agentd(
        &agentd_bin,
        &mcp_server,
        &dir,
        &args.agentd_listen,
        &args.mock_listen,
        &shapes,
    )?;
    let client = load::client(CLIENT_IDLE).map_err(|e| format!("http client: {e}"))?;
    procs::wait_ready(
        &client,
        &format!("http://{}/health", args.agentd_listen),
        Duration::from_secs(60),
    )
    .await?;
    mock.check_alive()?;
    relay.check_alive()?;
    let bench = scenarios::Bench {
        client,
        agentd: args.agentd_listen.clone(),
        mock: args.mock_listen.clone(),
        relay: args.relay_listen.clone(),
        peers: args.peer.clone(),
        step_seconds: args.step_seconds,
        rates: args.rates.clone(),
        open_streams,
        runs: args.runs,
    };
    let mut report = report::Report::default();
    report.note(format!(
        "agentd pid {}, mock pid {}, relay pid {}, open-file limit {limit}, {} CPUs",
        agentd.pid(),
        mock.pid(),
        relay.pid(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));
    if open_streams < args.open_streams {
        report.note(format!(
            "scenario 3 holds {open_streams} streams, not {}: the open-file limit is {limit}, agentd needs two descriptors per stream and keeps {AGENTD_OTHER_FDS} for the rest",
            args.open_streams,
        ));
    }
    if args.only.contains(&1) {
        eprintln!("scenario 1: non-streaming single turn");
        scenarios::single_turn(&bench, &shapes.single, (&agentd, &relay), &mut report).await;
    }
    if args.only.contains(&2) {
        eprintln!("scenario 2: streaming, 64 chunks");
        scenarios::streaming(&bench, &shapes.streamed, &mut report).await;
    }
    if args.only.contains(&4) {
        eprintln!("scenario 4: 5-turn agent with an MCP tool each turn");
        scenarios::turns(&bench, &shapes.turns, &mcp_server, &mut report).await;
    }
    if args.only.contains(&3) {
        eprintln!("scenario 3: {open_streams} open streams");
        // A fresh agentd: its RSS baseline is not a heap grown (and kept) by the earlier
        // scenarios, and no descriptors are held by their idle connections.
        drop(agentd);
        let first_log = dir.join("agentd.log");
        let _ = std::fs::rename(&first_log, dir.join("agentd-scenarios-1-2-4.log"));
        agentd = procs::start_agentd(
            &agentd_bin,
            &mcp_server,
            &dir,
            &args.agentd_listen,
            &args.mock_listen,
            &shapes,
        )?;
        procs::wait_ready(
            &bench.client,
            &format!("http://{}/health", args.agentd_listen),
            Duration::from_secs(60),
        )
        .await?;
        report.note(format!(
            "scenario 3 runs on a fresh agentd, pid {}",
            agentd.pid()
        ));
        scenarios::open_streams(&bench, &shapes.slow, &agentd, &mut report).await;
    }
    agentd.check_alive()?;
    mock.check_alive()?;
    relay.check_alive()?;
    println!("{}", report.render());
    drop(agentd);
    drop(relay);
    drop(mock);
    if std::env::var_os("AGENTD_BENCH_KEEP").is_some() {
        eprintln!(
            "kept {} (agentd.json, agentd.log, the store)",
            dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
