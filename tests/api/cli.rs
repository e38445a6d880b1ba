//! The `agentd` binary: `check`, `agents`, `run` and `serve`'s refusals, with their exit codes
//! (0 ok, 1 session failure, 4 bad config). Each test runs in its own directory and HOME so no
//! configuration layer leaks in.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::binary::{command, project};
use crate::support::mock_llm::{MockLlm, Reply};

pub(crate) struct Output {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) async fn agentd(dir: &Path, args: &[&str]) -> Output {
    let output = command(dir).args(args).output().await.expect("agentd runs");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn config_for(base_url: &str) -> Value {
    json!({"providers": {"llm": {"type": "openai-compatible", "baseUrl": base_url}}, "agents": ["agents"]})
}

#[tokio::test]
async fn check_accepts_a_valid_project() {
    let dir = project(&config_for("http://127.0.0.1:9/v1"));
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("1 agent(s)"), "{}", out.stdout);
}

#[tokio::test]
async fn check_names_an_mcp_server_it_could_not_start_or_reach() {
    let mut config = config_for("http://127.0.0.1:9/v1");
    config["mcpServers"] = json!({"fetcher": {"command": "agentd-surely-not-installed-xyz"}});
    let dir = project(&config);
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("mcpServers.fetcher.command")
            && out.stderr.contains("agentd-surely-not-installed-xyz")
            && out.stderr.contains("PATH"),
        "{}",
        out.stderr
    );

    config["mcpServers"] = json!({"fetcher": {"command": "sh", "args": ["-c", "true"]}});
    let dir = project(&config);
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 0, "a command on PATH is fine: {}", out.stderr);

    config["mcpServers"] = json!({"remote": {"url": "http://exa mple.com/mcp"}});
    let dir = project(&config);
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("mcpServers.remote.url") && out.stderr.contains("not a valid URL"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn check_names_the_file_and_pointer_of_a_broken_openapi_document() {
    let mut config = config_for("http://127.0.0.1:9/v1");
    config["openapiSpecs"] =
        json!({"pets": {"spec": "specs/pets.json", "baseUrl": "http://127.0.0.1:9"}});
    let dir = project(&config);
    std::fs::create_dir(dir.path().join("specs")).expect("dir");
    std::fs::write(
        dir.path().join("specs/pets.json"),
        r#"{"openapi": "3.1.0", "paths": {"/pets": {"get": {"parameters": [{"name": "s", "in": "cookie"}]}}}}"#,
    )
    .expect("spec");
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("specs/pets.json")
            && out.stderr.contains("/paths/~1pets/get/parameters/0/in"),
        "the path is resolved against the config file and the pointer named: {}",
        out.stderr
    );
}

#[tokio::test]
async fn check_warns_when_there_are_no_agents() {
    let config = json!({"providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}}});
    let dir = project(&config);
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("warning: no agents"), "{}", out.stderr);
}

#[tokio::test]
async fn check_names_the_file_and_key_of_a_config_error() {
    let mut config = config_for("http://x/v1");
    config["server"] = json!({"listn": "127.0.0.1:1"});
    let dir = project(&config);
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 4);
    assert!(
        out.stderr.contains("agentd.json") && out.stderr.contains("server.listn"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn check_names_a_missing_variable_with_its_layer_and_key() {
    let config = json!({"providers": {"llm": {"type": "openai-compatible", "baseUrl": "${AGENTD_TEST_SURELY_UNSET_VAR}"}}});
    let dir = project(&config);
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 4);
    for needle in [
        "AGENTD_TEST_SURELY_UNSET_VAR",
        "providers.llm.baseUrl",
        "agentd.json",
    ] {
        assert!(
            out.stderr.contains(needle),
            "missing {needle}: {}",
            out.stderr
        );
    }
}

#[tokio::test]
async fn layer_env_file_supplies_variables() {
    let config = json!({"providers": {"llm": {"type": "openai-compatible", "baseUrl": "${LLM_URL}"}}, "agents": ["agents"]});
    let dir = project(&config);
    std::fs::write(
        dir.path().join(".ai-agent.env"),
        "export LLM_URL=\"http://127.0.0.1:9/v1\"\n",
    )
    .expect("env");
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[tokio::test]
async fn check_names_an_unknown_frontmatter_key() {
    let dir = project(&config_for("http://x/v1"));
    std::fs::write(
        dir.path().join("agents/bad.ai"),
        "---\nmaxTurnz: 3\n---\nprompt",
    )
    .expect("agent");
    let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
    assert_eq!(out.code, 4);
    assert!(
        out.stderr.contains("bad.ai") && out.stderr.contains("maxTurnz"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_missing_explicit_config_is_an_error() {
    let dir = tempfile::tempdir().expect("dir");
    let out = agentd(dir.path(), &["check", "--config", "nowhere.json"]).await;
    assert_eq!(out.code, 4);
    assert!(out.stderr.contains("nowhere.json"), "{}", out.stderr);
}

#[tokio::test]
async fn the_working_directory_layer_is_read() {
    let dir = project(&config_for("http://127.0.0.1:9/v1"));
    std::fs::rename(
        dir.path().join("agentd.json"),
        dir.path().join(".ai-agent.json"),
    )
    .expect("rename");
    let out = agentd(dir.path(), &["agents"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("chat\tA helpful chat agent\tmodels=llm/upstream-model"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn run_prints_the_answer_and_exits_zero() {
    let llm = MockLlm::start().await;
    llm.push(Reply::text("forty-two"));
    let dir = project(&config_for(&llm.base_url()));
    let out = agentd(
        dir.path(),
        &[
            "run",
            "chat",
            "What is the answer?",
            "--config",
            "agentd.json",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "forty-two\n");
    assert_eq!(
        llm.requests()[0]["messages"][1]["content"],
        "What is the answer?"
    );
    assert!(
        !dir.path().join("agentd.db").exists(),
        "a CLI run keeps nothing unless --database is given"
    );
}

#[tokio::test]
async fn run_starts_only_the_tool_servers_its_agent_uses() {
    let llm = MockLlm::start().await;
    llm.push(Reply::text("no tools needed"));
    let mut config = config_for(&llm.base_url());
    // A required server that cannot start, used by another agent: `serve` would stop on it.
    config["mcpServers"] = json!({"broken": {"command": "sh", "args": ["-c", "exit 7"]}});
    let dir = project(&config);
    std::fs::write(
        dir.path().join("agents/tooly.ai"),
        "---\ndescription: Uses the broken server\nmodels: llm/m\ntools: [broken]\n---\nx\n",
    )
    .expect("second agent");
    let out = agentd(
        dir.path(),
        &["run", "chat", "hi", "--config", "agentd.json"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "no tools needed\n");
}

#[tokio::test]
async fn run_json_prints_the_agent_result_and_failures_exit_one() {
    let llm = MockLlm::start().await;
    llm.push(Reply::status(401, json!({"error": {"message": "bad key"}})));
    let dir = project(&config_for(&llm.base_url()));
    let out = agentd(
        dir.path(),
        &[
            "run",
            "agents/chat.ai",
            "hi",
            "--config",
            "agentd.json",
            "--json",
        ],
    )
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).expect("AgentResult JSON");
    assert_eq!(result["success"], false);
    assert_eq!(result["exit_reason"], "auth_failure");
    assert_eq!(result["accounting"][0]["type"], "llm");
    assert_eq!(result["accounting"][0]["status"], "failed");
}

#[tokio::test]
async fn serve_refuses_a_public_address_without_keys() {
    let dir = project(&config_for("http://x/v1"));
    let out = agentd(
        dir.path(),
        &["serve", "--config", "agentd.json", "--listen", "0.0.0.0:0"],
    )
    .await;
    assert_eq!(out.code, 4);
    assert!(out.stderr.contains("auth.keys"), "{}", out.stderr);
    assert!(out.stderr.contains("AGENTD_ADMIN_KEY"), "{}", out.stderr);
}

#[tokio::test]
async fn an_unknown_agent_names_the_loaded_ones_or_the_missing_config() {
    let dir = project(&config_for("http://x/v1"));
    let with_config = agentd(
        dir.path(),
        &["run", "nobody", "hi", "--config", "agentd.json"],
    )
    .await;
    assert_eq!(with_config.code, 4, "{}", with_config.stderr);
    assert!(
        with_config.stderr.contains("chat"),
        "{}",
        with_config.stderr
    );
    let without = agentd(dir.path(), &["run", "chat", "hi"]).await;
    assert_eq!(without.code, 4, "{}", without.stderr);
    assert!(
        without.stderr.contains("--config") && !without.stderr.contains("`agentd agents`"),
        "{}",
        without.stderr
    );
}

#[tokio::test]
async fn a_json_run_answered_in_prose_exits_with_the_schema_code() {
    let llm = MockLlm::start().await;
    for _ in 0..12 {
        llm.push(Reply::text("forty-two"));
    }
    let dir = project(&config_for(&llm.base_url()));
    std::fs::write(dir.path().join("agents/report.ai"), REPORT_AGENT).expect("agent");
    let out = agentd(
        dir.path(),
        &[
            "run",
            "report",
            "q",
            "--config",
            "agentd.json",
            "--format",
            "json",
        ],
    )
    .await;
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(
        out.stderr.contains("schema_validation_failed"),
        "{}",
        out.stderr
    );
}

const REPORT_AGENT: &str = "---\ndescription: Answers through the final report\nmodels: llm/upstream-model\ntransport: native\n---\nYou report.\n";

fn final_report_call(arguments: Value) -> Reply {
    Reply::tool_calls(vec![crate::support::mock_llm::ToolCall::new(
        "call_1",
        "agent__final_report",
        arguments.to_string(),
    )])
}

#[tokio::test]
async fn run_ends_through_the_final_report_and_keeps_thinking_on_stderr() {
    let llm = MockLlm::start().await;
    llm.push(
        final_report_call(json!({"report_format": "markdown", "report_content": "# Report"}))
            .with_reasoning("pondering deeply"),
    );
    let dir = project(&config_for(&llm.base_url()));
    std::fs::write(dir.path().join("agents/report.ai"), REPORT_AGENT).expect("agent");
    let out = agentd(
        dir.path(),
        &["run", "report", "write it", "--config", "agentd.json"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "# Report\n");
    assert!(out.stderr.contains("pondering deeply"), "{}", out.stderr);
    let tools = llm.requests()[0]["tools"]
        .as_array()
        .expect("tools offered")
        .clone();
    assert!(
        tools
            .iter()
            .any(|t| t["function"]["name"] == "agent__final_report")
    );
}

#[tokio::test]
async fn run_with_format_and_schema_validates_the_json_report() {
    let llm = MockLlm::start().await;
    llm.push(final_report_call(
        json!({"report_format": "json", "content_json": {"answer": 42}}),
    ));
    let dir = project(&config_for(&llm.base_url()));
    std::fs::write(dir.path().join("agents/report.ai"), REPORT_AGENT).expect("agent");
    let schema =
        r#"{"type":"object","required":["answer"],"properties":{"answer":{"type":"integer"}}}"#;
    let out = agentd(
        dir.path(),
        &[
            "run",
            "report",
            "q",
            "--config",
            "agentd.json",
            "--format",
            "json",
            "--schema",
            schema,
            "--json",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).expect("AgentResult");
    assert_eq!(
        result["final_report"]["content_json"],
        json!({"answer": 42})
    );
    assert_eq!(result["final_report"]["format"], "json");
    let offered =
        &llm.requests()[0]["tools"][0]["function"]["parameters"]["properties"]["content_json"];
    assert_eq!(
        offered["required"],
        json!(["answer"]),
        "the tool schema carries the requested schema"
    );
}

#[tokio::test]
async fn run_exit_codes_name_each_failure_category() {
    let dir = project(&config_for("http://127.0.0.1:9/v1"));
    let run_chat = |extra: &'static [&'static str]| {
        let mut args = vec!["run", "chat", "hi", "--config", "agentd.json"];
        args.extend_from_slice(extra);
        let dir = dir.path().to_path_buf();
        async move { agentd(&dir, &args).await }
    };
    let cases: [(&[&str], i32, &str); 5] = [
        (&["--no-such-flag"], 4, "a bad argument"),
        (&["--models", "nope/x"], 4, "an unknown provider"),
        (
            &["--format", "json", "--schema", r#"{"type": 12}"#],
            5,
            "a schema that does not compile",
        ),
        (
            &["--database", "sqlite:///no/such/dir/x.db"],
            3,
            "a store that cannot start",
        ),
        (&["--schema", "{not json"], 4, "a --schema that is not JSON"),
    ];
    for (extra, code, what) in cases {
        let out = run_chat(extra).await;
        assert_eq!(out.code, code, "{what}: {}", out.stderr);
    }
    let unknown = agentd(
        dir.path(),
        &["run", "nobody", "hi", "--config", "agentd.json"],
    )
    .await;
    assert_eq!(unknown.code, 4, "unknown agent: {}", unknown.stderr);
    let missing_prompt_file = agentd(
        dir.path(),
        &["run", "chat", "@nowhere.txt", "--config", "agentd.json"],
    )
    .await;
    assert_eq!(
        missing_prompt_file.code, 4,
        "{}",
        missing_prompt_file.stderr
    );
}

#[tokio::test]
async fn run_reads_the_prompt_from_a_file() {
    let llm = MockLlm::start().await;
    let dir = project(&config_for(&llm.base_url()));
    std::fs::write(dir.path().join("task.txt"), "from a file").expect("prompt");
    let out = agentd(
        dir.path(),
        &["run", "chat", "@task.txt", "--config", "agentd.json"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(llm.requests()[0]["messages"][1]["content"], "from a file");
}

#[tokio::test]
async fn every_session_log_line_carries_the_trace_id_in_logfmt_and_json() {
    for format in ["logfmt", "json"] {
        let llm = MockLlm::start().await;
        llm.push(Reply::empty());
        llm.push(Reply::text("fine"));
        let mut config = config_for(&llm.base_url());
        config["telemetry"] = json!({"logFormat": format});
        let dir = project(&config);
        let out = agentd(
            dir.path(),
            &["run", "chat", "hi", "--config", "agentd.json", "--json"],
        )
        .await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        let run_id = serde_json::from_str::<Value>(&out.stdout).expect("result")["run_id"]
            .as_str()
            .expect("id")
            .to_string();
        let lines: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("empty response"))
            .collect();
        assert!(
            !lines.is_empty(),
            "{format}: a warning is logged: {}",
            out.stderr
        );
        for line in lines {
            match format {
                "logfmt" => assert!(
                    line.contains(&format!("trace_id={run_id}")) && line.contains("level=warn"),
                    "{line}"
                ),
                _ => {
                    let parsed: Value = serde_json::from_str(line).expect("a JSON log line");
                    let spans = parsed["spans"].as_array().expect("spans");
                    assert!(
                        spans.iter().any(|span| span["trace_id"] == run_id.as_str()),
                        "{line}"
                    );
                    assert_eq!(parsed["level"], "WARN");
                }
            }
        }
    }
}
