//! The runtime's [`FileKeeper`]: a file a tool's result carried is received like an upload
//! (hashed, its type sniffed, held to `limits.attachments`), stored once by its SHA-256 and
//! recorded as a file of the run's user (`purpose: tool_result`), so replays and the page read
//! it through the Files API like any attachment.

use std::sync::Arc;

use async_trait::async_trait;

use crate::agent::tool_files::FileKeeper;
use crate::attachments::{self, RequestBudget};
use crate::config::attachments::AttachmentLimits;
use crate::store::Store;
use crate::tools::ToolFile;
use crate::vocabulary::Attachment;

/// The `purpose` of files kept from tools' results.
pub const TOOL_PURPOSE: &str = "tool_result";

pub(super) struct StoreFileKeeper {
    pub store: Arc<dyn Store>,
    pub limits: AttachmentLimits,
}

#[async_trait]
impl FileKeeper for StoreFileKeeper {
    async fn keep(&self, user_id: Option<&str>, file: ToolFile) -> Result<Attachment, String> {
        let store = self.store.as_ref();
        let mut budget = RequestBudget::new(&self.limits);
        let received = attachments::receive_bytes(
            store,
            file.content.clone(),
            &file.name,
            Some(&file.media_type),
            &file.name,
            &self.limits,
            &mut budget,
        )
        .await
        .map_err(|error| error.to_string())?;
        let owner = user_id.unwrap_or_default();
        let record = attachments::save(store, owner, &file.name, TOOL_PURPOSE, received)
            .await
            .map_err(|error| error.to_string())?;
        let mut attachment = Attachment::from(&record);
        attachment.content = Some(Arc::from(file.content.as_ref()));
        Ok(attachment)
    }
}
