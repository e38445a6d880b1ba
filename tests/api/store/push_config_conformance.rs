//! A2A push-notification configs on both backends (SPEC §13): a config reads back whole for its
//! owner only, a second put of the same id replaces it, the runtime's listing holds every
//! owner's, delete removes once; an outbox message keeps its extra headers and its id.

use agentd::store::{NewDelivery, PushConfig};
use chrono::{SubsecRound, TimeDelta, Utc};

use super::Backend;

fn config(owner: &str, id: &str, url: &str) -> PushConfig {
    PushConfig {
        task_id: "task-1".into(),
        owner: owner.into(),
        id: id.into(),
        url: url.into(),
        token: Some("tok".into()),
        auth_scheme: Some("Bearer".into()),
        auth_credentials: Some("secret".into()),
        dialect: "1.0".into(),
        created_at: Utc::now().trunc_subsecs(6),
    }
}

pub async fn push_configs_are_kept_per_owner_replaced_and_deleted_once(backend: &Backend) {
    let store = backend.open().await;
    let alices = config("alice", "a", "https://example.com/a");
    store.put_push_config(&alices).await.expect("stored");
    let bobs = config("bob", "a", "https://example.com/b");
    store.put_push_config(&bobs).await.expect("stored");
    assert_eq!(
        store
            .push_config("task-1", "alice", "a")
            .await
            .expect("read"),
        Some(alices.clone())
    );
    assert_eq!(
        store
            .push_config("task-1", "carol", "a")
            .await
            .expect("read"),
        None
    );
    let replaced = PushConfig {
        url: "https://example.com/a2".into(),
        token: None,
        ..alices.clone()
    };
    store.put_push_config(&replaced).await.expect("replaced");
    let alices_list = store
        .list_push_configs("task-1", Some("alice"))
        .await
        .expect("listed");
    assert_eq!(alices_list, vec![replaced]);
    let everyones = store
        .list_push_configs("task-1", None)
        .await
        .expect("listed");
    assert_eq!(everyones.len(), 2);
    assert!(
        !store
            .delete_push_config("task-1", "carol", "a")
            .await
            .expect("deleted"),
        "another owner deletes nothing"
    );
    assert!(
        store
            .delete_push_config("task-1", "alice", "a")
            .await
            .expect("deleted")
    );
    assert!(
        !store
            .delete_push_config("task-1", "alice", "a")
            .await
            .expect("deleted")
    );
    assert_eq!(
        store
            .list_push_configs("task-1", None)
            .await
            .expect("listed"),
        vec![bobs]
    );

    let now = Utc::now().trunc_subsecs(6);
    let message = NewDelivery {
        id: "msg_push".into(),
        url: "https://example.com/a".into(),
        signer: agentd::store::Signer::Unsigned,
        event: "a2a.task".into(),
        payload: "{}".into(),
        user_id: Some("alice".into()),
        run_id: Some("task-1".into()),
        headers: Some(r#"{"X-A2A-Notification-Token":"tok"}"#.into()),
        created_at: now,
    };
    // The same id twice is one message.
    store
        .enqueue_deliveries(&[message.clone(), message.clone()])
        .await
        .expect("enqueued");
    let leased = store
        .lease_due_deliveries(
            "r1",
            now + TimeDelta::seconds(1),
            now + TimeDelta::minutes(1),
            10,
        )
        .await
        .expect("leased");
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].headers, message.headers);
    assert_eq!(leased[0].signer, Some(agentd::store::Signer::Unsigned));
}

/// A store opened on a database that holds a config lists it, and one opened on a database
/// without any lists a config stored after it opened: SQLite answers "no configs" from memory
/// until one is stored, so this is what keeps that answer honest.
pub async fn configs_stored_before_or_after_a_store_opens_are_listed(backend: &Backend) {
    let before = backend.open().await;
    assert!(
        before
            .list_push_configs("task-1", None)
            .await
            .expect("listed")
            .is_empty()
    );
    let first = config("alice", "a", "https://example.com/a");
    before.put_push_config(&first).await.expect("stored");
    assert_eq!(
        before
            .list_push_configs("task-1", None)
            .await
            .expect("listed"),
        vec![first.clone()],
        "stored after the store opened"
    );
    let reopened = backend.open().await;
    assert_eq!(
        reopened
            .list_push_configs("task-1", None)
            .await
            .expect("listed"),
        vec![first],
        "stored before the store opened"
    );
}
