//! Real clients of the Responses API and of client tools against the real `agentd` binary
//! (tests/sdk/responses_clients.py): the OpenAI Python SDK, its Chat Completions tool loop, the
//! Anthropic SDK's tool loop and the OpenAI Agents SDK with a `@function_tool`; and OpenAI's
//! Codex CLI with agentd as a `wire_api = "responses"` model provider running its shell tool.
//! The Python clients live in `.ci/venv` and Codex in `.ci/codex`, both filled by `.ci/run`
//! (the Agents SDK is installed here too when it is missing).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::sdk_clients::run_sdk_script;
use crate::support::REPORT_AGENT;
use crate::support::binary::{command, project, serve};
use crate::support::mock_llm::{MockLlm, Reply, ToolCall};

/// The Agents SDK pinned as `.ci/run` pins it.
const AGENTS_SDK: &str = "openai-agents==0.24.0";
/// The Codex CLI pinned as `.ci/run` pins it.
const CODEX: &str = "@openai/codex@0.169.0";

fn ci_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci")
}

/// Installs the Agents SDK into `.ci/venv` when it is missing (the venv itself and the other
/// SDKs are `run_sdk_script`'s).
fn ensure_agents_sdk() {
    let python = ci_dir().join("venv/bin/python");
    let has = || {
        std::process::Command::new(&python)
            .args(["-c", "import agents"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if python.exists() && !has() {
        let installed = std::process::Command::new(ci_dir().join("venv/bin/pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                AGENTS_SDK,
            ])
            .status();
        assert!(
            installed.is_ok_and(|s| s.success()) && has(),
            "the OpenAI Agents SDK is missing: `{} -m pip install {AGENTS_SDK}`",
            python.display()
        );
    }
}

fn final_report(arguments: Value) -> Reply {
    Reply::tool_calls(vec![ToolCall::new(
        "final",
        "agent__final_report",
        arguments.to_string(),
    )])
}

async fn serve_with(llm: &MockLlm) -> (tempfile::TempDir, crate::support::binary::Served) {
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "auth": {"keys": [{"key": "sdk-key", "admin": true}]},
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
    }));
    std::fs::write(dir.path().join("agents/report.ai"), REPORT_AGENT).expect("report agent");
    let mut agentd = command(dir.path());
    agentd.args(["serve", "--config", "agentd.json"]);
    let server = serve(agentd, |_| {}).await;
    (dir, server)
}

#[tokio::test]
async fn the_openai_anthropic_and_agents_sdks_use_responses_and_client_tools() {
    let llm = MockLlm::start().await;
    let hello = "Hello from the mock upstream!";
    llm.push(Reply::text(hello));
    llm.push(Reply::text(hello).with_chunks(5));
    llm.push(Reply::text(hello).with_chunks(3));
    llm.push(Reply::text_in_pieces(&["one ", "two ", "three"]));
    for text in ["first", "second", "third"] {
        llm.push(Reply::text(text));
    }
    llm.push(final_report(
        json!({"report_format": "json", "content_json": {"city": "Paris"}}),
    ));
    llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_rome",
        "get_weather",
        r#"{"city": "Rome"}"#,
    )]));
    llm.push(Reply::text("Warm in Rome"));
    llm.push(Reply::tool_calls(vec![ToolCall::new(
        "toolu_oslo",
        "get_weather",
        r#"{"city": "Oslo"}"#,
    )]));
    llm.push(Reply::text("Cold in Oslo"));
    llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_paris",
        "get_weather",
        r#"{"city": "Paris"}"#,
    )]));
    llm.push(Reply::text("It is sunny in Paris"));
    llm.push(Reply::hang());
    let (_dir, server) = serve_with(&llm).await;
    tokio::task::spawn_blocking(ensure_agents_sdk)
        .await
        .expect("agents sdk");
    let args = [format!("http://{}", server.address), "sdk-key".to_string()];
    let stdout = run_sdk_script("responses_clients.py", &args).await;
    assert_eq!(
        stdout.lines().filter(|l| l.ends_with(" ok")).count(),
        11,
        "{stdout}"
    );
    // The Agents SDK's second request carried its tool's result to the model.
    let requests = llm.requests();
    let agents_turn = requests
        .iter()
        .find(|r| r.to_string().contains("sunny in Paris"))
        .expect("the tool result reached the model");
    let messages = agents_turn["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_paris");
}

/// The Codex CLI installed by `.ci/run` under `.ci/codex`, installed here when missing.
pub(crate) fn codex_binary() -> PathBuf {
    let prefix = ci_dir().join("codex");
    let binary = prefix.join("node_modules/.bin/codex");
    if !binary.exists() {
        let installed = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(CODEX)
            .status();
        assert!(
            installed.is_ok_and(|s| s.success()) && binary.exists(),
            "the Codex CLI is missing: `npm install --prefix {} {CODEX}`",
            prefix.display()
        );
    }
    binary
}

/// Runs `codex exec PROMPT` with agentd as its `responses` model provider; returns its output.
async fn codex_exec(address: &str, prompt: &str) -> (bool, String, String) {
    let codex = tokio::task::spawn_blocking(codex_binary)
        .await
        .expect("codex");
    let home = tempfile::tempdir().expect("codex home");
    let work = tempfile::tempdir().expect("codex workdir");
    let config = format!(
        "model = \"chat\"\nmodel_provider = \"agentd\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n\
         [model_providers.agentd]\nname = \"agentd\"\nbase_url = \"http://{address}/v1\"\nwire_api = \"responses\"\nenv_key = \"AGENTD_TEST_KEY\"\n"
    );
    std::fs::write(home.path().join("config.toml"), config).expect("codex config");
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(codex)
            .args(["exec", "--skip-git-repo-check", prompt])
            .current_dir(work.path())
            .env("CODEX_HOME", home.path())
            .env("AGENTD_TEST_KEY", "sdk-key")
            .env_remove("OPENAI_API_KEY")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("codex finishes within 2 minutes")
    .expect("codex runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn codex_runs_its_shell_tool_through_agentd_and_answers_with_what_it_printed() {
    let llm = MockLlm::start().await;
    // Codex offers its shell as the client tool `exec_command`; the scripted model calls it,
    // then answers once Codex sent back what the command printed.
    llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_shell",
        "exec_command",
        r#"{"cmd": "echo agentd-codex-$((40 + 2))"}"#,
    )]));
    llm.push(Reply::text("The command printed agentd-codex-42."));
    let (_dir, server) = serve_with(&llm).await;
    let (ok, stdout, stderr) =
        codex_exec(&server.address, "Run echo and tell me what it printed").await;
    assert!(ok, "codex failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("The command printed agentd-codex-42."),
        "{stdout}\n{stderr}"
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"exec_command"), "{offered:?}");
    let messages = requests[1]["messages"].as_array().expect("messages");
    let result = messages.last().expect("the shell's result");
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_shell");
    assert!(
        result["content"]
            .as_str()
            .expect("text")
            .contains("agentd-codex-42"),
        "the shell ran on the client and its output reached the model: {result}"
    );
}
