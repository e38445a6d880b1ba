-- Tool approvals (SPEC §8): each tool call that waits for a person, with its decision once made,
-- and the checkpoint of a run waiting for them (its whole session state), which the replica that
-- resumes the run takes (deletes) as it claims the run.
CREATE TABLE run_approvals (
    run_id           TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    user_id          TEXT,
    agent            TEXT NOT NULL,
    tool             TEXT NOT NULL,
    server           TEXT NOT NULL,
    arguments        JSONB NOT NULL,
    requested_at     TIMESTAMPTZ NOT NULL,
    expires_at       TIMESTAMPTZ NOT NULL,
    decision         TEXT,
    decided_by       TEXT,
    reason           TEXT,
    edited_arguments JSONB,
    decided_at       TIMESTAMPTZ,
    PRIMARY KEY (run_id, call_id)
);
CREATE INDEX run_approvals_waiting ON run_approvals (expires_at) WHERE decision IS NULL;
CREATE INDEX run_approvals_user ON run_approvals (user_id, requested_at) WHERE decision IS NULL;

CREATE TABLE run_checkpoints (
    run_id     TEXT PRIMARY KEY,
    state      JSONB NOT NULL,
    last_seq   BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
