//! The shipped `config/agentd.json` and `config/agents/` against agentd's built-in scripted
//! model, through the real binary as a newcomer starts it (no upstream, no mock): a plain answer
//! in one upstream call, a REST tool round trip against agentd's own API, an approval that waits
//! and resumes, JSON answers valid against their schema — and the expansion that sends the same
//! config to a real upstream once `AGENTD_LLM_BASE_URL` is set.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentd::config::agent_file::parse_agent_file;
use agentd::config::expand::expand_layer;
use agentd::config::parse_config;
use agentd::llm::catalog::build_providers;
use serde_json::{Value, json};

use crate::support::binary::{Served, command, serve};
use crate::support::{json_frames, sse_data};

/// Variables of the shipped config a test must not inherit from the machine.
const CONFIG_VARIABLES: &[&str] = &[
    "AGENTD_LLM_BASE_URL",
    "AGENTD_LLM_MODEL",
    "AGENTD_LLM_API_KEY",
    "OPENAI_API_KEY",
    "AGENTD_ADMIN_KEY",
    "AGENTD_LISTEN",
    "AGENTD_DATABASE_URL",
];

fn shipped(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `agentd serve --config config/agentd.json` on a free port with a store in a temporary
/// directory, and `env` on top (nothing else of the machine's `AGENTD_*`).
struct Shipped {
    served: Served,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Shipped {
    async fn start(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        // The REST tools call agentd itself at AGENTD_LISTEN, so the port is chosen up front.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("address").port()
        };
        let mut agentd = command(dir.path());
        for name in CONFIG_VARIABLES {
            agentd.env_remove(name);
        }
        agentd
            .env("AGENTD_LISTEN", format!("127.0.0.1:{port}"))
            .env(
                "AGENTD_DATABASE_URL",
                format!("sqlite://{}", dir.path().join("agentd.db").display()),
            )
            .envs(env.iter().copied())
            .arg("serve")
            .arg("--config")
            .arg(shipped("config/agentd.json"));
        let served = serve(agentd, |_| {}).await;
        Self {
            served,
            client: reqwest::Client::new(),
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.served.address)
    }

    async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    async fn get(&self, path: &str) -> Value {
        let response = self
            .client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent");
        assert!(response.status().is_success(), "GET {path}: {response:?}");
        response.json().await.expect("JSON")
    }

    /// A run of `agent` without streaming: its AgentResult.
    async fn run(&self, agent: &str, prompt: &str) -> Value {
        let response = self
            .post(
                &format!("/v1/agents/{agent}/runs"),
                &json!({"prompt": prompt}),
            )
            .await;
        assert!(response.status().is_success(), "{response:?}");
        response.json().await.expect("AgentResult")
    }

    /// `GET /v1/runs/{id}` once its status is `status`; fails after ten seconds.
    async fn run_with_status(&self, run_id: &str, status: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let run = self.get(&format!("/v1/runs/{run_id}")).await;
            if run["status"] == status {
                return run;
            }
            assert!(
                Instant::now() < deadline,
                "run {run_id} is not {status}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

fn llm_calls(result: &Value) -> usize {
    entries(result, "llm").len()
}

fn entries<'a>(result: &'a Value, kind: &str) -> Vec<&'a Value> {
    result["accounting"]
        .as_array()
        .expect("accounting")
        .iter()
        .filter(|entry| entry["type"] == kind)
        .collect()
}

fn report_content(result: &Value) -> &str {
    assert_eq!(result["success"], true, "{result}");
    result["final_report"]["content"]
        .as_str()
        .expect("text report")
}

/// The output schema of a shipped agent file.
fn agent_schema(file: &str) -> Value {
    let text = std::fs::read_to_string(shipped(file)).expect("agent file");
    let agent = parse_agent_file(&text).expect("parses");
    agent
        .frontmatter
        .output
        .and_then(|output| output.schema)
        .expect("an output schema")
}

fn assert_valid(value: &Value, schema: &Value) {
    let validator = jsonschema::validator_for(schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{value}: {errors:?}");
}

#[tokio::test]
async fn the_shipped_config_answers_alone_in_one_upstream_call() {
    let agentd = Shipped::start(&[]).await;
    let result = agentd.run("chat", "hello agentd").await;
    assert_eq!(
        report_content(&result),
        "Hi! I'm agentd's scripted model, so I repeat what you send: hello agentd"
    );
    assert_eq!(llm_calls(&result), 1, "one call per plain answer: {result}");
    let llm = entries(&result, "llm")[0];
    assert_eq!(llm["provider"], "scripted", "{llm}");
    assert_eq!(llm["model"], "tools", "{llm}");
    assert!(
        result["usage"]["input_tokens"].as_u64() > Some(0),
        "{result}"
    );
    assert!(
        result["usage"]["output_tokens"].as_u64() > Some(0),
        "{result}"
    );

    // The same through OpenAI chat completions, streamed.
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let frames = json_frames(&sse_data(agentd.post("/v1/chat/completions", &body).await).await);
    let streamed: String = frames
        .iter()
        .filter_map(|f| f["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(streamed.ends_with("repeat what you send: hi"), "{streamed}");
}

#[tokio::test]
async fn the_status_agent_calls_its_rest_tool_on_agentd_and_sums_it_up() {
    let agentd = Shipped::start(&[]).await;
    let result = agentd.run("status", "is the server up?").await;
    assert_eq!(
        report_content(&result),
        "I called `rest__agentd_health` and it answered: {\"status\":\"ok\"}"
    );
    assert_eq!(llm_calls(&result), 2, "the call, then the answer: {result}");
    let tools = entries(&result, "tool");
    assert_eq!(tools.len(), 1, "{result}");
    assert_eq!(tools[0]["command"], "rest__agentd_health");
    assert_eq!(tools[0]["status"], "ok", "{}", tools[0]);
}

#[tokio::test]
async fn the_readiness_tool_waits_for_approval_then_runs() {
    let agentd = Shipped::start(&[]).await;
    let started = agentd
        .post(
            "/v1/agents/status/runs",
            &json!({"prompt": "use agentd_ready", "background": true}),
        )
        .await;
    assert_eq!(started.status(), 202);
    let started: Value = started.json().await.expect("JSON");
    let run_id = started["run_id"].as_str().expect("run id").to_string();
    agentd.run_with_status(&run_id, "waiting_approval").await;
    let waiting = agentd.get(&format!("/v1/runs/{run_id}/approvals")).await;
    let call = &waiting["data"][0];
    assert_eq!(call["tool"], "rest__agentd_ready", "{waiting}");
    assert_eq!(call["arguments"], json!({}), "{waiting}");
    let call_id = call["call_id"].as_str().expect("call id");
    let decided = agentd
        .post(
            &format!("/v1/runs/{run_id}/approvals/{call_id}"),
            &json!({"decision": "approve"}),
        )
        .await;
    assert!(decided.status().is_success(), "{decided:?}");
    let run = agentd.run_with_status(&run_id, "completed").await;
    assert_eq!(
        report_content(&run["result"]),
        "I called `rest__agentd_ready` and it answered: {\"status\":\"ready\"}"
    );
}

#[tokio::test]
async fn json_answers_are_valid_against_their_schema() {
    let agentd = Shipped::start(&[]).await;
    // The triage agent's own output schema, answered through the XML final tag in one call.
    let schema = agent_schema("config/agents/triage.ai");
    let result = agentd
        .run("triage", "I was charged twice for my subscription")
        .await;
    assert_eq!(result["success"], true, "{result}");
    let report = &result["final_report"]["content_json"];
    assert_valid(report, &schema);
    assert_eq!(report["summary"], "I was charged twice for my subscription");
    assert_eq!(llm_calls(&result), 1, "{result}");

    // A schema a client asks of a text agent (OpenAI `response_format`).
    let schema = json!({"type": "object", "additionalProperties": false,
        "required": ["city", "temperature", "sunny"],
        "properties": {"city": {"type": "string"}, "temperature": {"type": "number", "minimum": -50, "maximum": 60},
                       "sunny": {"type": "boolean"}}});
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "weather in Paris"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "weather", "schema": schema}}});
    let response = agentd.post("/v1/chat/completions", &body).await;
    assert!(response.status().is_success(), "{response:?}");
    let completion: Value = response.json().await.expect("JSON");
    let content = completion["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    let value: Value = serde_json::from_str(content).expect("the answer is JSON");
    assert_valid(&value, &schema);
}

#[tokio::test]
async fn agentd_llm_model_picks_the_scripted_behaviour() {
    let agentd = Shipped::start(&[("AGENTD_LLM_MODEL", "think")]).await;
    let result = agentd.run("chat", "why").await;
    assert!(report_content(&result).ends_with("repeat what you send: why"));
    let assistant = result["conversation"]
        .as_array()
        .and_then(|messages| messages.iter().rfind(|m| m["role"] == "assistant"))
        .expect("an assistant message");
    assert!(
        assistant["reasoning"]
            .as_str()
            .is_some_and(|r| r.contains("1 word")),
        "{assistant}"
    );

    let agentd = Shipped::start(&[("AGENTD_LLM_MODEL", "gpt-4o")]).await;
    let result = agentd.run("chat", "hi").await;
    assert_eq!(result["success"], false, "{result}");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("no model `gpt-4o`") && error.contains("echo, think, tools and json"),
        "{result}"
    );
}

/// The shipped config expanded with `vars`: its default model targets and the `llm` URL.
fn expanded(vars: &[(&str, &str)]) -> (Value, Value) {
    let text = std::fs::read_to_string(shipped("config/agentd.json")).expect("config");
    let mut value: Value = serde_json::from_str(&text).expect("JSON");
    let lookup = |name: &str| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    };
    expand_layer(&mut value, "config/agentd.json", &lookup).expect("expands");
    let config = parse_config(value.clone(), "config/agentd.json").expect("parses");
    build_providers(&config.providers).expect("every provider builds");
    (
        value["defaults"]["models"].clone(),
        value["providers"]["llm"]["baseUrl"].clone(),
    )
}

#[test]
fn the_shipped_config_reaches_the_upstream_once_its_url_is_set() {
    assert_eq!(expanded(&[]).0, json!(["scripted/tools"]));
    assert_eq!(
        expanded(&[("AGENTD_LLM_MODEL", "json")]).0,
        json!(["scripted/json"])
    );
    let url = ("AGENTD_LLM_BASE_URL", "http://127.0.0.1:11434/v1");
    assert_eq!(expanded(&[url]), (json!(["llm/gpt-4o-mini"]), json!(url.1)));
    assert_eq!(
        expanded(&[url, ("AGENTD_LLM_MODEL", "llama3.2")]).0,
        json!(["llm/llama3.2"])
    );
    // Set but empty counts as unset, as for every `:-` default.
    assert_eq!(
        expanded(&[("AGENTD_LLM_BASE_URL", "")]).0,
        json!(["scripted/tools"])
    );
}
