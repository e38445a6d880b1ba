//! The scenarios of bench/README.md. Each one is measured through agentd and directly against
//! the mock in the same run, and reports the difference and the ratio, never one absolute time.

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
    /// Other servers measured beside agentd in scenario 1: (name, host:port); each serves the
    /// agent names (`single`, `streamed`) as models routed to the mock.
    pub peers: Vec<(String, String)>,
    pub step_seconds: f64,
    pub rates: Vec<f64>,
    pub open_streams: usize,
    pub runs: usize,
}

/// Where a request goes: the mock itself, something that forwards the mock's model name to it
/// unchanged (the relay), or a server that maps an agent name to the mock's model (agentd, peers).
enum Via<'a> {
    Direct,
    Relay,
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
            Via::Relay => (self.relay.as_str(), shape.model()),
            Via::Named(host) => (host, agent.to_string()),
        };
        let body = json!({"model": model, "stream": streamed,
            "messages": [{"role": "user", "content": "Say something."}]});
        Call {
            url: Arc::from(format!("http://{host}/v1/chat/completions")),
            body: Bytes::from(body.to_string()),
            streamed,
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
pub async fn single_turn(
    bench: &Bench,
    shape: &Shape,
    (agentd, relay): (&Process, &Process),
    compared: &[(&str, &str, &Process)],
    report: &mut Report,
) {
    let mut ours = vec![
        Ladder::new(
            "direct",
            bench.call_via(Via::Direct, shape, "single", false),
        ),
        Ladder::new("relay", bench.call_via(Via::Relay, shape, "single", false)).served_by(relay),
        Ladder::new("agentd", bench.call(true, shape, "single", false)).served_by(agentd),
    ];
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
    for (name, host) in &bench.peers {
        let mut peer = vec![
            Ladder::new(
                "direct",
                bench.call_via(Via::Direct, shape, "single", false),
            ),
            Ladder::new(
                name,
                bench.call_via(Via::Named(host), shape, "single", false),
            ),
        ];
        climb(bench, &mut peer, false, report).await;
        maxima.push((name.clone(), peer[1].max));
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
                if name == "agentd" { ", store writes included" } else { "" }
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
            Call { url: Arc::from(format!("http://{}/v1/chat/completions", bench.mock)), body: Bytes::from(body.to_string()), streamed: false }
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
