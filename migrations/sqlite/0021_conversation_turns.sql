-- Conversations that take turns (SPEC §13): one row per message that waits for, or holds, its
-- conversation's turn. The lowest ticket of a conversation holds the turn (`answering`); the
-- others wait in ticket order (`queued`). A row lives in the store, so every replica sees the
-- same queue and lock, and a replica that dies leaves its rows to the others.
CREATE TABLE conversation_turns (
    user_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    ticket          INTEGER NOT NULL,
    run_id          TEXT NOT NULL UNIQUE,
    agent           TEXT NOT NULL,
    message         TEXT NOT NULL,
    busy            TEXT NOT NULL,
    state           TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (user_id, conversation_id, ticket)
);
