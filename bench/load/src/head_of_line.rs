//! Scenario 10, head-of-line: does a large request stall small streams? `streams` paced
//! streams (scenario 7's slots, 50 content frames per second each) are measured alone, then
//! while `senders` connections send non-streamed requests of ~`prompt_words` prompt tokens back
//! to back to the same target. Reported per target (the mock directly, then agentd): the small
//! streams' gaps between content frames without and with the large requests, the large
//! requests answered and their latency, and the server's CPU per large request (its CPU with
//! them less its CPU alone, over the same window).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;

use crate::capacity::{self, Pacing, Step};
use crate::load::{self, Call, Sample, Summary};
use crate::procs::Process;

/// What scenario 10 sends.
#[derive(Clone, Copy)]
pub struct Settings {
    /// Small paced streams open at once.
    pub streams: usize,
    /// Connections sending large requests back to back.
    pub senders: usize,
    /// Words of the large prompt (`"word "` each: about one token per word).
    pub prompt_words: usize,
    pub pacing: Pacing,
}

/// One target measured alone and with the large requests.
pub struct Measured {
    pub target: String,
    pub alone: Step,
    pub with_large: Step,
    /// The large requests finished in the measured window.
    pub large: Summary,
    /// Server CPU seconds per large request answered: (CPU with − CPU alone) / answered.
    pub cpu_per_large: Option<f64>,
}

/// The large request: `call`'s target and model with a prompt of `words` words.
pub fn large_call(small: &Call, model: &str, words: usize) -> Call {
    let body = json!({"model": model, "stream": false,
        "messages": [{"role": "user", "content": "word ".repeat(words)}]});
    Call {
        url: small.url.clone(),
        body: Bytes::from(body.to_string()),
        streamed: false,
        headers: small.headers.clone(),
    }
}

/// `small` alone, then `small` while `large` is sent back to back on `settings.senders`
/// connections.
pub async fn measure(
    target: &str,
    (small, large): (&Call, &Call),
    process: &Process,
    settings: Settings,
) -> Measured {
    let alone = capacity::measure(small, settings.streams, settings.pacing, Some(process)).await;
    let client = match load::client(settings.senders + 4) {
        Ok(client) => client,
        Err(error) => {
            eprintln!("10. http client: {error}");
            return Measured {
                target: target.to_string(),
                with_large: alone.clone(),
                alone,
                large: load::latency(&[]),
                cpu_per_large: None,
            };
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let window = measured_window(settings.pacing);
    let senders: Vec<_> = (0..settings.senders.max(1))
        .map(|_| {
            let (client, large, stop) = (client.clone(), large.clone(), stop.clone());
            tokio::spawn(async move { send_until(&client, &large, &stop, window).await })
        })
        .collect();
    let with_large =
        capacity::measure(small, settings.streams, settings.pacing, Some(process)).await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for sender in senders {
        if let Ok(mut some) = sender.await {
            samples.append(&mut some);
        }
    }
    let large = load::latency(&samples);
    let answered = samples.iter().filter(|s| s.ok).count();
    let cpu_per_large = with_large
        .server_cpu
        .zip(alone.server_cpu)
        .filter(|_| answered > 0)
        .map(|(with, without)| (with - without).max(0.0) / answered as f64);
    Measured {
        target: target.to_string(),
        alone,
        with_large,
        large,
        cpu_per_large,
    }
}

/// When the measured part of a step (after its ramp) starts and ends, from now.
fn measured_window(pacing: Pacing) -> (Instant, Instant) {
    let start = Instant::now() + pacing.ramp;
    (start, start + pacing.hold)
}

/// Sends `call` again as soon as it is answered until `stop`; keeps the samples that finished
/// inside `window`.
async fn send_until(
    client: &reqwest::Client,
    call: &Call,
    stop: &AtomicBool,
    (from, until): (Instant, Instant),
) -> Vec<Sample> {
    let mut kept = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let sample = load::one(client, call, Instant::now()).await;
        let (finished, ok) = (Instant::now(), sample.ok);
        if finished >= from && finished < until {
            kept.push(sample);
        }
        if !ok {
            // A target refusing the large request would otherwise spin; pace the retries.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    kept
}
