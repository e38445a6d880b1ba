//! Benchmark: the upstream stream decoder on a long stream of small chunks.
//!
//! Feeds an in-memory OpenAI Chat Completions SSE body, cut into N chunks of ~40 bytes (so
//! boundaries fall inside events, JSON and multi-byte characters), through the same pipeline a
//! provider uses: idle-guarded byte stream → SSE framing → chunk decoding → response assembly.
//! Reports the time per chunk at N = 1k, 10k, 100k; a linear decoder keeps it flat as N grows.
//!
//! Run: `cargo bench --bench sse_decoder` (see `bench/README.md`).

#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a benchmark stops loudly on a broken setup"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::llm::ResponseAssembler;
use agentd::llm::failure::Secrets;
use agentd::llm::openai::decode::ChunkDecoder;
use agentd::llm::stream::{FrameRead, Frames, decode_frames, idle_guarded};
use bytes::Bytes;
use futures_util::StreamExt;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// Chunks decoded per size in all (repetitions × N), so every size is timed for similar work.
const WORK_PER_SIZE: usize = 1_000_000;
const BYTES_PER_CHUNK: usize = 40;

/// An SSE body of content chunks, about `chunks × BYTES_PER_CHUNK` bytes long.
fn body(chunks: usize) -> Vec<u8> {
    let mut body = String::new();
    let mut n = 0;
    while body.len() < chunks * BYTES_PER_CHUNK {
        let piece = if n % 3 == 0 { "Grüße " } else { "tok " };
        body.push_str(&format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{piece}{n}\"}},\"finish_reason\":null}}]}}\n\n"
        ));
        n += 1;
    }
    body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    body.into_bytes()
}

/// `body` cut into exactly `n` near-equal chunks.
fn cut(body: &[u8], n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| Bytes::copy_from_slice(&body[i * body.len() / n..(i + 1) * body.len() / n]))
        .collect()
}

fn byte_stream(chunks: &[Bytes]) -> agentd::llm::stream::ByteStream {
    let items: Vec<Result<Bytes, String>> = chunks.iter().cloned().map(Ok).collect();
    idle_guarded(futures_util::stream::iter(items), Duration::from_secs(60))
}

/// SSE framing only.
async fn frames_only(chunks: &[Bytes]) -> usize {
    let mut frames = Frames::sse(byte_stream(chunks));
    let mut count = 0;
    while let FrameRead::Frame(_) = frames.next().await {
        count += 1;
    }
    count
}

/// The whole provider pipeline, deltas assembled into a response.
async fn full_pipeline(chunks: &[Bytes]) -> usize {
    let frames = Frames::sse(byte_stream(chunks));
    let mut deltas = decode_frames(
        frames,
        ChunkDecoder::new(false),
        Arc::new(Secrets::default()),
    );
    let mut assembler = ResponseAssembler::default();
    while let Some(delta) = deltas.next().await {
        if let Err(error) = delta.and_then(|delta| assembler.push(&delta)) {
            panic!("the benchmark stream failed: {error}");
        }
    }
    assembler.finish().text.len()
}

async fn run_once(chunks: &[Bytes], full: bool) -> usize {
    if full {
        full_pipeline(chunks).await
    } else {
        frames_only(chunks).await
    }
}

async fn time_per_chunk(chunks: &[Bytes], full: bool) -> f64 {
    let repetitions = (WORK_PER_SIZE / chunks.len()).max(3);
    // One warm-up run, then the best of three timed batches (least disturbed by the machine).
    std::hint::black_box(run_once(chunks, full).await);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        for _ in 0..repetitions {
            std::hint::black_box(run_once(chunks, full).await);
        }
        let per_chunk = started.elapsed().as_nanos() as f64 / (repetitions * chunks.len()) as f64;
        best = best.min(per_chunk);
    }
    best
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    println!(
        "SSE decoder, ~{BYTES_PER_CHUNK}-byte chunks (best of 3 batches of ~{WORK_PER_SIZE} chunks)"
    );
    println!(
        "{:<16} {:>9} {:>12} {:>12} {:>10}",
        "pipeline", "N chunks", "bytes", "ns/chunk", "vs N=1k"
    );
    for (label, full) in [("sse framing", false), ("sse+json+assemble", true)] {
        let mut baseline = None;
        for n in SIZES {
            let body = body(n);
            let chunks = cut(&body, n);
            let ns = runtime.block_on(time_per_chunk(&chunks, full));
            let base = *baseline.get_or_insert(ns);
            println!(
                "{label:<16} {:>9} {:>12} {:>12.1} {:>9.2}x",
                chunks.len(),
                body.len(),
                ns,
                ns / base
            );
        }
    }
}
