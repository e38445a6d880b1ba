-- Chat history (seeds/001): a user's conversations with an agent and their ordered messages.
-- `next_seq` hands out message numbers: appenders lock the conversation row, so seq is gap-free.
CREATE TABLE conversations (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    title      TEXT,
    next_seq   BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX conversations_user_updated ON conversations (user_id, updated_at DESC, id DESC);

CREATE TABLE messages (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             BIGINT NOT NULL,
    role            TEXT NOT NULL,
    content         TEXT,
    tool_calls      JSONB,
    tool_call_id    TEXT,
    reasoning       TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
