//! agentd as a library (SPEC §16), as an embedder uses it: an agent from a string against a
//! configured OpenAI-compatible upstream calling a tool the embedder implemented, streamed with
//! an observer; an agent from a file; what the builder refuses.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::library::{Agent, AgentEvent, LibraryError};
use agentd::llm::ToolDefinition;
use agentd::tools::{ToolOutcome, ToolProvider};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::support::mock_llm::{MockLlm, Reply, ToolCall};

/// A tool the embedder wrote: `clock__now` answers a fixed time and remembers its calls.
#[derive(Default)]
struct Clock {
    calls: Mutex<Vec<Value>>,
}

#[async_trait]
impl ToolProvider for Clock {
    fn namespace(&self) -> &str {
        "clock"
    }

    async fn list_tools(&self) -> Vec<ToolDefinition> {
        vec![ToolDefinition {
            name: "clock__now".into(),
            description: "The current time.".into(),
            parameters: json!({"type": "object", "properties": {"zone": {"type": "string"}}}),
        }]
    }

    async fn call(&self, name: &str, arguments: Value, _timeout: Duration) -> ToolOutcome {
        self.calls.lock().expect("calls").push(arguments);
        ToolOutcome::Ok(format!("{name}: 12:00"))
    }
}

#[tokio::test]
async fn an_embedded_agent_calls_the_embedders_tool_and_streams_its_events() {
    let llm = MockLlm::start().await;
    llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c1",
        "clock__now",
        r#"{"zone":"UTC"}"#,
    )]));
    llm.push(Reply::text("It is noon."));
    let clock = Arc::new(Clock::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kinds = Arc::clone(&seen);
    let agent = Agent::builder("timekeeper")
        .config(json!({"providers": {"upstream": {
            "type": "openai-compatible", "baseUrl": llm.base_url()}}}))
        .system_prompt("Tell the time.")
        .model("upstream/m")
        .tool_provider(clock.clone())
        .plain_text_answers()
        .build()
        .await
        .expect("agent")
        .with_observer(move |event: &AgentEvent| kinds.lock().expect("kinds").push(event.kind()));

    let mut stream = agent.stream("What time is it?");
    let mut streamed = Vec::new();
    while let Some(event) = stream.next_event().await {
        streamed.push(event.kind());
    }
    let result = stream.result().await;

    assert!(result.success, "{result:?}");
    assert_eq!(result.answer_text(), "It is noon.");
    assert_eq!(
        *clock.calls.lock().expect("calls"),
        vec![json!({"zone": "UTC"})]
    );
    assert!(streamed.contains(&"tool.finished"), "{streamed:?}");
    assert_eq!(streamed.first(), Some(&"run.started"));
    assert_eq!(streamed.last(), Some(&"run.finished"));
    assert_eq!(
        *seen.lock().expect("seen"),
        streamed,
        "the observer saw every event"
    );
    let first_request = &llm.requests()[0];
    assert_eq!(first_request["messages"][0]["content"], "Tell the time.");
    assert!(
        first_request["tools"].to_string().contains("clock__now"),
        "{first_request}"
    );
}

#[tokio::test]
async fn an_agent_file_runs_as_the_server_would_and_a_failure_is_a_result_not_an_error() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("summary.ai");
    std::fs::write(
        &path,
        "---\nmodels: [down/m, bundled/echo]\nmaxRetries: 2\n---\nSummarise.\n",
    )
    .expect("write");
    // The first target refuses the connection: the run falls back to the second.
    let config = json!({"providers": {
        "down": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"},
        "bundled": {"type": "scripted"}}});
    let agent = Agent::from_file(&path, config).await.expect("agent");
    assert_eq!(agent.name(), "summary");
    let result = agent.run("one two").await;
    assert!(result.success, "{result:?}");
    assert!(result.answer_text().contains("one two"), "{result:?}");

    let broken = Agent::from_markdown(
        "broken",
        "---\nmodels: down/m\nmaxRetries: 1\nmaxTurns: 1\n---\nx\n",
        json!({"providers": {"down": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}}}),
    )
    .await
    .expect("agent");
    let failed = broken.run("hello").await;
    assert!(!failed.success);
    assert!(failed.error.is_some(), "{failed:?}");
}

#[tokio::test]
async fn what_an_embedder_gets_wrong_is_named_when_the_agent_is_built() {
    let no_model = Agent::builder("x").build().await.expect_err("no model");
    assert!(matches!(no_model, LibraryError::NoModel), "{no_model}");

    let unknown = Agent::builder("x")
        .model("nowhere/m")
        .build()
        .await
        .expect_err("unknown provider");
    assert!(unknown.to_string().contains("nowhere"), "{unknown}");

    let bad_frontmatter = Agent::from_markdown("x", "---\nmaxTurn: 3\n---\nx\n", json!({}))
        .await
        .expect_err("unknown key");
    assert!(
        bad_frontmatter.to_string().contains("maxTurn"),
        "{bad_frontmatter}"
    );

    let sub_agents = Agent::from_markdown(
        "lead",
        "---\nmodels: b/echo\nagents: [helper]\n---\nx\n",
        json!({"providers": {"b": {"type": "scripted"}}}),
    )
    .await
    .expect_err("sub-agents need the server");
    assert!(
        matches!(sub_agents, LibraryError::NeedsServer { .. }),
        "{sub_agents}"
    );
}

#[test]
fn the_embed_example_runs_two_agents_with_no_network() {
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--example", "embed"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building examples/embed.rs failed");
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_agentd"))
        .parent()
        .expect("target dir")
        .join("examples/embed");
    let output = std::process::Command::new(binary)
        .arg("Please refund my invoice")
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("triage: success=true exit=final_answer answer={\"queue\":"),
        "{stdout}"
    );
    assert!(stdout.contains("Please refund my invoice"), "{stdout}");
    assert!(stdout.contains("echo: success=true turns=1"), "{stdout}");
    assert!(
        output.stderr.is_empty(),
        "the library writes nothing of its own: {:?}",
        String::from_utf8_lossy(&output.stderr)
    );
}
