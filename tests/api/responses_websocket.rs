//! Codex CLI (pinned in `scripts/test`, under `.ci/codex`) pointed at agentd as its OpenAI base
//! URL first opens a WebSocket on `GET /v1/responses` (SPEC §15): agentd's 426 makes it fall
//! back to `POST /v1/responses` after one attempt, where a 404 or 405 costs six retries
//! (about 6.5 s) first.

use std::time::Instant;

use crate::support::mock_llm::{MockLlm, Reply};

#[tokio::test]
async fn codex_falls_back_from_the_websocket_mode_after_one_attempt() {
    let llm = MockLlm::start().await;
    llm.push(Reply::text("Hello from agentd."));
    let (_dir, server) =
        crate::support::binary::serve_with_admin_key(&llm.base_url(), "ws-key").await;
    let codex = tokio::task::spawn_blocking(crate::responses_clients::codex_binary)
        .await
        .expect("codex");
    let home = tempfile::tempdir().expect("codex home");
    let work = tempfile::tempdir().expect("codex workdir");
    // The built-in OpenAI provider at another base URL: the one Codex opens WebSockets to.
    let config = format!(
        "model = \"chat\"\napproval_policy = \"never\"\nopenai_base_url = \"http://{}/v1\"\n",
        server.address
    );
    std::fs::write(home.path().join("config.toml"), config).expect("codex config");
    // The OpenAI provider takes its key from `codex login`, not from the environment.
    let mut login = tokio::process::Command::new(&codex)
        .args(["login", "--with-api-key"])
        .env("CODEX_HOME", home.path())
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("codex login");
    if let Some(mut stdin) = login.stdin.take() {
        use tokio::io::AsyncWriteExt;
        stdin.write_all(b"ws-key\n").await.expect("key sent");
    }
    assert!(
        login.wait().await.expect("login ends").success(),
        "codex login"
    );
    let started = Instant::now();
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::process::Command::new(codex)
            .args(["exec", "--skip-git-repo-check", "Say hello"])
            .current_dir(work.path())
            .env("CODEX_HOME", home.path())
            .env("OPENAI_API_KEY", "ws-key")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("codex finishes within a minute")
    .expect("codex runs");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Hello from agentd."), "{stdout}\n{stderr}");
    let socket_attempts = stderr
        .matches("failed to connect to Responses WebSocket")
        .count();
    assert_eq!(socket_attempts, 1, "{stderr}");
    eprintln!(
        "codex exec through agentd: {elapsed:?} to its answer, {socket_attempts} WebSocket attempt"
    );
}
