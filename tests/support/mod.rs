//! Shared test support: `spawn_app()`, which serves the real agentd app on 127.0.0.1:0 with a
//! temporary SQLite store against the scripted mock LLM, the requests tests make of it (start a
//! run and read its id), and SSE reading. The submodules own the mock LLM, the in-process
//! session doubles, the real binary as a child process and the MCP servers.

pub mod binary;
pub mod mcp;
pub mod mcp_server;
pub mod mock_llm;
pub mod pdf;
pub mod python_tool;
pub mod scripted;
pub mod services;

use std::sync::Arc;

use agentd::config::{AgentRegistry, parse_config};
use agentd::runtime::Runtime;
use futures_util::StreamExt;
use serde_json::{Value, json};

use mock_llm::MockLlm;

/// The agents every test app has.
pub const CHAT_AGENT: &str = "---\ndescription: A helpful chat agent\nmodels: llm/upstream-model\nfinalization: text\n---\nYou are a helpful assistant.\n";
/// A report agent whose final report is a tool call (the HTTP mock cannot echo XML nonces).
pub const REPORT_AGENT: &str = "---\ndescription: Reports through the final-report tool\nmodels: llm/upstream-model\ntransport: native\n---\nYou report.\n";
/// A text agent with a small context window, for context-guard tests over HTTP.
pub const TIGHT_AGENT: &str = "---\ndescription: Has a small context window\nmodels: llm/upstream-model\ncontextWindow: 1000\nmaxOutputTokens: 100\nfinalization: text\n---\nYou answer.\n";
pub const TWO_TARGET_AGENT: &str = "---\ndescription: Tries two targets\nmodels: [llm/first, llm/second]\nmaxRetries: 3\nfinalization: text\n---\nYou answer briefly.\n";

pub struct TestApp {
    /// `http://127.0.0.1:PORT`
    pub address: String,
    pub client: reqwest::Client,
    pub llm: MockLlm,
    pub runtime: Arc<Runtime>,
    /// Holds the store file and agent files for the life of the test.
    _dir: tempfile::TempDir,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// The test app with these agent files (name, text) added; keep the directory alive.
pub async fn spawn_app_with_agents(agents: &[(String, String)]) -> (TestApp, tempfile::TempDir) {
    let agents: Vec<(&str, &str)> = agents
        .iter()
        .map(|(file, text)| (file.as_str(), text.as_str()))
        .collect();
    spawn_app_with_agents_and(&agents, |_| {}).await
}

/// [`spawn_app_with_agents`] letting the test adjust the config JSON too; keep the directory
/// alive.
pub async fn spawn_app_with_agents_and(
    agents: &[(&str, &str)],
    adjust: impl FnOnce(&mut Value),
) -> (TestApp, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    for (file, text) in agents {
        std::fs::write(dir.path().join(file), text).expect("agent");
    }
    let path = dir.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(serde_json::json!(path));
        adjust(config);
    })
    .await;
    (app, dir)
}

/// Like [`spawn_app`], letting the test adjust the config JSON first.
pub async fn spawn_app_with(adjust: impl FnOnce(&mut Value)) -> TestApp {
    let llm = MockLlm::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agents_dir = dir.path().join("agents");
    std::fs::create_dir(&agents_dir).expect("agents dir");
    std::fs::write(agents_dir.join("chat.ai"), CHAT_AGENT).expect("chat agent");
    std::fs::write(agents_dir.join("fallback.ai"), TWO_TARGET_AGENT).expect("fallback agent");
    std::fs::write(agents_dir.join("tight.ai"), TIGHT_AGENT).expect("tight agent");
    std::fs::write(agents_dir.join("report.ai"), REPORT_AGENT).expect("report agent");
    let mut config = json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url(), "apiKey": "test-key"}},
        "store": {"url": format!("sqlite://{}", dir.path().join("agentd.db").display())},
        "agents": [agents_dir.display().to_string()],
    });
    adjust(&mut config);
    let config = parse_config(config, "test config").expect("test config is valid");
    let registry = AgentRegistry::load(&config).expect("agents load");
    let runtime = Runtime::start(config, registry)
        .await
        .expect("runtime starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    let served = runtime.clone();
    tokio::spawn(async move {
        let _ = agentd::http::serve(listener, served, std::future::pending()).await;
    });
    TestApp {
        address,
        client: reqwest::Client::new(),
        llm,
        runtime,
        _dir: dir,
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// POSTs `body` to `path` (a run or a chat completion) and returns the run's id with the
    /// response.
    pub async fn start_run(&self, path: &str, body: &Value) -> (String, reqwest::Response) {
        let response = self.post_json(path, body).await;
        (run_id(&response), response)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    /// `GET /v1/runs/{run_id}` once the run is no longer `running`; fails after `within`.
    pub async fn ended_run(&self, run_id: &str, within: std::time::Duration) -> Value {
        let deadline = std::time::Instant::now() + within;
        loop {
            let run: Value = self
                .get(&format!("/v1/runs/{run_id}"))
                .await
                .json()
                .await
                .expect("json");
            if run["status"] != "running" {
                return run;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "run {run_id} still runs after {within:?}: {run}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }
}

/// The id of the run a response belongs to (its `x-agentd-run-id` header).
pub fn run_id(response: &reqwest::Response) -> String {
    response.headers()["x-agentd-run-id"]
        .to_str()
        .expect("the run id header is text")
        .to_string()
}

/// Reads a whole SSE body and returns the `data:` payload of every event, in order.
pub async fn sse_data(response: reqwest::Response) -> Vec<String> {
    let mut body = String::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        body.push_str(&String::from_utf8_lossy(&chunk.expect("body chunk")));
    }
    body.split("\n\n")
        .filter_map(|frame| {
            let data: Vec<&str> = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

/// `(id, event, data)` of every numbered frame of a run's SSE body (SPEC §4.2).
pub fn numbered_frames(body: &str) -> Vec<(i64, String, Value)> {
    body.split("\n\n")
        .filter_map(|frame| {
            let field = |name: &str| {
                frame
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::to_string)
            };
            let id = field("id: ")?.parse().ok()?;
            let data = serde_json::from_str(&field("data: ")?).ok()?;
            Some((id, field("event: ")?, data))
        })
        .collect()
}

/// Parses every data payload except `[DONE]` as JSON.
pub fn json_frames(data: &[String]) -> Vec<Value> {
    data.iter()
        .filter(|d| d.as_str() != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("frame is JSON"))
        .collect()
}
