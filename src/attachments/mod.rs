//! Attachments (SPEC §11): receiving a file's bytes as a stream — hashed (SHA-256), its media
//! type sniffed from the content, held to `limits.attachments` — storing it once in the store
//! with a per-owner file record, and loading content back when a request to a model is built.
//! Headends parse their own wire shapes (`http::shared::attachments`) and call in here; this
//! module knows nothing of HTTP, and the store knows nothing of sniffing or limits.

mod intake;
pub mod sniff;
pub mod text_form;

use std::sync::Arc;

use crate::config::attachments::AttachmentLimits;
use crate::llm::ChatMessage;
use crate::outbound::{GuardedClient, OutboundError, OutboundPolicy};
use crate::store::{FileRecord, FileStore, StoreError, read_blob};
use crate::vocabulary::Attachment;

pub use intake::{
    Inspected, Received, RequestBudget, discard_abandoned_uploads, inspect_bytes, receive,
    receive_bytes, save,
};

/// The `purpose` of files stored from a message's inline content (OpenAI's for user input).
pub const INLINE_PURPOSE: &str = "user_data";

/// Why an attachment was refused; each names the request part it came from.
#[derive(Debug, thiserror::Error)]
pub enum AttachmentError {
    #[error("`{part}` is larger than the limit of {limit} bytes per file")]
    FileTooLarge { part: String, limit: u64 },
    #[error("the attachments of this request pass the limit of {limit} bytes at `{part}`")]
    RequestTooLarge { part: String, limit: u64 },
    #[error("`{part}` holds {media_type}, which this server does not accept; allowed: {allowed}")]
    UnsupportedMediaType {
        part: String,
        media_type: String,
        allowed: String,
    },
    #[error("`{part}`: {message}")]
    Invalid { part: String, message: String },
    #[error("`{part}` names the file {file_id:?}, which does not exist for this caller")]
    NoSuchFile { part: String, file_id: String },
    #[error("`{part}`: the attachment's content is no longer stored (its file was deleted)")]
    ContentGone { part: String },
    #[error("`{part}`: fetching the URL failed: {source}")]
    Fetch { part: String, source: OutboundError },
    #[error("`{part}`: reading the upload failed: {message}")]
    Read { part: String, message: String },
    #[error("`{part}`: the PDF {name} cannot be read as text: {message}")]
    Unreadable {
        part: String,
        name: String,
        message: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AttachmentError {
    /// The request part the error names, when it names one.
    pub fn part(&self) -> Option<&str> {
        match self {
            Self::FileTooLarge { part, .. }
            | Self::RequestTooLarge { part, .. }
            | Self::UnsupportedMediaType { part, .. }
            | Self::Invalid { part, .. }
            | Self::NoSuchFile { part, .. }
            | Self::ContentGone { part }
            | Self::Fetch { part, .. }
            | Self::Read { part, .. }
            | Self::Unreadable { part, .. } => Some(part),
            Self::Store(_) => None,
        }
    }
}

impl From<&FileRecord> for Attachment {
    fn from(file: &FileRecord) -> Self {
        Self {
            name: file.filename.clone(),
            media_type: file.media_type.clone(),
            bytes: file.bytes,
            sha256: file.sha256.clone(),
            file_id: file.id.clone(),
            content: None,
            url: None,
            text_form: None,
        }
    }
}

/// The attachment of file `file_id`, which `owner` must own (`may_read` decides for callers
/// who may read others' files, such as admins).
pub async fn from_file_id(
    store: &(impl FileStore + ?Sized),
    file_id: &str,
    part: &str,
    may_read: impl Fn(&FileRecord) -> bool,
) -> Result<Attachment, AttachmentError> {
    let no_such_file = || AttachmentError::NoSuchFile {
        part: part.to_string(),
        file_id: file_id.to_string(),
    };
    let file = store.file_by_id(file_id).await?.ok_or_else(no_such_file)?;
    if !may_read(&file) {
        return Err(no_such_file());
    }
    Ok(Attachment::from(&file))
}

/// Fetches a remote attachment through the address guard, capped at the per-file limit.
pub async fn fetch_url(
    limits: &AttachmentLimits,
    url: &str,
    part: &str,
) -> Result<(bytes::Bytes, Option<String>), AttachmentError> {
    let fetch_error = |source| AttachmentError::Fetch {
        part: part.to_string(),
        source,
    };
    let client = GuardedClient::new(OutboundPolicy {
        allow_private: limits.allow_private_urls,
        timeout: std::time::Duration::from_secs(limits.fetch_timeout_seconds.max(1)),
        max_bytes: limits.max_file_bytes,
    })
    .map_err(fetch_error)?;
    match client.fetch(url).await {
        Ok(fetched) => Ok((fetched.bytes, fetched.content_type)),
        Err(OutboundError::TooLarge { limit }) => Err(AttachmentError::FileTooLarge {
            part: part.to_string(),
            limit,
        }),
        Err(error) => Err(fetch_error(error)),
    }
}

/// Loads the content of every attachment of `messages` not loaded yet, from the store. One
/// whose content is no longer stored (its file was deleted) stays unloaded: requests name it
/// in a note instead.
pub async fn load_contents(
    store: &(impl FileStore + ?Sized),
    messages: &mut [ChatMessage],
) -> Result<(), StoreError> {
    for message in messages.iter_mut() {
        load_attachments(store, &mut message.attachments).await?;
    }
    Ok(())
}

/// Loads the content of `attachment` when it is not yet, and fills its text form: the
/// attachment found at `part` must be a PDF that can be read.
pub async fn with_text_form(
    store: &(impl FileStore + ?Sized),
    mut attachment: Attachment,
    part: &str,
    max_text_bytes: usize,
) -> Result<Attachment, AttachmentError> {
    load_attachments(store, std::slice::from_mut(&mut attachment)).await?;
    if attachment.content.is_none() {
        return Err(AttachmentError::ContentGone {
            part: part.to_string(),
        });
    }
    text_form::fill_text_form(&mut attachment, max_text_bytes)
        .await
        .map_err(|error| AttachmentError::Unreadable {
            part: part.to_string(),
            name: attachment.name.clone(),
            message: error.to_string(),
        })?;
    Ok(attachment)
}

/// Fills the text form of the PDFs of `messages` and `prompt` (already loaded) for an agent
/// with `attachments: text`. A PDF of the history that cannot be read keeps none (a model
/// that cannot read it gets it as it is, and says so).
pub async fn fill_text_forms(
    messages: &mut [ChatMessage],
    prompt: &mut [Attachment],
    max_text_bytes: usize,
) {
    let attachments = messages
        .iter_mut()
        .flat_map(|m| m.attachments.iter_mut())
        .chain(prompt.iter_mut());
    for attachment in attachments {
        if let Err(error) = text_form::fill_text_form(attachment, max_text_bytes).await {
            tracing::warn!(name = %attachment.name, %error, "a PDF could not be read as text");
        }
    }
}

/// [`load_contents`] for attachments not yet on a message (a prompt's).
pub async fn load_attachments(
    store: &(impl FileStore + ?Sized),
    attachments: &mut [Attachment],
) -> Result<(), StoreError> {
    let stored = attachments
        .iter_mut()
        .filter(|a| a.content.is_none() && a.url.is_none());
    for attachment in stored {
        if let Some(content) = read_blob(store, &attachment.sha256).await? {
            attachment.content = Some(Arc::from(content));
        }
    }
    Ok(())
}
