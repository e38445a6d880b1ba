//! The scenarios of bench/README.md (scenario 7's client and climb live in `capacity.rs`).
//! Each one is measured through agentd and directly against the mock in the same run (and,
//! where it applies, through the do-nothing relay and nginx), and reports the difference and
//! the ratio, never one absolute time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;

use crate::load::{self, Call, Sample, Summary};
use crate::mock::Shape;
use crate::procs::{self, Process};
use crate::report::Report;

pub struct Bench {
    pub client: reqwest::Client,
    pub agentd: String,
    pub mock: String,
    /// The do-nothing relay in front of the mock (`relay.rs`).
    pub relay: String,
    /// nginx in front of the mock (`nginx.rs`), unless `--no-nginx`.
    pub nginx: Option<String>,
    /// Other servers measured beside agentd in scenarios 1 and 8 (`--peer`, `--peer-forward`).
    pub peers: Vec<Peer>,
    pub step_seconds: f64,
    pub rates: Vec<f64>,
    pub open_streams: usize,
    pub runs: usize,
    /// Scenario 7: the N of each step (already capped by the open-file limit).
    pub capacity_steps: Vec<usize>,
    pub capacity_pacing: crate::capacity::Pacing,
    /// Scenario 8: connections, warm-up and measured time per target.
    pub closed_connections: usize,
    pub closed_warmup: Duration,
    pub closed_seconds: Duration,
}

/// A server measured beside agentd: it serves the agent names (`single`) as models routed to
/// the mock (`--peer`, LiteLLM), or, `forward`, passes the mock's own model names through to it
/// as the relay does (`--peer-forward`, Portkey); `headers` go on each of its requests
/// (`--peer-header`, e.g. Portkey's provider and upstream).
pub struct Peer {
    pub name: String,
    pub host: String,
    pub forward: bool,
    pub headers: Arc<[(String, String)]>,
}

/// Where a request goes: the mock itself, something at this host that forwards the mock's model
/// name to it unchanged (the relay, nginx), or a server that maps an agent name to the mock's
/// model (agentd, peers).
enum Via<'a> {
    Direct,
    Forward(&'a str),
    Named(&'a str),
}

impl Bench {
    fn call(&self, through_agentd: bool, shape: &Shape, agent: &str, streamed: bool) -> Call {
        let via = if through_agentd {
            Via::Named(&self.agentd)
        } else {
            Via::Direct
        };
        self.call_via(via, shape, agent, streamed)
    }

    fn call_via(&self, via: Via, shape: &Shape, agent: &str, streamed: bool) -> Call {
        let (host, model) = match via {
            Via::Direct => (self.mock.as_str(), shape.model()),
            Via::Forward(host) => (host, shape.model()),
            Via::Named(host) => (host, agent.to_string()),
        };
        let body = json!({"model": model, "stream": streamed,
            "messages": [{"role": "user", "content": "Say something."}]});
        Call {
            url: Arc::from(format!("http://{host}/v1/chat/completions")),
            body: Bytes::from(body.to_string()),
            streamed,
            headers: Arc::from([]),
        }
    }

    fn call_peer(&self, peer: &Peer, shape: &Shape, agent: &str, streamed: bool) -> Call {
        let via = if peer.forward {
            Via::Forward(&peer.host)
        } else {
            Via::Named(&peer.host)
        };
        Call {
            headers: peer.headers.clone(),
            ..self.call_via(via, shape, agent, streamed)
        }
    }
}

/// A step that is not sustained is measured once more before its ladder stops: on this shared
/// box a single stall of the whole machine (the generator's lag shows it) fails a step on every
/// target alike, and the highest sustained rate should not depend on when one came.
const STEP_RETRIES: usize = 1;

/// One target of scenario 1's rate ladder, climbed until it stops sustaining its rate.
struct Ladder<'a> {
    name: String,
    call: Call,
    /// The process serving it, when the bench started it: its CPU per request is noted.
    process: Option<&'a Process>,
    alive: bool,
    max: f64,
    /// Requests sent at this rate (more than one step's when it was measured again).
    sent: usize,
    /// This rate's samples, when it was measured.
    last: Option<Vec<Sample>>,
}

impl<'a> Ladder<'a> {
    fn new(name: &str, call: Call) -> Self {
        Self {
            name: name.to_string(),
            call,
            process: None,
            alive: true,
            max: 0.0,
            sent: 0,
            last: None,
        }
    }

    fn served_by(self, process: &'a Process) -> Self {
        Self {
            process: Some(process),
            ..self
        }
    }
}

/// Scenario 1: non-streaming single-turn agent, fixed rates up to the highest sustained one:
/// the mock directly, the do-nothing relay and agentd one after another at each rate; then
/// each peer climbs alone, so that a peer's backlog (work it is still doing after its step)
/// never lands on agentd's steps.
/// Returns agentd's highest sustained rate.
pub async fn single_turn(
    bench: &Bench,
    shape: &Shape,
    (agentd, relay, nginx): (&Process, &Process, Option<&Process>),
    compared: &[(&str, &str, &Process)],
    report: &mut Report,
) -> f64 {
    let mut ours = vec![
        Ladder::new(
            "direct",
            bench.call_via(Via::Direct, shape, "single", false),
        ),
        Ladder::new(
            "relay",
            bench.call_via(Via::Forward(&bench.relay), shape, "single", false),
        )
        .served_by(relay),
    ];
    if let (Some(host), Some(process)) = (&bench.nginx, nginx) {
        ours.push(
            Ladder::new(
                "nginx",
                bench.call_via(Via::Forward(host), shape, "single", false),
            )
            .served_by(process),
        );
    }
    ours.push(Ladder::new("agentd", bench.call(true, shape, "single", false)).served_by(agentd));
    // Other agentd builds climb the same ladder, each right after agentd at every rate.
    for (name, host, process) in compared {
        ours.push(
            Ladder::new(
                name,
                bench.call_via(Via::Named(host), shape, "single", false),
            )
            .served_by(process),
        );
    }
    climb(bench, &mut ours, true, report).await;
    let mut maxima: Vec<(String, f64)> = ours.iter().map(|l| (l.name.clone(), l.max)).collect();
    for peer in &bench.peers {
        let mut ladders = vec![
            Ladder::new(
                "direct",
                bench.call_via(Via::Direct, shape, "single", false),
            ),
            Ladder::new(&peer.name, bench.call_peer(peer, shape, "single", false)),
        ];
        climb(bench, &mut ladders, false, report).await;
        maxima.push((peer.name.clone(), ladders[1].max));
    }
    let maxima: Vec<(&str, f64)> = maxima.iter().map(|(n, m)| (n.as_str(), *m)).collect();
    report.throughput(&maxima);
    let agentd_max = maxima
        .iter()
        .find(|(n, _)| *n == "agentd")
        .map_or(0.0, |m| m.1);
    for (name, _, _) in compared {
        let max = maxima.iter().find(|(n, _)| n == name).map_or(0.0, |m| m.1);
        report.compare_row(name, max, agentd_max);
    }
    agentd_max
}

/// Climbs `ladders` (the first is `direct`) rate by rate until none sustains its rate, or,
/// unless `direct_to_its_max`, until only `direct` does. A ladder whose process the bench
/// started gets that process's CPU per request noted (each process works only during its own
/// ladder's step), agentd's its RSS too.
async fn climb(
    bench: &Bench,
    ladders: &mut [Ladder<'_>],
    direct_to_its_max: bool,
    report: &mut Report,
) {
    // Warm every path (connections, agentd's first session, SQLite pages) at the first rate
    // of the ladder, at most 500/s: a peer that cannot keep up is not left with a backlog.
    let warm_rate = bench
        .rates
        .first()
        .map_or(100.0, |rate| rate.clamp(10.0, 500.0));
    for ladder in ladders.iter() {
        load::open_loop(&bench.client, &ladder.call, warm_rate, 300).await;
    }
    for &rate in &bench.rates {
        let count = ((rate * bench.step_seconds) as usize).max(200);
        let before: Vec<(f64, u64)> = ladders
            .iter()
            .map(|l| {
                l.process
                    .map_or((0.0, 0), |p| (p.cpu_seconds(), p.rss_kib()))
            })
            .collect();
        for ladder in ladders.iter_mut() {
            ladder.last = None;
            if !ladder.alive {
                continue;
            }
            ladder.sent = 0;
            for attempt in 0..=STEP_RETRIES {
                let samples = load::open_loop(&bench.client, &ladder.call, rate, count).await;
                ladder.sent += count;
                let summary = load::latency(&samples);
                ladder.alive = summary.errors == 0 && summary.p99 < 50.0;
                report.rate_row(
                    &ladder.name,
                    rate,
                    &summary,
                    load::lag_p99(&samples),
                    ladder.alive,
                );
                if summary.errors > 0 {
                    report.note(format!(
                        "  {} errors at {rate} req/s: {}",
                        ladder.name,
                        load::failures(&samples)
                    ));
                }
                ladder.last = Some(samples);
                if ladder.alive {
                    ladder.max = rate;
                    break;
                }
                if attempt < STEP_RETRIES {
                    report.note(format!(
                        "  {} not sustained at {rate} req/s (p99 {:.3} ms, {} errors): measured again",
                        ladder.name, summary.p99, summary.errors
                    ));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        if let Some(direct) = &ladders[0].last {
            let direct = load::latency(direct);
            for ladder in &ladders[1..] {
                if let Some(samples) = &ladder.last {
                    report.added_row(&ladder.name, rate, &direct, &load::latency(samples));
                }
            }
        }
        let from = if direct_to_its_max { 0 } else { 1 };
        if ladders[from..].iter().all(|ladder| !ladder.alive) {
            break;
        }
        // Let agentd's store writes (or a peer's backlog) from this step settle.
        tokio::time::sleep(Duration::from_millis(500)).await;
        for (ladder, (cpu_before, rss_before)) in ladders.iter().zip(before) {
            let (Some(process), Some(_)) = (ladder.process, &ladder.last) else {
                continue;
            };
            let cpu = process.cpu_seconds() - cpu_before;
            let (name, sent) = (&ladder.name, ladder.sent);
            report.note(format!(
                "  {name} CPU at {rate} req/s: {:.0} µs per request (user + system, {sent} requests{})",
                cpu * 1e6 / sent as f64,
                match name.as_str() {
                    "agentd" => ", store writes included",
                    "nginx" => ", master and workers",
                    _ => "",
                }
            ));
            if name == "agentd" {
                report.note(format!(
                    "  agentd RSS at {rate} req/s: {rss_before} KiB before, {} KiB after",
                    process.rss_kib()
                ));
            }
        }
    }
}

/// Scenario 2: streamed answers of many chunks: added time to first content and to the end.
pub async fn streaming(bench: &Bench, shape: &Shape, report: &mut Report) {
    let rate = 100.0;
    let count = (rate * bench.step_seconds * 2.0) as usize;
    let direct = bench.call(false, shape, "streamed", true);
    let through = bench.call(true, shape, "streamed", true);
    load::open_loop(&bench.client, &through, rate, 100).await;
    let d = load::open_loop(&bench.client, &direct, rate, count).await;
    let a = load::open_loop(&bench.client, &through, rate, count).await;
    report.stream_rows(
        shape,
        rate,
        (&load::first_content(&d), &load::first_content(&a)),
        (&load::latency(&d), &load::latency(&a)),
    );
}

/// Scenario 3: many streams open at once against a slow upstream: agentd's RSS per open stream.
pub async fn open_streams(bench: &Bench, shape: &Shape, agentd: &Process, report: &mut Report) {
    let ramp_rate = 1000.0;
    let count = bench.open_streams;
    for through_agentd in [false, true] {
        let call = bench.call(through_agentd, shape, "slow", true);
        let baseline = agentd.rss_kib();
        let ramp = Duration::from_secs_f64(count as f64 / ramp_rate);
        let client = load::client(count + 16).unwrap_or_else(|_| bench.client.clone());
        let run =
            tokio::spawn(async move { load::open_loop(&client, &call, ramp_rate, count).await });
        // All streams are open and idle (waiting for the upstream's first content) a little
        // after the ramp; sample agentd there.
        tokio::time::sleep(ramp + Duration::from_secs(3)).await;
        let peak = agentd.rss_kib();
        let samples = run.await.unwrap_or_default();
        let completed = samples.iter().filter(|s| s.ok).count();
        let last = load::latency(&samples);
        if completed < count {
            let target = if through_agentd { "agentd" } else { "direct" };
            report.note(format!(
                "3. {target}: not completed: {}",
                load::failures(&samples)
            ));
        }
        if through_agentd {
            report.open_stream_row("agentd", count, completed, &last, Some((baseline, peak)));
        } else {
            report.open_stream_row("direct", count, completed, &last, None);
        }
    }
}

/// Scenario 4: a 5-turn agent with one MCP tool call per turn: agentd's own time per turn.
pub async fn turns(
    bench: &Bench,
    shape: &Shape,
    mcp_server: &std::path::Path,
    report: &mut Report,
) {
    let turns = shape.script_turns.unwrap_or(5);
    let through = bench.call(true, shape, "turns", false);
    let metrics = format!("http://{}/metrics", bench.agentd);
    // Direct: the same answers the run asks for, one after the other.
    let bodies: Vec<Call> = (0..turns)
        .map(|done| {
            let mut messages = vec![json!({"role": "user", "content": "Say something."})];
            for turn in 1..=done {
                messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{turn}"), "type": "function", "function": {"name": "mcp__echo", "arguments": "{\"text\":\"x\"}"}}]}));
                messages.push(json!({"role": "tool", "tool_call_id": format!("call_{turn}"), "content": "x"}));
            }
            let body = json!({"model": shape.model(), "stream": false, "messages": messages,
                "tools": [{"type": "function", "function": {"name": "mcp__echo", "parameters": {"type": "object"}}}]});
            Call { url: Arc::from(format!("http://{}/v1/chat/completions", bench.mock)), body: Bytes::from(body.to_string()), streamed: false, headers: Arc::from([]) }
        })
        .collect();
    for _ in 0..20 {
        load::one(&bench.client, &through, Instant::now()).await;
    }
    let (sum_before, count_before) =
        procs::histogram(&bench.client, &metrics, "agentd_overhead_seconds").await;
    let mut runs = Vec::with_capacity(bench.runs);
    for _ in 0..bench.runs {
        runs.push(load::one(&bench.client, &through, Instant::now()).await);
    }
    let (sum_after, count_after) =
        procs::histogram(&bench.client, &metrics, "agentd_overhead_seconds").await;
    let mut direct = Vec::with_capacity(bench.runs);
    for _ in 0..bench.runs {
        let start = Instant::now();
        let mut failure = None;
        for body in &bodies {
            failure = failure.or(load::one(&bench.client, body, Instant::now()).await.failure);
        }
        direct.push(Sample {
            latency: start.elapsed(),
            first_content: None,
            ok: failure.is_none(),
            failure,
            lag: Duration::ZERO,
        });
    }
    let tool = crate::mcp_probe::echo_latencies(mcp_server, bench.runs).await;
    let exported = if count_after > count_before {
        Some((sum_after - sum_before) / (count_after - count_before) * 1000.0)
    } else {
        None
    };
    report.turn_rows(
        turns,
        &load::latency(&runs),
        &load::latency(&direct),
        tool.as_ref().ok(),
        exported,
    );
    if let Err(error) = tool {
        report.note(format!("  MCP echo probe failed: {error}"));
    }
}

pub fn tool_summary(latencies: &[Duration]) -> Summary {
    let samples: Vec<Sample> = latencies
        .iter()
        .map(|&latency| Sample {
            latency,
            first_content: None,
            ok: true,
            failure: None,
            lag: Duration::ZERO,
        })
        .collect();
    load::latency(&samples)
}

/// The servers of scenarios 7 and 8, in order: the mock itself, the relay, nginx, agentd.
fn forwarding_targets<'a>(
    bench: &'a Bench,
    shape: &Shape,
    agent: &str,
    streamed: bool,
    (mock, relay, nginx, agentd): (&'a Process, &'a Process, Option<&'a Process>, &'a Process),
) -> Vec<(String, Call, &'a Process)> {
    let mut targets = vec![
        (
            "direct".to_string(),
            bench.call_via(Via::Direct, shape, agent, streamed),
            mock,
        ),
        (
            "relay".to_string(),
            bench.call_via(Via::Forward(&bench.relay), shape, agent, streamed),
            relay,
        ),
    ];
    if let (Some(host), Some(process)) = (&bench.nginx, nginx) {
        targets.push((
            "nginx".to_string(),
            bench.call_via(Via::Forward(host), shape, agent, streamed),
            process,
        ));
    }
    targets.push((
        "agentd".to_string(),
        bench.call(true, shape, agent, streamed),
        agentd,
    ));
    targets
}

/// Scenario 7: streaming capacity, N paced streams kept open, N climbing per target.
pub async fn capacity(
    bench: &Bench,
    shape: &Shape,
    processes: (&Process, &Process, Option<&Process>, &Process),
    report: &mut Report,
) {
    let targets: Vec<crate::capacity::Target> =
        forwarding_targets(bench, shape, "paced", true, processes)
            .into_iter()
            .map(|(name, call, process)| crate::capacity::Target {
                name,
                call,
                process: Some(process),
            })
            .collect();
    report.note(format!(
        "7. upstream `{}` ({} content frames {} ms apart per stream); streams opened over {:.1} s, then {:.1} s measured; steps {:?}",
        shape.model(),
        shape.chunks,
        shape.gap_ms,
        bench.capacity_pacing.ramp.as_secs_f64(),
        bench.capacity_pacing.hold.as_secs_f64(),
        bench.capacity_steps
    ));
    let best = crate::capacity::climb(
        &targets,
        &bench.capacity_steps,
        bench.capacity_pacing,
        report,
    )
    .await;
    let best: Vec<(&str, usize)> = best.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    let highest_step = bench.capacity_steps.iter().copied().max().unwrap_or(0);
    report.capacity_summary(&best, highest_step);
}

/// Scenario 10: head-of-line, the mock directly and then agentd (`head_of_line.rs`).
pub async fn head_of_line(
    bench: &Bench,
    (paced, single): (&Shape, &Shape),
    (mock, agentd): (&Process, &Process),
    settings: crate::head_of_line::Settings,
    report: &mut Report,
) {
    report.note(format!(
        "10. {} small streams of `{}` ({} content frames {} ms apart), {:.1} s measured after a {:.1} s ramp; {} connection(s) sending non-streamed prompts of {} words back to back",
        settings.streams,
        paced.model(),
        paced.chunks,
        paced.gap_ms,
        settings.pacing.hold.as_secs_f64(),
        settings.pacing.ramp.as_secs_f64(),
        settings.senders,
        settings.prompt_words
    ));
    for (through_agentd, process) in [(false, mock), (true, agentd)] {
        let small = bench.call(through_agentd, paced, "paced", true);
        let (target, model) = if through_agentd {
            ("agentd", "single".to_string())
        } else {
            ("direct", single.model())
        };
        let large = crate::head_of_line::large_call(
            &bench.call(through_agentd, single, "single", false),
            &model,
            settings.prompt_words,
        );
        let measured =
            crate::head_of_line::measure(target, (&small, &large), process, settings).await;
        report.head_of_line_rows(&measured, settings.prompt_words);
    }
}

/// Scenario 8: closed loop, `closed_connections` connections each sending its next request as
/// soon as its answer is complete; every target alone, one after the other: the non-streaming
/// single turn (peers too) and 64-chunk streams.
pub async fn closed(
    bench: &Bench,
    (single, burst): (&Shape, &Shape),
    processes: (&Process, &Process, Option<&Process>, &Process),
    report: &mut Report,
) {
    let client =
        load::client(bench.closed_connections + 16).unwrap_or_else(|_| bench.client.clone());
    for (case, shape, agent, streamed) in [
        ("non-streaming single turn", single, "single", false),
        ("64-chunk stream", burst, "burst64", true),
    ] {
        let mut targets: Vec<(String, Call, Option<&Process>)> =
            forwarding_targets(bench, shape, agent, streamed, processes)
                .into_iter()
                .map(|(name, call, process)| (name, call, Some(process)))
                .collect();
        if !streamed {
            for peer in &bench.peers {
                targets.push((
                    peer.name.clone(),
                    bench.call_peer(peer, shape, agent, streamed),
                    None,
                ));
            }
        }
        let mut rates = Vec::new();
        for (name, call, process) in &targets {
            eprintln!("8. {case}: {name}");
            let cpu_before = process.map(|p| p.cpu_seconds());
            let driver_before = procs::cpu_seconds_of(std::process::id());
            let measured = load::closed_loop(
                &client,
                call,
                bench.closed_connections,
                bench.closed_warmup,
                bench.closed_seconds,
            )
            .await;
            // The CPU covers the warm-up and the drain too: per request sent in all of them.
            let cpu = process
                .map(|p| p.cpu_seconds())
                .zip(cpu_before)
                .map(|(after, before)| after - before);
            // The driver's own CPU (this process: the connections, no mock, no relay): it must
            // not be what limits the rate.
            let driver = procs::cpu_seconds_of(std::process::id()) - driver_before;
            report.closed_row(case, name, &measured, (cpu, driver));
            if measured.errors > 0 {
                report.note(format!(
                    "  8. {case}, {name}: {} errors: {}",
                    measured.errors, measured.failures
                ));
            }
            rates.push((name.clone(), measured.per_second()));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let rates: Vec<(&str, f64)> = rates.iter().map(|(n, r)| (n.as_str(), *r)).collect();
        report.closed_summary(case, &rates);
    }
}

/// Scenario 9 (b)'s settings.
pub struct Soak {
    pub rate: f64,
    pub seconds: u64,
    /// agentd's RSS is sampled this often.
    pub sample_every: Duration,
    /// The baseline is the first sample at or after this time.
    pub baseline_after: Duration,
    /// Errors and p99 are reported per bucket of this length.
    pub bucket: Duration,
}

/// Scenario 9: (a) idle RSS of a freshly started agentd (2 s after /health answered), and,
/// with `soak`, (b) an open loop of the non-streaming single turn with agentd's RSS sampled.
pub async fn memory(
    bench: &Bench,
    shape: &Shape,
    agentd: &Process,
    soak: Option<&Soak>,
    report: &mut Report,
) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    report.idle_rss(agentd.rss_kib());
    let Some(soak) = soak else {
        return;
    };
    let pid = agentd.pid();
    let start = Instant::now();
    let total = Duration::from_secs(soak.seconds);
    let every = soak.sample_every;
    let sampler = tokio::spawn(async move {
        let mut samples = Vec::new();
        let mut next = start + every;
        while next <= start + total {
            tokio::time::sleep_until(next.into()).await;
            samples.push((next - start, procs::rss_kib_of(pid)));
            next += every;
        }
        samples
    });
    let call = bench.call(true, shape, "single", false);
    let mut buckets = Vec::new();
    let mut elapsed = Duration::ZERO;
    while elapsed < total {
        let length = soak.bucket.min(total - elapsed);
        let count = ((soak.rate * length.as_secs_f64()) as usize).max(1);
        let samples = load::open_loop(&bench.client, &call, soak.rate, count).await;
        elapsed = start.elapsed();
        let summary = load::latency(&samples);
        if summary.errors > 0 {
            report.note(format!(
                "  9. soak errors until {:.0} s: {}",
                elapsed.as_secs_f64(),
                load::failures(&samples)
            ));
        }
        buckets.push((elapsed, summary, load::lag_p99(&samples)));
    }
    let rss = sampler.await.unwrap_or_default();
    report.soak(soak, &rss, &buckets);
}
