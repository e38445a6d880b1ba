//! The checks every store backend must pass identically.

use std::sync::Arc;

use agentd::store::{
    AccountingRecord, NewConversation, NewMessage, NewRun, NewRunEvent, RunBatch, RunOutcome,
    RunWrite, Store, StoreError,
};
use chrono::{DateTime, Utc};
use serde_json::json;

use super::Backend;
use super::cache_conformance;
pub use super::conversation_checks::{
    concurrent_appenders_get_unique_ordered_seqs,
    conversations_are_listed_newest_first_page_by_page,
    conversations_are_renamed_searched_and_truncated, messages_keep_their_order_and_fields,
    no_query_returns_another_users_rows,
};
use super::key_limit_conformance;

/// A fixed instant with microseconds, plus `seconds`.
pub fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-21T10:00:00.123456Z")
        .expect("time")
        .with_timezone(&Utc)
        + chrono::Duration::seconds(seconds)
}

pub fn conversation(id: &str, user: &str, created: i64) -> NewConversation {
    NewConversation {
        id: id.into(),
        user_id: user.into(),
        agent: "chat".into(),
        title: Some(format!("about {id}")),
        created_at: at(created),
    }
}

pub fn message(role: &str, content: &str, seconds: i64) -> NewMessage {
    NewMessage {
        role: role.into(),
        content: Some(content.into()),
        tool_calls: None,
        tool_call_id: None,
        reasoning: None,
        created_at: at(seconds),
        attachments: None,
    }
}

fn event(run_id: &str, seq: i64) -> NewRunEvent {
    NewRunEvent {
        run_id: run_id.into(),
        seq,
        event_type: if seq == 1 { "run.started" } else { "output" }.into(),
        data: json!({"text": format!("chunk {seq} ✓"), "n": seq}).into(),
        ts: at(seq),
    }
}

pub(super) fn new_run(id: &str, user: Option<&str>) -> NewRun {
    NewRun {
        id: id.into(),
        agent: "chat".into(),
        user_id: user.map(Into::into),
        conversation_id: Some("c-1".into()),
        created_at: at(0),
        owner: None,
        acted_by: None,
        key_id: None,
    }
}

pub(super) fn outcome() -> RunOutcome {
    RunOutcome {
        status: agentd::vocabulary::RunStatus::Completed,
        exit_reason: "final_answer",
        success: true,
        error: None,
        final_report: Some(
            json!({"status": "success", "format": "markdown", "content": "hi ✓", "ts": 1}).into(),
        ),
        input_tokens: 10,
        output_tokens: 5,
        cached_tokens: 2,
        total_tokens: 17,
        cost_usd: 0.0125,
        turns: 1,
        finished_at: at(1) + chrono::Duration::milliseconds(500),
        duration_ms: 1500,
        result: Some(json!({"run_id": "r", "exit_reason": "final_answer"}).into()),
        accounting: vec![
            AccountingRecord {
                entry_type: "llm".into(),
                provider: Some("llm".into()),
                model: Some("m1".into()),
                tool: None,
                status: "failed".into(),
                ts: at(1),
                entry: json!({"type": "llm", "status": "failed", "error": "HTTP 500"}).into(),
                usage: Default::default(),
            },
            AccountingRecord {
                entry_type: "tool".into(),
                provider: Some("time".into()),
                model: None,
                tool: Some("now".into()),
                status: "ok".into(),
                ts: at(2),
                entry: json!({"type": "tool", "mcpServer": "time", "command": "now"}).into(),
                usage: Default::default(),
            },
        ],
        notices: Vec::new(),
    }
}

pub async fn runs_are_recorded_with_their_outcome_and_accounting(backend: &Backend) {
    let store = backend.open().await;
    store.ping().await.expect("ping");
    write_runs(&store, vec![write("r-1", false)]).await;
    let started = store.get_run("r-1").await.expect("get").expect("exists");
    assert_eq!(started.status.as_str(), "running");
    assert_eq!(started.user_id.as_deref(), Some("alice"));
    assert_eq!(started.created_at, at(0));
    assert_eq!((started.success, started.result.as_ref()), (None, None));
    let again = RunWrite {
        run: new_run("r-1", None),
        outcome: None,
    };
    write_runs(&store, vec![again]).await;
    let unchanged = store.get_run("r-1").await.expect("get").expect("exists");
    assert_eq!(unchanged, started, "a second start changes nothing");

    let outcome = outcome();
    write_runs(&store, vec![write("r-1", true)]).await;
    let finished = store.get_run("r-1").await.expect("get").expect("exists");
    assert_eq!(finished.status.as_str(), "completed");
    assert_eq!(finished.exit_reason.as_deref(), Some("final_answer"));
    assert_eq!(finished.success, Some(true));
    assert_eq!(
        finished.final_report,
        outcome.final_report.map(|t| t.to_value())
    );
    assert_eq!(finished.result, outcome.result.map(|t| t.to_value()));
    let tokens = (
        finished.input_tokens,
        finished.output_tokens,
        finished.cached_tokens,
        finished.total_tokens,
    );
    assert_eq!(tokens, (10, 5, 2, 17));
    assert!((finished.cost_usd - 0.0125).abs() < 1e-12);
    assert_eq!(finished.duration_ms, Some(1500));
    assert_eq!(finished.finished_at, Some(outcome.finished_at));
    assert_eq!(
        store.list_accounting("r-1").await.expect("list"),
        outcome.accounting
    );
    assert!(store.list_accounting("r-2").await.expect("list").is_empty());
    assert!(store.get_run("no-such-run").await.expect("get").is_none());
}

async fn write_runs(store: &Arc<dyn Store>, runs: Vec<RunWrite>) {
    let batch = RunBatch {
        runs,
        events: Vec::new(),
    };
    store.write_run_batch(&batch).await.expect("write runs");
}

fn write(id: &str, finished: bool) -> RunWrite {
    RunWrite {
        run: new_run(id, Some("alice")),
        outcome: finished.then(outcome),
    }
}

/// What the run recorder writes: runs whole or as started, their end later, events alongside;
/// every batch idempotent, and a late start never undoes an end.
pub async fn run_batches_insert_finish_and_never_undo_a_finished_run(backend: &Backend) {
    let store = backend.open().await;
    let first = RunBatch {
        runs: vec![write("started", false), write("whole", true)],
        events: vec![event("started", 1), event("whole", 1), event("whole", 2)],
    };
    store.write_run_batch(&first).await.expect("first batch");
    store
        .write_run_batch(&first)
        .await
        .expect("same batch again");
    let started = store
        .get_run("started")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(
        (started.status.as_str(), started.finished_at),
        ("running", None)
    );
    let whole = store.get_run("whole").await.expect("get").expect("stored");
    assert_eq!(whole.status.as_str(), "completed");
    assert_eq!(whole.user_id.as_deref(), Some("alice"));
    assert_eq!(whole.created_at, at(0));
    assert_eq!(whole.result, outcome().result.map(|t| t.to_value()));
    assert_eq!(
        store.list_accounting("whole").await.expect("list"),
        outcome().accounting,
        "accounting once, in order, after the batch was written twice"
    );
    let events = store.list_run_events("whole", 0, 10).await.expect("events");
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);

    let second = RunBatch {
        runs: vec![write("started", true), write("whole", false)],
        events: vec![event("started", 2)],
    };
    store.write_run_batch(&second).await.expect("second batch");
    let ended = store
        .get_run("started")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(ended.status.as_str(), "completed");
    assert_eq!(ended.exit_reason.as_deref(), Some("final_answer"));
    assert_eq!(ended.total_tokens, 17);
    assert_eq!(ended.finished_at, Some(outcome().finished_at));
    assert_eq!(ended.created_at, at(0), "the start is kept");
    assert_eq!(
        store.list_accounting("started").await.expect("list").len(),
        2
    );
    let still = store.get_run("whole").await.expect("get").expect("stored");
    assert_eq!(
        still, whole,
        "a running row never overwrites a finished one"
    );
    store
        .write_run_batch(&RunBatch::default())
        .await
        .expect("an empty batch is nothing to do");
}

/// 60 runs in one batch: more than one multi-row statement of runs and of accounting.
pub async fn a_run_batch_larger_than_one_statement_is_written_whole(backend: &Backend) {
    let store = backend.open().await;
    let ids: Vec<String> = (0..60).map(|n| format!("run-{n}")).collect();
    let batch = RunBatch {
        runs: ids.iter().map(|id| write(id, true)).collect(),
        events: ids.iter().map(|id| event(id, 1)).collect(),
    };
    store.write_run_batch(&batch).await.expect("batch");
    for id in &ids {
        let run = store.get_run(id).await.expect("get").expect("stored");
        assert_eq!(run.status.as_str(), "completed", "{id}");
        assert_eq!(
            store.list_accounting(id).await.expect("list").len(),
            2,
            "{id}"
        );
        assert_eq!(
            store
                .list_run_events(id, 0, 10)
                .await
                .expect("events")
                .len(),
            1
        );
    }
}

pub async fn run_events_are_listed_in_seq_order_after_a_seq(backend: &Backend) {
    let store = backend.open().await;
    // More rows than one INSERT statement carries.
    let events: Vec<_> = (1..=1200).map(|seq| event("run-a", seq)).collect();
    store.append_run_events(&events).await.expect("append");
    store
        .append_run_events(&[event("run-b", 1)])
        .await
        .expect("append");
    store
        .append_run_events(&events[..10])
        .await
        .expect("re-appending is a no-op");
    store
        .append_run_events(&[])
        .await
        .expect("nothing to append");

    let first = store.list_run_events("run-a", 0, 1000).await.expect("list");
    assert_eq!(first.len(), 1000);
    assert_eq!(first[0], events[0], "fields round-trip");
    let rest = store
        .list_run_events("run-a", 1000, 1000)
        .await
        .expect("list");
    assert_eq!(
        rest.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1001..=1200).collect::<Vec<_>>()
    );
    let resumed = store
        .list_run_events("run-a", 1197, 10)
        .await
        .expect("list");
    assert_eq!(
        resumed.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1198, 1199, 1200]
    );
    assert_eq!(
        store
            .list_run_events("run-b", 0, 10)
            .await
            .expect("list")
            .len(),
        1
    );
    assert!(
        store
            .list_run_events("run-c", 0, 10)
            .await
            .expect("list")
            .is_empty()
    );
}

/// A run's last stored seq (where following its new events starts) is found whatever rows hold
/// its events: packed, single, re-appended by a retried write; 0 for a run with none.
pub async fn the_last_stored_event_seq_is_found_past_packed_and_retried_rows(backend: &Backend) {
    let store = backend.open().await;
    assert_eq!(store.last_run_event_seq("run-x").await.expect("last"), 0);
    let x: Vec<_> = (1..=200).map(|seq| event("run-x", seq)).collect();
    store.append_run_events(&x[..150]).await.expect("append");
    assert_eq!(store.last_run_event_seq("run-x").await.expect("last"), 150);
    store.append_run_events(&x[150..151]).await.expect("append");
    assert_eq!(store.last_run_event_seq("run-x").await.expect("last"), 151);
    store.append_run_events(&x[151..]).await.expect("append");
    store
        .append_run_events(&x[140..190])
        .await
        .expect("re-append");
    assert_eq!(store.last_run_event_seq("run-x").await.expect("last"), 200);
    store
        .append_run_events(&[event("run-y", 1)])
        .await
        .expect("append");
    assert_eq!(store.last_run_event_seq("run-y").await.expect("last"), 1);
    assert_eq!(store.last_run_event_seq("run-x").await.expect("last"), 200);
}

/// A run's events that reach one write share a row (migration 0011); every replay position and
/// page size still gives each event once, as appended, whatever mix of rows holds them.
pub async fn events_sharing_rows_replay_event_for_event_from_any_seq(backend: &Backend) {
    let store = backend.open().await;
    let x: Vec<_> = (1..=160)
        .map(|seq| NewRunEvent {
            ts: at(1000 + seq * 7) + chrono::Duration::microseconds(seq * 13),
            ..event("run-x", seq)
        })
        .collect();
    let y: Vec<_> = (1..=3).map(|seq| event("run-y", seq)).collect();
    // Two runs interleaved in one write, more of run-x than one row holds; then a lone event
    // (a row of its own) and a short packed row.
    let mut interleaved = Vec::new();
    for (index, e) in x[..150].iter().enumerate() {
        interleaved.push(e.clone());
        if let Some(other) = y.get(index) {
            interleaved.push(other.clone());
        }
    }
    store.append_run_events(&interleaved).await.expect("append");
    store.append_run_events(&x[150..151]).await.expect("append");
    store.append_run_events(&x[151..]).await.expect("append");
    // A retried write that overlaps stored rows adds nothing a reader sees twice.
    store.append_run_events(&x[4..20]).await.expect("re-append");
    for after in 0..=160_i64 {
        for limit in [1_u32, 7, 64, 1000] {
            let listed = store
                .list_run_events("run-x", after, limit)
                .await
                .expect("list");
            let from = after as usize;
            let to = (from + limit as usize).min(x.len());
            assert_eq!(listed, x[from..to], "after {after}, limit {limit}");
        }
    }
    assert_eq!(
        store.list_run_events("run-y", 0, 10).await.expect("list"),
        y
    );
    assert_eq!(
        store.list_run_events("run-y", 2, 10).await.expect("list"),
        y[2..]
    );
}

pub async fn concurrent_sessions_append_events_without_losing_any(backend: &Backend) {
    let store = backend.open().await;
    let tasks: Vec<_> = (0..50)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let run = format!("run-{task}");
                for batch in 0..4 {
                    let events: Vec<_> = (1..=5).map(|n| event(&run, batch * 5 + n)).collect();
                    store.append_run_events(&events).await?;
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task").expect("append");
    }
    for task in 0..50 {
        let events = store
            .list_run_events(&format!("run-{task}"), 0, 100)
            .await
            .expect("list");
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=20).collect::<Vec<_>>(),
            "run-{task}"
        );
    }
}

pub async fn data_survives_close_and_reopen(backend: &Backend) {
    let store = backend.open().await;
    write_runs(&store, vec![write("kept", false)]).await;
    write_runs(&store, vec![write("kept", true)]).await;
    store
        .create_conversation(&conversation("c", "alice", 0))
        .await
        .expect("create");
    store
        .append_messages("alice", "c", &[message("user", "remember me", 1)])
        .await
        .expect("append");
    store
        .append_run_events(&[event("kept", 1), event("kept", 2)])
        .await
        .expect("events");
    store.close().await;
    assert!(
        store.ping().await.is_err(),
        "a closed store refuses queries"
    );

    let reopened: Arc<dyn Store> = backend.open().await;
    let run = reopened
        .get_run("kept")
        .await
        .expect("get")
        .expect("run kept");
    assert_eq!(run.status.as_str(), "completed");
    assert_eq!(
        reopened.list_accounting("kept").await.expect("list").len(),
        2
    );
    let messages = reopened
        .list_messages("alice", "c", 0, 10)
        .await
        .expect("list");
    assert_eq!(messages[0].content.as_deref(), Some("remember me"));
    assert_eq!(
        reopened
            .list_run_events("kept", 0, 10)
            .await
            .expect("list")
            .len(),
        2
    );
    // Numbering continues where it stopped.
    let seqs = reopened
        .append_messages("alice", "c", &[message("assistant", "I do", 2)])
        .await
        .expect("append");
    assert_eq!(seqs, [2]);
}

pub async fn page_sizes_are_checked_at_and_past_the_limit(backend: &Backend) {
    let store = backend.open().await;
    store
        .create_conversation(&conversation("c", "alice", 0))
        .await
        .expect("create");
    let max = agentd::store::MAX_PAGE_SIZE;
    assert!(store.list_conversations("alice", None, max).await.is_ok());
    assert!(store.list_messages("alice", "c", 0, max).await.is_ok());
    assert!(store.list_run_events("r", 0, max).await.is_ok());
    for bad in [0, max + 1] {
        let errors = [
            store.list_conversations("alice", None, bad).await.err(),
            store.list_messages("alice", "c", 0, bad).await.err(),
            store.list_run_events("r", 0, bad).await.err(),
        ];
        for error in errors {
            let text = error.map(|e| e.to_string()).unwrap_or_default();
            assert!(
                text.contains(&format!("page size {bad}")) && text.contains("1 to 1000"),
                "{text}"
            );
        }
    }
}

pub async fn cache_entries_expire_and_are_removed(backend: &Backend) {
    let store = backend.open().await;
    let cache = agentd::cache::StoreCache::new(store, 100);
    cache_conformance::entries_expire_and_are_removed(&cache).await;
}

pub async fn cache_evicts_least_recently_used_past_max_entries(backend: &Backend) {
    let store = backend.open().await;
    let cache = agentd::cache::StoreCache::new(store, 3);
    cache_conformance::least_recently_used_are_evicted_past_three(&cache).await;
}

pub async fn key_run_slots_are_held_until_released_or_their_lease_runs_out(backend: &Backend) {
    let [counter, _] = key_limit_conformance::store_counters(backend).await;
    key_limit_conformance::run_slots_are_held_until_released_or_their_lease_runs_out(
        counter.as_ref(),
    )
    .await;
}

pub async fn key_run_slots_claimed_by_two_replicas_at_once_stay_within_the_limit(
    backend: &Backend,
) {
    let counters = key_limit_conformance::store_counters(backend).await;
    key_limit_conformance::concurrent_claims_never_hand_out_more_slots_than_the_limit(counters)
        .await;
}

pub async fn key_requests_are_counted_once_each_per_window(backend: &Backend) {
    let counters = key_limit_conformance::store_counters(backend).await;
    key_limit_conformance::requests_are_counted_once_each_per_window(counters).await;
}

pub async fn key_usage_adds_up_per_key_and_day(backend: &Backend) {
    let counters = key_limit_conformance::store_counters(backend).await;
    key_limit_conformance::usage_adds_up_per_key_and_day(counters).await;
}
