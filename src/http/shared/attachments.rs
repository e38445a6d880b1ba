//! What every headend shares about attachments (SPEC §11): the HTTP answer of a refused
//! attachment (413 / 415 / 400 / 404 naming the part), who may read a file, and turning inline
//! content (base64, `data:` URLs, remote URLs, `file_id`s) into stored attachments. Each headend
//! only finds the parts in its own wire shape and calls in here.

use axum::http::StatusCode;
use base64::Engine;
use bytes::Bytes;

use crate::attachments::{self, AttachmentError, INLINE_PURPOSE, RequestBudget, sniff};
use crate::config::AgentSpec;
use crate::config::model_input::{model_input, passes_urls, wants_text_form};
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::outbound::check_url_for_another;
use crate::runtime::Runtime;
use crate::store::FileRecord;
use crate::vocabulary::{Attachment, AttachmentKind};

impl From<AttachmentError> for ApiError {
    fn from(error: AttachmentError) -> Self {
        let (status, code) = match &error {
            AttachmentError::FileTooLarge { .. } | AttachmentError::RequestTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "attachment_too_large")
            }
            AttachmentError::UnsupportedMediaType { .. } => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            AttachmentError::NoSuchFile { .. } => (StatusCode::NOT_FOUND, "not_found"),
            AttachmentError::ContentGone { .. } => (StatusCode::GONE, "attachment_gone"),
            AttachmentError::Unreadable { .. } => {
                (StatusCode::BAD_REQUEST, "unreadable_attachment")
            }
            AttachmentError::Invalid { .. }
            | AttachmentError::Fetch { .. }
            | AttachmentError::Read { .. } => (StatusCode::BAD_REQUEST, "invalid_request"),
            AttachmentError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
        };
        if let AttachmentError::Store(store) = error {
            return ApiError::store(store);
        }
        ApiError {
            status,
            code,
            message: error.to_string(),
            param: error.part().map(str::to_string),
            retry_after_secs: None,
        }
    }
}

/// One attachment of the per-user chat: `data` (base64), `url` (`https` or `data:`) or
/// `file_id`, with its `name` and declared `media_type` (the bytes decide the type).
#[derive(Debug, Clone, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatAttachment {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub data: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub file_id: Option<String>,
}

/// Whether `caller` may read `file`: its owner, or an admin.
pub fn may_read(caller: &Caller, file: &FileRecord) -> bool {
    caller.admin || caller.owner().unwrap_or_default() == file.user_id
}

/// The owner id files of `caller` are recorded under (empty on a server without keys).
pub fn owner_of(caller: &Caller) -> String {
    caller.owner().unwrap_or_default()
}

/// What an intake does with inline content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keeping {
    /// Stored once by SHA-256 and recorded as the caller's file: a request that runs.
    Stored,
    /// Checked (limits, sniffed type) and held in memory for the request only: a request that
    /// measures its files (a token count) stores nothing.
    Measured,
}

/// Turns the attachments of one request into stored ones, keeping the request's budget, and
/// refuses those the agent's models cannot read.
pub struct AttachmentIntake<'a> {
    runtime: &'a Runtime,
    caller: &'a Caller,
    budget: RequestBudget,
    /// The agent the request runs: every one of its models must read each attachment.
    agent: &'a AgentSpec,
    keeping: Keeping,
}

impl<'a> AttachmentIntake<'a> {
    pub fn new(runtime: &'a Runtime, caller: &'a Caller, agent: &'a AgentSpec) -> Self {
        Self {
            runtime,
            caller,
            budget: RequestBudget::new(&runtime.config().limits.attachments),
            agent,
            keeping: Keeping::Stored,
        }
    }

    /// An intake for a request that only counts its tokens: inline content is checked as for
    /// a run but never stored (a file of the Files API is still read, with the same
    /// authorization).
    pub fn measuring(runtime: &'a Runtime, caller: &'a Caller, agent: &'a AgentSpec) -> Self {
        Self {
            keeping: Keeping::Measured,
            ..Self::new(runtime, caller, agent)
        }
    }

    /// The request's attachments so far used `budget` (a form's files, read before the agent
    /// was known).
    pub fn with_budget(mut self, budget: RequestBudget) -> Self {
        self.budget = budget;
        self
    }

    /// 400 `unsupported_attachment` naming the model and the part when one of the agent's
    /// models does not read this kind of file (text files go as text to every model; PDFs,
    /// under `attachments: text`, as their text: 400 `unreadable_attachment` when they have
    /// none).
    pub async fn readable(
        &self,
        attachment: Attachment,
        part: &str,
    ) -> Result<Attachment, ApiError> {
        let kind = attachment.kind();
        if kind == AttachmentKind::Text {
            return Ok(attachment);
        }
        let config = self.runtime.config();
        if wants_text_form(config, self.agent, kind) {
            return Ok(self.runtime.with_text_form(attachment, part).await?);
        }
        for target in &self.agent.targets {
            let input = model_input(config, &target.provider, &target.model);
            if !input.contains(&kind) {
                return Err(ApiError {
                    status: StatusCode::BAD_REQUEST,
                    code: "unsupported_attachment",
                    message: format!(
                        "`{part}` is {} ({}), which the model {target} of agent `{}` does not read; it reads: {}",
                        attachment.media_type,
                        kind.as_str(),
                        self.agent.name,
                        input
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    param: Some(part.to_string()),
                    retry_after_secs: None,
                });
            }
        }
        Ok(attachment)
    }

    /// Stores content the request carried and returns it as an attachment (content loaded).
    pub async fn content(
        &mut self,
        content: Bytes,
        part: &str,
        declared: Option<&str>,
        name: &str,
    ) -> Result<Attachment, ApiError> {
        let limits = &self.runtime.config().limits.attachments;
        if self.keeping == Keeping::Measured {
            let inspected = attachments::inspect_bytes(
                &content,
                part,
                declared,
                name,
                limits,
                &mut self.budget,
            )?;
            let attachment = Attachment {
                name: name.to_string(),
                media_type: inspected.media_type,
                bytes: inspected.bytes,
                sha256: inspected.sha256,
                file_id: String::new(),
                content: Some(std::sync::Arc::from(content.as_ref())),
                url: None,
                text_form: None,
            };
            return self.readable(attachment, part).await;
        }
        let received = self
            .runtime
            .receive_file_bytes(content.clone(), part, declared, name, &mut self.budget)
            .await?;
        let owner = owner_of(self.caller);
        let file = self
            .runtime
            .save_file(&owner, name, INLINE_PURPOSE, received)
            .await?;
        let mut attachment = Attachment::from(&file);
        attachment.content = Some(std::sync::Arc::from(content.as_ref()));
        self.readable(attachment, part).await
    }

    /// Base64 content (without a `data:` prefix).
    pub async fn base64(
        &mut self,
        data: &str,
        part: &str,
        declared: Option<&str>,
        name: &str,
    ) -> Result<Attachment, ApiError> {
        let content = decode_base64(data, part)?;
        self.content(content, part, declared, name).await
    }

    /// A `data:` URL, or an `http(s)` URL: passed on unread to vendors that fetch it
    /// ([`Self::passed_through`]), else fetched through the address guard. `declared` is the
    /// media type the request gave, if any.
    pub async fn url(
        &mut self,
        url: &str,
        part: &str,
        name: Option<&str>,
        declared: Option<&str>,
    ) -> Result<Attachment, ApiError> {
        if let Some(data_url) = url.strip_prefix("data:") {
            let (declared, data) = parse_data_url(data_url, part)?;
            let name = name.map_or_else(|| default_name(declared.as_deref()), str::to_string);
            return self.base64(data, part, declared.as_deref(), &name).await;
        }
        if let Some(remote) = self.passed_through(url, part, name, declared).await? {
            return self.readable(remote, part).await;
        }
        let limits = &self.runtime.config().limits.attachments;
        let (content, declared) = attachments::fetch_url(limits, url, part).await?;
        let name = name.map_or_else(|| name_of_url(url), str::to_string);
        self.content(content, part, declared.as_deref(), &name)
            .await
    }

    /// The remote attachment at `url` when every model of the agent gets it as its URL (SPEC
    /// §11): an image or PDF by its declared type or its path's extension, of a type
    /// `limits.attachments` allows, at an address the guard allows (checked, never fetched).
    async fn passed_through(
        &self,
        url: &str,
        part: &str,
        name: Option<&str>,
        declared: Option<&str>,
    ) -> Result<Option<Attachment>, ApiError> {
        let config = self.runtime.config();
        let limits = &config.limits.attachments;
        let media_type = declared
            .map(|d| d.split(';').next().unwrap_or(d).trim().to_ascii_lowercase())
            .filter(|d| AttachmentKind::of(d) != AttachmentKind::Text && !d.ends_with("/*"))
            .or_else(|| sniff::media_type_of_url(url).map(str::to_string));
        let Some(media_type) = media_type else {
            return Ok(None);
        };
        let kind = AttachmentKind::of(&media_type);
        if !limits.allows(&media_type) || !passes_urls(config, self.agent, kind) {
            return Ok(None);
        }
        if let Err(source) = check_url_for_another(url, limits.allow_private_urls).await {
            return Err(AttachmentError::Fetch {
                part: part.to_string(),
                source,
            }
            .into());
        }
        let name = name.map_or_else(|| name_of_url(url), str::to_string);
        Ok(Some(Attachment::remote(name, media_type, url.to_string())))
    }

    /// A file of the Files API the caller may read.
    pub async fn file_id(&mut self, file_id: &str, part: &str) -> Result<Attachment, ApiError> {
        let caller = self.caller;
        let attachment = self
            .runtime
            .file_attachment(file_id, part, |file| may_read(caller, file))
            .await?;
        self.readable(attachment, part).await
    }
}

impl AttachmentIntake<'_> {
    /// The per-user chat's `attachments` (the field named `field`), stored in order.
    pub async fn chat_attachments(
        &mut self,
        attachments: &[ChatAttachment],
        field: &str,
    ) -> Result<Vec<Attachment>, ApiError> {
        let mut stored = Vec::new();
        for (index, attachment) in attachments.iter().enumerate() {
            let part = format!("{field}[{index}]");
            stored.push(self.chat_attachment(attachment, &part).await?);
        }
        Ok(stored)
    }

    /// One attachment in the per-user chat's shape, found at `part`.
    pub async fn chat_attachment(
        &mut self,
        attachment: &ChatAttachment,
        part: &str,
    ) -> Result<Attachment, ApiError> {
        let name = attachment.name.as_deref();
        let declared = attachment.media_type.as_deref();
        match (&attachment.file_id, &attachment.data, &attachment.url) {
            (Some(id), None, None) => self.file_id(id, &format!("{part}.file_id")).await,
            (None, Some(data), None) => {
                let name = name.map_or_else(|| default_name(declared), str::to_string);
                self.base64(data, &format!("{part}.data"), declared, &name)
                    .await
            }
            (None, None, Some(url)) => self.url(url, &format!("{part}.url"), name, declared).await,
            _ => Err(ApiError::invalid_request(format!(
                "`{part}` needs exactly one of `data`, `url` or `file_id`"
            ))
            .with_param(part)),
        }
    }
}

fn decode_base64(data: &str, part: &str) -> Result<Bytes, ApiError> {
    let data: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map(Bytes::from)
        .map_err(|error| {
            ApiError::invalid_request(format!("`{part}` is not valid base64: {error}"))
                .with_param(part)
        })
}

/// `TYPE[;params];base64,DATA` (after `data:`): the declared type and the base64 data.
fn parse_data_url<'u>(rest: &'u str, part: &str) -> Result<(Option<String>, &'u str), ApiError> {
    let invalid = || {
        ApiError::invalid_request(format!(
            "`{part}` is not a base64 data URL (`data:<media type>;base64,<data>`)"
        ))
        .with_param(part)
    };
    let (header, data) = rest.split_once(',').ok_or_else(invalid)?;
    let Some(media_type) = header.strip_suffix(";base64") else {
        return Err(invalid());
    };
    let media_type = media_type.split(';').next().unwrap_or_default().trim();
    Ok((
        (!media_type.is_empty()).then(|| media_type.to_string()),
        data,
    ))
}

fn default_name(media_type: Option<&str>) -> String {
    let extension = media_type
        .and_then(|t| t.split('/').nth(1))
        .unwrap_or("bin");
    format!("attachment.{extension}")
}

fn name_of_url(url: &str) -> String {
    url.split(['?', '#'])
        .next()
        .and_then(|path| path.rsplit('/').next())
        .filter(|name| !name.is_empty())
        .unwrap_or("attachment")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_give_their_type_and_data() {
        let (declared, data) = parse_data_url("image/png;base64,iVBO", "p").expect("valid");
        assert_eq!(declared.as_deref(), Some("image/png"));
        assert_eq!(data, "iVBO");
        let refused = parse_data_url("text/plain,hello", "messages[0].content[1]");
        assert_eq!(
            refused.expect_err("not base64").param.as_deref(),
            Some("messages[0].content[1]")
        );
    }

    #[test]
    fn names_come_from_urls_and_types() {
        assert_eq!(name_of_url("https://x.test/a/cat.png?x=1"), "cat.png");
        assert_eq!(default_name(Some("image/png")), "attachment.png");
    }
}
