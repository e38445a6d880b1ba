//! Scenario 7, streaming capacity: N client slots each keep one paced stream open (the mock
//! sends a content frame every 20 ms, 50 chunks/s; a slot opens its next stream as soon as the
//! previous one ends), N climbing per target. The client is kept cheap per chunk: each slot
//! drives its own hyper HTTP/1.1 connection in its own task, reads the body chunks as they
//! come, counts content frames by a byte search and notes their arrival times, never parsing
//! JSON. A step passes when the gap between consecutive content frames of
//! a stream has p99 ≤ 100 ms and no stream failed; the step's counters only cover the hold
//! window after the ramp.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::{Either, select};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use crate::load::{Call, Failure};
use crate::procs::{self, Process};
use crate::report::Report;

/// A content frame, as the mock, the relay, nginx and agentd all write it.
const CONTENT: &[u8] = b"\"content\":\"token";
const DONE: &[u8] = b"[DONE]";
/// A step passes with the p99 gap at most this, no failed stream, and at least
/// `MIN_DELIVERED` of the chunks its schedule sends: frames read together count as gaps of 0,
/// so a target falling behind in bursts would otherwise pass on its gaps alone.
pub const GAP_P99_LIMIT_MS: f64 = 100.0;
pub const MIN_DELIVERED: f64 = 0.9;
/// The gap histogram: 0.1 ms buckets up to 10 s (the last bucket holds everything above).
const BUCKET_MS: f64 = 0.1;
const BUCKETS: usize = 100_001;

/// The durations and pacing of one capacity step.
#[derive(Clone, Copy)]
pub struct Pacing {
    /// The N streams are opened spread over this time; nothing is counted during it.
    pub ramp: Duration,
    /// The measured window after the ramp.
    pub hold: Duration,
    /// One stream's length (chunks × gap), for its timeout.
    pub stream: Duration,
    /// The mock's gap between content frames.
    pub gap: Duration,
}

/// One target of the climb: where the streams go and the process serving them (its CPU per
/// chunk is reported; nginx's is summed over its workers).
pub struct Target<'a> {
    pub name: String,
    pub call: Call,
    pub process: Option<&'a Process>,
}

/// What one step measured (counters of the hold window only, failures of the whole step).
#[derive(Debug, Clone)]
pub struct Step {
    pub streams: usize,
    pub seconds: f64,
    /// Content frames that arrived in the window.
    pub chunks: u64,
    pub gap_p50: f64,
    pub gap_p99: f64,
    pub gap_max: f64,
    /// Streams started during the step (ramp, window and the ones finishing after it).
    pub started: u64,
    pub failed: u64,
    pub failures: String,
    /// The serving process's CPU time in the window, seconds.
    pub server_cpu: Option<f64>,
    /// The generator's own CPU time in the window, seconds.
    pub generator_cpu: f64,
}

impl Step {
    /// `expected`: chunks per second the schedule sends to all the step's streams.
    pub fn passed(&self, expected: f64) -> bool {
        self.failed == 0
            && self.chunks > 0
            && self.gap_p99 <= GAP_P99_LIMIT_MS
            && self.chunks_per_second() >= MIN_DELIVERED * expected
    }

    pub fn chunks_per_second(&self) -> f64 {
        self.chunks as f64 / self.seconds
    }
}

/// Gaps in 0.1 ms buckets (exact maximum beside them).
struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max_ms: f64,
}

impl Histogram {
    fn new() -> Self {
        Self {
            counts: vec![0; BUCKETS],
            total: 0,
            max_ms: 0.0,
        }
    }

    fn add(&mut self, gap_ms: f64) {
        let bucket = ((gap_ms / BUCKET_MS) as usize).min(BUCKETS - 1);
        self.counts[bucket] += 1;
        self.total += 1;
        self.max_ms = self.max_ms.max(gap_ms);
    }

    /// The upper bound of the bucket holding quantile `q` (NaN when empty).
    fn quantile(&self, q: f64) -> f64 {
        if self.total == 0 {
            return f64::NAN;
        }
        let rank = ((self.total as f64 * q).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return ((bucket + 1) as f64 * BUCKET_MS).min(self.max_ms);
            }
        }
        self.max_ms
    }
}

/// Counters shared by the slots of one step.
struct Shared {
    gaps: Mutex<Histogram>,
    chunks: AtomicU64,
    started: AtomicU64,
    failures: Mutex<BTreeMap<Failure, u64>>,
}

/// One step: `n` slots against `call` for the ramp and the hold window.
pub async fn measure(call: &Call, n: usize, pacing: Pacing, process: Option<&Process>) -> Step {
    let shared = Arc::new(Shared {
        gaps: Mutex::new(Histogram::new()),
        chunks: AtomicU64::new(0),
        started: AtomicU64::new(0),
        failures: Mutex::new(BTreeMap::new()),
    });
    let target = match Endpoint::of(call) {
        Ok(target) => Arc::new(target),
        Err(error) => {
            return Step {
                streams: n,
                seconds: pacing.hold.as_secs_f64(),
                chunks: 0,
                gap_p50: f64::NAN,
                gap_p99: f64::NAN,
                gap_max: f64::NAN,
                started: 0,
                failed: 1,
                failures: error,
                server_cpu: None,
                generator_cpu: 0.0,
            };
        }
    };
    let start = Instant::now();
    let window = (start + pacing.ramp, start + pacing.ramp + pacing.hold);
    let limit = pacing.stream * 3 + Duration::from_secs(30);
    let mut slots = Vec::with_capacity(n);
    for index in 0..n {
        let opens = start + pacing.ramp.mul_f64(index as f64 / n as f64);
        let (target, shared) = (target.clone(), shared.clone());
        slots.push(tokio::spawn(async move {
            tokio::time::sleep_until(opens.into()).await;
            slot(&target, window, limit, &shared).await;
        }));
    }
    // CPU of the serving process and of this generator over the window only.
    tokio::time::sleep_until(window.0.into()).await;
    let (server_before, own_before) = (process.map(Process::cpu_seconds), procs::own_cpu_seconds());
    tokio::time::sleep_until(window.1.into()).await;
    let server_cpu = process
        .map(Process::cpu_seconds)
        .zip(server_before)
        .map(|(after, before)| after - before);
    let generator_cpu = procs::own_cpu_seconds() - own_before;
    let mut task_failures = 0;
    for slot in slots {
        if slot.await.is_err() {
            task_failures += 1;
        }
    }
    let (p50, p99, max) = match shared.gaps.lock() {
        Ok(h) => (h.quantile(0.50), h.quantile(0.99), h.max_ms),
        Err(_) => (f64::NAN, f64::NAN, f64::NAN),
    };
    let mut failures = shared
        .failures
        .lock()
        .map(|f| f.clone())
        .unwrap_or_default();
    if task_failures > 0 {
        failures.insert(Failure::Task, task_failures);
    }
    let failed = failures.values().sum();
    let mut listed: Vec<_> = failures.into_iter().collect();
    listed.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    Step {
        streams: n,
        seconds: pacing.hold.as_secs_f64(),
        chunks: shared.chunks.load(Ordering::Relaxed),
        gap_p50: p50,
        gap_p99: p99,
        gap_max: max,
        started: shared.started.load(Ordering::Relaxed),
        failed,
        failures: listed
            .iter()
            .map(|(failure, n)| format!("{n}× {failure}"))
            .collect::<Vec<_>>()
            .join(", "),
        server_cpu,
        generator_cpu,
    }
}

/// Where a slot's streams go: `host:port`, the path, the body, any extra headers.
struct Endpoint {
    address: String,
    path: String,
    body: bytes::Bytes,
    headers: std::sync::Arc<[(String, String)]>,
}

impl Endpoint {
    fn of(call: &Call) -> Result<Self, String> {
        let rest = call
            .url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{}: only http:// URLs", call.url))?;
        let (address, path) = rest.split_once('/').unwrap_or((rest, ""));
        Ok(Self {
            address: address.to_string(),
            path: format!("/{path}"),
            body: call.body.clone(),
            headers: call.headers.clone(),
        })
    }
}

/// One client slot: its own HTTP/1.1 connection (hyper's, driven in this very task, so a
/// chunk costs one wake-up of one task: no pool, no connection task, no channel between
/// tasks), one stream after the other until the window ends; a new connection after a failure.
async fn slot(target: &Endpoint, window: (Instant, Instant), limit: Duration, shared: &Shared) {
    let mut gaps = Vec::with_capacity(512);
    while Instant::now() < window.1 {
        let connection = match tokio::net::TcpStream::connect(&target.address).await {
            Ok(tcp) => {
                let _ = tcp.set_nodelay(true);
                hyper::client::conn::http1::handshake::<_, Full<bytes::Bytes>>(TokioIo::new(tcp))
                    .await
            }
            Err(_) => {
                shared.failed(Failure::Send {
                    timeout: false,
                    connect: true,
                });
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok((mut sender, connection)) = connection else {
            shared.failed(Failure::Send {
                timeout: false,
                connect: true,
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut connection = std::pin::pin!(connection);
        while Instant::now() < window.1 {
            shared.started.fetch_add(1, Ordering::Relaxed);
            // The connection is polled beside the exchange; if it ends first (closed), the
            // exchange still gets what was already read, then the slot reconnects.
            let (outcome, open) = {
                let exchange = std::pin::pin!(tokio::time::timeout(
                    limit,
                    stream(&mut sender, target, window, &mut gaps)
                ));
                match select(connection.as_mut(), exchange).await {
                    Either::Left((_, exchange)) => (exchange.await, false),
                    Either::Right((outcome, _)) => (outcome, true),
                }
            };
            let failure = match outcome {
                Ok(Ok(chunks)) => {
                    shared.chunks.fetch_add(chunks, Ordering::Relaxed);
                    None
                }
                Ok(Err((failure, chunks))) => {
                    shared.chunks.fetch_add(chunks, Ordering::Relaxed);
                    Some(failure)
                }
                Err(_) => Some(Failure::Send {
                    timeout: true,
                    connect: false,
                }),
            };
            if !gaps.is_empty()
                && let Ok(mut histogram) = shared.gaps.lock()
            {
                for gap in gaps.drain(..) {
                    histogram.add(gap);
                }
            }
            if let Some(failure) = failure {
                shared.failed(failure);
                // No hot loop of refused requests; a fresh connection after a failure.
                tokio::time::sleep(Duration::from_millis(100)).await;
                break;
            }
            if !open {
                break;
            }
        }
    }
}

impl Shared {
    fn failed(&self, failure: Failure) {
        if let Ok(mut failures) = self.failures.lock() {
            *failures.entry(failure).or_insert(0) += 1;
        }
    }
}

/// One stream: the content frames that arrived in `window`, their gaps (ms) pushed to `gaps`.
async fn stream(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<bytes::Bytes>>,
    target: &Endpoint,
    window: (Instant, Instant),
    gaps: &mut Vec<f64>,
) -> Result<u64, (Failure, u64)> {
    let mut request = hyper::Request::post(&target.path)
        .header(hyper::header::HOST, &target.address)
        .header(hyper::header::CONTENT_TYPE, "application/json");
    for (name, value) in target.headers.iter() {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request.body(Full::new(target.body.clone()));
    let Ok(request) = request else {
        return Err((Failure::Task, 0));
    };
    let sent = async {
        sender.ready().await?;
        sender.send_request(request).await
    };
    let response = match sent.await {
        Ok(response) => response,
        Err(_) => {
            let failure = Failure::Send {
                timeout: false,
                connect: false,
            };
            return Err((failure, 0));
        }
    };
    if !response.status().is_success() {
        return Err((Failure::Status(response.status().as_u16()), 0));
    }
    let mut body = response.into_body();
    let in_window = |at: Instant| at >= window.0 && at < window.1;
    let (mut chunks, mut any_content, mut done) = (0u64, false, false);
    let mut last_content: Option<Instant> = None;
    let mut tail = bytes::Bytes::new();
    loop {
        let chunk = match body.frame().await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(chunk) => chunk,
                Err(_) => continue,
            },
            None => break,
            Some(Err(_)) => return Err((Failure::Body, chunks)),
        };
        let now = Instant::now();
        let frames = count(&chunk, CONTENT);
        if frames > 0 {
            any_content = true;
            if in_window(now) {
                chunks += frames;
                if let Some(previous) = last_content {
                    gaps.push(now.duration_since(previous).as_secs_f64() * 1000.0);
                }
                // Frames that came in one read arrived together.
                gaps.extend(std::iter::repeat_n(0.0, frames as usize - 1));
            }
            last_content = Some(now);
        } else if !done {
            done = contains(&chunk, DONE);
        }
        tail = chunk;
    }
    // [DONE] can share the last read with the last content frame.
    done |= contains(&tail, DONE);
    if done && any_content {
        Ok(chunks)
    } else {
        Err((Failure::Incomplete, chunks))
    }
}

fn count(haystack: &[u8], needle: &[u8]) -> u64 {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count() as u64
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Climbs every target step by step (all targets at one N, then the next N); a step that does
/// not pass is measured once more before that target stops (as scenario 1). Returns each
/// target's highest passing N (0: none passed).
pub async fn climb(
    targets: &[Target<'_>],
    steps: &[usize],
    pacing: Pacing,
    report: &mut Report,
) -> Vec<(String, usize)> {
    let mut alive = vec![true; targets.len()];
    let mut best = vec![0usize; targets.len()];
    for &n in steps {
        for (index, target) in targets.iter().enumerate() {
            if !alive[index] {
                continue;
            }
            for attempt in 0..=1 {
                eprintln!("7. {} with {n} streams", target.name);
                let step = measure(&target.call, n, pacing, target.process).await;
                let expected = n as f64 * 1000.0 / pacing.gap.as_millis().max(1) as f64;
                let passed = step.passed(expected);
                report.capacity_row(&target.name, &step, pacing.gap);
                if !step.failures.is_empty() {
                    report.note(format!(
                        "  7. {} at {n} streams: {} of {} streams failed: {}",
                        target.name, step.failed, step.started, step.failures
                    ));
                }
                if step.chunks_per_second() < MIN_DELIVERED * expected {
                    report.note(format!(
                        "  7. {} at {n} streams delivered {:.0} of {expected:.0} chunks/s ({:.0} %): its streams fell behind their schedule (gap p50 {:.1} ms)",
                        target.name,
                        step.chunks_per_second(),
                        step.chunks_per_second() / expected * 100.0,
                        step.gap_p50
                    ));
                }
                // Let the closed connections and the server settle before the next step.
                tokio::time::sleep(Duration::from_secs(1)).await;
                if passed {
                    best[index] = n;
                    break;
                }
                if attempt == 0 {
                    report.note(format!(
                        "  7. {} did not pass at {n} streams (gap p99 {:.1} ms, {} failed, {:.0} % delivered): measured again",
                        target.name, step.gap_p99, step.failed, step.chunks_per_second() / expected * 100.0
                    ));
                } else {
                    alive[index] = false;
                }
            }
        }
        if alive.iter().all(|a| !a) {
            break;
        }
    }
    targets
        .iter()
        .zip(best)
        .map(|(target, n)| (target.name.clone(), n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles() {
        let mut h = Histogram::new();
        for gap in 1..=100 {
            h.add(gap as f64);
        }
        assert!((h.quantile(0.5) - 50.1).abs() < 0.01);
        assert!((h.quantile(0.99) - 99.1).abs() < 0.01);
        assert_eq!(h.quantile(1.0), 100.0);
        h.add(20_000.0);
        assert_eq!(h.max_ms, 20_000.0);
    }

    #[test]
    fn counts_frames() {
        let two = b"data: {\"delta\":{\"content\":\"token \"}}\n\ndata: {\"delta\":{\"content\":\"token \"}}\n\n";
        assert_eq!(count(two, CONTENT), 2);
        assert!(contains(b"data: [DONE]\n\n", DONE));
    }
}
