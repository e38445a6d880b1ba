//! In-process test doubles for the session library: a [`Provider`] that plays the mock LLM's
//! [`Reply`]s without a network (so tests can run on tokio's paused clock), a [`ToolProvider`]
//! with well-behaved and misbehaving tools, and the [`Harness`] that runs a session on them.
//! All of them record what they were asked.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentd::agent::observer::{GuardEvent, SessionObserver};
use agentd::agent::{
    AgentEvent, AgentResult, EventSink, ProviderSet, RunControl, SamplingParams, Session,
    SessionRequest,
};
use agentd::config::models::ModelCatalog;
use agentd::config::{AgentSpec, parse_config, registry::resolve_agent};
use agentd::llm::failure::{classify_status, parse_retry_after};
use agentd::llm::{
    DeltaStream, LlmDelta, LlmError, LlmRequest, Provider, ResponseMetadata, StopReason,
    ToolDefinition, Usage,
};
use agentd::tools::{ToolOutcome, ToolProvider, ToolRegistry};
use async_trait::async_trait;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::{Value, json};

use super::mock_llm::{Cut, Kind, Reply, ToolCall};

/// Tool calls as `(id, name, raw arguments)`.
pub fn calls(calls: &[(&str, &str, &str)]) -> Reply {
    Reply::tool_calls(
        calls
            .iter()
            .map(|(id, name, arguments)| ToolCall::new(*id, *name, *arguments))
            .collect(),
    )
}

/// The final report as a call of the `agent__final_report` tool.
pub fn final_report(format: &str, content: &str) -> Reply {
    let arguments = json!({"report_format": format, "report_content": content}).to_string();
    calls(&[("final", "agent__final_report", &arguments)])
}

/// A provider playing [`Reply`]s in process (no network, so tests can run on tokio's paused
/// clock); an exhausted script is an `InvalidResponse` error.
#[derive(Default)]
pub struct ScriptedLlm {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<LlmRequest>>,
}

impl ScriptedLlm {
    pub fn new(replies: Vec<Reply>) -> Arc<Self> {
        Arc::new(Self {
            script: Mutex::new(replies.into()),
            requests: Mutex::default(),
        })
    }

    pub fn requests(&self) -> Vec<LlmRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The upstream model of every request, in order.
    pub fn models(&self) -> Vec<String> {
        self.requests().iter().map(|r| r.model.clone()).collect()
    }
}

#[async_trait]
impl Provider for ScriptedLlm {
    async fn stream(&self, request: LlmRequest) -> Result<DeltaStream, LlmError> {
        let nonce = session_nonce(&request);
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        let reply = self
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let Some(reply) = reply else {
            return Err(LlmError::InvalidResponse(
                "the test script is exhausted".into(),
            ));
        };
        match reply.kind() {
            Kind::Answer => Ok(Box::pin(futures_util::stream::iter(deltas(
                &reply,
                nonce.as_deref(),
            )))),
            Kind::Status { status, body } => {
                let mut headers = HeaderMap::new();
                if let Some(value) = reply.header("retry-after") {
                    headers.insert(RETRY_AFTER, value.parse().expect("retry-after value"));
                }
                Err(classify_status(
                    *status,
                    &body.to_string(),
                    parse_retry_after(&headers),
                ))
            }
            Kind::Malformed => Err(LlmError::InvalidResponse(
                "the scripted reply is malformed".into(),
            )),
            Kind::Hang => {
                std::future::pending::<()>().await;
                unreachable!("a pending future never completes")
            }
            Kind::Panic => panic!("scripted provider panicked on purpose"),
            Kind::Endless => {
                use super::mock_llm::{ENDLESS_BYTES, ENDLESS_PIECE};
                let pieces = futures_util::stream::repeat_with(|| {
                    Ok(LlmDelta::Text("x".repeat(ENDLESS_PIECE)))
                });
                Ok(Box::pin(futures_util::StreamExt::take(
                    pieces,
                    ENDLESS_BYTES / ENDLESS_PIECE,
                )))
            }
        }
    }
}

/// The deltas a provider decodes from `reply`: the reasoning in one piece, the text pieces
/// (`NONCE` replaced by the session's nonce), whole tool calls, the route, usage and the stop reason; a cut reply ends
/// with a network error after its text pieces.
fn deltas(reply: &Reply, nonce: Option<&str>) -> Vec<Result<LlmDelta, LlmError>> {
    let with_nonce = |text: String| match nonce {
        Some(nonce) => text.replace("NONCE", nonce),
        None => text,
    };
    let mut deltas: Vec<LlmDelta> = reply
        .reasoning()
        .map(|r| LlmDelta::Reasoning(r.into()))
        .into_iter()
        .collect();
    let text = reply.text_pieces().into_iter().map(with_nonce);
    if let Some(Cut::AfterTextPieces(k)) = reply.cut() {
        let mut cut: Vec<_> = deltas.into_iter().map(Ok).collect();
        cut.extend(text.take(k).map(|t| Ok(LlmDelta::Text(t))));
        cut.push(Err(LlmError::Network(
            "the scripted connection was cut".into(),
        )));
        return cut;
    }
    deltas.extend(text.map(LlmDelta::Text));
    deltas.extend(reply.calls().iter().enumerate().map(|(index, call)| {
        LlmDelta::ToolCallFragment {
            index,
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            arguments: call.arguments.clone(),
        }
    }));
    let usage = reply.usage();
    deltas.push(LlmDelta::Usage(Usage {
        input_tokens: usage.input,
        output_tokens: usage.output,
        cached_tokens: usage.cache_read,
        cache_write_tokens: usage.cache_write,
        reasoning_tokens: 0,
    }));
    if let Some(route) = reply.dialect().route {
        deltas.push(LlmDelta::Metadata(ResponseMetadata {
            cost_usd: Some(route.cost),
            actual_provider: Some(route.provider.into()),
            actual_model: Some(route.model.into()),
        }));
    }
    deltas.push(LlmDelta::Stop(StopReason::from_openai(
        &reply.finish_reason(),
    )));
    deltas.into_iter().map(Ok).collect()
}

/// The XML nonce the session advertised in this request's XML-NEXT, if any.
pub fn session_nonce(request: &LlmRequest) -> Option<String> {
    let text = request.messages.last()?.content.clone()?;
    // Read it from the final-report slot: feedback may quote other nonces.
    let slot = text.find("## Final report").unwrap_or(0);
    let start = slot + text[slot..].find("<ai-agent-")? + "<ai-agent-".len();
    text.get(start..start + 8).map(str::to_string)
}

/// Tools `test__echo`, `test__slow` (sleeps `ms`), `test__fail`, `test__panic`, `test__big`
/// (`bytes` × "x") and `test__text` (returns `text`).
#[derive(Default)]
pub struct TestTools {
    calls: Mutex<Vec<(String, Value)>>,
}

impl TestTools {
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl ToolProvider for TestTools {
    fn namespace(&self) -> &str {
        "test"
    }

    async fn list_tools(&self) -> Vec<ToolDefinition> {
        ["echo", "slow", "fail", "panic", "big", "text"]
            .iter()
            .map(|name| ToolDefinition {
                name: format!("test__{name}"),
                description: format!("test tool {name}"),
                parameters: json!({"type": "object"}),
            })
            .collect()
    }

    async fn call(&self, name: &str, arguments: Value, _timeout: Duration) -> ToolOutcome {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.to_string(), arguments.clone()));
        match name {
            "echo" => ToolOutcome::Ok(format!("echo: {arguments}")),
            "slow" => {
                let ms = arguments["ms"].as_u64().unwrap_or(60_000);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                ToolOutcome::Ok("slow done".into())
            }
            "fail" => ToolOutcome::Failed("it broke".into()),
            "panic" => panic!("test tool panicked on purpose"),
            "big" => ToolOutcome::Ok("x".repeat(arguments["bytes"].as_u64().unwrap_or(0) as usize)),
            "text" => ToolOutcome::Ok(arguments["text"].as_str().unwrap_or_default().to_string()),
            other => ToolOutcome::Failed(format!("no tool {other}")),
        }
    }
}

/// Builds an agent from frontmatter lines; providers `a` and `b` exist.
pub fn agent(frontmatter: &str) -> Arc<AgentSpec> {
    let config = parse_config(
        json!({"providers": {"a": {"type": "openai-compatible", "baseUrl": "http://unused"}, "b": {"type": "openai-compatible", "baseUrl": "http://unused"}}}),
        "test",
    )
    .expect("config");
    let models = if frontmatter.contains("models:") {
        ""
    } else {
        "models: [a/m1]\n"
    };
    // The contract tests drive the final report as a tool call unless a test picks a transport.
    let transport = if frontmatter.contains("transport:") {
        ""
    } else {
        "transport: native\n"
    };
    let text = format!("---\n{models}{transport}{frontmatter}\n---\nYou are a test agent.");
    let file = agentd::config::agent_file::parse_agent_file(&text).expect("agent file");
    Arc::new(resolve_agent(std::path::Path::new("/test/agent.ai"), file, &config).expect("agent"))
}

/// A session wired to `llm` (as providers `a` and `b`) and `tools`.
pub struct Harness {
    pub llm: Arc<ScriptedLlm>,
    pub tools: Arc<TestTools>,
    pub control: RunControl,
    /// Context-guard trips the session reported.
    pub guard_events: Arc<GuardRecorder>,
    /// Config JSON the model catalog (context windows, prices) is built from.
    pub catalog_config: Value,
}

/// Records every context-guard event.
#[derive(Default)]
pub struct GuardRecorder(Mutex<Vec<GuardEvent>>);

impl GuardRecorder {
    pub fn events(&self) -> Vec<GuardEvent> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl SessionObserver for GuardRecorder {
    fn context_guard(&self, event: &GuardEvent) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
    }
}

impl Harness {
    pub fn new(replies: Vec<Reply>) -> Self {
        Self {
            llm: ScriptedLlm::new(replies),
            tools: Arc::new(TestTools::default()),
            control: RunControl::default(),
            guard_events: Arc::new(GuardRecorder::default()),
            catalog_config: json!({}),
        }
    }

    pub fn request(agent: Arc<AgentSpec>, prompt: &str) -> SessionRequest {
        SessionRequest {
            run_id: "run-1".into(),
            agent,
            prompt: prompt.into(),
            history: Vec::new(),
            overrides: SamplingParams::default(),
            conversation_id: None,
            format: None,
            schema: None,
            user_id: None,
            transport: None,
            client_tools: Default::default(),
            budget: Default::default(),
            parent: None,
        }
    }

    /// Runs the session and returns its result and every event it emitted.
    pub async fn run(&self, request: SessionRequest) -> (AgentResult, Vec<AgentEvent>) {
        let mut providers = ProviderSet::default();
        providers.insert("a", self.llm.clone());
        providers.insert("b", self.llm.clone());
        let mut registry = ToolRegistry::default();
        registry.add(self.tools.clone());
        let (sink, mut receiver) = EventSink::channel(64);
        let collector = tokio::spawn(async move {
            let mut events = Vec::new();
            while let Some(event) = receiver.recv().await {
                events.push(event);
            }
            events
        });
        let mut config = json!({"providers": {"a": {"type": "openai-compatible"}, "b": {"type": "openai-compatible"}}});
        if let (Some(target), Some(extra)) =
            (config.as_object_mut(), self.catalog_config.as_object())
        {
            target.extend(extra.clone());
        }
        let catalog =
            ModelCatalog::from_config(&parse_config(config, "catalog").expect("catalog config"));
        let session = Session::new(providers, registry, sink, self.control.clone())
            .with_catalog(Arc::new(catalog))
            .with_observer(self.guard_events.clone());
        let result = session.run(request).await;
        drop(session);
        (result, collector.await.expect("collector"))
    }
}
