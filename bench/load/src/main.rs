//! agentd's end-to-end benchmark (see bench/README.md). `agentd-bench run` starts the mock
//! upstream, the do-nothing relay, nginx and agentd (release builds) on 127.0.0.1, runs every
//! scenario through agentd and directly against the mock in the same run, and prints the
//! table; `agentd-bench mock` is the mock upstream process itself. This file owns the command
//! line and the order of the scenarios.

mod capacity;
mod ceiling;
mod follow;
mod head_of_line;
mod load;
mod mcp_probe;
mod mock;
mod nginx;
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
/// Connections the driver holds to agentd besides scenario 3's streams (its shared client's
/// keep-alive connection for `/health` and `/metrics`): agentd's automatic
/// `server.maxConnections` is the same half of the open-file limit, so scenario 3 leaves these
/// room instead of having its last stream refused 503 at that limit.
const DRIVER_OTHER_CONNECTIONS: usize = 8;

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
    /// One open-loop series against any chat-completions server (no agentd: e.g. a gateway in
    /// front of `agentd-bench mock`); prints its latency percentiles and failures.
    Load {
        /// Base URL, e.g. http://127.0.0.1:19061 (POSTs to URL/v1/chat/completions).
        #[arg(long)]
        url: String,
        /// The model sent (the mock's own names pick its answer, e.g. fb0-c1-g0).
        #[arg(long, default_value = "fb0-c1-g0")]
        model: String,
        /// Requests per second.
        #[arg(long, default_value_t = 100.0)]
        rate: f64,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Ask for an SSE stream.
        #[arg(long)]
        stream: bool,
        /// A request header, HEADER=VALUE (repeatable).
        #[arg(long, value_parser = parse_header)]
        header: Vec<(String, String)>,
    },
    /// nginx configured as `run` starts it (in DIR), in the foreground until interrupted.
    Nginx {
        #[arg(long, default_value = "127.0.0.1:19050")]
        listen: String,
        #[arg(long, default_value = "127.0.0.1:19090")]
        upstream: String,
        /// Its config, error log and temp dirs.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Every scenario; prints the markdown table.
    Run(Box<RunArgs>),
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
    /// nginx's port (agentd's − 30: − 20 is LiteLLM's in bench/peers.sh).
    #[arg(long, default_value = "127.0.0.1:19050")]
    nginx_listen: String,
    /// Do not start nginx (scenarios 1, 7 and 8 then go without it).
    #[arg(long)]
    no_nginx: bool,
    /// Another server measured in scenario 1 beside agentd, as NAME=HOST:PORT (repeatable). It
    /// must serve the model `single` as the mock's `fb0-c1-g0` (bench/peers.sh sets LiteLLM up).
    #[arg(long, value_parser = parse_peer)]
    peer: Vec<(String, String)>,
    /// A peer like --peer that is sent the mock's own model names (`fb0-c1-g0`), as the relay
    /// is, for a gateway that passes `model` through (bench/peers.sh's Portkey), as
    /// NAME=HOST:PORT (repeatable).
    #[arg(long, value_parser = parse_peer)]
    peer_forward: Vec<(String, String)>,
    /// A header on every request to the peer NAME, as NAME:HEADER=VALUE (repeatable; e.g.
    /// `portkey:x-portkey-provider=openai`).
    #[arg(long, value_parser = parse_peer_header)]
    peer_header: Vec<(String, (String, String))>,
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
    /// Scenarios to run (1-4 and 6-10; 5 is store_events, run by bench/run.sh; 6 needs
    /// --postgres). Without it: 1,2,3,4,7,8,10,9 with scenario 9's idle RSS only; the soak (9 b)
    /// runs only when --only names 9.
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<u8>>,
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
    /// Scenario 7: the steps of N, concurrent paced streams (capped by the open-file limit).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "250,500,1000,2000,3000,4000,6000,8000,12000,16000"
    )]
    capacity_streams: Vec<usize>,
    /// Scenario 7: seconds measured per step, after the ramp.
    #[arg(long, default_value_t = 15.0)]
    capacity_seconds: f64,
    /// Scenario 7: seconds over which a step's streams are opened (not measured).
    #[arg(long, default_value_t = 2.0)]
    capacity_ramp_seconds: f64,
    /// Scenario 7: content frames per stream, 20 ms apart (250: 5 s per stream).
    #[arg(long, default_value_t = 250)]
    capacity_chunks: usize,
    /// Scenario 8: connections, each sending its next request when its answer is complete.
    #[arg(long, default_value_t = 32)]
    closed_connections: usize,
    /// Scenario 8: seconds measured per target and case.
    #[arg(long, default_value_t = 10.0)]
    closed_seconds: f64,
    /// Scenario 8: warm-up seconds before each measurement (not counted).
    #[arg(long, default_value_t = 2.0)]
    closed_warmup_seconds: f64,
    /// Scenario 11: how many replicas write, one ladder each (needs --postgres).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    ceiling_replicas: Vec<usize>,
    /// Scenario 11: runs started per step (over one second, spread over the writers).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "25,50,75,100,150,200,300,400,600,800"
    )]
    ceiling_runs: Vec<usize>,
    /// Scenario 10: small paced streams open at once (scenario 7's, 50 frames/s each).
    #[arg(long, default_value_t = 200)]
    hol_streams: usize,
    /// Scenario 10: connections sending the large request back to back.
    #[arg(long, default_value_t = 1)]
    hol_senders: usize,
    /// Scenario 10: words in the large prompt (about one token each).
    #[arg(long, default_value_t = 100_000)]
    hol_prompt_words: usize,
    /// Scenario 9: soak rate, req/s (default: half of scenario 1's agentd maximum when
    /// scenario 1 ran, else 2000).
    #[arg(long)]
    soak_rate: Option<f64>,
    /// Scenario 9: soak length in seconds (0: no soak).
    #[arg(long, default_value_t = 600)]
    soak_seconds: u64,
    /// Scenario 9: seconds between agentd RSS samples.
    #[arg(long, default_value_t = 10)]
    soak_sample_seconds: u64,
    /// Scenario 9: the RSS baseline is the first sample at or after this many seconds.
    #[arg(long, default_value_t = 60)]
    soak_baseline_seconds: u64,
    /// Scenario 9: errors and p99 are reported per this many seconds.
    #[arg(long, default_value_t = 60)]
    soak_bucket_seconds: u64,
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
        Cmd::Nginx {
            listen,
            upstream,
            dir,
        } => runtime.block_on(standalone_nginx(&listen, &upstream, &dir)),
        Cmd::Load {
            url,
            model,
            rate,
            seconds,
            stream,
            header,
        } => runtime.block_on(standalone_load(&url, &model, rate, seconds, stream, header)),
        Cmd::Run(args) => runtime.block_on(run(*args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("agentd-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `agentd-bench nginx`: nginx as `run` starts it, until Ctrl-C (then stopped with its workers).
async fn standalone_nginx(
    listen: &str,
    upstream: &str,
    dir: &std::path::Path,
) -> Result<(), String> {
    let binary = nginx::ensure()?;
    let process = nginx::start(&nginx::Setup {
        binary: &binary,
        dir,
        listen,
        upstream,
        files: open_file_limit(),
    })
    .await?;
    eprintln!(
        "nginx pid {} on {listen}, upstream {upstream}, config {}/nginx.conf",
        process.pid(),
        dir.display()
    );
    let _ = tokio::signal::ctrl_c().await;
    drop(process);
    Ok(())
}

/// `agentd-bench load`: `seconds` of requests at `rate`, then the latency percentiles (time to
/// the first content too when streamed) and the failures, on stdout.
async fn standalone_load(
    url: &str,
    model: &str,
    rate: f64,
    seconds: f64,
    streamed: bool,
    headers: Vec<(String, String)>,
) -> Result<(), String> {
    if !(rate > 0.0 && seconds > 0.0) {
        return Err("--rate and --seconds must be positive".to_string());
    }
    let client = load::client(CLIENT_IDLE).map_err(|e| format!("http client: {e}"))?;
    let body = serde_json::json!({"model": model, "stream": streamed,
        "messages": [{"role": "user", "content": "Say something."}]});
    let call = load::Call {
        url: std::sync::Arc::from(format!("{}/v1/chat/completions", url.trim_end_matches('/'))),
        body: bytes::Bytes::from(body.to_string()),
        streamed,
        headers: std::sync::Arc::from(headers),
    };
    let count = (rate * seconds).ceil() as usize;
    let started = std::time::Instant::now();
    let samples = load::open_loop(&client, &call, rate, count).await;
    let elapsed = started.elapsed().as_secs_f64();
    let print = |what: &str, s: load::Summary| {
        println!(
            "{what}: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            s.p50, s.p90, s.p99, s.max
        );
    };
    let latency = load::latency(&samples);
    println!(
        "{} requests at {rate}/s to {} ({model}{}) in {elapsed:.2} s: {} ok, {} failed{}; generator lag p99 {:.2} ms",
        latency.count,
        call.url,
        if streamed { ", streamed" } else { "" },
        latency.count - latency.errors,
        latency.errors,
        if latency.errors > 0 {
            format!(" ({})", load::failures(&samples))
        } else {
            String::new()
        },
        load::lag_p99(&samples),
    );
    print("latency", latency);
    if streamed {
        print("first content", load::first_content(&samples));
    }
    if latency.errors > 0 {
        return Err(format!(
            "{} of {} requests failed",
            latency.errors, latency.count
        ));
    }
    Ok(())
}

/// `--peer`, `--peer-forward` and `--peer-header` as the scenarios' peers (a header's NAME must
/// be one of theirs).
fn peers(args: &RunArgs) -> Result<Vec<scenarios::Peer>, String> {
    let named = args.peer.iter().map(|p| (p, false));
    let forwarded = args.peer_forward.iter().map(|p| (p, true));
    let peers: Vec<scenarios::Peer> = named
        .chain(forwarded)
        .map(|((name, host), forward)| scenarios::Peer {
            name: name.clone(),
            host: host.clone(),
            forward,
            headers: args
                .peer_header
                .iter()
                .filter(|(peer, _)| peer == name)
                .map(|(_, header)| header.clone())
                .collect(),
        })
        .collect();
    for (i, peer) in peers.iter().enumerate() {
        if peers[..i].iter().any(|p| p.name == peer.name) {
            return Err(format!("peer {:?} given twice", peer.name));
        }
    }
    for (name, _) in &args.peer_header {
        if !peers.iter().any(|p| &p.name == name) {
            return Err(format!(
                "--peer-header {name}:…: no --peer or --peer-forward {name}=…"
            ));
        }
    }
    Ok(peers)
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(format!("expected HEADER=VALUE, got {text:?}")),
    }
}

fn parse_peer_header(text: &str) -> Result<(String, (String, String)), String> {
    match text.split_once(':') {
        Some((peer, header)) if !peer.is_empty() => Ok((peer.to_string(), parse_header(header)?)),
        _ => Err(format!("expected NAME:HEADER=VALUE, got {text:?}")),
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
    let peers = peers(&args)?;
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
            scheduled: false,
        },
        streamed: Shape {
            first_byte_ms: 5,
            chunks: 64,
            gap_ms: 1,
            script_turns: None,
            scheduled: false,
        },
        slow: Shape {
            first_byte_ms: 0,
            chunks: 4,
            gap_ms: 0,
            script_turns: None,
            scheduled: false,
        },
        turns: Shape {
            first_byte_ms: 0,
            chunks: 1,
            gap_ms: 0,
            script_turns: Some(5),
            scheduled: false,
        },
        // 40 chunks 25 ms apart; content starts 300 ms after the run, so both followers are
        // attached before the first `output` exists (the report checks it).
        follow: Shape {
            first_byte_ms: 300,
            chunks: 40,
            gap_ms: 25,
            script_turns: None,
            scheduled: false,
        },
        // Scenario 7: 50 content frames per second, --capacity-chunks of them.
        paced: Shape {
            first_byte_ms: 0,
            chunks: args.capacity_chunks.max(2),
            gap_ms: 20,
            script_turns: None,
            scheduled: true,
        },
        // Scenario 8: 64 chunks as fast as the mock writes them.
        burst64: Shape {
            first_byte_ms: 0,
            chunks: 64,
            gap_ms: 0,
            script_turns: None,
            scheduled: false,
        },
    };
    let (only, soak_requested) = match &args.only {
        Some(only) => (only.clone(), only.contains(&9)),
        None => (vec![1, 2, 3, 4, 7, 8, 10, 9], false),
    };
    let limit = open_file_limit();
    // Descriptors agentd holds besides the streams: its store, MCP server and listener, and
    // idle upstream connections (≤ 256 per host). Scenario 3 runs on a fresh agentd, so no
    // idle client connections of the earlier scenarios count.
    let open_streams = args
        .open_streams
        .min((limit.saturating_sub(AGENTD_OTHER_FDS) / 2).saturating_sub(DRIVER_OTHER_CONNECTIONS));
    // The slow upstream holds every stream until all are open, plus a margin to sample RSS.
    let hold_ms = (open_streams as u64 * 1000 / 1000) + 8000;
    let slow = Shape {
        first_byte_ms: hold_ms,
        ..shapes.slow
    };
    let shapes = procs::Agents { slow, ..shapes };
    // Scenario 7: each stream costs a proxy (agentd, the relay, nginx) two descriptors.
    let capacity_cap = limit.saturating_sub(AGENTD_OTHER_FDS) / 2;
    let mut capacity_steps: Vec<usize> = args
        .capacity_streams
        .iter()
        .map(|&n| n.min(capacity_cap))
        .filter(|&n| n > 0)
        .collect();
    capacity_steps.dedup();

    for scenario in [6, 11] {
        if only.contains(&scenario) && args.postgres.is_none() {
            return Err(format!(
                "scenario {scenario} needs --postgres postgres://user@host:port"
            ));
        }
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
    // nginx beside the relay for scenarios 1, 7 and 8 (its own dir, config and error log).
    let wants_nginx = !args.no_nginx && [1, 7, 8].iter().any(|n| only.contains(n));
    let mut nginx = if wants_nginx {
        let binary = nginx::ensure()?;
        let nginx_dir = dir.join("nginx");
        Some(
            nginx::start(&nginx::Setup {
                binary: &binary,
                dir: &nginx_dir,
                listen: &args.nginx_listen,
                upstream: &args.mock_listen,
                files: limit,
            })
            .await?,
        )
    } else {
        None
    };
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
    if only.contains(&1) {
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
        nginx: nginx.as_ref().map(|_| args.nginx_listen.clone()),
        peers,
        step_seconds: args.step_seconds,
        rates: args.rates.clone(),
        open_streams,
        runs: args.runs,
        capacity_steps: capacity_steps.clone(),
        capacity_pacing: capacity::Pacing {
            ramp: Duration::from_secs_f64(args.capacity_ramp_seconds),
            hold: Duration::from_secs_f64(args.capacity_seconds),
            stream: Duration::from_millis(shapes.paced.gap_ms * shapes.paced.chunks as u64),
            gap: Duration::from_millis(shapes.paced.gap_ms),
        },
        closed_connections: args.closed_connections,
        closed_warmup: Duration::from_secs_f64(args.closed_warmup_seconds),
        closed_seconds: Duration::from_secs_f64(args.closed_seconds),
    };
    let mut report = report::Report::default();
    let mut agentd_max: Option<f64> = None;
    report.note(format!(
        "agentd pid {}, mock pid {}, relay pid {}, open-file limit {limit}, {} CPUs",
        agentd.pid(),
        mock.pid(),
        relay.pid(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));
    if let Some(nginx) = &nginx {
        report.note(format!(
            "nginx pid {} on {}, {} worker processes (CPU summed over master and workers)",
            nginx.pid(),
            args.nginx_listen,
            procs::children_of(nginx.pid()).len()
        ));
    }
    if only.contains(&7) && args.capacity_streams.iter().any(|&n| n > capacity_cap) {
        report.note(format!(
            "scenario 7 steps capped at {capacity_cap} streams: the open-file limit is {limit}, a proxy needs two descriptors per stream and keeps {AGENTD_OTHER_FDS} for the rest"
        ));
    }
    if only.contains(&3) && open_streams < args.open_streams {
        report.note(format!(
            "scenario 3 holds {open_streams} streams, not {}: the open-file limit is {limit}, agentd needs two descriptors per stream and keeps {AGENTD_OTHER_FDS} for the rest (its `maxConnections` is that half), less {DRIVER_OTHER_CONNECTIONS} connections for the driver's own requests",
            args.open_streams,
        ));
    }
    if only.contains(&1) {
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
        agentd_max = Some(
            scenarios::single_turn(
                &bench,
                &shapes.single,
                (&agentd, &relay, nginx.as_ref()),
                &compared,
                &mut report,
            )
            .await,
        );
    }
    for (name, _, process) in &mut compared {
        process.check_alive().map_err(|e| format!("{name}: {e}"))?;
    }
    drop(compared);
    if only.contains(&2) {
        eprintln!("scenario 2: streaming, 64 chunks");
        scenarios::streaming(&bench, &shapes.streamed, &mut report).await;
    }
    if only.contains(&4) {
        eprintln!("scenario 4: 5-turn agent with an MCP tool each turn");
        scenarios::turns(&bench, &shapes.turns, &mcp_server, &mut report).await;
    }
    if only.contains(&6) {
        eprintln!("scenario 6: cross-replica follow latency");
        let port: u16 = port_of(&args.agentd_listen)?;
        let store_url = store("replicas")?;
        let (a_listen, b_listen) = (
            format!("127.0.0.1:{}", port + 1),
            format!("127.0.0.1:{}", port + 2),
        );
        let mut replicas = Vec::new();
        for (name, listen) in [("replica-a", &a_listen), ("replica-b", &b_listen)] {
            let instance = procs::Instance {
                binary: &agentd_bin,
                name,
                listen,
                store_url: &store_url,
            };
            let around = (
                mcp_server.as_path(),
                dir.as_path(),
                args.mock_listen.as_str(),
            );
            replicas
                .push(procs::start_agentd_ready(&instance, around, &shapes, &bench.client).await?);
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
    if only.contains(&11) {
        eprintln!("scenario 11: event-write ceiling of one PostgreSQL");
        let port: u16 = port_of(&args.agentd_listen)?;
        let store_url = store("ceiling")?;
        let count = args
            .ceiling_replicas
            .iter()
            .copied()
            .max()
            .unwrap_or(1)
            .max(2);
        let mut replicas = Vec::new();
        let mut listens = Vec::new();
        for index in 0..count {
            let listen = format!("127.0.0.1:{}", port + 3 + index as u16);
            let instance = procs::Instance {
                binary: &agentd_bin,
                name: &format!("ceiling-{index}"),
                listen: &listen,
                store_url: &store_url,
            };
            let around = (
                mcp_server.as_path(),
                dir.as_path(),
                args.mock_listen.as_str(),
            );
            replicas
                .push(procs::start_agentd_ready(&instance, around, &shapes, &bench.client).await?);
            listens.push(listen);
        }
        report.note(format!(
            "11. {count} replicas (pids {}) on one fresh PostgreSQL database; upstream `{}`; each step's runs started over 1 s",
            replicas.iter().map(|r| r.pid().to_string()).collect::<Vec<_>>().join(", "),
            shapes.follow.model()
        ));
        // Warm every replica (connections, statements).
        ceiling::climb(&bench.client, &listens, count, &[3 * count], |_| {}).await;
        for &writers in &args.ceiling_replicas {
            let start = std::time::Instant::now();
            let cpu = || {
                [
                    replicas
                        .iter()
                        .map(procs::Process::cpu_seconds)
                        .sum::<f64>(),
                    procs::cpu_seconds_named("postgres"),
                    procs::machine_busy_seconds(),
                    start.elapsed().as_secs_f64(),
                ]
            };
            let mut before = cpu();
            let mut rows = Vec::new();
            let steps = ceiling::climb(
                &bench.client,
                &listens,
                writers,
                &args.ceiling_runs,
                |step| {
                    let now = cpu();
                    rows.push((step.measured.runs, [0, 1, 2, 3].map(|i| now[i] - before[i])));
                    before = now;
                },
            )
            .await;
            for (step, (_, cpu)) in steps.iter().zip(&rows) {
                report.ceiling_row(step, *cpu);
            }
            report.ceiling_summary(writers, &steps);
        }
        for replica in &mut replicas {
            replica.check_alive()?;
        }
    }
    if only.contains(&7) {
        eprintln!("scenario 7: streaming capacity");
        scenarios::capacity(
            &bench,
            &shapes.paced,
            (&mock, &relay, nginx.as_ref(), &agentd),
            &mut report,
        )
        .await;
        agentd.check_alive()?;
    }
    if only.contains(&8) {
        eprintln!("scenario 8: closed loop");
        scenarios::closed(
            &bench,
            (&shapes.single, &shapes.burst64),
            (&mock, &relay, nginx.as_ref(), &agentd),
            &mut report,
        )
        .await;
        agentd.check_alive()?;
    }
    if only.contains(&10) {
        eprintln!("scenario 10: head-of-line");
        let settings = head_of_line::Settings {
            streams: args.hol_streams.min(capacity_cap.max(1)),
            senders: args.hol_senders,
            prompt_words: args.hol_prompt_words,
            pacing: bench.capacity_pacing,
        };
        scenarios::head_of_line(
            &bench,
            (&shapes.paced, &shapes.single),
            (&mock, &agentd),
            settings,
            &mut report,
        )
        .await;
        agentd.check_alive()?;
    }
    if only.contains(&3) {
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
    if only.contains(&9) {
        // Again a fresh agentd: its idle RSS is that of a server that has served nothing.
        drop(agentd);
        let log = dir.join("agentd.log");
        let _ = std::fs::rename(&log, dir.join("agentd-before-9.log"));
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
        let soak = scenarios::Soak {
            rate: args
                .soak_rate
                .or(agentd_max.filter(|&m| m > 0.0).map(|m| m / 2.0))
                .unwrap_or(2000.0),
            seconds: args.soak_seconds,
            sample_every: Duration::from_secs(args.soak_sample_seconds.max(1)),
            baseline_after: Duration::from_secs(args.soak_baseline_seconds),
            bucket: Duration::from_secs(args.soak_bucket_seconds.max(1)),
        };
        let soak = (soak_requested && soak.seconds > 0).then_some(soak);
        eprintln!(
            "scenario 9: memory (fresh agentd, pid {}){}",
            agentd.pid(),
            soak.as_ref().map_or(String::new(), |s| format!(
                ", soak at {} req/s for {} s",
                s.rate, s.seconds
            ))
        );
        report.note(format!(
            "scenario 9 runs on a fresh agentd, pid {}",
            agentd.pid()
        ));
        scenarios::memory(&bench, &shapes.single, &agentd, soak.as_ref(), &mut report).await;
    }
    agentd.check_alive()?;
    mock.check_alive()?;
    relay.check_alive()?;
    if let Some(nginx) = &mut nginx {
        nginx.check_alive()?;
    }
    println!("{}", report.render());
    drop(agentd);
    drop(nginx);
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
