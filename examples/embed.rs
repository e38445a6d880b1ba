//! agentd embedded as a library (SPEC §16): one agent from a Markdown string, one from the
//! builder, each run with no network against the bundled scripted model; one streamed, one
//! run to its result with an observer counting events.
//!
//! `cargo run --example embed -- "What is the weather like?"`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentd::library::{Agent, AgentEvent, LibraryError};
use serde_json::json;

const TRIAGE: &str = "---
description: Sorts a request into a queue.
models: bundled/json
output:
  format: json
  schema:
    type: object
    required: [queue, urgent]
    properties:
      queue: {type: string, enum: [billing, support, sales]}
      urgent: {type: boolean}
---
Sort the user's request into a queue.
";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), LibraryError> {
    let input = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Hello from an embedder".to_string());

    // From a string, against a configuration naming the providers.
    let config = json!({"providers": {"bundled": {"type": "scripted"}}});
    let triage = Agent::from_markdown("triage", TRIAGE, config).await?;
    let result = triage.run(input.as_str()).await;
    println!(
        "{}: success={} exit={} answer={}",
        triage.name(),
        result.success,
        result.exit_reason.as_str(),
        result.answer_text()
    );

    // From the builder, streamed, with an observer.
    let events = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&events);
    let echo = Agent::builder("echo")
        .system_prompt("Repeat what you are told.")
        .scripted_model("echo")
        .max_turns(2)
        .build()
        .await?
        .with_observer(move |_: &AgentEvent| {
            counter.fetch_add(1, Ordering::Relaxed);
        });
    let mut stream = echo.stream(input.as_str());
    print!("{}: ", echo.name());
    while let Some(event) = stream.next_event().await {
        if let AgentEvent::Output(delta) = event {
            print!("{}", delta.text);
        }
    }
    let result = stream.result().await;
    println!();
    println!(
        "{}: success={} turns={} tokens={} events={}",
        echo.name(),
        result.success,
        result.turns,
        result.usage.total_tokens,
        events.load(Ordering::Relaxed)
    );
    Ok(())
}
