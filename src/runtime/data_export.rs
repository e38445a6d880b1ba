//! A user's export (SPEC §14, data rights): everything agentd keeps of one user as one JSON
//! document — every conversation with its messages, every run with its result, accounting,
//! events and approvals, the names (never the values) of the user's secrets, the metadata of
//! their files (content through the Files API) and their schedules. What the export route
//! serves; who may ask is the route's.

use chrono::Utc;
use serde_json::{Value, json};

use super::Runtime;
use crate::store::{
    ApprovalRecord, Conversation, MAX_PAGE_SIZE, RunCursor, RunFilter, RunOwnerFilter, RunRecord,
    Store, StoreError, StoredMessage,
};

/// A user's export, with the counts its audit row records.
#[derive(Debug)]
pub struct UserExport {
    pub document: Value,
    pub conversations: usize,
    pub runs: usize,
}

impl Runtime {
    /// Everything kept of `user_id`, read after the recorder's queue is written.
    pub async fn export_user(&self, user_id: &str) -> Result<UserExport, StoreError> {
        self.flush_recorder().await;
        let store = self.store.as_ref();
        let conversations = conversations_of(store, user_id).await?;
        let runs = runs_of(store, user_id).await?;
        let secrets = store.list_secrets(user_id).await?;
        let files = files_of(store, user_id).await?;
        let schedules = schedules_of(store, user_id).await?;
        let (conversation_count, run_count) = (conversations.len(), runs.len());
        let document = json!({
            "object": "user.export",
            "user_id": user_id,
            "exported_at": Utc::now(),
            "conversations": conversations,
            "runs": runs,
            "secrets": secrets.iter().map(|s| json!({"name": s.name, "updated_at": s.updated_at})).collect::<Vec<_>>(),
            "files": files,
            "schedules": schedules,
        });
        Ok(UserExport {
            document,
            conversations: conversation_count,
            runs: run_count,
        })
    }
}

fn conversation_json(conversation: &Conversation, messages: &[StoredMessage]) -> Value {
    json!({
        "id": conversation.id,
        "agent": conversation.agent,
        "title": conversation.title,
        "created_at": conversation.created_at,
        "updated_at": conversation.updated_at,
        "messages": messages.iter().map(|m| json!({
            "seq": m.seq,
            "role": m.role,
            "content": m.content,
            "tool_calls": m.tool_calls,
            "tool_call_id": m.tool_call_id,
            "reasoning": m.reasoning,
            "created_at": m.created_at,
        })).collect::<Vec<_>>(),
    })
}

fn approval_json(approval: &ApprovalRecord) -> Value {
    json!({
        "call_id": approval.call_id,
        "tool": approval.tool,
        "server": approval.server,
        "arguments": approval.arguments,
        "requested_at": approval.requested_at,
        "decision": approval.decision,
        "decided_by": approval.decided_by,
        "reason": approval.reason,
        "decided_at": approval.decided_at,
    })
}

async fn messages_of(
    store: &dyn Store,
    user_id: &str,
    conversation_id: &str,
) -> Result<Vec<StoredMessage>, StoreError> {
    let mut messages: Vec<StoredMessage> = Vec::new();
    loop {
        let after = messages.last().map_or(0, |m| m.seq);
        let page = store
            .list_messages(user_id, conversation_id, after, MAX_PAGE_SIZE)
            .await?;
        let full = page.len() == MAX_PAGE_SIZE as usize;
        messages.extend(page);
        if !full {
            return Ok(messages);
        }
    }
}

async fn conversations_of(store: &dyn Store, user_id: &str) -> Result<Vec<Value>, StoreError> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_conversations(user_id, cursor.as_ref(), MAX_PAGE_SIZE)
            .await?;
        for conversation in &page {
            let messages = messages_of(store, user_id, &conversation.id).await?;
            out.push(conversation_json(conversation, &messages));
        }
        if page.len() < MAX_PAGE_SIZE as usize {
            return Ok(out);
        }
        cursor = page.last().map(Conversation::cursor);
    }
}

async fn run_json(store: &dyn Store, run: &RunRecord) -> Result<Value, StoreError> {
    let whole = store.get_run(&run.id).await?;
    let accounting = store.list_accounting(&run.id).await?;
    let mut events = Vec::new();
    loop {
        let after = events
            .last()
            .map_or(0, |e: &crate::store::RunEventRecord| e.seq);
        let page = store.list_run_events(&run.id, after, MAX_PAGE_SIZE).await?;
        let full = page.len() == MAX_PAGE_SIZE as usize;
        events.extend(page);
        if !full {
            break;
        }
    }
    let approvals = store.run_approvals(&run.id).await?;
    Ok(json!({
        "run_id": run.id,
        "agent": run.agent,
        "conversation_id": run.conversation_id,
        "status": run.status.as_str(),
        "exit_reason": run.exit_reason,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "cost_usd": run.cost_usd,
        "result": whole.and_then(|r| r.result),
        "accounting": accounting.iter().map(|a| a.entry.to_value()).collect::<Vec<_>>(),
        "events": events.iter().map(|e| json!({
            "seq": e.seq, "type": e.event_type, "data": e.data.to_value(), "ts": e.ts,
        })).collect::<Vec<_>>(),
        "approvals": approvals.iter().map(approval_json).collect::<Vec<_>>(),
    }))
}

async fn runs_of(store: &dyn Store, user_id: &str) -> Result<Vec<Value>, StoreError> {
    let mut out = Vec::new();
    let mut after: Option<RunCursor> = None;
    loop {
        let page = store
            .list_runs(&RunFilter {
                owner: RunOwnerFilter::User(Some(user_id.to_string())),
                agent: None,
                agents_allowed: None,
                statuses: Vec::new(),
                conversation_id: None,
                after: after.clone(),
                limit: MAX_PAGE_SIZE,
            })
            .await?;
        for run in &page {
            out.push(run_json(store, run).await?);
        }
        if page.len() < MAX_PAGE_SIZE as usize {
            return Ok(out);
        }
        after = page.last().map(|run| RunCursor {
            created_at: run.created_at,
            id: run.id.clone(),
        });
    }
}

/// The user's files, as the Files API shows them (content at `/v1/files/{id}/content`).
async fn files_of(store: &dyn Store, user_id: &str) -> Result<Vec<Value>, StoreError> {
    let mut out = Vec::new();
    let mut before: Option<String> = None;
    loop {
        let page = store
            .list_files(user_id, MAX_PAGE_SIZE, before.as_deref())
            .await?;
        let full = page.len() == MAX_PAGE_SIZE as usize;
        before = page.last().map(|file| file.id.clone());
        out.extend(page.iter().map(|file| {
            json!({
                "id": file.id,
                "filename": file.filename,
                "purpose": file.purpose,
                "media_type": file.media_type,
                "bytes": file.bytes,
                "sha256": file.sha256,
                "created_at": file.created_at,
                "content": format!("/v1/files/{}/content", file.id),
            })
        }));
        if !full {
            return Ok(out);
        }
    }
}

/// The user's schedules with their settings.
async fn schedules_of(store: &dyn Store, user_id: &str) -> Result<Vec<Value>, StoreError> {
    let schedules = store.list_schedules(Some(user_id)).await?;
    Ok(schedules
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "agent": s.agent,
                "prompt": s.prompt,
                "cron": s.cron,
                "timezone": s.timezone,
                "conversation_id": s.conversation_id,
                "overlap": s.overlap,
                "missed": s.missed,
                "webhook_url": s.webhook_url,
                "enabled": s.enabled,
                "created_at": s.created_at,
                "updated_at": s.updated_at,
            })
        })
        .collect())
}
