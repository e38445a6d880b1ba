//! MCP servers through rmcp against real servers: the test server over stdio (a child process)
//! and streamable HTTP (in process), and the published `mcp-server-time` over stdio. Covers
//! listing and calling, argument validation, filters, queues, timeouts with cancellation,
//! crash and restart, process-tree shutdown and start-up failures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::config::parse_config;
use agentd::telemetry::Metrics;
use agentd::tools::mcp::{McpServer, RESTARTING};
use agentd::tools::queue::ToolQueues;
use agentd::tools::{ToolOutcome, ToolProvider};
use serde_json::{Value, json};

use crate::support::mcp::{test_server_config, time_server_config};
use crate::support::mcp_server::{INSTRUCTIONS, serve_http};

const TIMEOUT: Duration = Duration::from_secs(30);

/// Starts `mcpServers.<name>` from `server`, with `queues` configured, and its metrics.
async fn start(name: &str, server: Value, queues: Value) -> (Arc<McpServer>, Metrics) {
    let config = parse_config(
        json!({"mcpServers": {name: server}, "queues": queues}),
        "test config",
    )
    .expect("valid config");
    let metrics = Metrics::new().expect("metrics");
    let queues = ToolQueues::new(&config.queues, &metrics);
    let server = &config.mcp_servers[name];
    let queue = queues.get(server.queue_name()).expect("queue");
    let started = McpServer::start(name, server, queue)
        .await
        .expect("server starts");
    (started, metrics)
}

async fn stats(server: &McpServer) -> Value {
    match server.call("stats", json!({}), TIMEOUT).await {
        ToolOutcome::Ok(text) => serde_json::from_str(&text).expect("stats JSON"),
        failed => panic!("stats failed: {failed:?}"),
    }
}

fn tool_names(definitions: &[agentd::llm::ToolDefinition]) -> Vec<&str> {
    definitions.iter().map(|d| d.name.as_str()).collect()
}

/// Waits (up to 10 s) until the server has seen one request cancelled.
async fn wait_for_one_cancellation(server: &McpServer) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats(server).await["cancelled"] != 1 {
        assert!(
            Instant::now() < deadline,
            "the server never saw the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (up to 20 s) until `echo` answers again.
async fn wait_until_echo_works(server: &McpServer) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if server.call("echo", json!({"text": "back"}), TIMEOUT).await
            == ToolOutcome::Ok("back".into())
        {
            return;
        }
        assert!(Instant::now() < deadline, "the server never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn stdio_server_offers_its_tools_with_schemas_and_answers() {
    let (server, _) = start("test", test_server_config(json!({})), json!({})).await;
    let definitions = server.list_tools().await;
    let names = tool_names(&definitions);
    for expected in [
        "test__echo",
        "test__sleep",
        "test__image",
        "test__huge",
        "test__fail",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let echo = definitions
        .iter()
        .find(|d| d.name == "test__echo")
        .expect("echo");
    assert_eq!(echo.description, "Sends the text back.");
    assert_eq!(echo.parameters["required"], json!(["text"]));
    assert_eq!(server.instructions().as_deref(), Some(INSTRUCTIONS));

    assert_eq!(
        server.call("echo", json!({"text": "héllo"}), TIMEOUT).await,
        ToolOutcome::Ok("héllo".into())
    );
    assert_eq!(
        server.call("image", json!({}), TIMEOUT).await,
        ToolOutcome::Ok("[image image/png]\na tiny picture".into())
    );
    assert_eq!(
        server
            .call("fail", json!({"message": "disk on fire"}), TIMEOUT)
            .await,
        ToolOutcome::Failed("disk on fire".into())
    );
    server.shutdown().await;
}

#[tokio::test]
async fn huge_content_arrives_whole_over_stdio() {
    let (server, _) = start("test", test_server_config(json!({})), json!({})).await;
    let size = 4 * 1024 * 1024;
    match server.call("huge", json!({"bytes": size}), TIMEOUT).await {
        ToolOutcome::Ok(text) => assert_eq!(text.len(), size),
        failed => panic!("huge failed: {failed:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn invalid_arguments_go_back_as_a_tool_error_without_a_call() {
    let (server, _) = start("test", test_server_config(json!({})), json!({})).await;
    let outcome = server.call("sleep", json!({"ms": "soon"}), TIMEOUT).await;
    let ToolOutcome::Failed(reason) = outcome else {
        panic!("invalid arguments must fail: {outcome:?}")
    };
    assert!(
        reason.starts_with("invalid arguments: /ms: \"soon\" is not of type \"integer\""),
        "{reason}"
    );
    let missing = server.call("echo", json!({}), TIMEOUT).await;
    assert!(
        matches!(&missing, ToolOutcome::Failed(r) if r.contains("\"text\" is a required property")),
        "{missing:?}"
    );
    assert_eq!(
        stats(&server).await["completed_sleeps"],
        0,
        "the server never saw the call"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn allow_and_deny_filters_choose_the_offered_tools() {
    let filtered = test_server_config(json!({
        "toolsAllowed": ["ECHO", "sleep", "Stats"],
        "toolsDenied": ["SLEEP"],
    }));
    let (server, _) = start("test", filtered, json!({})).await;
    assert_eq!(
        tool_names(&server.list_tools().await),
        ["test__echo", "test__stats"]
    );
    let denied = server.call("sleep", json!({"ms": 1}), TIMEOUT).await;
    assert!(
        matches!(&denied, ToolOutcome::Failed(r) if r.contains("unknown tool")),
        "{denied:?}"
    );
    server.shutdown().await;

    let everything_denied = test_server_config(json!({"toolsDenied": ["any"]}));
    let (server, _) = start("test", everything_denied, json!({})).await;
    assert!(server.list_tools().await.is_empty());
    server.shutdown().await;
}

/// Runs three 300 ms sleeps at once and returns the server's peak concurrency and the time.
async fn three_parallel_sleeps(server: &McpServer) -> (u64, Duration) {
    let started = Instant::now();
    let calls = (0..3).map(|_| server.call("sleep", json!({"ms": 300}), TIMEOUT));
    for outcome in futures_util::future::join_all(calls).await {
        assert_eq!(outcome, ToolOutcome::Ok("slept 300 ms".into()));
    }
    let elapsed = started.elapsed();
    let peak = stats(server).await["max_in_flight"].as_u64().expect("peak");
    (peak, elapsed)
}

#[tokio::test]
async fn a_queue_of_one_serialises_parallel_calls() {
    let (server, metrics) = start(
        "test",
        test_server_config(json!({"queue": "single"})),
        json!({"single": {"concurrent": 1}}),
    )
    .await;
    let (peak, elapsed) = three_parallel_sleeps(&server).await;
    assert_eq!(peak, 1, "one call at a time");
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    let text = metrics.render();
    assert!(
        text.contains(r#"ai_agent_queue_wait_duration_ms_count{queue="single"} 4"#),
        "three sleeps and the stats call waited: {text}"
    );
    assert!(
        text.contains(r#"ai_agent_queue_in_use{queue="single"} 0"#),
        "{text}"
    );
    server.shutdown().await;

    let (server, _) = start(
        "test",
        test_server_config(json!({"queue": "wide"})),
        json!({"wide": {"concurrent": 3}}),
    )
    .await;
    let (peak, _) = three_parallel_sleeps(&server).await;
    assert_eq!(peak, 3, "a wider queue lets them overlap");
    server.shutdown().await;
}

#[tokio::test]
async fn a_timeout_fails_the_call_and_cancels_it_at_the_server() {
    let (server, _) = start("test", test_server_config(json!({})), json!({})).await;
    let started = Instant::now();
    let outcome = server
        .call("sleep", json!({"ms": 20_000}), Duration::from_millis(300))
        .await;
    assert_eq!(outcome, ToolOutcome::Unreachable("timeout".into()));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    wait_for_one_cancellation(&server).await;
    server.shutdown().await;
}

#[tokio::test]
async fn request_timeout_caps_the_tool_timeout() {
    let (server, _) = start(
        "test",
        test_server_config(json!({"requestTimeout": "200ms"})),
        json!({}),
    )
    .await;
    let started = Instant::now();
    let outcome = server.call("sleep", json!({"ms": 20_000}), TIMEOUT).await;
    assert_eq!(outcome, ToolOutcome::Unreachable("timeout".into()));
    assert!(started.elapsed() < Duration::from_secs(5));
    server.shutdown().await;
}

#[tokio::test]
async fn a_crash_mid_call_is_followed_by_a_restart() {
    let (server, _) = start("test", test_server_config(json!({})), json!({})).await;
    let first_pid = stats(&server).await["pid"].clone();
    let in_flight = server.call("sleep", json!({"ms": 10_000}), TIMEOUT);
    let crash = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.call("crash", json!({}), TIMEOUT).await
    };
    let (interrupted, crashed) = tokio::join!(in_flight, crash);
    assert!(interrupted.failure().is_some(), "{interrupted:?}");
    assert!(crashed.failure().is_some(), "{crashed:?}");
    wait_until_echo_works(&server).await;
    assert_ne!(
        stats(&server).await["pid"],
        first_pid,
        "a new process serves"
    );

    // The second restart in a row waits 1 s: callers hear that the server is restarting.
    let crashed = server.call("crash", json!({}), TIMEOUT).await;
    assert!(crashed.failure().is_some(), "{crashed:?}");
    assert_eq!(
        server.call("echo", json!({"text": "x"}), TIMEOUT).await,
        ToolOutcome::Unreachable(RESTARTING.into())
    );
    assert!(
        !server.list_tools().await.is_empty(),
        "tools stay offered while restarting"
    );
    wait_until_echo_works(&server).await;
    server.shutdown().await;
}

/// Whether a process is gone (or a zombie nobody reaped, which is dead too).
fn process_is_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

#[tokio::test]
async fn shutdown_ends_the_whole_process_tree() {
    let (server, _) = start("test", test_server_config(json!({})), json!({})).await;
    let server_pid = stats(&server).await["pid"].to_string();
    let grandchild = match server.call("spawn_grandchild", json!({}), TIMEOUT).await {
        ToolOutcome::Ok(pid) => pid,
        failed => panic!("spawn_grandchild failed: {failed:?}"),
    };
    assert!(!process_is_gone(&grandchild));
    server.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(process_is_gone(&grandchild) && process_is_gone(&server_pid)) {
        assert!(Instant::now() < deadline, "processes survived the shutdown");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        server.call("echo", json!({"text": "x"}), TIMEOUT).await,
        ToolOutcome::Failed("mcp server stopped".into())
    );
}

#[tokio::test]
async fn http_server_gets_headers_and_bearer_token_and_answers() {
    let http = serve_http().await.expect("http test server");
    let (server, _) = start(
        "web",
        json!({
            "type": "http",
            "url": http.url,
            "headers": {"X-Team": "blue", "X-Path": "${PATH}"},
            "bearerToken": "sekret",
        }),
        json!({}),
    )
    .await;
    assert!(tool_names(&server.list_tools().await).contains(&"web__echo"));
    assert_eq!(
        server
            .call("echo", json!({"text": "over http"}), TIMEOUT)
            .await,
        ToolOutcome::Ok("over http".into())
    );
    assert_eq!(
        server.call("image", json!({}), TIMEOUT).await,
        ToolOutcome::Ok("[image image/png]\na tiny picture".into())
    );
    match server
        .call("huge", json!({"bytes": 1_048_576}), TIMEOUT)
        .await
    {
        ToolOutcome::Ok(text) => assert_eq!(text.len(), 1_048_576),
        failed => panic!("huge failed: {failed:?}"),
    }
    let seen = http.seen_headers.lock().expect("headers").clone();
    let has = |name: &str, value: &str| seen.iter().any(|(n, v)| n == name && v == value);
    assert!(has("authorization", "Bearer sekret"), "{seen:?}");
    assert!(has("x-team", "blue"), "{seen:?}");
    let path = std::env::var("PATH").expect("PATH");
    assert!(
        has("x-path", &path),
        "${{PATH}} is expanded at connect time: {seen:?}"
    );
    server.shutdown().await;
    http.stop.cancel();
}

#[tokio::test]
async fn http_timeout_cancels_the_call_at_the_server() {
    let http = serve_http().await.expect("http test server");
    let (server, _) = start("web", json!({"url": http.url}), json!({})).await;
    let outcome = server
        .call("sleep", json!({"ms": 20_000}), Duration::from_millis(300))
        .await;
    assert_eq!(outcome, ToolOutcome::Unreachable("timeout".into()));
    wait_for_one_cancellation(&server).await;
    server.shutdown().await;
    http.stop.cancel();
}

#[tokio::test]
async fn a_missing_variable_in_headers_names_the_server_and_key() {
    let config = parse_config(
        json!({"mcpServers": {"web": {"url": "http://127.0.0.1:9/mcp",
            "headers": {"X-Key": "${AGENTD_TEST_SURELY_UNSET_VARIABLE}"}}}}),
        "test",
    )
    .expect("config");
    let metrics = Metrics::new().expect("metrics");
    let queue = ToolQueues::new(&config.queues, &metrics)
        .get("default")
        .expect("default");
    let err = McpServer::start("web", &config.mcp_servers["web"], queue)
        .await
        .err()
        .expect("a missing variable fails")
        .to_string();
    assert!(
        err.contains("\"web\"") && err.contains("headers.X-Key"),
        "{err}"
    );
    assert!(err.contains("AGENTD_TEST_SURELY_UNSET_VARIABLE"), "{err}");
}

#[tokio::test]
async fn a_required_server_that_cannot_start_is_named() {
    let config = parse_config(
        json!({"mcpServers": {
            "ghost": {"command": "/nonexistent/mcp-server"},
            "mute": {"command": "sleep", "args": ["30"], "initTimeout": "300ms"},
        }}),
        "test",
    )
    .expect("config");
    let metrics = Metrics::new().expect("metrics");
    let queues = ToolQueues::new(&config.queues, &metrics);
    let queue = || queues.get("default").expect("default");
    let err = McpServer::start("ghost", &config.mcp_servers["ghost"], queue())
        .await
        .err()
        .expect("spawn fails")
        .to_string();
    assert!(
        err.contains("\"ghost\"") && err.contains("/nonexistent/mcp-server"),
        "{err}"
    );

    let started = Instant::now();
    let err = McpServer::start("mute", &config.mcp_servers["mute"], queue())
        .await
        .err()
        .expect("a server that never answers times out")
        .to_string();
    assert!(
        err.contains("\"mute\"") && err.contains("initTimeout"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_optional_server_that_cannot_start_leaves_callers_a_clear_failure() {
    let (server, _) = start(
        "later",
        json!({"command": "/nonexistent/mcp-server", "required": false}),
        json!({}),
    )
    .await;
    assert!(server.list_tools().await.is_empty());
    assert!(!server.is_ready());
    assert_eq!(
        server.call("echo", json!({}), TIMEOUT).await,
        ToolOutcome::Unreachable(RESTARTING.into())
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_published_time_server_answers_over_stdio() {
    let (server, _) = start("time", time_server_config(), json!({})).await;
    let names = tool_names(&server.list_tools().await).join(",");
    assert!(names.contains("time__get_current_time"), "{names}");
    assert!(names.contains("time__convert_time"), "{names}");
    match server
        .call(
            "get_current_time",
            json!({"timezone": "Europe/Paris"}),
            TIMEOUT,
        )
        .await
    {
        ToolOutcome::Ok(text) => {
            let answer: Value = serde_json::from_str(&text).expect("JSON answer");
            assert_eq!(answer["timezone"], "Europe/Paris", "{text}");
            assert!(answer["datetime"].is_string(), "{text}");
        }
        failed => panic!("get_current_time failed: {failed:?}"),
    }
    let invalid = server
        .call("get_current_time", json!({"timezone": 7}), TIMEOUT)
        .await;
    assert!(
        matches!(&invalid, ToolOutcome::Failed(r) if r.starts_with("invalid arguments")),
        "{invalid:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_unset_variable_in_a_servers_env_names_its_key_and_spares_an_optional_server() {
    let env = json!({"TOKEN": "${AGENTD_TEST_SURELY_UNSET_TOKEN}"});
    let config = parse_config(
        json!({"mcpServers": {"vault": {"command": "sh", "env": env}}}),
        "test config",
    )
    .expect("valid config: env is expanded when the server starts");
    let metrics = Metrics::new().expect("metrics");
    let queues = ToolQueues::new(&config.queues, &metrics);
    let server = &config.mcp_servers["vault"];
    let queue = queues.get(server.queue_name()).expect("queue");
    let error = McpServer::start("vault", server, queue)
        .await
        .err()
        .expect("a required server cannot start without its variable")
        .to_string();
    assert!(
        error.contains("mcpServers.vault.env.TOKEN")
            && error.contains("${AGENTD_TEST_SURELY_UNSET_TOKEN}")
            && !error.contains("<root>"),
        "{error}"
    );

    let remote = parse_config(
        json!({"mcpServers": {"remote": {"url": "http://127.0.0.1:9/mcp",
            "bearerToken": "${AGENTD_TEST_SURELY_UNSET_TOKEN}"}}}),
        "test config",
    )
    .expect("valid config: the bearer token is expanded when the server connects");
    let queue = queues.get("default").expect("queue");
    let error = McpServer::start("remote", &remote.mcp_servers["remote"], queue)
        .await
        .err()
        .expect("a required server cannot connect without its token")
        .to_string();
    assert!(error.contains("mcpServers.remote.bearerToken"), "{error}");

    let (optional, _) = start(
        "vault",
        json!({"command": "sh", "env": env, "required": false}),
        json!({}),
    )
    .await;
    assert!(
        !optional.is_ready(),
        "an optional server waits for its variable"
    );
    assert_eq!(
        optional.call("anything", json!({}), TIMEOUT).await,
        ToolOutcome::Unreachable(RESTARTING.into())
    );
    optional.shutdown().await;
}
