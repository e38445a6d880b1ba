//! `limits.attachments` (SPEC §11): how large a file and a request's attachments may be, which
//! media types are accepted, and whether remote attachment URLs may name private addresses; and
//! an agent's `attachments:` (how files its models cannot read are sent).

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
    /// The most bytes of text extracted from one PDF for a model that cannot read PDFs
    /// (`attachments: text`; default 100,000): past it the text is cut, saying so.
    pub max_extracted_text_bytes: u64,
}

/// An agent's `attachments:` frontmatter: what a file one of its models cannot read does.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentMode {
    /// Refused before the run with 400 `unsupported_attachment`.
    #[default]
    Native,
    /// PDFs go to such a model as their extracted text (text files always go as text);
    /// images stay refused.
    Text,
}

impl Default for AttachmentLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 20 * MIB,
            max_request_bytes: 50 * MIB,
            media_types: DEFAULT_MEDIA_TYPES.iter().map(|t| t.to_string()).collect(),
            allow_private_urls: false,
            fetch_timeout_seconds: 30,
            max_extracted_text_bytes: 100_000,
        }
    }
}

impl AttachmentLimits {
    pub fn allows(&self, media_type: &str) -> bool {
        self.media_types.iter().any(|allowed| allowed == media_type)
    }

    /// [`Self::max_extracted_text_bytes`] as a length.
    pub fn max_text_bytes(&self) -> usize {
        usize::try_from(self.max_extracted_text_bytes).unwrap_or(usize::MAX)
    }
}
