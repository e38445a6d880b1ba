-- Every session agentd runs: who ran what, how it ended, what it cost.
CREATE TABLE runs (
    id              TEXT PRIMARY KEY NOT NULL,
    agent           TEXT NOT NULL,
    user_id         TEXT,
    conversation_id TEXT,
    status          TEXT NOT NULL,
    exit_reason     TEXT,
    success         INTEGER,
    error           TEXT,
    final_report    TEXT,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cached_tokens   INTEGER NOT NULL DEFAULT 0,
    cost_usd        REAL NOT NULL DEFAULT 0,
    turns           INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    finished_at     TEXT,
    duration_ms     INTEGER
);
CREATE INDEX runs_agent_created ON runs (agent, created_at);
CREATE INDEX runs_user_created ON runs (user_id, created_at);
