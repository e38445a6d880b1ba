//! The conversation and message checks of the conformance suite: ordering, paging, user
//! isolation and concurrent appenders.

use std::sync::Arc;

use agentd::store::{ConversationCursor, StoreError};
use serde_json::json;

use super::Backend;
use super::conformance::{at, conversation, message};

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

/// Rename, title search (wildcards taken literally) and truncation for an edited message: the
/// removed messages are gone, the next one takes the first removed number, and another user's
/// conversation of the same id is untouched.
pub async fn conversations_are_renamed_searched_and_truncated(backend: &Backend) {
    let store = backend.open().await;
    for (n, id) in ["s-1", "s-2", "s-3"].iter().enumerate() {
        store
            .create_conversation(&conversation(id, "alice", n as i64))
            .await
            .expect("create");
    }
    store
        .create_conversation(&conversation("s-1", "bob", 0))
        .await
        .expect("bob's");
    let renamed = store
        .rename_conversation("alice", "s-1", "Trip to 100% Rome_plan")
        .await
        .expect("rename")
        .expect("exists");
    assert_eq!(renamed.title.as_deref(), Some("Trip to 100% Rome_plan"));
    assert_eq!(
        renamed.updated_at,
        at(0),
        "a rename keeps the listing order"
    );
    assert_eq!(
        store
            .rename_conversation("alice", "nope", "x")
            .await
            .expect("rename"),
        None
    );
    let found = |query: &'static str| {
        let store = store.clone();
        async move {
            store
                .search_conversations("alice", query, None, 10)
                .await
                .expect("search")
                .into_iter()
                .map(|c| c.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(found("ROME").await, ["s-1"]);
    assert_eq!(found("100%").await, ["s-1"]);
    assert_eq!(found("0% r").await, ["s-1"]);
    assert_eq!(found("e_p").await, ["s-1"]);
    assert_eq!(
        found("_").await,
        ["s-1"],
        "`_` is a character, not a wildcard"
    );
    assert_eq!(found("about").await, ["s-3", "s-2"]);
    let page = store
        .search_conversations("alice", "about", None, 1)
        .await
        .expect("page");
    let rest = store
        .search_conversations("alice", "about", Some(&page[0].cursor()), 1)
        .await
        .expect("next page");
    assert_eq!(rest[0].id, "s-2");
    assert!(
        store
            .search_conversations("bob", "rome", None, 10)
            .await
            .expect("bob")
            .is_empty()
    );

    let messages: Vec<_> = (0..4)
        .map(|n| {
            message(
                if n % 2 == 0 { "user" } else { "assistant" },
                &format!("m{n}"),
                n,
            )
        })
        .collect();
    store
        .append_messages("alice", "s-1", &messages)
        .await
        .expect("append");
    store
        .append_messages("bob", "s-1", &messages[..1])
        .await
        .expect("bob's message");
    assert_eq!(
        store
            .truncate_messages("alice", "s-1", 3)
            .await
            .expect("truncate"),
        2
    );
    let seqs = store
        .append_messages("alice", "s-1", &[message("user", "edited", 9)])
        .await
        .expect("append after");
    assert_eq!(seqs, [3]);
    let kept: Vec<_> = store
        .list_messages("alice", "s-1", 0, 10)
        .await
        .expect("list")
        .into_iter()
        .map(|m| (m.seq, m.content.unwrap_or_default()))
        .collect();
    assert_eq!(
        kept,
        [
            (1, "m0".into()),
            (2, "m1".into()),
            (3, "edited".to_string())
        ]
    );
    assert_eq!(
        store
            .truncate_messages("alice", "s-1", 99)
            .await
            .expect("past the end"),
        0
    );
    assert_eq!(
        store
            .append_messages("alice", "s-1", &[message("assistant", "a", 10)])
            .await
            .expect("numbering kept"),
        [4]
    );
    assert!(matches!(
        store.truncate_messages("alice", "nope", 1).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        store
            .list_messages("bob", "s-1", 0, 10)
            .await
            .expect("bob's")
            .len(),
        1
    );
}
