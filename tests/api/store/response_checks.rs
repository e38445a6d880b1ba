//! The Responses API's table on both backends (SPEC §9.1): a stored response reads back whole,
//! only for its own user, a repeated id is a conflict, and delete removes it once.

use agentd::store::{StoreError, StoredResponse};
use chrono::{SubsecRound, Utc};
use serde_json::json;

use super::Backend;

fn response(id: &str, user: &str) -> StoredResponse {
    StoredResponse {
        id: id.into(),
        run_id: format!("run-of-{id}"),
        user_key: user.into(),
        previous_response_id: Some("resp_before".into()),
        request: json!({"model": "chat", "metadata": {"k": "v"}}),
        input_items: json!([{"type": "message", "id": "in_1", "content": "hi ✓"}]),
        created_at: Utc::now().trunc_subsecs(6),
    }
}

pub async fn responses_are_kept_per_user_and_deleted_once(backend: &Backend) {
    let store = backend.open().await;
    let alice = response("resp_a", "alice");
    store.put_response(&alice).await.expect("stored");
    assert_eq!(
        store.get_response("alice", "resp_a").await.expect("read"),
        Some(alice.clone())
    );
    assert_eq!(
        store.get_response("bob", "resp_a").await.expect("read"),
        None,
        "another user's response is not found"
    );
    assert!(matches!(
        store.put_response(&alice).await,
        Err(StoreError::Conflict { .. })
    ));
    assert!(
        !store
            .delete_response("bob", "resp_a")
            .await
            .expect("delete")
    );
    assert!(
        store
            .delete_response("alice", "resp_a")
            .await
            .expect("delete")
    );
    assert!(
        !store
            .delete_response("alice", "resp_a")
            .await
            .expect("delete")
    );
    assert_eq!(
        store.get_response("alice", "resp_a").await.expect("read"),
        None
    );
}
