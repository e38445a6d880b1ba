-- Runs that outlive a process (SPEC §7): the processes sharing this store and their heartbeats,
-- which process owns each run, idempotent submissions, and cancellations waiting for a run's
-- owner.
CREATE TABLE replicas (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL
);

ALTER TABLE runs ADD COLUMN owner TEXT;
CREATE INDEX runs_running_owner ON runs (owner) WHERE status = 'running';

-- One row per (user, requestId): the run it started. `user_key` is '' for callers without a user.
CREATE TABLE run_requests (
    user_key   TEXT NOT NULL,
    request_id TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_key, request_id)
);
CREATE INDEX run_requests_created ON run_requests (created_at);

-- A cancel asked of a replica that does not own the run, until the owner takes it.
CREATE TABLE run_cancellations (
    run_id       TEXT PRIMARY KEY,
    mode         TEXT NOT NULL,
    requested_at TIMESTAMPTZ NOT NULL
);
