//! `retention`: how long each kind of data is kept (SPEC §14), and how the sweep that removes
//! older rows paces itself. A kind without a duration is kept until someone deletes it.

use serde::Deserialize;

use super::duration::HumanDuration;

/// The most rows one sweep statement may delete.
pub const MAX_BATCH_SIZE: u32 = 10_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Finished runs (with their accounting), by when they finished.
    pub runs: Option<HumanDuration>,
    /// Run events (SSE replay), by when they were emitted.
    pub events: Option<HumanDuration>,
    /// Conversations (with their messages), by their last message.
    pub conversations: Option<HumanDuration>,
    /// Stored Responses API objects, by when they were created.
    pub responses: Option<HumanDuration>,
    /// Attachments: accepted for configurations written for SPEC §11; this store keeps none.
    pub attachments: Option<HumanDuration>,
    /// Audit rows, by their time (the oldest go first; the chain verifies from the oldest kept).
    pub audit: Option<HumanDuration>,
    /// How often a replica tries to sweep (default 3600).
    pub sweep_seconds: u64,
    /// Rows deleted per statement (default 500, at most 10 000): each is one short transaction.
    pub batch_size: u32,
    /// Pause between two batches (default 20 ms), so ordinary writes get the lock in between.
    pub pause_ms: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            runs: None,
            events: None,
            conversations: None,
            responses: None,
            attachments: None,
            audit: None,
            sweep_seconds: 3600,
            batch_size: 500,
            pause_ms: 20,
        }
    }
}

impl RetentionConfig {
    /// Whether any kind has a duration (else no sweeper runs).
    pub fn is_set(&self) -> bool {
        [
            self.runs,
            self.events,
            self.conversations,
            self.responses,
            self.audit,
        ]
        .iter()
        .any(Option::is_some)
    }

    /// The problem with the pacing settings, naming the key.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(format!(
                "retention.batchSize is {}; use 1 to {MAX_BATCH_SIZE}",
                self.batch_size
            ));
        }
        if self.sweep_seconds == 0 {
            return Err("retention.sweepSeconds must be at least 1".into());
        }
        Ok(())
    }
}
