//! One scrape after a run with tools, a retry, pricing and a context-guard trip: every metric
//! family of SPEC §6 is present with its labels, and the scrape is saved for `.ci/run` to check
//! with `promtool check metrics` (the file is `$CARGO_TARGET_TMPDIR/metrics-scrape.prom`).

use serde_json::json;

use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::spawn_app_with;

const WORKER: &str = "---\ndescription: Uses tools\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\n---\nYou use tools.\n";

/// Where the scrape is saved for promtool.
pub fn scrape_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("metrics-scrape.prom")
}

#[tokio::test]
async fn a_scrape_after_a_full_run_has_every_family_and_is_saved_for_promtool() {
    let agents = tempfile::tempdir().expect("dir");
    std::fs::write(agents.path().join("worker.ai"), WORKER).expect("agent");
    let agents_path = agents.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents_path));
        config["pricing"] = json!({"llm": {"upstream-model": {"prompt": 1.0, "completion": 2.0}}});
    })
    .await;
    app.llm
        .push(Reply::status(500, json!({"error": {"message": "flaky"}})));
    app.llm.push(Reply::tool_calls(vec![
        ToolCall::new("c1", "test__echo", r#"{"text": "hi"}"#),
        ToolCall::new("c2", "test__fail", r#"{"message": "nope"}"#),
    ]));
    app.llm.push(Reply::text("done").with_usage(20, 5, 0, 0));
    let worker = json!({"model": "worker", "messages": [{"role": "user", "content": "work"}]});
    assert_eq!(
        app.post_json("/v1/chat/completions", &worker)
            .await
            .status(),
        200
    );
    let tight =
        json!({"model": "tight", "messages": [{"role": "user", "content": "word ".repeat(2000)}]});
    assert_eq!(
        app.post_json("/v1/chat/completions", &tight).await.status(),
        200
    );
    app.get("/no/such/route").await;
    let scrape = app.get("/metrics").await.text().await.expect("scrape");
    let families = [
        r#"agentd_http_requests_total{method="POST",route="/v1/chat/completions",status="200"}"#,
        r#"agentd_http_request_duration_seconds_bucket{method="POST",route="/v1/chat/completions","#,
        "agentd_sessions_active 0",
        r#"agentd_sessions_total{agent="worker",exit_reason="final_answer"} 1"#,
        "agentd_sse_streams_active 0",
        r#"agentd_overhead_seconds_bucket{agent="worker","#,
        r#"ai_agent_llm_requests_total{agent="worker",model="upstream-model",provider="llm",status="failed"} 1"#,
        r#"ai_agent_llm_latency_ms_bucket{agent="worker",model="upstream-model",provider="llm","#,
        r#"ai_agent_llm_prompt_tokens_total{agent="worker",model="upstream-model",provider="llm"}"#,
        r#"ai_agent_llm_completion_tokens_total{agent="worker",model="upstream-model",provider="llm"}"#,
        r#"ai_agent_llm_cost_usd_total{agent="worker",model="upstream-model",provider="llm"}"#,
        r#"ai_agent_llm_errors_total{agent="worker",model="upstream-model",provider="llm"} 1"#,
        r#"ai_agent_llm_retries_total{agent="worker",model="upstream-model",provider="llm"} 1"#,
        r#"ai_agent_tool_invocations_total{agent="worker",server="test",tool="test__echo"} 1"#,
        r#"ai_agent_tool_latency_ms_bucket{agent="worker",server="test",tool="test__echo","#,
        r#"ai_agent_tool_errors_total{agent="worker",server="test",tool="test__fail"} 1"#,
        r#"ai_agent_queue_depth{queue="default"}"#,
        r#"ai_agent_queue_in_use{queue="default"}"#,
        r#"ai_agent_queue_wait_duration_ms_bucket{queue="default","#,
        r#"ai_agent_context_guard_events_total{agent="tight",model="upstream-model",outcome="forced_final",provider="llm",trigger="turn_preflight"} 1"#,
        r#"ai_agent_context_guard_remaining_tokens{agent="tight","#,
        r#"ai_agent_final_report_total{agent="worker",status="success"} 1"#,
    ];
    for family in families {
        assert!(scrape.contains(family), "missing {family} in\n{scrape}");
    }
    std::fs::write(scrape_path(), &scrape).expect("save the scrape");
    app.runtime.close().await;
}
