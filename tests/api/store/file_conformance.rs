//! Attachments on both backends (SPEC §11): an upload is written in chunks as it arrives, becomes
//! the blob of its SHA-256 once (a second upload of the same content is dropped), reads back byte for byte (a chunk at a time, across chunk boundaries), file records are per
//! owner, listed newest first page by page, and the blob goes with the last record naming it.

use agentd::store::{BLOB_CHUNK_BYTES, FileRecord, read_blob};
use chrono::{SubsecRound, TimeDelta, Utc};

use super::Backend;

fn record(id: &str, owner: &str, sha256: &str, bytes: u64, seconds: i64) -> FileRecord {
    FileRecord {
        id: id.into(),
        user_id: owner.into(),
        filename: format!("{id}.bin"),
        purpose: "user_data".into(),
        media_type: "image/png".into(),
        bytes,
        sha256: sha256.into(),
        created_at: (Utc::now() + TimeDelta::seconds(seconds)).trunc_subsecs(6),
    }
}

pub async fn blobs_are_stored_once_read_back_whole_and_go_with_their_last_file(backend: &Backend) {
    let store = backend.open().await;
    // Two and a half chunks of bytes that are not UTF-8, NULs among them.
    let content: Vec<u8> = (0..BLOB_CHUNK_BYTES * 5 / 2)
        .map(|i| (i % 251) as u8)
        .collect();
    let sha = "ab".repeat(32);
    // Written as it arrives, under the upload's key; adopted by the blob once hashed.
    for (seq, chunk) in content.chunks(BLOB_CHUNK_BYTES).enumerate() {
        store
            .put_upload_chunk("upload:one", seq as u32, chunk)
            .await
            .expect("chunk");
    }
    let new = store
        .finish_upload("upload:one", &sha, content.len() as u64)
        .await
        .expect("finished");
    assert!(new, "the first upload makes the blob");
    store
        .put_upload_chunk("upload:two", 0, &content[..10])
        .await
        .expect("chunk");
    let again = store
        .finish_upload("upload:two", &sha, content.len() as u64)
        .await
        .expect("finished");
    assert!(!again, "the same content is stored once");
    assert_eq!(
        store.blob_chunk("upload:two", 0).await.expect("read"),
        None,
        "the second upload's chunks are dropped"
    );
    assert_eq!(
        store
            .blob_chunk(&sha, 2)
            .await
            .expect("read")
            .map(|c| c.len()),
        Some(BLOB_CHUNK_BYTES / 2)
    );
    assert_eq!(store.blob_chunk(&sha, 3).await.expect("read"), None);
    assert_eq!(
        read_blob(store.as_ref(), &sha).await.expect("read"),
        Some(content.clone())
    );

    store
        .put_upload_chunk("upload:refused", 0, b"x")
        .await
        .expect("chunk");
    store
        .discard_upload("upload:refused")
        .await
        .expect("discarded");
    assert_eq!(
        store.blob_chunk("upload:refused", 0).await.expect("read"),
        None
    );

    let empty_sha = "cd".repeat(32);
    store
        .put_upload_chunk("upload:empty", 0, b"")
        .await
        .expect("chunk");
    store
        .finish_upload("upload:empty", &empty_sha, 0)
        .await
        .expect("empty");
    assert_eq!(
        read_blob(store.as_ref(), &empty_sha).await.expect("read"),
        Some(Vec::new())
    );

    let first = record("file-a1", "alice", &sha, content.len() as u64, 0);
    let second = record("file-a2", "alice", &sha, content.len() as u64, 1);
    let bobs = record("file-b1", "bob", &empty_sha, 0, 2);
    for file in [&first, &second, &bobs] {
        store.create_file(file).await.expect("recorded");
    }
    assert_eq!(
        store.file_by_id("file-a1").await.expect("read"),
        Some(first.clone())
    );
    let page = store.list_files("alice", 1, None).await.expect("listed");
    assert_eq!(page, vec![second.clone()], "newest first");
    let next = store
        .list_files("alice", 10, Some("file-a2"))
        .await
        .expect("listed");
    assert_eq!(next, vec![first.clone()]);
    assert_eq!(
        store.list_files("carol", 10, None).await.expect("listed"),
        vec![]
    );

    assert!(
        !store.delete_file("bob", "file-a1").await.expect("deleted"),
        "not bob's"
    );
    assert!(
        store
            .delete_file("alice", "file-a1")
            .await
            .expect("deleted")
    );
    assert!(
        !store
            .delete_file("alice", "file-a1")
            .await
            .expect("deleted"),
        "once"
    );
    assert!(
        read_blob(store.as_ref(), &sha)
            .await
            .expect("read")
            .is_some(),
        "another file still names the blob"
    );
    assert!(
        store
            .delete_file("alice", "file-a2")
            .await
            .expect("deleted")
    );
    assert_eq!(
        read_blob(store.as_ref(), &sha).await.expect("read"),
        None,
        "the last one took it"
    );
}

pub async fn erasing_a_user_takes_their_files_and_content_no_one_else_has(backend: &Backend) {
    let store = backend.open().await;
    let shared = "11".repeat(32);
    let theirs = "22".repeat(32);
    for (upload, sha) in [("upload:s", &shared), ("upload:t", &theirs)] {
        store
            .put_upload_chunk(upload, 0, sha.as_bytes())
            .await
            .expect("chunk");
        store.finish_upload(upload, sha, 64).await.expect("blob");
    }
    for file in [
        record("file-e1", "erin", &shared, 64, 0),
        record("file-e2", "erin", &theirs, 64, 1),
        record("file-f1", "frank", &shared, 64, 2),
    ] {
        store.create_file(&file).await.expect("recorded");
    }
    let agentd::store::Erasure::Erased(erased) = store.erase_user("erin").await.expect("erased")
    else {
        panic!("erin has no runs in progress");
    };
    assert_eq!(erased.files, 2);
    assert_eq!(
        store.list_files("erin", 10, None).await.expect("listed"),
        vec![]
    );
    assert_eq!(
        read_blob(store.as_ref(), &theirs).await.expect("read"),
        None
    );
    assert_eq!(
        read_blob(store.as_ref(), &shared).await.expect("read"),
        Some(shared.as_bytes().to_vec()),
        "frank's file keeps its content"
    );
}

/// An upload whose process died mid-way leaves chunks under its own key; the sweep drops those
/// of uploads that began before the cut-off (and of keys that do not say when they began),
/// keeps an upload still in progress and never touches a finished blob.
pub async fn chunks_of_abandoned_uploads_are_swept_and_nothing_else(backend: &Backend) {
    let store = backend.open().await;
    let began = |ago: TimeDelta| {
        let at = Utc::now() - ago;
        let timestamp = uuid::Timestamp::from_unix(
            uuid::NoContext,
            u64::try_from(at.timestamp()).expect("after 1970"),
            at.timestamp_subsec_nanos(),
        );
        format!("upload:{}", uuid::Uuid::new_v7(timestamp).simple())
    };
    let abandoned = began(TimeDelta::hours(2));
    let in_progress = began(TimeDelta::seconds(5));
    let unknown = format!("upload:{}", uuid::Uuid::new_v4().simple());
    let finished = began(TimeDelta::hours(3));
    for (seq, key) in [&abandoned, &in_progress, &unknown, &finished]
        .into_iter()
        .enumerate()
    {
        store
            .put_upload_chunk(key, 0, format!("chunk {seq}").as_bytes())
            .await
            .expect("chunk");
    }
    store
        .finish_upload(&finished, "f1n15hed", 7)
        .await
        .expect("finished");
    let dropped = agentd::attachments::discard_abandoned_uploads(
        store.as_ref(),
        Utc::now() - TimeDelta::hours(1),
    )
    .await
    .expect("swept");
    assert_eq!(dropped, 2, "the abandoned and the unknown upload");
    assert_eq!(
        store.uploads_with_chunks().await.expect("keys"),
        [in_progress]
    );
    assert_eq!(
        store.blob_chunk("f1n15hed", 0).await.expect("read"),
        Some(b"chunk 3".to_vec()),
        "a finished blob is untouched"
    );
}
