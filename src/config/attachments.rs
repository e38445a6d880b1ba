//! `limits.attachments` (SPEC §11): how large a file and a request's attachments may be, which
//! media types are accepted, and whether remote attachment URLs may name private addresses.

use serde::Deserialize;

/// One MiB.
const MIB: u64 = 1024 * 1024;

/// The media types accepted when the configuration names none.
pub const DEFAULT_MEDIA_TYPES: [&str; 9] = [
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/pdf",
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
];

/// The `limits` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LimitsConfig {
    pub attachments: AttachmentLimits,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AttachmentLimits {
    /// The most bytes one file may have (default 20 MiB): past it, 413 naming the part.
    pub max_file_bytes: u64,
    /// The most bytes of all attachments of one request together (default 50 MiB).
    pub max_request_bytes: u64,
    /// Media types accepted, as sniffed from the content (415 otherwise).
    pub media_types: Vec<String>,
    /// Let remote attachment URLs name loopback, private and link-local addresses.
    pub allow_private_urls: bool,
    /// How long fetching a remote attachment may take, in seconds (default 30).
    pub fetch_timeout_seconds: u64,
}

impl Default for AttachmentLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 20 * MIB,
            max_request_bytes: 50 * MIB,
            media_types: DEFAULT_MEDIA_TYPES.iter().map(|t| t.to_string()).collect(),
            allow_private_urls: false,
            fetch_timeout_seconds: 30,
        }
    }
}

impl AttachmentLimits {
    pub fn allows(&self, media_type: &str) -> bool {
        self.media_types.iter().any(|allowed| allowed == media_type)
    }
}
