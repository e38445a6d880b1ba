//! An attachment as runs speak of it (SPEC §11): its metadata — name, media type, size, SHA-256
//! and the file record naming it — which messages, stored conversations and events carry, and
//! its content, loaded from the store when a request to a model is built and never serialised.
//! A remote attachment the agent's vendors fetch themselves carries its URL instead: agentd
//! stores no content for it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One file attached to a message.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Attachment {
    /// The file name the client gave (or one made up from the media type).
    pub name: String,
    /// The media type sniffed from the content.
    pub media_type: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Lowercase hex SHA-256 of the content: where the store keeps it.
    pub sha256: String,
    /// The file record (`file-…`) of the Files API that names it.
    pub file_id: String,
    /// For a remote attachment passed to vendors that fetch it themselves: its URL (no bytes,
    /// SHA-256 or file record, since agentd never read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The content, present once loaded for a request; never written anywhere.
    #[serde(skip)]
    pub content: Option<Arc<[u8]>>,
    /// What a model that cannot read the file gets instead (a PDF's extracted text under
    /// `attachments: text`), once known for a request; never written anywhere.
    #[serde(skip)]
    pub text_form: Option<Arc<str>>,
}

impl std::fmt::Debug for Attachment {
    /// Metadata only: content stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("name", &self.name)
            .field("media_type", &self.media_type)
            .field("bytes", &self.bytes)
            .field("sha256", &self.sha256)
            .field("file_id", &self.file_id)
            .field("url", &self.url)
            .field("loaded", &self.content.is_some())
            .field("text_form", &self.text_form.is_some())
            .finish()
    }
}

/// What a model must be able to take to read an attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentKind {
    Image,
    Pdf,
    Text,
}

impl AttachmentKind {
    /// The kind of a (sniffed) media type: images, PDF, and everything else as text.
    pub fn of(media_type: &str) -> Self {
        if media_type.starts_with("image/") {
            Self::Image
        } else if media_type == "application/pdf" {
            Self::Pdf
        } else {
            Self::Text
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Pdf => "pdf",
            Self::Text => "text",
        }
    }
}

impl Attachment {
    /// A remote file at `url` that the vendors fetch themselves.
    pub fn remote(name: String, media_type: String, url: String) -> Self {
        Self {
            name,
            media_type,
            bytes: 0,
            sha256: String::new(),
            file_id: String::new(),
            url: Some(url),
            content: None,
            text_form: None,
        }
    }

    /// The URL of a remote attachment no content of which is loaded: the vendor fetches it.
    pub fn remote_url(&self) -> Option<&str> {
        self.url.as_deref().filter(|_| self.content.is_none())
    }

    pub fn kind(&self) -> AttachmentKind {
        AttachmentKind::of(&self.media_type)
    }

    /// The content as standard base64, empty when it was not loaded.
    pub fn base64(&self) -> String {
        use base64::Engine;
        self.content
            .as_deref()
            .map(|content| base64::engine::general_purpose::STANDARD.encode(content))
            .unwrap_or_default()
    }

    /// A `data:` URL of the content.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.base64())
    }

    /// The content as text (lossy UTF-8), for text files.
    pub fn text(&self) -> String {
        self.content
            .as_deref()
            .map(|content| String::from_utf8_lossy(content).into_owned())
            .unwrap_or_default()
    }
}
