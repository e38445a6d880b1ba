//! Files a tool's result carried (MCP `image` blocks, embedded `resource` blobs; SPEC §11):
//! each is kept once, like any attachment, through a [`FileKeeper`] the runtime gives the
//! session (the session itself performs no I/O), then rides on the call's `tool` message to
//! the model and on its `tool.finished` event as metadata. Without a keeper, or when one is
//! refused, the model's reply names the file instead.

use std::collections::HashMap;

use async_trait::async_trait;

use crate::tools::ToolFile;
use crate::vocabulary::Attachment;

/// Keeps a tool's file once and hands it back as an attachment (content loaded).
#[async_trait]
pub trait FileKeeper: Send + Sync {
    /// Keeps `file` for `user_id` (none: the server's own files); `Err` says why not.
    async fn keep(&self, user_id: Option<&str>, file: ToolFile) -> Result<Attachment, String>;
}

/// The attachments of this turn's tool calls, by call id, until their `tool` messages are
/// added.
pub(super) type TurnFiles = HashMap<String, Vec<Attachment>>;

/// Keeps `files`; a refused one becomes a line of `notes` naming it.
pub(super) async fn keep_all(
    keeper: Option<&dyn FileKeeper>,
    user_id: Option<&str>,
    files: Vec<ToolFile>,
) -> (Vec<Attachment>, Vec<String>) {
    let mut kept = Vec::new();
    let mut notes = Vec::new();
    for file in files {
        let name = file.name.clone();
        let media_type = file.media_type.clone();
        let outcome = match keeper {
            Some(keeper) => keeper.keep(user_id, file).await,
            None => Err("this server keeps no tool files".to_string()),
        };
        match outcome {
            Ok(attachment) => kept.push(attachment),
            Err(why) => notes.push(format!(
                "[the tool's file {name} ({media_type}) is not attached: {why}]"
            )),
        }
    }
    (kept, notes)
}
