//! OpenTelemetry export end to end (SPEC §14): the real `agentd serve` with `telemetry.otlp`
//! set sends spans and the GenAI metrics to a real OTLP/HTTP receiver
//! (tests/sdk/otlp_receiver.py, decoding with the `opentelemetry-proto` package), under the
//! caller's `traceparent`, with the GenAI semantic conventions' names and attributes.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::support::binary;
use crate::support::mock_llm::{MockLlm, Reply, ToolCall};
use crate::support::python_tool::python_with;

/// The pinned receiver package (also in scripts/test).
const OTLP_PROTO: &str = "opentelemetry-proto==1.45.2";

/// The receiver process and what it decoded, one JSON value per span or metric.
struct Receiver {
    _child: tokio::process::Child,
    port: u16,
    records: tokio::sync::mpsc::UnboundedReceiver<Value>,
    seen: Vec<Value>,
}

impl Receiver {
    async fn start() -> Self {
        let python = python_with("venv", &["opentelemetry.proto"], &[OTLP_PROTO]);
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/otlp_receiver.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the receiver starts");
        let mut lines =
            tokio::io::BufReader::new(child.stdout.take().expect("stdout piped")).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the receiver listens within 30 s")
            .expect("reads its stdout")
            .expect("a first line");
        let port = first
            .strip_prefix("listening ")
            .and_then(|port| port.parse().ok())
            .expect("`listening PORT`");
        let (sender, records) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(record) = serde_json::from_str(&line) {
                    let _ = sender.send(record);
                }
            }
        });
        Self {
            _child: child,
            port,
            records,
            seen: Vec::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Waits (up to 20 s) until `done` holds for everything received so far.
    async fn until(&mut self, done: impl Fn(&[Value]) -> bool) -> &[Value] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !done(&self.seen) {
            match tokio::time::timeout_at(deadline, self.records.recv()).await {
                Ok(Some(record)) => self.seen.push(record),
                _ => panic!(
                    "the receiver did not get what was expected: {:#?}",
                    self.seen
                ),
            }
        }
        &self.seen
    }
}

fn span<'a>(records: &'a [Value], name: &str) -> Option<&'a Value> {
    records
        .iter()
        .find(|r| r["signal"] == "span" && r["name"] == name)
}

/// The latest export of a metric (temporality is cumulative: it holds everything so far).
fn metric<'a>(records: &'a [Value], name: &str) -> Option<&'a Value> {
    records
        .iter()
        .rev()
        .find(|r| r["signal"] == "metric" && r["name"] == name)
}

/// The sum of a histogram's points whose `gen_ai.token.type` is `kind`.
fn token_sum(metric: &Value, kind: &str) -> f64 {
    metric["points"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["attributes"]["gen_ai.token.type"] == kind)
        .filter_map(|p| p["sum"].as_f64())
        .sum()
}

const WEATHER_AGENT: &str = "---\ndescription: Tells the weather\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [rest__weather]\n---\nYou tell the weather.\n";

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test]
async fn spans_and_genai_metrics_reach_a_real_otlp_receiver_under_the_callers_trace() {
    let mut receiver = Receiver::start().await;
    let llm = MockLlm::start().await;
    llm.push(
        Reply::tool_calls(vec![ToolCall::new("c1", "rest__weather", "{}")])
            .with_usage(120, 7, 100, 0),
    );
    llm.push(Reply::text("It is sunny.").with_usage(150, 5, 0, 0));
    let dir = binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "auth": {"keys": [{"key": "otel-key", "admin": true}]},
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
        "restTools": {"weather": {"url": receiver.url("/tool"), "description": "The weather"}},
        "telemetry": {"otlp": {
            "endpoint": receiver.url("/v1/traces"),
            "serviceName": "agentd-otel-test",
            "metricsIntervalMs": 300,
        }},
    }));
    std::fs::write(dir.path().join("agents/weather.ai"), WEATHER_AGENT).expect("agent");
    let mut command = binary::command(dir.path());
    command.args(["serve", "--config", "agentd.json"]);
    let mut start_log = Vec::new();
    let mut served = binary::serve(command, |line| start_log.push(line.to_string())).await;

    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/agents/weather/runs", served.address))
        .bearer_auth("otel-key")
        .header("traceparent", format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))
        .json(&json!({"prompt": "weather?"}))
        .send()
        .await
        .expect("run");
    assert_eq!(response.status(), 200);
    let result: Value = response.json().await.expect("result");
    assert_eq!(result["success"], true, "{result}");

    let records = receiver
        .until(|seen| {
            span(seen, "invoke_agent weather").is_some()
                && span(seen, "POST /v1/agents/{agent}/runs").is_some()
                && span(seen, "execute_tool rest__weather").is_some()
                && seen
                    .iter()
                    .filter(|r| r["name"] == "chat upstream-model")
                    .count()
                    == 2
                && metric(seen, "gen_ai.client.token.usage")
                    .is_some_and(|m| token_sum(m, "input") >= 270.0)
                && metric(seen, "gen_ai.client.operation.duration").is_some()
        })
        .await
        .to_vec();

    let request = span(&records, "POST /v1/agents/{agent}/runs").expect("the request's span");
    assert_eq!(request["trace_id"], TRACE_ID, "traceparent honoured");
    assert_eq!(request["parent_span_id"], CALLER_SPAN);
    assert_eq!(request["service"], "agentd-otel-test");
    let agent = span(&records, "invoke_agent weather").expect("agent span");
    assert_eq!(agent["trace_id"], TRACE_ID);
    assert_eq!(agent["parent_span_id"], request["span_id"]);
    let attributes = &agent["attributes"];
    assert_eq!(attributes["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(attributes["gen_ai.agent.name"], "weather");
    assert_eq!(attributes["gen_ai.usage.input_tokens"], 270);
    assert_eq!(attributes["gen_ai.usage.output_tokens"], 12);

    let first_chat = records
        .iter()
        .find(|r| {
            r["name"] == "chat upstream-model"
                && r["attributes"]["gen_ai.usage.input_tokens"] == 120
        })
        .expect("the first chat span");
    let chat = &first_chat["attributes"];
    assert_eq!(first_chat["trace_id"], TRACE_ID);
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.provider.name"], "llm");
    assert_eq!(chat["gen_ai.request.model"], "upstream-model");
    assert_eq!(chat["gen_ai.response.model"], "upstream-model");
    assert_eq!(chat["gen_ai.usage.output_tokens"], 7);
    assert_eq!(chat["gen_ai.usage.cache_read.input_tokens"], 100);
    assert!(
        chat.get("gen_ai.input.messages").is_none(),
        "no message content unless captureContent"
    );

    let tool = span(&records, "execute_tool rest__weather").expect("tool span");
    assert_eq!(tool["trace_id"], TRACE_ID);
    assert_eq!(tool["attributes"]["gen_ai.tool.name"], "rest__weather");
    assert_eq!(tool["attributes"]["gen_ai.tool.call.id"], "c1");

    let usage = metric(&records, "gen_ai.client.token.usage").expect("token metric");
    assert_eq!(usage["unit"], "{token}");
    assert_eq!(token_sum(usage, "input"), 270.0, "{usage}");
    assert_eq!(token_sum(usage, "output"), 12.0, "{usage}");
    let duration = metric(&records, "gen_ai.client.operation.duration").expect("duration");
    assert_eq!(duration["unit"], "s");

    let _ = served.child.start_kill();
    let mut log = start_log;
    while let Ok(line) = served.log.try_recv() {
        log.push(line);
    }
    assert!(
        !log.iter().any(|line| line.contains("panicked")),
        "the exporter never panics: {log:#?}"
    );
    assert!(
        !records.iter().any(|r| r["signal"] == "error"),
        "every body decodes"
    );
}
