//! Tools wired into runs: an agent's `tools:` list gives its sessions exactly those MCP servers
//! and REST tools, a full run calls the published `mcp-server-time` and uses its answer, and
//! bad tool configuration stops the runtime from starting with a message naming the culprit.

use serde_json::{Value, json};

use agentd::config::{AgentRegistry, parse_config};
use agentd::runtime::Runtime;

use crate::support::mcp::{test_server_config, time_server_config};
use crate::support::mcp_server::INSTRUCTIONS;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::spawn_app_with;

const CLOCK_AGENT: &str = "---\ndescription: Tells the time\nmodels: llm/upstream-model\nfinalization: text\ntools: [time]\n---\nYou tell the time using your tools.\n";

/// A directory of extra agent files, added to the app's `agents`.
fn agents_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("agent file");
    }
    dir
}

/// The test app with `mcpServers` set and the agent files added; keep the directory alive.
async fn spawn_with_agents(
    mcp_servers: Value,
    files: &[(&str, &str)],
) -> (crate::support::TestApp, tempfile::TempDir) {
    let extra = agents_dir(files);
    let extra_path = extra.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["mcpServers"] = mcp_servers;
        config["agents"]
            .as_array_mut()
            .expect("agents list")
            .push(json!(extra_path));
    })
    .await;
    (app, extra)
}

fn tool_names_offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_agent_run_calls_an_mcp_tool_and_uses_its_answer() {
    let servers = json!({"time": time_server_config(), "test": test_server_config(json!({}))});
    let (app, _agents) = spawn_with_agents(servers, &[("clock.ai", CLOCK_AGENT)]).await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "time__get_current_time",
        r#"{"timezone": "Asia/Tokyo"}"#,
    )]));
    app.llm.push(Reply::text("It is late in Tokyo."));
    let response = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "clock", "messages": [{"role": "user", "content": "Time in Tokyo?"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "It is late in Tokyo."
    );

    let requests = app.llm.requests();
    assert_eq!(
        requests.len(),
        2,
        "one turn for the tool, one for the answer"
    );
    let offered = tool_names_offered(&requests[0]);
    assert!(
        offered.contains(&"time__get_current_time".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|name| name.starts_with("test__")),
        "only the agent's own servers are offered: {offered:?}"
    );
    let tool_reply = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool's answer went back to the model")
        .clone();
    assert_eq!(tool_reply["tool_call_id"], "call-1");
    let answer: Value =
        serde_json::from_str(tool_reply["content"].as_str().expect("content")).expect("JSON");
    assert_eq!(answer["timezone"], "Asia/Tokyo");

    let metrics = app.get("/metrics").await.text().await.expect("metrics");
    assert!(
        metrics.contains(r#"ai_agent_tool_invocations_total{agent="clock",server="time",tool="time__get_current_time"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"ai_agent_queue_wait_duration_ms_count{queue="default"} 1"#),
        "{metrics}"
    );
    app.runtime.close().await;
}

#[tokio::test]
async fn server_instructions_are_available_per_agent() {
    let agent = "---\nmodels: llm/upstream-model\ntools: [test]\n---\nHi.\n";
    let servers = json!({"test": test_server_config(json!({}))});
    let (app, _agents) = spawn_with_agents(servers, &[("helper.ai", agent)]).await;
    let tools = &app.runtime.tools();
    let helper = app.runtime.agents().get("helper").expect("helper agent");
    assert_eq!(
        tools.instructions_for(&helper),
        [("test".to_string(), INSTRUCTIONS.to_string())]
    );
    let chat = app.runtime.agents().get("chat").expect("chat agent");
    assert!(tools.instructions_for(&chat).is_empty());
    let body = json!({"model": "helper", "messages": [{"role": "user", "content": "hi"}]});
    app.llm.push(Reply::text("hello"));
    app.post_json("/v1/chat/completions", &body).await;
    let system = app.llm.requests()[0]["messages"][0]["content"]
        .as_str()
        .expect("system")
        .to_string();
    assert!(
        system.starts_with("Hi.\n\n#### MCP Server: test\n\n"),
        "{system}"
    );
    assert!(
        system.ends_with(INSTRUCTIONS),
        "the instructions are appended once: {system}"
    );
    app.runtime.close().await;
}

#[tokio::test]
async fn agents_without_tools_are_offered_none() {
    let app = spawn_app_with(|config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
    })
    .await;
    app.llm.push(Reply::text("hi"));
    let response = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": [{"role": "user", "content": "hello"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert!(tool_names_offered(&app.llm.requests()[0]).is_empty());
    assert_eq!(
        app.runtime.tools().servers().count(),
        0,
        "no agent uses the server: not started"
    );
    app.runtime.close().await;
}

/// Starts a runtime from `config` with the agent files in `agents`.
async fn start_runtime(mut config: Value, agents: &[(&str, &str)]) -> Result<(), String> {
    let dir = agents_dir(agents);
    config["agents"] = json!([dir.path().display().to_string()]);
    config["providers"] =
        json!({"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}});
    config["store"] = json!({"url": "sqlite::memory:"});
    let config = parse_config(config, "test").map_err(|e| e.to_string())?;
    let registry = AgentRegistry::load(&config).map_err(|e| e.to_string())?;
    match Runtime::start(config, registry).await {
        Ok(runtime) => {
            runtime.close().await;
            Ok(())
        }
        Err(error) => Err(format!("config={} {error}", error.is_config_error())),
    }
}

#[tokio::test]
async fn a_missing_queue_stops_the_start_and_is_named() {
    let err = start_runtime(
        json!({"mcpServers": {"test": {"command": "x", "queue": "nightly"}}}),
        &[],
    )
    .await
    .unwrap_err();
    assert!(err.starts_with("config=true"), "{err}");
    assert!(
        err.contains("mcpServers.test.queue") && err.contains("\"nightly\""),
        "{err}"
    );
}

#[tokio::test]
async fn an_unknown_tool_in_an_agent_names_the_file_and_tool() {
    let agent = "---\nmodels: llm/m\ntools: [ghost]\n---\nHi.\n";
    let err = start_runtime(json!({}), &[("haunted.ai", agent)])
        .await
        .unwrap_err();
    assert!(err.starts_with("config=true"), "{err}");
    assert!(
        err.contains("haunted.ai") && err.contains("\"ghost\""),
        "{err}"
    );
    let agent = "---\nmodels: llm/m\ntools: [rest__nothing]\n---\nHi.\n";
    let err = start_runtime(json!({}), &[("a.ai", agent)])
        .await
        .unwrap_err();
    assert!(err.contains("\"rest__nothing\""), "{err}");
}

#[tokio::test]
async fn a_required_server_that_fails_stops_the_start() {
    let agent = "---\nmodels: llm/m\ntools: [broken]\n---\nHi.\n";
    let config = json!({"mcpServers": {"broken": {"command": "/nonexistent/server"}}});
    let err = start_runtime(config.clone(), &[("a.ai", agent)])
        .await
        .unwrap_err();
    assert!(
        err.starts_with("config=false"),
        "a failing server is not a config error: {err}"
    );
    assert!(err.contains("\"broken\""), "{err}");

    let mut optional = config;
    optional["mcpServers"]["broken"]["required"] = json!(false);
    start_runtime(optional, &[("a.ai", agent)])
        .await
        .expect("an optional server may be down at start");
}

const PRICED_AGENT: &str = "---\ndescription: Echoes through a priced tool\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\n---\nYou echo.\n";

#[tokio::test]
async fn priced_tool_calls_add_their_cost_to_the_run_and_the_metrics() {
    let extra = agents_dir(&[("priced.ai", PRICED_AGENT)]);
    let extra_path = extra.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
        config["agents"]
            .as_array_mut()
            .expect("agents list")
            .push(json!(extra_path));
        config["pricing"]["tools"] = json!({
            "test__echo": {"perCall": 0.01, "perThousandCharacters": 2.0},
            "test": {"perCall": 0.5},
        });
    })
    .await;
    let text = "x".repeat(1000);
    app.llm.push(Reply::tool_calls(vec![
        ToolCall::new("echo-1", "test__echo", json!({"text": text}).to_string()),
        ToolCall::new("sleep-1", "test__sleep", r#"{"ms": 1}"#),
    ]));
    app.llm.push(Reply::text("echoed"));
    let response = app
        .post_json("/v1/agents/priced/runs", &json!({"prompt": "echo"}))
        .await;
    assert_eq!(response.status(), 200);
    let result: Value = response.json().await.expect("json");
    let tools: Vec<&Value> = result["accounting"]
        .as_array()
        .expect("accounting")
        .iter()
        .filter(|entry| entry["type"] == "tool")
        .collect();
    let entry = |command: &str| {
        *tools
            .iter()
            .find(|entry| entry["command"] == command)
            .unwrap_or_else(|| panic!("no {command} entry in {tools:?}"))
    };
    let echo = entry("test__echo");
    let characters =
        echo["charactersIn"].as_u64().expect("in") + echo["charactersOut"].as_u64().expect("out");
    assert!(characters > 2000, "{echo}");
    let echo_cost = 0.01 + 2.0 * characters as f64 / 1000.0;
    assert!(
        (echo["costUsd"].as_f64().expect("echo cost") - echo_cost).abs() < 1e-9,
        "{echo}"
    );
    assert_eq!(
        entry("test__sleep")["costUsd"],
        0.5,
        "the server's price applies to its other tools"
    );
    let total = result["cost_usd"].as_f64().expect("run cost");
    assert!((total - (echo_cost + 0.5)).abs() < 1e-9, "{result}");

    let metrics = app.get("/metrics").await.text().await.expect("metrics");
    assert!(
        metrics.contains(
            r#"ai_agent_tool_cost_usd_total{agent="priced",server="test",tool="test__sleep"} 0.5"#
        ),
        "{metrics}"
    );
    app.runtime.close().await;
}

#[tokio::test]
async fn a_negative_tool_price_is_named() {
    let config = json!({"pricing": {"tools": {"test": {"perCall": -1.0}}}});
    let error = parse_config(config, "agentd.json").expect_err("a negative price");
    let message = error.to_string();
    assert!(message.contains("pricing.tools.test.perCall"), "{message}");
    let config = json!({"pricing": {"tools": {"test": {"perMinute": 1.0}}}});
    let message = parse_config(config, "agentd.json")
        .expect_err("unknown key")
        .to_string();
    assert!(message.contains("perMinute"), "{message}");
}
