//! Scenario 6: cross-replica follow latency. Background runs start on replica A; each one is
//! followed from A and from B at once (`GET /v1/runs/{id}/events`, `Last-Event-ID: 0`), and
//! every `output` event's arrival is timed at both followers. A serves its own runs' events
//! from memory as they happen, so A's arrival is the event's creation plus a loopback hop; the
//! delay of an event is its arrival on B minus its arrival on A. Every run is also checked:
//! B must get every seq once, in order, with the same event and data as A.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;

use crate::load::Summary;

/// One SSE frame as a follower saw it.
struct Frame {
    seq: u64,
    kind: String,
    data: String,
    at: Instant,
}

/// One follower's stream of one run.
#[derive(Default)]
struct Followed {
    /// When the response headers arrived.
    attached: Option<Instant>,
    frames: Vec<Frame>,
    error: Option<String>,
}

/// One run, as both followers saw it.
struct Traced {
    accepted: Instant,
    a: Followed,
    b: Followed,
}

/// A whole-run failure (no 202, no run id).
type RunResult = Result<Traced, String>;

/// What one case (N runs followed at once) measured.
pub struct Measured {
    pub concurrent: usize,
    pub runs: usize,
    /// Delay of every `output` event, B − A, in ms.
    pub delays: Vec<f64>,
    /// Per run and write batch seen on B (frames that arrived together): the largest delay.
    pub burst_max: Vec<f64>,
    /// Runs where B got every seq once, in order, equal to A's, ending with `run.finished`.
    pub complete: usize,
    /// Every defect found, one line per run (missing, duplicated, out of order, different).
    pub defects: Vec<String>,
    /// The latest follower attachment after the 202, over all runs and both replicas (ms).
    pub attach_max_ms: f64,
    /// The earliest first `output` at A after the 202, over all runs (ms): when this is above
    /// `attach_max_ms`, both followers were attached before any output existed.
    pub first_output_min_ms: f64,
    pub output_events_per_run: (usize, usize),
    /// Events whose `data` bytes differ between A and B while the JSON is the same (B reads
    /// them back from the store, which may reorder keys and re-space them).
    pub reformatted: usize,
    /// Events A delivered, over all runs (each one a stored event B read back).
    pub events: usize,
    /// From the earliest 202 to the latest event at A: the time those events were written in.
    pub window: Option<(Instant, Instant)>,
}

impl Measured {
    /// Events per second over [`Self::window`].
    pub fn events_per_second(&self) -> f64 {
        match self.window {
            Some((from, until)) if until > from => {
                self.events as f64 / (until - from).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// The runs of `other` (measured at the same time on other replicas) added to these.
    pub fn absorb(&mut self, other: Measured) {
        self.concurrent += other.concurrent;
        self.runs += other.runs;
        self.delays.extend(other.delays);
        self.burst_max.extend(other.burst_max);
        self.complete += other.complete;
        self.defects.extend(other.defects);
        self.attach_max_ms = self.attach_max_ms.max(other.attach_max_ms);
        self.first_output_min_ms = self.first_output_min_ms.min(other.first_output_min_ms);
        self.output_events_per_run = (
            self.output_events_per_run
                .0
                .min(other.output_events_per_run.0),
            self.output_events_per_run
                .1
                .max(other.output_events_per_run.1),
        );
        self.reformatted += other.reformatted;
        self.events += other.events;
        self.window = match (self.window, other.window) {
            (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
            (x, y) => x.or(y),
        };
    }
}

pub fn summarize(values: &[f64]) -> Summary {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if v.is_empty() {
            f64::NAN
        } else {
            v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
        }
    };
    Summary {
        count: v.len(),
        errors: 0,
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        max: at(1.0),
    }
}

/// Runs `rounds` × `concurrent` runs: each round starts `concurrent` background runs on `a`
/// spread evenly over `spread` and follows every one from `a` and `b`; the next round starts
/// when all of this one's streams ended.
pub async fn measure(
    client: &reqwest::Client,
    (a, b): (&str, &str),
    agent: &str,
    concurrent: usize,
    rounds: usize,
    spread: Duration,
) -> Measured {
    let mut results: Vec<RunResult> = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(concurrent);
        for index in 0..concurrent {
            let due = start + spread.mul_f64(index as f64 / concurrent as f64);
            tokio::time::sleep_until(due.into()).await;
            let (client, a, b, agent) = (
                client.clone(),
                a.to_string(),
                b.to_string(),
                agent.to_string(),
            );
            tasks.push(tokio::spawn(async move {
                match tokio::time::timeout(
                    Duration::from_secs(120),
                    one_run(&client, &a, &b, &agent),
                )
                .await
                {
                    Ok(result) => result,
                    Err(_) => Err("run not finished on both followers within 120 s".into()),
                }
            }));
        }
        for task in tasks {
            results.push(
                task.await
                    .unwrap_or_else(|e| Err(format!("driver task: {e}"))),
            );
        }
    }
    analyse(concurrent, results)
}

async fn one_run(client: &reqwest::Client, a: &str, b: &str, agent: &str) -> RunResult {
    let response = client
        .post(format!("http://{a}/v1/agents/{agent}/runs"))
        .header("content-type", "application/json")
        .body(json!({"prompt": "Say something.", "background": true}).to_string())
        .send()
        .await
        .map_err(|e| format!("POST runs: {e}"))?;
    let accepted = Instant::now();
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| format!("POST runs: {e}"))?;
    if status.as_u16() != 202 {
        return Err(format!("POST runs: HTTP {status}: {text}"));
    }
    let body: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("POST runs body: {e}"))?;
    let run_id = body["run_id"]
        .as_str()
        .ok_or_else(|| format!("POST runs: no run_id in {text}"))?
        .to_string();
    let (a, b) = tokio::join!(follow(client, a, &run_id), follow(client, b, &run_id));
    Ok(Traced { accepted, a, b })
}

async fn follow(client: &reqwest::Client, host: &str, run_id: &str) -> Followed {
    let mut followed = Followed::default();
    let response = client
        .get(format!("http://{host}/v1/runs/{run_id}/events"))
        .header("accept", "text/event-stream")
        .header("last-event-id", "0")
        .send()
        .await;
    let response = match response {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            followed.error = Some(format!("HTTP {}", r.status()));
            return followed;
        }
        Err(e) => {
            followed.error = Some(format!("GET events: {e}"));
            return followed;
        }
    };
    followed.attached = Some(Instant::now());
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    while let Some(chunk) = body.next().await {
        let at = Instant::now();
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                followed.error = Some(format!("stream broke off: {e}"));
                return followed;
            }
        };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = find_frame_end(&buffer) {
            let frame: Vec<u8> = buffer.drain(..end.0 + end.1).collect();
            if let Some(frame) = parse_frame(&frame[..end.0], at) {
                let finished = frame.kind == "run.finished";
                followed.frames.push(frame);
                if finished {
                    return followed;
                }
            }
        }
    }
    followed.error = Some("stream ended before run.finished".into());
    followed
}

/// Where the first frame ends: (its length, the length of the blank line after it).
fn find_frame_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4));
    match (lf, crlf) {
        (Some(x), Some(y)) => Some(if x.0 <= y.0 { x } else { y }),
        (x, y) => x.or(y),
    }
}

fn parse_frame(frame: &[u8], at: Instant) -> Option<Frame> {
    let text = String::from_utf8_lossy(frame);
    let (mut seq, mut kind, mut data) = (None, String::from("message"), Vec::new());
    for line in text.lines() {
        let field = |name: &str| {
            line.strip_prefix(name)
                .map(|rest| rest.strip_prefix(' ').unwrap_or(rest).to_string())
        };
        if let Some(id) = field("id:") {
            seq = id.trim().parse().ok();
        } else if let Some(event) = field("event:") {
            kind = event;
        } else if let Some(value) = field("data:") {
            data.push(value);
        }
    }
    Some(Frame {
        seq: seq?,
        kind,
        data: data.join("\n"),
        at,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn signed_ms(later: Instant, earlier: Instant) -> f64 {
    if later >= earlier {
        ms(later - earlier)
    } else {
        -ms(earlier - later)
    }
}

/// Seqs 1, 2, 3… each once, ending with `run.finished`; else what is wrong.
fn check_sequence(side: &str, frames: &[Frame]) -> Vec<String> {
    let mut defects = Vec::new();
    let mut expected = 1;
    for frame in frames {
        if frame.seq != expected {
            defects.push(format!(
                "{side}: seq {} where {expected} was due ({})",
                frame.seq,
                if frame.seq < expected {
                    "repeated or out of order"
                } else {
                    "a gap"
                }
            ));
            expected = frame.seq.max(expected);
        }
        expected += 1;
    }
    if frames.last().is_none_or(|f| f.kind != "run.finished") {
        defects.push(format!("{side}: no run.finished"));
    }
    defects
}

fn analyse(concurrent: usize, results: Vec<RunResult>) -> Measured {
    let mut m = Measured {
        concurrent,
        runs: results.len(),
        delays: Vec::new(),
        burst_max: Vec::new(),
        complete: 0,
        defects: Vec::new(),
        attach_max_ms: 0.0,
        first_output_min_ms: f64::INFINITY,
        output_events_per_run: (usize::MAX, 0),
        reformatted: 0,
        events: 0,
        window: None,
    };
    for (index, result) in results.into_iter().enumerate() {
        let run = match result {
            Ok(run) => run,
            Err(error) => {
                m.defects.push(format!("run {index}: {error}"));
                continue;
            }
        };
        m.events += run.a.frames.len();
        if let Some(last) = run.a.frames.last() {
            m.window = Some(match m.window {
                Some((from, until)) => (from.min(run.accepted), until.max(last.at)),
                None => (run.accepted, last.at),
            });
        }
        let mut defects = Vec::new();
        for (side, f) in [("A", &run.a), ("B", &run.b)] {
            if let Some(error) = &f.error {
                defects.push(format!("{side}: {error}"));
            }
            if let Some(attached) = f.attached {
                m.attach_max_ms = m.attach_max_ms.max(signed_ms(attached, run.accepted));
            }
        }
        defects.extend(check_sequence("A", &run.a.frames));
        defects.extend(check_sequence("B", &run.b.frames));
        if run.a.frames.len() != run.b.frames.len() {
            defects.push(format!(
                "A got {} events, B {}",
                run.a.frames.len(),
                run.b.frames.len()
            ));
        }
        let same_json = |x: &str, y: &str| match (
            serde_json::from_str::<serde_json::Value>(x),
            serde_json::from_str::<serde_json::Value>(y),
        ) {
            (Ok(x), Ok(y)) => x == y,
            _ => x == y,
        };
        let pairs = || run.a.frames.iter().zip(&run.b.frames);
        let differ = pairs()
            .filter(|(x, y)| x.seq != y.seq || x.kind != y.kind || !same_json(&x.data, &y.data))
            .count();
        m.reformatted += pairs()
            .filter(|(x, y)| x.data != y.data && same_json(&x.data, &y.data))
            .count();
        if differ > 0 {
            defects.push(format!("{differ} events differ between A and B"));
        }
        // Delays of output events, matched by seq.
        let by_seq: std::collections::HashMap<u64, &Frame> =
            run.a.frames.iter().map(|f| (f.seq, f)).collect();
        let mut outputs = 0;
        let mut burst: Option<(Instant, f64)> = None;
        for frame in run.b.frames.iter().filter(|f| f.kind == "output") {
            let Some(a) = by_seq.get(&frame.seq) else {
                continue;
            };
            outputs += 1;
            let delay = signed_ms(frame.at, a.at);
            m.delays.push(delay);
            m.first_output_min_ms = m.first_output_min_ms.min(signed_ms(a.at, run.accepted));
            // Frames that reached B within 1 ms of each other came from one write batch.
            burst = match burst {
                Some((at, max)) if frame.at.duration_since(at) <= Duration::from_millis(1) => {
                    Some((frame.at, max.max(delay)))
                }
                Some((_, max)) => {
                    m.burst_max.push(max);
                    Some((frame.at, delay))
                }
                None => Some((frame.at, delay)),
            };
        }
        if let Some((_, max)) = burst {
            m.burst_max.push(max);
        }
        m.output_events_per_run.0 = m.output_events_per_run.0.min(outputs);
        m.output_events_per_run.1 = m.output_events_per_run.1.max(outputs);
        if defects.is_empty() {
            m.complete += 1;
        } else {
            m.defects
                .push(format!("run {index}: {}", defects.join("; ")));
        }
    }
    m
}
