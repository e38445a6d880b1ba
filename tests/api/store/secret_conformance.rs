//! Users' sealed tool secrets on both backends: a row reads back whole for its own user only,
//! a second put replaces it, listings hold names and times in name order, delete removes once.

use agentd::store::SealedSecret;
use chrono::{SubsecRound, TimeDelta, Utc};

use super::Backend;

fn sealed(user: &str, name: &str, bytes: &[u8]) -> SealedSecret {
    SealedSecret {
        user_id: user.into(),
        name: name.into(),
        nonce: vec![7; 12],
        ciphertext: bytes.to_vec(),
        updated_at: Utc::now().trunc_subsecs(6),
    }
}

pub async fn secrets_are_kept_per_user_replaced_listed_and_deleted_once(backend: &Backend) {
    let store = backend.open().await;
    // Bytes that are not UTF-8, a NUL among them: the column holds bytes.
    let first = sealed("alice", "TOKEN", &[0, 159, 146, 150, 255]);
    store.put_secret(&first).await.expect("stored");
    assert_eq!(
        store.get_secret("alice", "TOKEN").await.expect("read"),
        Some(first.clone())
    );
    assert_eq!(store.get_secret("bob", "TOKEN").await.expect("read"), None);
    assert_eq!(
        store.get_secret("alice", "token").await.expect("read"),
        None,
        "names are exact"
    );

    let mut second = sealed("alice", "TOKEN", b"new bytes");
    second.updated_at = first.updated_at + TimeDelta::seconds(1);
    store.put_secret(&second).await.expect("replaced");
    store
        .put_secret(&sealed("alice", "A-first", b"a"))
        .await
        .expect("stored");
    store
        .put_secret(&sealed("bob", "TOKEN", b"bob's"))
        .await
        .expect("stored");
    assert_eq!(
        store.get_secret("alice", "TOKEN").await.expect("read"),
        Some(second.clone())
    );
    let names = store.list_secrets("alice").await.expect("listed");
    let listed: Vec<&str> = names.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(listed, ["A-first", "TOKEN"]);
    assert_eq!(names[1].updated_at, second.updated_at);
    assert!(
        store
            .list_secrets("carol")
            .await
            .expect("listed")
            .is_empty()
    );

    assert!(!store.delete_secret("carol", "TOKEN").await.expect("delete"));
    assert!(store.delete_secret("alice", "TOKEN").await.expect("delete"));
    assert!(!store.delete_secret("alice", "TOKEN").await.expect("delete"));
    assert_eq!(
        store.get_secret("alice", "TOKEN").await.expect("read"),
        None
    );
    assert!(
        store
            .get_secret("bob", "TOKEN")
            .await
            .expect("read")
            .is_some(),
        "another user's secret of the same name stays"
    );
}
