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
    pub step_seconds: f64,
    pub rates: Vec<f64>,
    pub open_streams: usize,
    pub runs: usize,
}

impl Bench {
    fn call(&self, through_agentd: bool, shape: &Shape, agent: &str, streamed: bool) -> Call {
        let (host, model) = if through_agentd {
            (&self.agentd, agent.to_string())
        } else {
            (&self.mock, shape.model())
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

/// Scenario 1: non-streaming single-turn agent, fixed rates up to the highest sustained one.
pub async fn single_turn(bench: &Bench, shape: &Shape, agentd: &Process, report: &mut Report) {
    let direct = bench.call(false, shape, "single", false);
    let through = bench.call(true, shape, "single", false);
    // Warm both paths (connections, agentd's first session, SQLite pages).
    load::open_loop(&bench.client, &direct, 500.0, 500).await;
    load::open_loop(&bench.client, &through, 500.0, 500).await;
    let (mut direct_alive, mut agentd_alive) = (true, true);
    let (mut direct_max, mut agentd_max) = (0.0, 0.0);
    for &rate in &bench.rates {
        let count = ((rate * bench.step_seconds) as usize).max(200);
        let mut row = |name: &str, samples: &[Sample]| {
            let summary = load::latency(samples);
            let sustained = summary.errors == 0 && summary.p99 < 50.0;
            report.rate_row(name, rate, &summary, load::lag_p99(samples), sustained);
            if summary.errors > 0 {
                report.note(format!(
                    "  {name} errors at {rate} req/s: {}",
                    load::failures(samples)
                ));
            }
            sustained
        };
        let d = if direct_alive {
            let samples = load::open_loop(&bench.client, &direct, rate, count).await;
            Some(samples)
        } else {
            None
        };
        let rss_before = agentd.rss_kib();
        let cpu_before = agentd.cpu_seconds();
        let a = if agentd_alive {
            Some(load::open_loop(&bench.client, &through, rate, count).await)
        } else {
            None
        };
        if let Some(samples) = &d {
            direct_alive = row("direct", samples);
            if direct_alive {
                direct_max = rate;
            }
        }
        if let Some(samples) = &a {
            agentd_alive = row("agentd", samples);
            if agentd_alive {
                agentd_max = rate;
            }
            report.note(format!(
                "  agentd RSS at {rate} req/s: {} KiB before, {} KiB after",
                rss_before,
                agentd.rss_kib()
            ));
        }
        if let (Some(d), Some(a)) = (&d, &a) {
            report.added_row(rate, &load::latency(d), &load::latency(a));
        }
        if !direct_alive && !agentd_alive {
            break;
        }
        // Let agentd's store writes from this step settle before the next one.
        tokio::time::sleep(Duration::from_millis(500)).await;
        if a.is_some() {
            let cpu = agentd.cpu_seconds() - cpu_before;
            report.note(format!(
                "  agentd CPU at {rate} req/s: {:.0} µs per request (user + system, {count} requests, store writes included)",
                cpu * 1e6 / count as f64
            ));
        }
    }
    report.throughput(direct_max, agentd_max);
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
