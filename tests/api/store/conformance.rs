//! The checks every store backend must pass identically.

use std::sync::Arc;

use agentd::store::{
    AccountingRecord, ConversationCursor, NewConversation, NewMessage, NewRun, NewRunEvent,
    RunOutcome, Store, StoreError,
};
use chrono::{DateTime, Utc};
use serde_json::json;

use super::Backend;
use super::cache_conformance;

/// A fixed instant with microseconds, plus `seconds`.
pub fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-21T10:00:00.123456Z")
        .expect("time")
        .with_timezone(&Utc)
        + chrono::Duration::seconds(seconds)
}

fn conversation(id: &str, user: &str, created: i64) -> NewConversation {
    NewConversation {
        id: id.into(),
        user_id: user.into(),
        agent: "chat".into(),
        title: Some(format!("about {id}")),
        created_at: at(created),
    }
}

fn message(role: &str, content: &str, seconds: i64) -> NewMessage {
    NewMessage {
        role: role.into(),
        content: Some(content.into()),
        tool_calls: None,
        tool_call_id: None,
        reasoning: None,
        created_at: at(seconds),
    }
}

fn event(run_id: &str, seq: i64) -> NewRunEvent {
    NewRunEvent {
        run_id: run_id.into(),
        seq,
        event_type: if seq == 1 { "run.started" } else { "output" }.into(),
        data: json!({"text": format!("chunk {seq} ✓"), "n": seq}),
        ts: at(seq),
    }
}

fn new_run(id: &str, user: Option<&str>) -> NewRun {
    NewRun {
        id: id.into(),
        agent: "chat".into(),
        user_id: user.map(Into::into),
        conversation_id: Some("c-1".into()),
        created_at: at(0),
    }
}

fn outcome() -> RunOutcome {
    RunOutcome {
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
        total_tokens: 17,
        cost_usd: 0.0125,
        turns: 1,
        finished_at: at(1) + chrono::Duration::milliseconds(500),
        duration_ms: 1500,
        result: Some(json!({"run_id": "r", "exit_reason": "final_answer"})),
        accounting: vec![
            AccountingRecord {
                entry_type: "llm".into(),
                provider: Some("llm".into()),
                model: Some("m1".into()),
                tool: None,
                status: "failed".into(),
                ts: at(1),
                entry: json!({"type": "llm", "status": "failed", "error": "HTTP 500"}),
            },
            AccountingRecord {
                entry_type: "tool".into(),
                provider: Some("time".into()),
                model: None,
                tool: Some("now".into()),
                status: "ok".into(),
                ts: at(2),
                entry: json!({"type": "tool", "mcpServer": "time", "command": "now"}),
            },
        ],
    }
}

pub async fn runs_are_recorded_with_their_outcome_and_accounting(backend: &Backend) {
    let store = backend.open().await;
    store.ping().await.expect("ping");
    store
        .insert_run(&new_run("r-1", Some("alice")))
        .await
        .expect("insert");
    let started = store.get_run("r-1").await.expect("get").expect("exists");
    assert_eq!(started.status, "running");
    assert_eq!(started.user_id.as_deref(), Some("alice"));
    assert_eq!(started.created_at, at(0));
    assert_eq!((started.success, started.result.as_ref()), (None, None));
    assert!(matches!(
        store.insert_run(&new_run("r-1", None)).await,
        Err(StoreError::Conflict { what: "run", .. })
    ));

    let outcome = outcome();
    store.finish_run("r-1", &outcome).await.expect("finish");
    let finished = store.get_run("r-1").await.expect("get").expect("exists");
    assert_eq!(finished.status, "completed");
    assert_eq!(finished.exit_reason.as_deref(), Some("final_answer"));
    assert_eq!(finished.success, Some(true));
    assert_eq!(finished.final_report, outcome.final_report);
    assert_eq!(finished.result, outcome.result);
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

pub async fn conversations_are_listed_newest_first_page_by_page(backend: &Backend) {
    let store = backend.open().await;
    for (n, id) in ["c-1", "c-2", "c-3", "c-4", "c-5"].iter().enumerate() {
        let created = store
            .create_conversation(&conversation(id, "alice", n as i64))
            .await
            .expect("create");
        assert_eq!(created.updated_at, at(n as i64));
    }
    // Same instant as c-4, so the tie (ordered by id) falls across a page boundary.
    store
        .create_conversation(&conversation("c-0", "alice", 3))
        .await
        .expect("create");
    assert!(matches!(
        store
            .create_conversation(&conversation("c-1", "alice", 9))
            .await,
        Err(StoreError::Conflict {
            what: "conversation",
            ..
        })
    ));
    let mut seen = Vec::new();
    let mut cursor: Option<ConversationCursor> = None;
    loop {
        let page = store
            .list_conversations("alice", cursor.as_ref(), 2)
            .await
            .expect("page");
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        cursor = Some(last.cursor());
        seen.extend(page.iter().map(|c| c.id.clone()));
    }
    assert_eq!(seen, ["c-5", "c-4", "c-0", "c-3", "c-2", "c-1"]);
    let got = store
        .get_conversation("alice", "c-3")
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(
        (got.agent.as_str(), got.title.as_deref(), got.created_at),
        ("chat", Some("about c-3"), at(2))
    );
}

pub async fn no_query_returns_another_users_rows(backend: &Backend) {
    let store = backend.open().await;
    store
        .create_conversation(&conversation("alice-chat", "alice", 0))
        .await
        .expect("create");
    store
        .append_messages("alice", "alice-chat", &[message("user", "my secret", 1)])
        .await
        .expect("append");
    assert!(
        store
            .get_conversation("bob", "alice-chat")
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .list_conversations("bob", None, 10)
            .await
            .expect("list")
            .is_empty()
    );
    let cursor = ConversationCursor {
        updated_at: at(100),
        id: "zzz".into(),
    };
    assert!(
        store
            .list_conversations("bob", Some(&cursor), 10)
            .await
            .expect("list")
            .is_empty()
    );
    assert!(
        store
            .list_messages("bob", "alice-chat", 0, 10)
            .await
            .expect("list")
            .is_empty()
    );
    assert!(matches!(
        store
            .append_messages("bob", "alice-chat", &[message("user", "injected", 2)])
            .await,
        Err(StoreError::NotFound {
            what: "conversation",
            ..
        })
    ));
    assert!(
        !store
            .delete_conversation("bob", "alice-chat")
            .await
            .expect("delete")
    );

    let messages = store
        .list_messages("alice", "alice-chat", 0, 10)
        .await
        .expect("list");
    let contents: Vec<_> = messages.iter().map(|m| m.content.as_deref()).collect();
    assert_eq!(contents, [Some("my secret")], "bob changed nothing");
    assert!(
        store
            .delete_conversation("alice", "alice-chat")
            .await
            .expect("delete")
    );
    assert!(
        store
            .get_conversation("alice", "alice-chat")
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .list_messages("alice", "alice-chat", 0, 10)
            .await
            .expect("list")
            .is_empty(),
        "messages go with their conversation"
    );
}

pub async fn messages_keep_their_order_and_fields(backend: &Backend) {
    let store = backend.open().await;
    store
        .create_conversation(&conversation("old", "alice", 0))
        .await
        .expect("create");
    store
        .create_conversation(&conversation("new", "alice", 1))
        .await
        .expect("create");
    let mut with_tools = message("assistant", "", 5);
    with_tools.content = None;
    with_tools.tool_calls =
        Some(json!([{"id": "call-1", "name": "time__now", "arguments": "{\"tz\":\"UTC\"}"}]));
    with_tools.reasoning = Some("need the time".into());
    let mut tool_reply = message("tool", "10:00", 6);
    tool_reply.tool_call_id = Some("call-1".into());
    let first = [message("user", "what time is it?", 4), with_tools.clone()];
    assert_eq!(
        store
            .append_messages("alice", "old", &first)
            .await
            .expect("append"),
        [1, 2]
    );
    let second = [tool_reply.clone(), message("assistant", "It is 10:00 ✓", 7)];
    assert_eq!(
        store
            .append_messages("alice", "old", &second)
            .await
            .expect("append"),
        [3, 4]
    );
    assert!(
        store
            .append_messages("alice", "old", &[])
            .await
            .expect("append")
            .is_empty()
    );

    let messages = store
        .list_messages("alice", "old", 0, 100)
        .await
        .expect("list");
    assert_eq!(
        messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(messages[1].content, None);
    assert_eq!(messages[1].tool_calls, with_tools.tool_calls);
    assert_eq!(messages[1].reasoning.as_deref(), Some("need the time"));
    assert_eq!(messages[2].tool_call_id.as_deref(), Some("call-1"));
    assert_eq!(messages[3].content.as_deref(), Some("It is 10:00 ✓"));
    assert_eq!(messages[3].created_at, at(7));
    let after_two = store
        .list_messages("alice", "old", 2, 1)
        .await
        .expect("list");
    assert_eq!(after_two.iter().map(|m| m.seq).collect::<Vec<_>>(), [3]);

    let listed = store
        .list_conversations("alice", None, 10)
        .await
        .expect("list");
    assert_eq!(
        listed[0].id, "old",
        "appending makes a conversation the newest"
    );
    assert_eq!(listed[0].updated_at, at(7));
}

pub async fn concurrent_appenders_get_unique_ordered_seqs(backend: &Backend) {
    let store = backend.open().await;
    store
        .create_conversation(&conversation("busy", "alice", 0))
        .await
        .expect("create");
    let tasks: Vec<_> = (0..50)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let pair = [
                    message("user", &format!("q{task}"), task),
                    message("assistant", &format!("a{task}"), task),
                ];
                store.append_messages("alice", "busy", &pair).await
            })
        })
        .collect();
    for task in tasks {
        let seqs = task.await.expect("task").expect("append");
        assert_eq!(seqs[1], seqs[0] + 1, "one append's messages stay together");
    }
    let messages = store
        .list_messages("alice", "busy", 0, 1000)
        .await
        .expect("list");
    assert_eq!(
        messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=100).collect::<Vec<_>>()
    );
    for pair in messages.chunks(2) {
        let question = pair[0].content.as_deref().unwrap_or_default();
        let answer = pair[1].content.as_deref().unwrap_or_default();
        assert_eq!(
            question.replace('q', "a"),
            answer,
            "pairs are not interleaved"
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
    store
        .insert_run(&new_run("kept", Some("alice")))
        .await
        .expect("run");
    store.finish_run("kept", &outcome()).await.expect("finish");
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
    assert_eq!(run.status, "completed");
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
