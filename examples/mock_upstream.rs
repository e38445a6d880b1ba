//! A stand-alone OpenAI-compatible mock upstream: answers every chat completion with the same
//! text, streamed or not, with configurable latency. For trying agentd without an LLM and for
//! the benchmarks in `bench/`.
//!
//! `cargo run --example mock_upstream -- --listen 127.0.0.1:9090 --text "Hello!" --chunks 8`

#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test double for the tests and benchmarks stops loudly"
)]

use std::time::Duration;

use clap::Parser;

#[path = "../tests/support/mock_llm.rs"]
mod mock_llm;

#[derive(Debug, Parser)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:9090")]
    listen: String,
    /// The answer to every request.
    #[arg(
        long,
        default_value = "Hello from the mock upstream! agentd is working."
    )]
    text: String,
    /// Number of streamed content chunks.
    #[arg(long, default_value_t = 8)]
    chunks: usize,
    /// Delay before the first byte, in milliseconds.
    #[arg(long, default_value_t = 0)]
    first_byte_ms: u64,
    /// Delay between streamed chunks, in milliseconds.
    #[arg(long, default_value_t = 0)]
    chunk_gap_ms: u64,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let reply = mock_llm::Reply::text(args.text)
        .with_chunks(args.chunks.max(1))
        .with_first_byte_delay(Duration::from_millis(args.first_byte_ms))
        .with_chunk_gap(Duration::from_millis(args.chunk_gap_ms));
    let mock = mock_llm::MockLlm::start_with(&args.listen, reply, false).await;
    eprintln!("mock upstream listening on {}", mock.base_url());
    let _ = tokio::signal::ctrl_c().await;
}
