//! agentd's end-to-end benchmark (see bench/README.md). `agentd-bench run` starts the mock
//! upstream and agentd (release builds) on 127.0.0.1, runs every scenario through agentd and
//! directly against the mock in the same run, and prints the table; `agentd-bench mock` is the
//! mock upstream process itself.

mod follow;
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
    /// Scenarios to run (1-4 and 6; 5 is store_events, run by bench/run.sh; 6 needs
    /// --postgres).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4")]
    only: Vec<u8>,
    /// PostgreSQL server, `postgres://user@host:port`: every agentd the bench starts gets a
    /// fresh database there (createdb; dropped at the end) instead of a SQLite file.
    /// Scenario 6 needs it.
    #[arg(long)]
    postgres: Option<String>,
    /// Another agentd build climbed in scenario 1 beside agentd, as NAME=PATH (repeatable; e.g.
    /// an older commit's release binary): same ladder, same steps, its own fresh store.
    #[arg(long, value_parser = parse_peer)]
    compare: Vec<(String, String)>,
    /// Scenario 6: runs followed one at a time (each from A and B at once).
    #[arg(long, default_value_t = 20)]
    follow_single: usize,
    /// Scenario 6: runs followed at once (each from A and B: twice as many streams).
    #[arg(long, default_value_t = 200)]
    follow_concurrent: usize,
    /// Scenario 6: rounds of --follow-concurrent runs.
    #[arg(long, default_value_t = 2)]
    follow_rounds: usize,
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

fn port_of(listen: &str) -> Result<u16, String> {
    listen
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .ok_or_else(|| format!("{listen}: expected HOST:PORT"))
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
        // 40 chunks 25 ms apart; content starts 300 ms after the run, so both followers are
        // attached before the first `output` exists (the report checks it).
        follow: Shape {
            first_byte_ms: 300,
            chunks: 40,
            gap_ms: 25,
            script_turns: None,
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

    if args.only.contains(&6) && args.postgres.is_none() {
        return Err("scenario 6 needs --postgres postgres://user@host:port".into());
    }
    // A store for each agentd the bench starts: a fresh PostgreSQL database with --postgres,
    // else a SQLite file of its own (AGENTD_BENCH_STORE_URL overrides agentd's).
    let mut databases: Vec<procs::Database> = Vec::new();
    let mut store = |label: &str| -> Result<String, String> {
        match &args.postgres {
            Some(base) => {
                let name = format!("agentd_bench_{}_{label}", std::process::id());
                let database = procs::Database::create(base, &name.replace('-', "_"))?;
                let url = database.url.clone();
                databases.push(database);
                Ok(url)
            }
            None => Ok(format!(
                "sqlite://{}",
                dir.join(format!("{label}.db")).display()
            )),
        }
    };
    let agentd_store = match std::env::var("AGENTD_BENCH_STORE_URL") {
        Ok(url) => url,
        Err(_) => store("agentd")?,
    };
    let mut mock = procs::start_mock(&args.mock_listen)?;
    let mut relay = procs::start_relay(&args.relay_listen, &args.mock_listen)?;
    let agentd_instance = procs::Instance {
        binary: &agentd_bin,
        name: "agentd",
        listen: &args.agentd_listen,
        store_url: &agentd_store,
    };
    let mut agentd = procs::start_agentd(
        &agentd_instance,
        &mcp_server,
        &dir,
        &args.mock_listen,
        &shapes,
    )?;
    // The other builds of scenario 1, each on its own port (agentd's + 30, + 31, …) and store.
    let mut compared = Vec::new();
    if args.only.contains(&1) {
        let port: u16 = port_of(&args.agentd_listen)?;
        for (index, (name, path)) in args.compare.iter().enumerate() {
            let listen = format!("127.0.0.1:{}", port + 30 + index as u16);
            let store_url = store(&format!("compare{index}"))?;
            let binary = PathBuf::from(path);
            let process = procs::start_agentd(
                &procs::Instance {
                    binary: &binary,
                    name: &format!("compare-{index}"),
                    listen: &listen,
                    store_url: &store_url,
                },
                &mcp_server,
                &dir,
                &args.mock_listen,
                &shapes,
            )?;
            compared.push((name.clone(), listen, process));
        }
    }
    let client = load::client(CLIENT_IDLE).map_err(|e| format!("http client: {e}"))?;
    procs::wait_ready(
        &client,
        &format!("http://{}/health", args.agentd_listen),
        Duration::from_secs(60),
    )
    .await?;
    for (name, listen, _) in &compared {
        procs::wait_ready(
            &client,
            &format!("http://{listen}/health"),
            Duration::from_secs(60),
        )
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    }
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
        for (name, listen, process) in &compared {
            report.note(format!(
                "{name}: another agentd build, pid {}, on {listen}",
                process.pid()
            ));
        }
        let compared: Vec<(&str, &str, &procs::Process)> = compared
            .iter()
            .map(|(n, l, p)| (n.as_str(), l.as_str(), p))
            .collect();
        scenarios::single_turn(
            &bench,
            &shapes.single,
            (&agentd, &relay),
            &compared,
            &mut report,
        )
        .await;
    }
    for (name, _, process) in &mut compared {
        process.check_alive().map_err(|e| format!("{name}: {e}"))?;
    }
    drop(compared);
    if args.only.contains(&2) {
        eprintln!("scenario 2: streaming, 64 chunks");
        scenarios::streaming(&bench, &shapes.streamed, &mut report).await;
    }
    if args.only.contains(&4) {
        eprintln!("scenario 4: 5-turn agent with an MCP tool each turn");
        scenarios::turns(&bench, &shapes.turns, &mcp_server, &mut report).await;
    }
    if args.only.contains(&6) {
        eprintln!("scenario 6: cross-replica follow latency");
        let port: u16 = port_of(&args.agentd_listen)?;
        let store_url = store("replicas")?;
        let (a_listen, b_listen) = (
            format!("127.0.0.1:{}", port + 1),
            format!("127.0.0.1:{}", port + 2),
        );
        let mut replicas = Vec::new();
        for (name, listen) in [("replica-a", &a_listen), ("replica-b", &b_listen)] {
            replicas.push(procs::start_agentd(
                &procs::Instance {
                    binary: &agentd_bin,
                    name,
                    listen,
                    store_url: &store_url,
                },
                &mcp_server,
                &dir,
                &args.mock_listen,
                &shapes,
            )?);
            procs::wait_ready(
                &bench.client,
                &format!("http://{listen}/health"),
                Duration::from_secs(60),
            )
            .await?;
        }
        report.note(format!(
            "6. replica A pid {} on {a_listen}, replica B pid {} on {b_listen}, one fresh PostgreSQL database; upstream `{}`",
            replicas[0].pid(),
            replicas[1].pid(),
            shapes.follow.model()
        ));
        // Warm both replicas (connections, the store's statements) before measuring.
        follow::measure(
            &bench.client,
            (&a_listen, &b_listen),
            "follow",
            5,
            1,
            Duration::from_millis(50),
        )
        .await;
        for (concurrent, rounds, spread) in [
            (1, args.follow_single, Duration::ZERO),
            (
                args.follow_concurrent,
                args.follow_rounds,
                Duration::from_millis(250),
            ),
        ] {
            if concurrent == 0 || rounds == 0 {
                continue;
            }
            let measured = follow::measure(
                &bench.client,
                (&a_listen, &b_listen),
                "follow",
                concurrent,
                rounds,
                spread,
            )
            .await;
            report.follow_rows(&measured, spread);
        }
        for replica in &mut replicas {
            replica.check_alive()?;
        }
    }
    if args.only.contains(&3) {
        eprintln!("scenario 3: {open_streams} open streams");
        // A fresh agentd: its RSS baseline is not a heap grown (and kept) by the earlier
        // scenarios, and no descriptors are held by their idle connections.
        drop(agentd);
        let first_log = dir.join("agentd.log");
        let _ = std::fs::rename(&first_log, dir.join("agentd-scenarios-1-2-4.log"));
        agentd = procs::start_agentd(
            &agentd_instance,
            &mcp_server,
            &dir,
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
    drop(databases);
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
