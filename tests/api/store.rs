//! The store: one conformance suite run against SQLite and the local PostgreSQL service, and
//! the runs the server records.

use std::sync::Arc;

use agentd::store::{NewRun, RunOutcome, Store};
use serde_json::{Value, json};
use sqlx::Connection;

use crate::support::spawn_app;

/// The same checks on any backend.
async fn conformance(store: Arc<dyn Store>) {
    store.ping().await.expect("ping");
    let created_at = chrono::DateTime::parse_from_rfc3339("2026-11-21T10:00:00.123Z")
        .expect("ts")
        .with_timezone(&chrono::Utc);
    let run = NewRun {
        id: uuid::Uuid::now_v7().to_string(),
        agent: "chat".into(),
        user_id: Some("alice".into()),
        conversation_id: None,
        created_at,
    };
    store.insert_run(&run).await.expect("insert");
    let started = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!(started.status, "running");
    assert_eq!(started.user_id.as_deref(), Some("alice"));
    assert_eq!(started.created_at, created_at);
    assert_eq!(started.success, None);
    let outcome = RunOutcome {
        status: "completed",
        exit_reason: "final_answer",
        success: true,
        error: None,
        final_report: Some(
            json!({"status": "success", "format": "markdown", "content": "hi ✓", "ts": 1}),
        ),
        input_tokens: 10,
        output_tokens: 5,
        cached_tokens: 2,
        cost_usd: 0.0125,
        turns: 1,
        finished_at: created_at + chrono::Duration::milliseconds(1500),
        duration_ms: 1500,
    };
    store.finish_run(&run.id, &outcome).await.expect("finish");
    let finished = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!(finished.status, "completed");
    assert_eq!(finished.exit_reason.as_deref(), Some("final_answer"));
    assert_eq!(finished.success, Some(true));
    assert_eq!(
        finished
            .final_report
            .as_ref()
            .and_then(|r| r["content"].as_str()),
        Some("hi ✓")
    );
    assert_eq!(
        (
            finished.input_tokens,
            finished.output_tokens,
            finished.cached_tokens
        ),
        (10, 5, 2)
    );
    assert!((finished.cost_usd - 0.0125).abs() < 1e-12);
    assert_eq!(finished.duration_ms, Some(1500));
    assert_eq!(finished.finished_at, Some(outcome.finished_at));
    assert!(store.get_run("no-such-run").await.expect("get").is_none());
}

#[tokio::test]
async fn sqlite_store_conformance() {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("new.db").display());
    let store = agentd::store::open(&url)
        .await
        .expect("sqlite store is created on first open");
    conformance(store).await;
    // Reopening applies no migration twice and keeps the data.
    agentd::store::open(&url).await.expect("reopen");
}

/// The local PostgreSQL service (CI has it); override with AGENTD_TEST_POSTGRES_URL.
fn postgres_admin_url() -> String {
    std::env::var("AGENTD_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

#[tokio::test]
async fn postgres_store_conformance() {
    let admin_url = postgres_admin_url();
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at {admin_url} ({e}). Start it with \
             `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, \
             or point AGENTD_TEST_POSTGRES_URL at a server where the user may create databases."
            )
        });
    let database = format!("agentd_test_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut admin)
        .await
        .expect("create test database");
    let (base, _) = admin_url.rsplit_once('/').expect("url has a database");
    let store = agentd::store::open(&format!("{base}/{database}"))
        .await
        .expect("postgres store opens and migrates");
    conformance(store).await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {database} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .expect("drop test database");
}

#[tokio::test]
async fn unsupported_store_urls_are_named() {
    let error = agentd::store::open("mysql://x")
        .await
        .err()
        .expect("rejected")
        .to_string();
    assert!(
        error.contains("mysql://x") && error.contains("sqlite://"),
        "{error}"
    );
}

#[tokio::test]
async fn every_completion_is_recorded_as_a_run() {
    let app = spawn_app().await;
    app.llm
        .push(crate::support::mock_llm::Reply::text("stored answer").with_usage(7, 2, 0));
    let response = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    let run_id = response.headers()["x-agentd-run-id"]
        .to_str()
        .expect("run id")
        .to_string();
    let _: Value = response.json().await.expect("json");
    let run = app
        .runtime
        .store
        .get_run(&run_id)
        .await
        .expect("store")
        .expect("run recorded");
    assert_eq!(run.agent, "chat");
    assert_eq!(run.status, "completed");
    assert_eq!(run.exit_reason.as_deref(), Some("final_answer"));
    assert_eq!(run.success, Some(true));
    assert_eq!((run.input_tokens, run.output_tokens), (7, 2));
    assert_eq!(run.turns, 1);
    assert!(run.duration_ms.is_some() && run.finished_at.is_some());
    assert_eq!(
        run.final_report
            .as_ref()
            .and_then(|r| r["content"].as_str()),
        Some("stored answer")
    );

    for _ in 0..3 {
        app.llm.push(crate::support::mock_llm::Reply::status(
            500,
            json!({"error": {"message": "x"}}),
        ));
    }
    let failed = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    let failed_id = failed.headers()["x-agentd-run-id"]
        .to_str()
        .expect("run id")
        .to_string();
    assert_eq!(failed.status(), 502);
    let run = app
        .runtime
        .store
        .get_run(&failed_id)
        .await
        .expect("store")
        .expect("failed run recorded");
    assert_eq!(
        (run.status.as_str(), run.exit_reason.as_deref(), run.success),
        ("failed", Some("llm_error"), Some(false))
    );
    assert!(run.error.as_deref().is_some_and(|e| e.contains("HTTP 500")));
}
