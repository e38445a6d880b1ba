//! Anthropic's Claude Code (`claude -p`, installed by `scripts/test` under `.ci/claude`) with
//! agentd as its model: `ANTHROPIC_BASE_URL` at the test app, a placeholder key, its default
//! model name answered by `server.defaultAgent`, `--model` naming an agent, its own Bash and
//! Read tools run by Claude Code as agentd's client tools, and its streamed text. Claude Code
//! runs with a temporary home and config directory and its non-essential traffic off, so it
//! reaches nothing but agentd and never touches the user's settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

/// Claude Code pinned as `scripts/test` pins it.
const CLAUDE_CODE: &str = "@anthropic-ai/claude-code@2.1.332";
/// Claude Code's default model, which names no agent.
const DEFAULT_MODEL_ANSWER: &str = "Hello from agentd's chat agent.";

/// Claude Code under `.ci/claude`, installed here when `scripts/test` has not run.
fn claude_binary() -> PathBuf {
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/claude");
    let binary = prefix.join("node_modules/.bin/claude");
    if !binary.exists() {
        let installed = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(CLAUDE_CODE)
            .status();
        assert!(
            installed.is_ok_and(|s| s.success()) && binary.exists(),
            "Claude Code is missing: `npm install --prefix {} {CLAUDE_CODE}`",
            prefix.display()
        );
    }
    binary
}

/// What one `claude -p` printed.
struct Printed {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `claude -p PROMPT ARGS…` in `workdir` against `app`, with nothing of this machine's
/// environment but `PATH` (so its Bash tool finds `echo`).
async fn claude_p(app: &TestApp, workdir: &Path, prompt: &str, args: &[&str]) -> Printed {
    let claude = tokio::task::spawn_blocking(claude_binary)
        .await
        .expect("claude");
    let home = tempfile::tempdir().expect("claude home");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(claude)
            .arg("-p")
            .arg(prompt)
            .args(args)
            .current_dir(workdir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("CLAUDE_CONFIG_DIR", home.path().join(".claude"))
            .env("ANTHROPIC_BASE_URL", &app.address)
            .env("ANTHROPIC_API_KEY", "dummy")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("claude finishes within 2 minutes")
    .expect("claude runs");
    Printed {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn app_with_default_agent() -> TestApp {
    spawn_app_with(|config| config["server"] = json!({"defaultAgent": "chat"})).await
}

/// The names of the tools the model was offered in request `n`.
fn offered_tools(app: &TestApp, n: usize) -> Vec<String> {
    app.llm.requests()[n]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn claude_codes_default_model_is_answered_by_the_default_agent() {
    let app = app_with_default_agent().await;
    app.llm.push(Reply::text(DEFAULT_MODEL_ANSWER));
    let work = tempfile::tempdir().expect("workdir");
    let printed = claude_p(&app, work.path(), "Say hello", &[]).await;
    assert!(
        printed.success,
        "claude failed:\n{}\n{}",
        printed.stdout, printed.stderr
    );
    assert_eq!(
        printed.stdout.trim(),
        DEFAULT_MODEL_ANSWER,
        "{}",
        printed.stderr
    );
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let messages = requests[0]["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["content"], "You are a helpful assistant.");
    assert!(
        messages.iter().any(|m| m["role"] == "system"
            && m["content"]
                .as_str()
                .is_some_and(|t| t.contains("Primary working directory"))),
        "Claude Code's system turn reached the model: {messages:#?}"
    );
    let last = messages.last().expect("the prompt");
    assert_eq!(last["role"], "user");
    assert!(
        last["content"]
            .as_str()
            .expect("text")
            .ends_with("Say hello")
    );
    let offered = offered_tools(&app, 0);
    for tool in ["Bash", "Read", "Edit", "Write"] {
        assert!(offered.iter().any(|t| t == tool), "{tool} in {offered:?}");
    }
    let max_tokens = requests[0]["max_tokens"].as_u64().expect("max_tokens");
    assert!(
        max_tokens <= 32768,
        "Claude's 128000 was lowered: {max_tokens}"
    );
}

#[tokio::test]
async fn claude_code_names_an_agent_with_model_and_without_a_default_gets_a_404() {
    let app = spawn_app_with(|_| {}).await;
    let work = tempfile::tempdir().expect("workdir");
    let refused = claude_p(&app, work.path(), "Say hello", &[]).await;
    assert!(!refused.success, "{}", refused.stdout);
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(said.contains("selected model"), "{said}");
    assert_eq!(app.llm.request_count(), 0);
    app.llm.push(Reply::text("The chat agent answers."));
    let printed = claude_p(&app, work.path(), "Say hello", &["--model", "chat"]).await;
    assert!(
        printed.success,
        "claude failed:\n{}\n{}",
        printed.stdout, printed.stderr
    );
    assert_eq!(printed.stdout.trim(), "The chat agent answers.");
}

#[tokio::test]
async fn claude_code_runs_its_bash_tool_for_agentds_model() {
    let app = app_with_default_agent().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_bash",
        "Bash",
        r#"{"command": "echo hello-from-agentd", "description": "Print a greeting"}"#,
    )]));
    app.llm
        .push(Reply::text("The command printed hello-from-agentd."));
    let work = tempfile::tempdir().expect("workdir");
    let printed = claude_p(
        &app,
        work.path(),
        "Run echo hello-from-agentd and tell me what it printed",
        &["--allowedTools", "Bash"],
    )
    .await;
    assert!(
        printed.success,
        "claude failed:\n{}\n{}",
        printed.stdout, printed.stderr
    );
    assert_eq!(
        printed.stdout.trim(),
        "The command printed hello-from-agentd."
    );
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let result = requests[1]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("the tool's result");
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_bash");
    assert_eq!(
        result["content"].as_str().map(str::trim),
        Some("hello-from-agentd"),
        "Claude Code ran the command and sent back what it printed: {result}"
    );
}

#[tokio::test]
async fn claude_code_reads_a_file_with_its_read_tool_for_agentds_model() {
    let app = app_with_default_agent().await;
    let work = tempfile::tempdir().expect("workdir");
    let note = work.path().join("note.txt");
    std::fs::write(&note, "the secret word is marmalade\n").expect("note");
    let arguments = json!({"file_path": note.display().to_string()}).to_string();
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_read",
        "Read",
        arguments,
    )]));
    app.llm.push(Reply::text("The note says marmalade."));
    let printed = claude_p(
        &app,
        work.path(),
        "What does note.txt say?",
        &["--allowedTools", "Read"],
    )
    .await;
    assert!(
        printed.success,
        "claude failed:\n{}\n{}",
        printed.stdout, printed.stderr
    );
    assert_eq!(printed.stdout.trim(), "The note says marmalade.");
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let result = requests[1]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("the tool's result");
    assert_eq!(result["tool_call_id"], "call_read");
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|text| text.contains("the secret word is marmalade")),
        "{result}"
    );
}

#[tokio::test]
async fn claude_code_streams_agentds_text_as_it_comes() {
    let app = app_with_default_agent().await;
    app.llm
        .push(Reply::text_in_pieces(&["Streamed ", "through ", "agentd."]));
    let work = tempfile::tempdir().expect("workdir");
    let printed = claude_p(
        &app,
        work.path(),
        "Say something",
        &[
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
        ],
    )
    .await;
    assert!(
        printed.success,
        "claude failed:\n{}\n{}",
        printed.stdout, printed.stderr
    );
    let lines: Vec<Value> = printed
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let events: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "stream_event")
        .map(|l| &l["event"])
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"message_start"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"message_stop"), "{kinds:?}");
    let streamed: String = events
        .iter()
        .filter(|e| e["delta"]["type"] == "text_delta")
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(streamed, "Streamed through agentd.");
    let result = lines
        .iter()
        .find(|l| l["type"] == "result")
        .expect("a result line");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["result"], "Streamed through agentd.");
}
