//! Governance on both backends (SPEC §14): the audit log's hash chain (appends from two stores
//! at once never fork it; an edited or deleted row is named by `verify`), its filters, and the
//! usage report's sums per group.

use std::sync::Arc;

use agentd::audit::{Actor, AuditAction, AuditEvent, verify};
use agentd::store::{
    AccountingRecord, AuditFilter, EntryUsage, RunBatch, RunWrite, Store, UsageGroup, UsageQuery,
};
use serde_json::json;

use super::Backend;
use super::conformance::{at, new_run, outcome};

fn event(user: &str, action: AuditAction, target: &str) -> AuditEvent {
    AuditEvent::new(
        Actor {
            user: Some(user.into()),
            key_id: Some(format!("key-{user}")),
            request_id: None,
        },
        action,
        target,
    )
}

/// Runs `statement` on the backend's database directly: what someone with database access
/// could do behind agentd's back.
async fn tamper(backend: &Backend, statement: &str) {
    use sqlx::Connection;
    let statement = sqlx::AssertSqlSafe(statement.to_string());
    if backend.url.starts_with("sqlite") {
        let mut connection = sqlx::SqliteConnection::connect(&backend.url)
            .await
            .expect("sqlite");
        sqlx::query(statement)
            .execute(&mut connection)
            .await
            .expect("tampered");
    } else {
        let mut connection = sqlx::PgConnection::connect(&backend.url)
            .await
            .expect("postgres");
        sqlx::query(statement)
            .execute(&mut connection)
            .await
            .expect("tampered");
    }
}

pub async fn the_audit_chain_verifies_and_names_an_edited_or_missing_row(backend: &Backend) {
    let store = backend.open().await;
    assert!(verify(store.as_ref()).await.expect("verify").ok, "empty");
    for (n, action) in [
        AuditAction::SecretSet,
        AuditAction::RunCancelled,
        AuditAction::SecretDeleted,
        AuditAction::ApprovalDecided,
        AuditAction::UserErased,
    ]
    .into_iter()
    .enumerate()
    {
        let user = if n % 2 == 0 { "alice" } else { "bob" };
        let row = agentd::audit::record(
            store.as_ref(),
            event(user, action, &format!("thing-{n}"))
                .with_details(json!({"n": n, "note": "ünïcode ✓"})),
        )
        .await
        .expect("appended");
        assert_eq!(row.seq, n as i64 + 1);
        assert!(row.hash_matches());
    }
    let all = store
        .list_audit(&AuditFilter {
            limit: 100,
            ..AuditFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(all.len(), 5);
    assert!(all.windows(2).all(|w| w[1].prev_hash == w[0].hash));
    assert!(all.iter().all(|row| row.hash_matches()), "read back whole");
    let bobs = store
        .list_audit(&AuditFilter {
            actor: Some("bob".into()),
            limit: 100,
            ..AuditFilter::default()
        })
        .await
        .expect("by actor");
    assert_eq!(bobs.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 4]);
    let by_key = store
        .list_audit(&AuditFilter {
            actor: Some("key-alice".into()),
            action: Some("secret.deleted".into()),
            limit: 100,
            ..AuditFilter::default()
        })
        .await
        .expect("by key and action");
    assert_eq!(by_key.iter().map(|r| r.seq).collect::<Vec<_>>(), [3]);
    let later = store
        .list_audit(&AuditFilter {
            from: Some(all[0].entry.at + chrono::Duration::days(1)),
            limit: 100,
            ..AuditFilter::default()
        })
        .await
        .expect("by time");
    assert!(later.is_empty());
    let verification = verify(store.as_ref()).await.expect("verify");
    assert!(verification.ok, "{verification:?}");
    assert_eq!(verification.rows, 5);

    tamper(backend, "UPDATE audit SET target = 'nothing' WHERE seq = 3").await;
    let verification = verify(store.as_ref()).await.expect("verify");
    assert!(!verification.ok);
    assert_eq!(verification.broken.as_ref().map(|b| b.seq), Some(3));

    tamper(backend, "UPDATE audit SET target = 'thing-2' WHERE seq = 3").await;
    assert!(verify(store.as_ref()).await.expect("verify").ok, "restored");
    tamper(backend, "DELETE FROM audit WHERE seq = 4").await;
    let verification = verify(store.as_ref()).await.expect("verify");
    assert_eq!(
        verification.broken.map(|b| (b.seq, b.reason)),
        Some((5, "rows 4 to 4 are missing".to_string()))
    );
    tamper(backend, "DELETE FROM audit WHERE seq = 5").await;
    let verification = verify(store.as_ref()).await.expect("verify");
    assert_eq!(
        verification.broken.map(|b| b.seq),
        Some(3),
        "a cut tail shows against the head"
    );
}

pub async fn appends_from_two_replicas_at_once_never_fork_the_chain(backend: &Backend) {
    let replicas: [Arc<dyn Store>; 2] = [backend.open().await, backend.open().await];
    let mut appends = Vec::new();
    for n in 0..40 {
        let store = Arc::clone(&replicas[n % 2]);
        appends.push(tokio::spawn(async move {
            agentd::audit::record(
                store.as_ref(),
                event("alice", AuditAction::KeyCreated, &format!("key-{n}")),
            )
            .await
            .expect("appended")
            .seq
        }));
    }
    let mut seqs = Vec::new();
    for append in appends {
        seqs.push(append.await.expect("task"));
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=40).collect::<Vec<i64>>(), "one place each");
    let verification = verify(replicas[0].as_ref()).await.expect("verify");
    assert!(verification.ok, "{verification:?}");
    assert_eq!(verification.rows, 40);
}

fn accounting(kind: &str, model: Option<&str>, usage: EntryUsage) -> AccountingRecord {
    AccountingRecord {
        entry_type: kind.into(),
        provider: Some("llm".into()),
        model: model.map(Into::into),
        tool: (kind == "tool").then(|| "now".into()),
        status: "ok".into(),
        ts: at(1),
        entry: json!({"type": kind}).into(),
        usage,
    }
}

fn tokens(input: i64, output: i64, reasoning: i64, cost_usd: f64) -> EntryUsage {
    EntryUsage {
        input_tokens: input,
        output_tokens: output,
        cached_tokens: input / 2,
        reasoning_tokens: reasoning,
        cost_usd,
    }
}

fn finished(id: &str, user: &str, key: &str, agent: &str, days: i64) -> RunWrite {
    let mut run = new_run(id, Some(user));
    run.agent = agent.into();
    run.key_id = Some(key.into());
    run.created_at = at(days * 86_400);
    let mut end = outcome();
    end.accounting = vec![
        accounting("llm", Some("m1"), tokens(100, 10, 4, 0.5)),
        accounting("tool", None, EntryUsage::default()),
        accounting("llm", Some("m2"), tokens(200, 20, 0, 1.0)),
    ];
    RunWrite {
        run,
        outcome: Some(end),
    }
}

pub async fn usage_is_summed_per_group_and_scoped_to_a_user(backend: &Backend) {
    let store = backend.open().await;
    let batch = RunBatch {
        runs: vec![
            finished("u1", "alice", "ka", "chat", 0),
            finished("u2", "alice", "ka", "report", 1),
            finished("u3", "bob", "kb", "chat", 1),
            finished("old", "bob", "kb", "chat", -40),
        ],
        events: Vec::new(),
    };
    store.write_run_batch(&batch).await.expect("written");
    let query = |group, user: Option<&str>| UsageQuery {
        group,
        from: at(-86_400),
        to: at(10 * 86_400),
        user: user.map(Into::into),
    };
    let by_user = store
        .usage(&query(UsageGroup::User, None))
        .await
        .expect("usage");
    let summary: Vec<_> = by_user
        .iter()
        .map(|r| {
            (
                r.group.clone().unwrap_or_default(),
                r.runs,
                r.input_tokens,
                r.output_tokens,
                r.reasoning_tokens,
                r.tool_calls,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alice".to_string(), 2, 600, 60, 8, 2),
            ("bob".to_string(), 1, 300, 30, 4, 1)
        ],
        "the run before the range is left out"
    );
    assert!((by_user[0].cost_usd - 3.0).abs() < 1e-9);
    assert_eq!(by_user[0].cached_tokens, 300);

    let by_model = store
        .usage(&query(UsageGroup::Model, None))
        .await
        .expect("usage");
    let models: Vec<_> = by_model
        .iter()
        .map(|r| (r.group.clone(), r.runs, r.input_tokens, r.tool_calls))
        .collect();
    assert_eq!(
        models,
        [
            (Some("m1".to_string()), 3, 300, 0),
            (Some("m2".to_string()), 3, 600, 0)
        ]
    );
    let by_key = store
        .usage(&query(UsageGroup::Key, None))
        .await
        .expect("usage");
    assert_eq!(
        by_key.iter().map(|r| r.group.clone()).collect::<Vec<_>>(),
        [Some("ka".to_string()), Some("kb".to_string())]
    );
    let by_day = store
        .usage(&query(UsageGroup::Day, None))
        .await
        .expect("usage");
    assert_eq!(
        by_day
            .iter()
            .map(|r| (r.group.clone().unwrap_or_default(), r.runs))
            .collect::<Vec<_>>(),
        [("2026-11-21".to_string(), 1), ("2026-11-22".to_string(), 2)]
    );
    let alices = store
        .usage(&query(UsageGroup::Agent, Some("alice")))
        .await
        .expect("usage");
    assert_eq!(
        alices
            .iter()
            .map(|r| (r.group.clone().unwrap_or_default(), r.runs))
            .collect::<Vec<_>>(),
        [("chat".to_string(), 1), ("report".to_string(), 1)]
    );
}

fn event_at(
    run_id: &str,
    seq: i64,
    ts: chrono::DateTime<chrono::Utc>,
) -> agentd::store::NewRunEvent {
    agentd::store::NewRunEvent {
        run_id: run_id.into(),
        seq,
        event_type: "output".into(),
        data: json!({"text": "x"}).into(),
        ts,
    }
}

pub async fn retention_sweeps_expired_rows_in_batches_under_one_lease(backend: &Backend) {
    use agentd::config::retention::RetentionConfig;
    use agentd::runtime::retention::sweep_once;
    use agentd::store::RetainedKind;
    let store = backend.open().await;
    let now = chrono::Utc::now();
    let mut recent = finished("recent", "alice", "ka", "chat", 0);
    if let Some(end) = recent.outcome.as_mut() {
        end.finished_at = now;
    }
    let batch = RunBatch {
        runs: vec![
            finished("old-1", "alice", "ka", "chat", 0),
            finished("old-2", "bob", "kb", "chat", 0),
            finished("old-3", "bob", "kb", "chat", 0),
            recent,
        ],
        events: vec![
            event_at("old-1", 1, at(0)),
            event_at("old-1", 2, at(1)),
            event_at("old-2", 1, at(2)),
            event_at("recent", 1, now),
        ],
    };
    store.write_run_batch(&batch).await.expect("written");
    let config: RetentionConfig = serde_json::from_value(json!({
        "runs": "1d", "events": "1d", "audit": "30d", "batchSize": 2, "pauseMs": 1,
    }))
    .expect("config");
    let stop = tokio_util::sync::CancellationToken::new();
    let other = sweep_once(store.as_ref(), "replica-b", &config, &stop);
    let report = sweep_once(store.as_ref(), "replica-a", &config, &stop)
        .await
        .expect("sweep");
    assert!(report.swept);
    assert_eq!(report.deleted(RetainedKind::Runs), 3, "{report:?}");
    // Rows, not events: a batch stores a run's consecutive events in one row.
    assert_eq!(report.deleted(RetainedKind::Events), 2, "{report:?}");
    assert!(store.get_run("old-1").await.expect("get").is_none());
    assert!(store.get_run("recent").await.expect("get").is_some());
    assert!(
        store
            .list_accounting("old-2")
            .await
            .expect("accounting")
            .is_empty(),
        "a run's accounting goes with it"
    );
    assert_eq!(
        store
            .list_run_events("recent", 0, 100)
            .await
            .expect("events")
            .len(),
        1
    );
    // One replica at a time: another one's sweep finds the lease held.
    let skipped = other.await.expect("sweep");
    assert!(!skipped.swept, "{skipped:?}");
    let taken = store
        .take_lease(
            agentd::store::RETENTION_LEASE,
            "replica-b",
            now + chrono::Duration::minutes(2),
            now + chrono::Duration::minutes(3),
        )
        .await
        .expect("lease");
    assert!(taken, "an expired lease passes to another replica");
}
