-- Every session agentd runs: who ran what, how it ended, what it cost.
CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
    agent           TEXT NOT NULL,
    user_id         TEXT,
    conversation_id TEXT,
    status          TEXT NOT NULL,
    exit_reason     TEXT,
    success         BOOLEAN,
    error           TEXT,
    final_report    JSONB,
    input_tokens    BIGINT NOT NULL DEFAULT 0,
    output_tokens   BIGINT NOT NULL DEFAULT 0,
    cached_tokens   BIGINT NOT NULL DEFAULT 0,
    cost_usd        DOUBLE PRECISION NOT NULL DEFAULT 0,
    turns           BIGINT NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL,
    finished_at     TIMESTAMPTZ,
    duration_ms     BIGINT
);
CREATE INDEX runs_agent_created ON runs (agent, created_at);
CREATE INDEX runs_user_created ON runs (user_id, created_at);
