//! `agentd tools [SERVER|all] [--validate]`: the real binary connects the MCP servers, lists
//! their tools (and the REST tools), forwards the servers' stderr to its log, and exits 0, 3
//! (a server failed), 4 (bad arguments or config) or 5 (a schema does not compile).

use serde_json::{Value, json};

use crate::cli::{Output, agentd};
use crate::support::binary::{Served, command, project, serve};
use crate::support::mcp::test_server_config;

/// Runs `agentd tools ARGS --config agentd.json` in a fresh directory holding `config`.
async fn agentd_tools(config: &Value, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("agentd.json"), config.to_string()).expect("config");
    let mut full = vec!["tools"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--config", "agentd.json"]);
    agentd(dir.path(), &full).await
}

fn valid_servers() -> Value {
    json!({
        "mcpServers": {"test": test_server_config(json!({"toolsDenied": ["odd_schema"]}))},
        "restTools": {"lookup": {"url": "http://127.0.0.1:9/x", "description": "Looks up\nmore"}},
    })
}

#[tokio::test]
async fn lists_every_server_and_rest_tool() {
    let out = agentd_tools(&valid_servers(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("test (stdio, queue default): 8 tool(s)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  test__echo\tSends the text back."),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("odd_schema"),
        "denied tools are not listed"
    );
    assert!(
        out.stdout
            .contains("rest (restTools): 1 tool(s)\n  rest__lookup\tLooks up\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("agentd::mcp::stderr") && out.stderr.contains("mcp test server ready"),
        "the server's stderr reaches the log: {}",
        out.stderr
    );
}

#[tokio::test]
async fn one_server_can_be_named() {
    let out = agentd_tools(&valid_servers(), &["test"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("test__echo") && !out.stdout.contains("rest__lookup"));
    let out = agentd_tools(&valid_servers(), &["nope"]).await;
    assert_eq!(out.code, 4);
    assert!(
        out.stderr
            .contains("no MCP server named \"nope\"; configured: test"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn validate_passes_when_every_schema_compiles() {
    let out = agentd_tools(&valid_servers(), &["all", "--validate"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("ok: all 9 tool schema(s) compile"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn validate_exits_5_for_a_schema_that_does_not_compile() {
    let config = json!({"mcpServers": {"test": test_server_config(json!({}))}});
    let out = agentd_tools(&config, &["--validate"]).await;
    assert_eq!(out.code, 5, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("test__odd_schema: the input schema does not compile"),
        "{}",
        out.stderr
    );
    let out = agentd_tools(&config, &[]).await;
    assert_eq!(
        out.code, 0,
        "without --validate the listing succeeds: {}",
        out.stderr
    );

    let rest =
        json!({"restTools": {"odd": {"url": "http://x", "parametersSchema": {"type": "nope"}}}});
    let out = agentd_tools(&rest, &["--validate"]).await;
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(
        out.stderr.contains("restTools.odd.parametersSchema"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_server_that_fails_exits_3_and_is_named() {
    let mut config = valid_servers();
    config["mcpServers"]["broken"] = json!({"command": "/nonexistent/server", "required": false});
    let out = agentd_tools(&config, &[]).await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("MCP server \"broken\": cannot start \"/nonexistent/server\""),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("test__echo"),
        "the others are still listed"
    );
}

#[tokio::test]
async fn a_bad_tool_config_exits_4() {
    let config = json!({"mcpServers": {"test": {"command": "x", "queue": "missing"}}});
    let out = agentd_tools(&config, &[]).await;
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("mcpServers.test.queue"),
        "{}",
        out.stderr
    );
}

/// A project directory with `agentd.json` and an agent `a` using the server `uses`.
fn serve_project(mcp_servers: Value, uses: &str) -> tempfile::TempDir {
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}},
        "agents": ["agents"],
        "mcpServers": mcp_servers,
        "store": {"url": "sqlite::memory:"},
    }));
    let agent = format!("---\nmodels: llm/m\ntools: [{uses}]\n---\nHi.\n");
    std::fs::write(dir.path().join("agents/a.ai"), agent).expect("agent");
    dir
}

/// `agentd serve` in `dir` on a free port.
fn serve_command(dir: &std::path::Path) -> tokio::process::Command {
    let mut command = command(dir);
    command.args([
        "serve",
        "--config",
        "agentd.json",
        "--listen",
        "127.0.0.1:0",
    ]);
    command
}

#[tokio::test]
async fn serve_exits_3_when_a_required_server_fails() {
    let dir = serve_project(
        json!({"broken": {"command": "/nonexistent/server"}}),
        "broken",
    );
    let output = serve_command(dir.path())
        .output()
        .await
        .expect("agentd runs");
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("MCP server \"broken\""), "{stderr}");
}

#[tokio::test]
async fn serve_ends_its_mcp_servers_when_it_stops() {
    let server = test_server_config(
        json!({"env": {"MCP_TEST_GRANDCHILD": "${AGENTD_TEST_UNSET_VAR:-yes}"}}),
    );
    let dir = serve_project(json!({"test": server}), "test");
    let mut server_pid = None;
    let mut grandchild_pid = None;
    let Served {
        mut child, address, ..
    } = serve(serve_command(dir.path()), |line| {
        if let Some((_, rest)) = line.split_once("mcp test server ready (pid ") {
            server_pid = leading_digits(rest);
        }
        if let Some((_, rest)) = line.split_once("grandchild pid ") {
            grandchild_pid = leading_digits(rest);
        }
    })
    .await;
    let server_pid = server_pid.expect("the MCP server logged its pid");
    let grandchild_pid = grandchild_pid.expect("the env reached the server, which started a child");
    assert!(std::path::Path::new(&format!("/proc/{grandchild_pid}")).exists());
    // SIGTERM is handled once the server runs: wait until it answers.
    let health = format!("http://{address}/health");
    let client = reqwest::Client::new();
    while !client
        .get(&health)
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let agentd_pid = child.id().expect("pid").to_string();
    let status = tokio::process::Command::new("kill")
        .arg(&agentd_pid)
        .status()
        .await
        .expect("kill runs");
    assert!(status.success());
    let exit = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait())
        .await
        .expect("agentd stops")
        .expect("exit status");
    assert_eq!(exit.code(), Some(0));
    // The group was killed before agentd exited; give the kernel a moment to finish them.
    for pid in [server_pid, grandchild_pid] {
        let gone = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.is_empty() || stat.contains(") Z")
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !gone() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(
            gone(),
            "process {pid} of the MCP server's tree outlived agentd"
        );
    }
}

/// The number at the start of `text` (log formats may quote what follows).
fn leading_digits(text: &str) -> Option<String> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty()).then_some(digits)
}

#[tokio::test]
async fn check_names_an_agent_tool_that_does_not_exist() {
    let dir = serve_project(json!({"test": {"command": "x"}}), "tset");
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 4);
    assert!(
        out.stderr.contains("a.ai: tools: \"tset\""),
        "{}",
        out.stderr
    );
}
