//! Receiving one file: its bytes are written to the store about a MiB at a time as they arrive
//! (under the upload's own key), hashed and checked for UTF-8 on the way, and held to the
//! per-file and per-request limits the moment they pass them; once the hash is known the chunks
//! become the blob of that SHA-256, or are dropped when the store has it already. A 20 MiB
//! upload costs a chunk of memory, not the file.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures_util::{Stream, StreamExt};
use sha2::{Digest, Sha256};

use super::AttachmentError;
use super::sniff::{self, HEAD_BYTES, Utf8Check};
use crate::config::attachments::AttachmentLimits;
use crate::store::{BLOB_CHUNK_BYTES, FileRecord, FileStore, StoreError};

/// What the attachments of one request have used of `limits.attachments.maxRequestBytes`.
#[derive(Debug, Clone)]
pub struct RequestBudget {
    used: u64,
    max: u64,
}

impl RequestBudget {
    pub fn new(limits: &AttachmentLimits) -> Self {
        Self {
            used: 0,
            max: limits.max_request_bytes,
        }
    }

    fn take(&mut self, bytes: u64, part: &str) -> Result<(), AttachmentError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.max {
            return Err(AttachmentError::RequestTooLarge {
                part: part.to_string(),
                limit: self.max,
            });
        }
        Ok(())
    }
}

/// What is known of a file's bytes as they pass: size, hash, UTF-8, its first bytes.
struct Inspector<'a> {
    part: &'a str,
    limits: &'a AttachmentLimits,
    hasher: Sha256,
    utf8: Utf8Check,
    head: Vec<u8>,
    bytes: u64,
}

/// A file's size, SHA-256 and sniffed media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    pub bytes: u64,
    pub sha256: String,
    pub media_type: String,
}

impl<'a> Inspector<'a> {
    fn new(part: &'a str, limits: &'a AttachmentLimits) -> Self {
        Self {
            part,
            limits,
            hasher: Sha256::new(),
            utf8: Utf8Check::default(),
            head: Vec::new(),
            bytes: 0,
        }
    }

    /// 413 the moment the file or the request passes its limit.
    fn feed(&mut self, chunk: &[u8], budget: &mut RequestBudget) -> Result<(), AttachmentError> {
        self.bytes += chunk.len() as u64;
        if self.bytes > self.limits.max_file_bytes {
            return Err(AttachmentError::FileTooLarge {
                part: self.part.to_string(),
                limit: self.limits.max_file_bytes,
            });
        }
        budget.take(chunk.len() as u64, self.part)?;
        self.hasher.update(chunk);
        self.utf8.feed(chunk);
        if self.head.len() < HEAD_BYTES {
            let wanted = (HEAD_BYTES - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..wanted]);
        }
        Ok(())
    }

    /// 415 when the sniffed media type is not allowed.
    fn finish(self, declared: Option<&str>, name: &str) -> Result<Inspected, AttachmentError> {
        let media_type = sniff::media_type(&self.head, self.utf8.is_utf8(), declared, name);
        if !self.limits.allows(&media_type) {
            return Err(AttachmentError::UnsupportedMediaType {
                part: self.part.to_string(),
                media_type,
                allowed: self.limits.media_types.join(", "),
            });
        }
        Ok(Inspected {
            bytes: self.bytes,
            sha256: hex(&self.hasher.finalize()),
            media_type,
        })
    }
}

/// A file received whole, checked and written under its upload key; [`save`] records it.
#[derive(Debug)]
pub struct Received {
    upload: String,
    pub inspected: Inspected,
}

/// The prefix of the key an upload's chunks are written under until its hash is known.
const UPLOAD_PREFIX: &str = "upload:";

/// A new upload's key: a UUIDv7, so the key tells when the upload began.
fn upload_key() -> String {
    format!("{UPLOAD_PREFIX}{}", uuid::Uuid::now_v7().simple())
}

/// When the upload with this key began; `None` for a key that does not say (an older form).
fn upload_began(key: &str) -> Option<DateTime<Utc>> {
    let id = uuid::Uuid::parse_str(key.strip_prefix(UPLOAD_PREFIX)?).ok()?;
    let (seconds, nanos) = id.get_timestamp()?.to_unix();
    DateTime::from_timestamp(i64::try_from(seconds).ok()?, nanos)
}

/// Drops the chunks of uploads that began before `before` and never finished (their process
/// died mid-upload: a finished or refused upload leaves none), and of uploads whose key does
/// not say when they began. How many uploads were dropped.
pub async fn discard_abandoned_uploads(
    store: &(impl FileStore + ?Sized),
    before: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let mut dropped = 0;
    for key in store.uploads_with_chunks().await? {
        if upload_began(&key).is_some_and(|began| began >= before) {
            continue;
        }
        store.discard_upload(&key).await?;
        dropped += 1;
    }
    Ok(dropped)
}

/// Reads `stream` to its end as the request part `part`, writing it to the store as it comes.
pub async fn receive<S, E>(
    store: &(impl FileStore + ?Sized),
    stream: S,
    part: &str,
    declared: Option<&str>,
    name: &str,
    limits: &AttachmentLimits,
    budget: &mut RequestBudget,
) -> Result<Received, AttachmentError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let upload = upload_key();
    let written = write_upload(store, &upload, stream, part, limits, budget).await;
    let inspected = written.and_then(|inspector| inspector.finish(declared, name));
    match inspected {
        Ok(inspected) => Ok(Received { upload, inspected }),
        Err(error) => {
            if let Err(discard) = store.discard_upload(&upload).await {
                tracing::warn!(error = %discard, upload, "a refused upload's chunks remain");
            }
            Err(error)
        }
    }
}

async fn write_upload<'a, S, E>(
    store: &(impl FileStore + ?Sized),
    upload: &str,
    mut stream: S,
    part: &'a str,
    limits: &'a AttachmentLimits,
    budget: &mut RequestBudget,
) -> Result<Inspector<'a>, AttachmentError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut inspector = Inspector::new(part, limits);
    let mut pending = Vec::with_capacity(BLOB_CHUNK_BYTES);
    let mut seq = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| AttachmentError::Read {
            part: part.to_string(),
            message: error.to_string(),
        })?;
        inspector.feed(&chunk, budget)?;
        pending.extend_from_slice(&chunk);
        if pending.len() >= BLOB_CHUNK_BYTES {
            store.put_upload_chunk(upload, seq, &pending).await?;
            pending.clear();
            seq += 1;
        }
    }
    // The last part; an empty file still has its one (empty) chunk, so it reads back.
    if !pending.is_empty() || seq == 0 {
        store.put_upload_chunk(upload, seq, &pending).await?;
    }
    Ok(inspector)
}

/// What [`receive_bytes`] checks (limits, content sniffed against the declared type), without
/// writing anything: for a request that only measures its files (a token count).
pub fn inspect_bytes(
    content: &[u8],
    part: &str,
    declared: Option<&str>,
    name: &str,
    limits: &AttachmentLimits,
    budget: &mut RequestBudget,
) -> Result<Inspected, AttachmentError> {
    let mut inspector = Inspector::new(part, limits);
    inspector.feed(content, budget)?;
    inspector.finish(declared, name)
}

/// [`receive`] for content already in memory (a data URL, base64 in JSON, a fetched URL).
pub async fn receive_bytes(
    store: &(impl FileStore + ?Sized),
    content: Bytes,
    part: &str,
    declared: Option<&str>,
    name: &str,
    limits: &AttachmentLimits,
    budget: &mut RequestBudget,
) -> Result<Received, AttachmentError> {
    let stream = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(content)]);
    receive(store, stream, part, declared, name, limits, budget).await
}

/// Makes the received content its blob (stored once by SHA-256) and records it as `owner`'s file.
pub async fn save(
    store: &(impl FileStore + ?Sized),
    owner: &str,
    name: &str,
    purpose: &str,
    received: Received,
) -> Result<FileRecord, AttachmentError> {
    let Received { upload, inspected } = received;
    store
        .finish_upload(&upload, &inspected.sha256, inspected.bytes)
        .await?;
    let file = FileRecord {
        id: format!("file-{}", uuid::Uuid::new_v4().simple()),
        user_id: owner.to_string(),
        filename: name.to_string(),
        purpose: purpose.to_string(),
        media_type: inspected.media_type,
        bytes: inspected.bytes,
        sha256: inspected.sha256,
        created_at: Utc::now(),
    };
    store.create_file(&file).await?;
    Ok(file)
}

fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_file: u64, max_request: u64) -> AttachmentLimits {
        AttachmentLimits {
            max_file_bytes: max_file,
            max_request_bytes: max_request,
            ..AttachmentLimits::default()
        }
    }

    fn inspect(
        content: &[u8],
        part: &str,
        declared: Option<&str>,
        limits: &AttachmentLimits,
        budget: &mut RequestBudget,
    ) -> Result<Inspected, AttachmentError> {
        let mut inspector = Inspector::new(part, limits);
        // Two pieces, so a character or a magic number may be cut between them.
        let (first, second) = content.split_at(content.len() / 2);
        inspector.feed(first, budget)?;
        inspector.feed(second, budget)?;
        inspector.finish(declared, "file")
    }

    #[test]
    fn a_file_at_the_limit_passes_and_one_byte_more_is_refused() {
        let limits = limits(10, 100);
        let mut budget = RequestBudget::new(&limits);
        let ok = inspect(b"0123456789", "a", None, &limits, &mut budget).expect("at the limit");
        assert_eq!(ok.bytes, 10);
        assert_eq!(ok.media_type, "text/plain");
        assert_eq!(
            ok.sha256,
            "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882"
        );
        let past = inspect(b"0123456789x", "b", None, &limits, &mut budget);
        assert!(matches!(past, Err(AttachmentError::FileTooLarge { part, .. }) if part == "b"));
    }

    #[test]
    fn the_request_budget_names_the_part_that_passes_it() {
        let limits = limits(10, 15);
        let mut budget = RequestBudget::new(&limits);
        inspect(b"0123456789", "first", None, &limits, &mut budget).expect("within");
        let second = inspect(b"012345", "second", None, &limits, &mut budget);
        assert!(
            matches!(second, Err(AttachmentError::RequestTooLarge { part, .. }) if part == "second")
        );
    }

    #[test]
    fn media_types_not_allowed_are_refused_with_the_sniffed_type() {
        let limits = limits(100, 100);
        let mut budget = RequestBudget::new(&limits);
        let binary = inspect(
            b"\x00\xff\x00",
            "x",
            Some("image/png"),
            &limits,
            &mut budget,
        );
        assert!(matches!(
            binary,
            Err(AttachmentError::UnsupportedMediaType { media_type, .. })
                if media_type == "application/octet-stream"
        ));
    }
}
