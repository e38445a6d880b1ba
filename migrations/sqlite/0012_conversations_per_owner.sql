-- Conversation ids are unique per owner, not globally (issue 35): ids clients choose (an AG-UI
-- `threadId`, an AI SDK chat `id`) may be the same for two users, and neither learns of the
-- other's. A message belongs to its owner's conversation.
CREATE TABLE conversations_by_owner (
    id         TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    title      TEXT,
    next_seq   INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, id)
);
INSERT INTO conversations_by_owner (id, user_id, agent, title, next_seq, created_at, updated_at)
    SELECT id, user_id, agent, title, next_seq, created_at, updated_at FROM conversations;

CREATE TABLE messages_by_owner (
    user_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL,
    content         TEXT,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    reasoning       TEXT,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (user_id, conversation_id, seq),
    FOREIGN KEY (user_id, conversation_id) REFERENCES conversations_by_owner (user_id, id) ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO messages_by_owner (user_id, conversation_id, seq, role, content, tool_calls, tool_call_id, reasoning, created_at)
    SELECT c.user_id, m.conversation_id, m.seq, m.role, m.content, m.tool_calls, m.tool_call_id, m.reasoning, m.created_at
    FROM messages m JOIN conversations c ON c.id = m.conversation_id;

DROP TABLE messages;
DROP TABLE conversations;
ALTER TABLE conversations_by_owner RENAME TO conversations;
ALTER TABLE messages_by_owner RENAME TO messages;
CREATE INDEX conversations_user_updated ON conversations (user_id, updated_at DESC, id DESC);
