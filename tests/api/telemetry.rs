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

/// The spans of `trace_id` as a tracing backend draws them: each under its parent, with its
/// service (printed by the test for the record).
fn trace_tree(records: &[Value], trace_id: &str) -> String {
    let spans: Vec<&Value> = records
        .iter()
        .filter(|r| r["signal"] == "span" && r["trace_id"] == trace_id)
        .collect();
    let mut out = format!("trace {trace_id}\n");
    let ids: Vec<&Value> = spans.iter().map(|s| &s["span_id"]).collect();
    let roots = spans
        .iter()
        .filter(|s| !ids.contains(&&s["parent_span_id"]));
    for root in roots {
        draw(&spans, root, 1, &mut out);
    }
    out
}

fn draw(spans: &[&Value], span: &Value, depth: usize, out: &mut String) {
    out.push_str(&format!(
        "{}{} [{}]\n",
        "  ".repeat(depth),
        span["name"].as_str().unwrap_or("?"),
        span["service"].as_str().unwrap_or("?")
    ));
    for child in spans
        .iter()
        .filter(|s| s["parent_span_id"] == span["span_id"])
    {
        draw(spans, child, depth + 1, out);
    }
}

const RELAY_AGENT: &str = "---\ndescription: Asks the other server's chat agent\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [other]\n---\nYou pass questions on.\n";

/// agentd on both ends of MCP: A's agent calls B's `chat` agent as an MCP tool. B's server span
/// for `tools/call chat` is in the caller's trace with A's tool span as its parent, carried by the
/// `_meta.traceparent` A writes (B's HTTP request span starts a trace of its own, so only `_meta`
/// can link them); an A2A request and a 2026-07-28 MCP request are server spans too.
#[tokio::test]
async fn mcp_and_a2a_requests_are_server_spans_and_mcp_meta_carries_the_trace() {
    let mut receiver = Receiver::start().await;
    let llm = MockLlm::start().await;
    let otlp = |service: &str| {
        json!({"otlp": {
            "endpoint": receiver.url("/v1/traces"),
            "serviceName": service,
            "metricsIntervalMs": 300,
        }})
    };
    let b_dir = binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
        "telemetry": otlp("agentd-b"),
    }));
    let mut command = binary::command(b_dir.path());
    command.args(["serve", "--config", "agentd.json"]);
    let b = binary::serve(command, |_| {}).await;
    let a_dir = binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "auth": {"keys": [{"key": "otel-key", "admin": true}]},
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
        "mcpServers": {"other": {"url": format!("http://{}/mcp", b.address)}},
        "telemetry": otlp("agentd-a"),
    }));
    std::fs::write(a_dir.path().join("agents/relay.ai"), RELAY_AGENT).expect("agent");
    let mut command = binary::command(a_dir.path());
    command.args(["serve", "--config", "agentd.json"]);
    let a = binary::serve(command, |_| {}).await;

    llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c1",
        "other__chat",
        r#"{"prompt": "hello?"}"#,
    )]));
    llm.push(Reply::text("Hello from B."));
    llm.push(Reply::text("B says hello."));
    let client = reqwest::Client::new();
    let response = client
        .post(format!("http://{}/v1/agents/relay/runs", a.address))
        .bearer_auth("otel-key")
        .header("traceparent", format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))
        .json(&json!({"prompt": "ask B"}))
        .send()
        .await
        .expect("run");
    let result: Value = response.json().await.expect("result");
    assert_eq!(result["success"], true, "{result}");

    // A's A2A headend: the caller's trace through the HTTP request span.
    const A2A_TRACE: &str = "5bf92f3577b34da6a3ce929d0e0e4737";
    llm.push(Reply::text("Hi over A2A."));
    let answer: Value = client
        .post(format!("http://{}/a2a/chat", a.address))
        .bearer_auth("otel-key")
        .header("traceparent", format!("00-{A2A_TRACE}-{CALLER_SPAN}-01"))
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
            "message": {"role": "user", "messageId": "m1", "kind": "message",
                "parts": [{"kind": "text", "text": "hi"}]}}}),
        )
        .send()
        .await
        .expect("a2a")
        .json()
        .await
        .expect("json");
    assert!(answer.get("result").is_some(), "{answer}");

    // B's 2026-07-28 MCP path: the trace in `_meta` alone, no traceparent header.
    const META_TRACE: &str = "6bf92f3577b34da6a3ce929d0e0e4738";
    const META_SPAN: &str = "10f067aa0ba902b8";
    llm.push(Reply::text("Hi over MCP."));
    let answer: Value = client
        .post(format!("http://{}/mcp", b.address))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "chat")
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "chat", "arguments": {"prompt": "hi"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "traceparent": format!("00-{META_TRACE}-{META_SPAN}-01"),
            }}}),
        )
        .send()
        .await
        .expect("mcp")
        .json()
        .await
        .expect("json");
    assert!(answer.get("result").is_some(), "{answer}");

    let records = receiver
        .until(|seen| {
            let served_call = |trace: &str| {
                seen.iter().any(|r| {
                    r["name"] == "tools/call chat"
                        && r["service"] == "agentd-b"
                        && r["trace_id"] == trace
                })
            };
            span(seen, "execute_tool other__chat").is_some()
                && served_call(TRACE_ID)
                && served_call(META_TRACE)
                && span(seen, "message/send chat").is_some()
        })
        .await
        .to_vec();
    eprintln!("{}", trace_tree(&records, TRACE_ID));
    let tool = span(&records, "execute_tool other__chat").expect("A's tool span");
    assert_eq!(tool["trace_id"], TRACE_ID);
    let served = records
        .iter()
        .find(|r| r["name"] == "tools/call chat" && r["trace_id"] == TRACE_ID)
        .expect("B's server span in the caller's trace");
    assert_eq!(served["attributes"]["mcp.method.name"], "tools/call");
    assert_eq!(served["attributes"]["gen_ai.tool.name"], "chat");
    let b_request = records
        .iter()
        .find(|r| r["name"] == "POST /mcp" && r["service"] == "agentd-b")
        .expect("B's HTTP request span");
    assert_ne!(
        b_request["trace_id"], TRACE_ID,
        "no traceparent header reached B: the link is `_meta`"
    );
    let b_agent = records
        .iter()
        .find(|r| r["name"] == "invoke_agent chat" && r["trace_id"] == TRACE_ID)
        .expect("B's run in the caller's trace");
    assert_eq!(b_agent["parent_span_id"], served["span_id"]);

    let modern = records
        .iter()
        .find(|r| r["name"] == "tools/call chat" && r["trace_id"] == META_TRACE)
        .expect("the 2026 request's span");
    assert_eq!(modern["parent_span_id"], META_SPAN);
    assert_eq!(modern["attributes"]["mcp.protocol.version"], "2026-07-28");

    let a2a = span(&records, "message/send chat").expect("A2A server span");
    assert_eq!(a2a["trace_id"], A2A_TRACE);
    assert_eq!(a2a["attributes"]["rpc.system"], "jsonrpc");
    assert_eq!(a2a["attributes"]["rpc.method"], "message/send");
    assert_eq!(a2a["attributes"]["gen_ai.agent.name"], "chat");
}
