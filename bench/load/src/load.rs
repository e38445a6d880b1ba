//! The open-loop load driver: requests leave on a fixed schedule whatever the earlier ones are
//! doing (no coordinated omission), and each one records its latency, its time to the first
//! content byte when streamed, and whether it completed. It knows nothing about agentd.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;

/// One request's target and body.
#[derive(Clone)]
pub struct Call {
    pub url: Arc<str>,
    pub body: Bytes,
    pub streamed: bool,
    /// Extra request headers (a peer's routing headers, e.g. Portkey's `x-portkey-*`).
    pub headers: Arc<[(String, String)]>,
}

/// Why a request did not count as answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    /// No response: connect, send or header error (`timeout` when reqwest says so).
    Send {
        timeout: bool,
        connect: bool,
    },
    Status(u16),
    /// The body broke off.
    Body,
    /// 200, but no answer text (or, streamed, no `[DONE]`).
    Incomplete,
    /// The task driving the request failed.
    Task,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Send { timeout, connect } => write!(
                f,
                "no response ({})",
                match (connect, timeout) {
                    (true, true) => "connect timeout",
                    (true, false) => "connect error",
                    (false, true) => "timeout",
                    (false, false) => "send error",
                }
            ),
            Self::Status(code) => write!(f, "HTTP {code}"),
            Self::Body => f.write_str("body broke off"),
            Self::Incomplete => f.write_str("no answer or no [DONE]"),
            Self::Task => f.write_str("driver task failed"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub latency: Duration,
    /// Streams: until the first body chunk holding answer text.
    pub first_content: Option<Duration>,
    pub ok: bool,
    pub failure: Option<Failure>,
    /// How late the request left against its schedule (the generator's own lag).
    pub lag: Duration,
}

pub fn client(pool: usize) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(pool)
        .pool_idle_timeout(Duration::from_secs(60))
        .tcp_nodelay(true)
        .no_proxy()
        .build()
}

/// Sends `count` calls at `rate` per second and waits for all of them.
pub async fn open_loop(
    client: &reqwest::Client,
    call: &Call,
    rate: f64,
    count: usize,
) -> Vec<Sample> {
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for index in 0..count {
        let due = start + Duration::from_secs_f64(index as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let (client, call) = (client.clone(), call.clone());
        tasks.push(tokio::spawn(async move { one(&client, &call, due).await }));
    }
    let mut samples = Vec::with_capacity(count);
    for task in tasks {
        samples.push(task.await.unwrap_or(Sample {
            latency: Duration::ZERO,
            first_content: None,
            ok: false,
            failure: Some(Failure::Task),
            lag: Duration::ZERO,
        }));
    }
    samples
}

/// One call, timed from when it actually left.
pub async fn one(client: &reqwest::Client, call: &Call, due: Instant) -> Sample {
    let sent = Instant::now();
    let lag = sent.saturating_duration_since(due);
    let (failure, first_content) = match send(client, call, sent).await {
        Ok(first_content) => (None, first_content),
        Err((failure, first_content)) => (Some(failure), first_content),
    };
    Sample {
        latency: sent.elapsed(),
        first_content,
        ok: failure.is_none(),
        failure,
        lag,
    }
}

type Sent = Result<Option<Duration>, (Failure, Option<Duration>)>;

async fn send(client: &reqwest::Client, call: &Call, sent: Instant) -> Sent {
    let mut request = client
        .post(&*call.url)
        .header("content-type", "application/json");
    for (name, value) in call.headers.iter() {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.body(call.body.clone()).send().await;
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            let failure = Failure::Send {
                timeout: error.is_timeout(),
                connect: error.is_connect(),
            };
            return Err((failure, None));
        }
    };
    if !response.status().is_success() {
        return Err((Failure::Status(response.status().as_u16()), None));
    }
    if !call.streamed {
        return match response.bytes().await {
            Ok(body) if contains(&body, b"token") => Ok(None),
            Ok(_) => Err((Failure::Incomplete, None)),
            Err(_) => Err((Failure::Body, None)),
        };
    }
    let mut first_content = None;
    let mut done = false;
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return Err((Failure::Body, first_content));
        };
        if first_content.is_none() && contains(&chunk, b"\"content\":\"token") {
            first_content = Some(sent.elapsed());
        }
        done |= contains(&chunk, b"[DONE]");
    }
    if done && first_content.is_some() {
        Ok(first_content)
    } else {
        Err((Failure::Incomplete, first_content))
    }
}

/// "3× HTTP 503, 2× body broke off": the failures of a series, most frequent first.
pub fn failures(samples: &[Sample]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for failure in samples.iter().filter_map(|s| s.failure) {
        *counts.entry(failure).or_insert(0usize) += 1;
    }
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    counts
        .iter()
        .map(|(failure, n)| format!("{n}× {failure}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Percentiles of one series, in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub count: usize,
    pub errors: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

pub fn summarize(samples: &[Sample], pick: impl Fn(&Sample) -> Option<Duration>) -> Summary {
    let mut values: Vec<f64> = samples
        .iter()
        .filter(|s| s.ok)
        .filter_map(&pick)
        .map(|d| d.as_secs_f64() * 1000.0)
        .collect();
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if values.is_empty() {
            return f64::NAN;
        }
        values[((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1]
    };
    Summary {
        count: samples.len(),
        errors: samples.iter().filter(|s| !s.ok).count(),
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        max: at(1.0),
    }
}

pub fn latency(samples: &[Sample]) -> Summary {
    summarize(samples, |s| Some(s.latency))
}

pub fn first_content(samples: &[Sample]) -> Summary {
    summarize(samples, |s| s.first_content)
}

pub fn lag_p99(samples: &[Sample]) -> f64 {
    let mut lags: Vec<Duration> = samples.iter().map(|s| s.lag).collect();
    lags.sort();
    lags.get(lags.len() * 99 / 100)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// What a closed loop measured in its window (after the warm-up).
#[derive(Debug, Clone)]
pub struct Closed {
    pub connections: usize,
    pub seconds: f64,
    /// Answers (200 and complete) that finished in the window.
    pub completed: usize,
    /// Requests that failed in the window.
    pub errors: usize,
    /// Every request sent, warm-up and the drain after the window included (for CPU per
    /// request).
    pub sent: usize,
    /// Latency of the window's answers.
    pub latency: Summary,
    pub failures: String,
}

impl Closed {
    pub fn per_second(&self) -> f64 {
        self.completed as f64 / self.seconds
    }
}

/// `connections` loops, each sending its next call as soon as the previous answer is complete,
/// for `warmup` (not counted) and then `seconds`; counts what finished in the window.
pub async fn closed_loop(
    client: &reqwest::Client,
    call: &Call,
    connections: usize,
    warmup: Duration,
    seconds: Duration,
) -> Closed {
    let start = Instant::now();
    let (from, until) = (start + warmup, start + warmup + seconds);
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (client, call) = (client.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let (mut samples, mut sent) = (Vec::new(), 0);
            while Instant::now() < until {
                let sample = one(&client, &call, Instant::now()).await;
                sent += 1;
                let finished = Instant::now();
                if finished >= from && finished < until {
                    samples.push(sample);
                }
            }
            (samples, sent)
        }));
    }
    let (mut samples, mut sent) = (Vec::new(), 0);
    let mut task_failures = 0;
    for task in tasks {
        match task.await {
            Ok((mut some, count)) => {
                samples.append(&mut some);
                sent += count;
            }
            Err(_) => task_failures += 1,
        }
    }
    let mut failures = failures(&samples);
    if task_failures > 0 {
        failures.push_str(&format!(" ({task_failures} driver tasks failed)"));
    }
    let latency = latency(&samples);
    Closed {
        connections,
        seconds: seconds.as_secs_f64(),
        completed: samples.iter().filter(|s| s.ok).count(),
        errors: latency.errors + task_failures,
        sent,
        latency,
        failures,
    }
}
