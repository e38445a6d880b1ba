//! Hot reload of `agentd serve`: a changed, added or removed agent file is picked up without a
//! restart (by the file watch, and by SIGHUP with the watch off); a broken file is reported and
//! the running agents stay; a run in flight finishes with the definition it started with.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::binary::{Served, command, project, serve};
use crate::support::mock_llm::{MockLlm, Reply, ToolCall};

fn config(llm: &MockLlm, check_seconds: u64) -> Value {
    json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0", "reloadCheckSeconds": check_seconds}
    })
}

fn agent(prompt: &str) -> String {
    format!(
        "---\ndescription: d\nmodels: llm/m\nfinalization: text\ntransport: native\n---\n{prompt}\n"
    )
}

async fn models(served: &Served) -> Vec<String> {
    let body: Value = reqwest::get(format!("http://{}/v1/models", served.address))
        .await
        .expect("models")
        .json()
        .await
        .expect("json");
    let mut ids: Vec<String> = body["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|m| m["id"].as_str().expect("id").to_string())
        .collect();
    ids.sort();
    ids
}

/// Waits until the model list is `expected` (the watch looks every second here).
async fn until_models(served: &Served, expected: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let now = models(served).await;
        if now == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "models {now:?}, waiting for {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for a log line containing `needle`.
async fn until_logged(served: &mut Served, needle: &str) -> String {
    let found = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(line) = served.log.recv().await {
            if line.contains(needle) {
                return line;
            }
        }
        String::new()
    })
    .await
    .unwrap_or_default();
    assert!(found.contains(needle), "no log line with {needle:?}");
    found
}

#[tokio::test]
async fn agent_files_are_reloaded_and_a_broken_one_leaves_the_running_agents() {
    let llm = MockLlm::start().await;
    let dir = project(&config(&llm, 1));
    let mut cmd = command(dir.path());
    cmd.args(["serve", "--config", "agentd.json"]);
    let mut served = serve(cmd, |_| {}).await;
    assert_eq!(models(&served).await, ["chat"]);

    let agents = dir.path().join("agents");
    std::fs::write(agents.join("poet.ai"), agent("You write poems.")).expect("write");
    until_models(&served, &["chat", "poet"]).await;
    let line = until_logged(&mut served, "agents reloaded").await;
    assert!(line.contains("poet"), "{line}");

    // A broken file: reported, and both agents keep answering.
    std::fs::write(agents.join("broken.ai"), "---\nmodels: [\n---\nx\n").expect("write");
    let line = until_logged(&mut served, "the running agents stay").await;
    assert!(
        line.contains("broken.ai"),
        "the error names the file: {line}"
    );
    assert_eq!(models(&served).await, ["chat", "poet"]);

    // Fixed and another removed: the next reload applies both.
    std::fs::remove_file(agents.join("broken.ai")).expect("remove");
    std::fs::remove_file(agents.join("poet.ai")).expect("remove");
    until_models(&served, &["chat"]).await;
}

#[tokio::test]
async fn sighup_reloads_with_the_watch_off_and_a_run_in_flight_keeps_its_definition() {
    let llm = MockLlm::start().await;
    let dir = project(&config(&llm, 0));
    let agents = dir.path().join("agents");
    std::fs::write(agents.join("poet.ai"), agent("OLD PROMPT")).expect("write");
    let mut cmd = command(dir.path());
    cmd.args(["serve", "--config", "agentd.json"]);
    let mut served = serve(cmd, |_| {}).await;

    // A two-turn run whose first answer takes a while: the file changes meanwhile.
    llm.push(
        Reply::tool_calls(vec![ToolCall::new("c1", "nothing__here", "{}")])
            .with_first_byte_delay(Duration::from_secs(2)),
    );
    llm.push(Reply::text("a poem"));
    let url = format!("http://{}/v1/chat/completions", served.address);
    let in_flight = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .json(&json!({"model": "poet", "messages": [{"role": "user", "content": "write"}]}))
            .send()
            .await
            .expect("sent")
            .json::<Value>()
            .await
            .expect("json")
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::write(agents.join("poet.ai"), agent("NEW PROMPT")).expect("write");
    std::fs::write(agents.join("sonnet.ai"), agent("You write sonnets.")).expect("write");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        models(&served).await,
        ["chat", "poet"],
        "no watch: nothing yet"
    );

    let pid = served.child.id().expect("pid") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGHUP,
    )
    .expect("SIGHUP");
    until_logged(&mut served, "agents reloaded").await;
    assert_eq!(models(&served).await, ["chat", "poet", "sonnet"]);

    let answer = in_flight.await.expect("answer");
    assert_eq!(
        answer["choices"][0]["message"]["content"], "a poem",
        "{answer}"
    );
    let second_turn = llm.requests()[1]["messages"][0]["content"].to_string();
    assert!(
        second_turn.contains("OLD PROMPT"),
        "the run in flight keeps its definition: {second_turn}"
    );

    llm.push(Reply::text("new"));
    let next: Value = reqwest::Client::new()
        .post(format!("http://{}/v1/chat/completions", served.address))
        .json(&json!({"model": "poet", "messages": [{"role": "user", "content": "again"}]}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(next["choices"][0]["message"]["content"], "new");
    let third = llm.requests()[2]["messages"][0]["content"].to_string();
    assert!(
        third.contains("NEW PROMPT"),
        "a new run uses the new file: {third}"
    );
    assert!(
        served.child.try_wait().expect("status").is_none(),
        "SIGHUP does not stop agentd"
    );
}
