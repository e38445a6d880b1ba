-- Chat history (seeds/001): a user's conversations with an agent and their ordered messages.
-- `next_seq` hands out message numbers inside the (single) write transaction, so seq is gap-free.
CREATE TABLE conversations (
    id         TEXT PRIMARY KEY NOT NULL,
    user_id    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    title      TEXT,
    next_seq   INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX conversations_user_updated ON conversations (user_id, updated_at DESC, id DESC);

CREATE TABLE messages (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL,
    content         TEXT,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    reasoning       TEXT,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
