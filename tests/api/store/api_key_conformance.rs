//! Run-time API keys on both backends: a key reads back whole by digest and id, a second key
//! with the same digest is a conflict, listings are per user (or everyone's) newest first and
//! leave revoked keys out, rotation replaces the digest, revocation happens once.

use agentd::store::{Rotation, StoreError, StoredApiKey};
use chrono::{SubsecRound, TimeDelta, Utc};

use super::Backend;

fn key(id: &str, user: Option<&str>, hash: &str, age_secs: i64) -> StoredApiKey {
    StoredApiKey {
        id: id.into(),
        name: format!("{id}'s name"),
        user_id: user.map(str::to_string),
        created_by: "key:ops".into(),
        secret_hash: hash.into(),
        prefix: "agd_abcd".into(),
        scopes: "agents:chat:run runs:read".into(),
        limits: Some(r#"{"tokensPerDay":1000}"#.into()),
        created_at: (Utc::now() - TimeDelta::seconds(age_secs)).trunc_subsecs(6),
        expires_at: Some((Utc::now() + TimeDelta::days(1)).trunc_subsecs(6)),
        rotated_at: None,
        revoked_at: None,
    }
}

pub async fn api_keys_are_found_by_digest_listed_per_user_rotated_and_revoked_once(
    backend: &Backend,
) {
    let store = backend.open().await;
    let alice_old = key("key_a1", Some("alice"), "hash-a1", 60);
    let alice_new = key("key_a2", Some("alice"), "hash-a2", 10);
    let unbound = key("key_c", None, "hash-c", 30);
    for k in [&alice_old, &alice_new, &unbound] {
        store.insert_api_key(k).await.expect("stored");
    }
    let same_digest = key("key_dup", Some("bob"), "hash-a1", 0);
    assert!(matches!(
        store.insert_api_key(&same_digest).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(
        store.api_key_by_hash("hash-a1").await.expect("read"),
        Some(alice_old.clone())
    );
    assert_eq!(
        store.api_key("key_c").await.expect("read"),
        Some(unbound.clone())
    );
    assert_eq!(store.api_key_by_hash("nope").await.expect("read"), None);
    let ids = |keys: Vec<StoredApiKey>| keys.into_iter().map(|k| k.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.list_api_keys(Some("alice")).await.expect("list")),
        ["key_a2", "key_a1"]
    );
    assert_eq!(
        ids(store.list_api_keys(None).await.expect("list")),
        ["key_a2", "key_c", "key_a1"]
    );

    let now = Utc::now().trunc_subsecs(6);
    let rotation = Rotation {
        id: "key_a1",
        secret_hash: "hash-a1-new",
        prefix: "agd_wxyz",
        at: now,
    };
    assert!(store.rotate_api_key(&rotation).await.expect("rotated"));
    assert_eq!(
        store.api_key_by_hash("hash-a1").await.expect("read"),
        None,
        "the old digest is gone"
    );
    let rotated = store
        .api_key_by_hash("hash-a1-new")
        .await
        .expect("read")
        .expect("found");
    assert_eq!(
        (rotated.prefix.as_str(), rotated.rotated_at),
        ("agd_wxyz", Some(now))
    );

    assert!(store.revoke_api_key("key_a1", now).await.expect("revoked"));
    assert!(!store.revoke_api_key("key_a1", now).await.expect("once"));
    assert!(
        !store
            .revoke_api_key("key_none", now)
            .await
            .expect("no such key")
    );
    let rotation = Rotation {
        id: "key_a1",
        secret_hash: "hash-again",
        prefix: "agd_q",
        at: now,
    };
    assert!(
        !store
            .rotate_api_key(&rotation)
            .await
            .expect("a revoked key is not rotated")
    );
    let revoked = store.api_key("key_a1").await.expect("read").expect("kept");
    assert_eq!(revoked.revoked_at, Some(now));
    assert_eq!(
        ids(store.list_api_keys(Some("alice")).await.expect("list")),
        ["key_a2"]
    );
}
